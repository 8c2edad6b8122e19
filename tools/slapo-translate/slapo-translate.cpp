//===- slapo-translate.cpp - mlir-translate for slapo's code generation ---===//
#include "slapo/Dialect/SlapoDialect.h"
#include "slapo/Target/CppEmitter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"

static llvm::cl::opt<std::string>
    target("slapo-target",
           llvm::cl::desc("with --slapo-to-cpp: the backend whose kernels "
                          "the program calls (cpu or cuda)"),
           llvm::cl::init("cpu"));

int main(int argc, char **argv) {
  mlir::TranslateFromMLIRRegistration toCpp(
      "slapo-to-cpp", "a planned @train_step as a rank program's step source",
      [](mlir::ModuleOp module, llvm::raw_ostream &os) {
        slapo::RankProgramInfo info;
        info.modelName = "model.pt";
        info.target = target;
        auto files = slapo::emitRankProgram(module, info);
        if (mlir::failed(files))
          return mlir::failure();
        // Several files in split-file's format, one after the other.
        for (const slapo::SourceFile &file : *files) {
          if (files->size() > 1)
            os << "//--- " << file.name << "\n";
          os << file.text;
        }
        return mlir::success();
      },
      [](mlir::DialectRegistry &registry) {
        registry.insert<slapo::SlapoDialect, mlir::func::FuncDialect>();
      });
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "slapo translation driver\n"));
}
