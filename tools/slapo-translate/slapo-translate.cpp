//===- slapo-translate.cpp - mlir-translate for slapo's code generation ---===//
#include "slapo/Dialect/SlapoDialect.h"
#include "slapo/Target/CppEmitter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"

int main(int argc, char **argv) {
  mlir::TranslateFromMLIRRegistration toCpp(
      "slapo-to-cpp", "a planned @train_step as a rank program's step.cpp",
      [](mlir::ModuleOp module, llvm::raw_ostream &os) {
        return slapo::emitRankProgram(module, {"model.pt"}, os);
      },
      [](mlir::DialectRegistry &registry) {
        registry.insert<slapo::SlapoDialect, mlir::func::FuncDialect>();
      });
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "slapo translation driver\n"));
}
