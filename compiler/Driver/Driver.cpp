//===- Driver.cpp - the slapoc pipeline -----------------------------------===//
#include "slapo/Driver/Driver.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Frontend/ImportCheck.h"
#include "slapo/Frontend/TorchScriptImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

namespace cl = llvm::cl;

namespace slapo {
namespace {

/// The stages --emit can print, in pipeline order.
enum class Stage { Torch, Slapo };

struct Options {
  cl::OptionCategory category{"slapoc options"};
  cl::opt<std::string> model{cl::Positional, cl::desc("<model.pt>"),
                             cl::Required, cl::cat(category)};
  cl::list<std::string> inputs{
      "input", cl::desc("a forward argument, in order: NAME=DTYPE[D0,D1,...] "
                        "(dtypes f32 f64 bf16 f16 i64 i32 i8 i1)"),
      cl::value_desc("spec"), cl::cat(category)};
  cl::list<Stage> emit{
      "emit", cl::desc("stages to print, in pipeline order"),
      cl::CommaSeparated,
      cl::values(clEnumValN(Stage::Torch, "torch",
                            "the TorchScript forward graph, inlined"),
                 clEnumValN(Stage::Slapo, "slapo", "the imported slapo IR")),
      cl::cat(category)};
  cl::opt<std::string> output{"o", cl::desc("output file (default: stdout)"),
                              cl::value_desc("file"), cl::init("-"),
                              cl::cat(category)};
  cl::opt<bool> summary{
      "summary",
      cl::desc("print op counts per module and the parameter count"),
      cl::cat(category)};
  cl::opt<bool> checkImport{
      "check-import",
      cl::desc("run the model and the imported IR on random inputs and "
               "compare their outputs"),
      cl::cat(category)};
  cl::opt<double> tolerance{
      "check-tolerance",
      cl::desc("largest relative error --check-import accepts"),
      cl::init(1e-5), cl::cat(category)};
  cl::opt<uint64_t> seed{"seed", cl::desc("seed of --check-import's inputs"),
                         cl::init(0), cl::cat(category)};
};

void printVersion(llvm::raw_ostream &os) {
  os << "slapoc " << SLAPO_VERSION << "\n"
     << "  LLVM/MLIR " << LLVM_VERSION_STRING << "\n"
     << "  LibTorch " << getLibTorchVersion() << "\n"
     << "  CUDA " << SLAPO_CUDA_VERSION << "\n";
}

/// Op counts per module path and the number of parameter elements.
void printSummary(mlir::ModuleOp module, llvm::raw_ostream &os) {
  llvm::MapVector<std::string, llvm::MapVector<llvm::StringRef, int>,
                  std::map<std::string, unsigned>>
      counts;
  module.walk([&](mlir::Operation *op) {
    if (op->getDialect() && op->getDialect()->getNamespace() == "slapo" &&
        !llvm::isa<ParamOp>(op))
      ++counts[getModulePath(op->getLoc())][op->getName().stripDialect()];
  });
  int64_t parameters = 0, buffers = 0, tensors = 0;
  for (auto param : module.getOps<ParamOp>()) {
    (param.getBuffer() ? buffers : parameters) +=
        param.getTensorType().getNumElements();
    ++tensors;
  }
  os << "slapo IR summary\n";
  for (auto &[path, ops] : counts) {
    os << "  " << (path.empty() ? "<root>" : path) << ":";
    for (auto &[name, count] : ops)
      os << " " << name << "=" << count;
    os << "\n";
  }
  os << llvm::formatv("parameters: {0} elements, buffers: {1} elements, in {2} "
                      "tensors\n",
                      parameters, buffers, tensors);
}

} // namespace

int runSlapocMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  Options options;
  cl::HideUnrelatedOptions(options.category);
  cl::SetVersionPrinter(printVersion);
  cl::ParseCommandLineOptions(
      argc, argv,
      "slapoc: compiles a TorchScript model and a schedule into training "
      "programs\n\n  MLIR's --mlir-print-ir-after-all, --mlir-timing and "
      "--mlir-elide-elementsattrs-if-larger work too.\n");

  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  auto fail = [](const llvm::Twine &message) {
    llvm::WithColor::error(llvm::errs(), "slapoc") << message << "\n";
    return 1;
  };

  std::vector<InputSpec> inputs;
  for (const std::string &text : options.inputs) {
    auto spec = parseInputSpec(text);
    if (!spec)
      return fail(llvm::toString(spec.takeError()));
    inputs.push_back(*spec);
  }
  auto model = TorchScriptModel::load(options.model);
  if (!model)
    return fail(llvm::toString(model.takeError()));

  mlir::DefaultTimingManager timing;
  mlir::applyDefaultTimingManagerCLOptions(timing);
  mlir::TimingScope rootTiming = timing.getRootScope();

  std::string error;
  auto output = mlir::openOutputFile(options.output, &error);
  if (!output)
    return fail(error);
  std::vector<Stage> stages(options.emit.begin(), options.emit.end());
  if (stages.empty() && !options.summary && !options.checkImport)
    stages.push_back(Stage::Slapo);
  auto emits = [&](Stage stage) { return llvm::is_contained(stages, stage); };

  if (emits(Stage::Torch))
    output->os() << (*model)->printInlinedForward();

  mlir::OwningOpRef<mlir::ModuleOp> module;
  {
    mlir::TimingScope importTiming = rootTiming.nest("TorchScript import");
    module = importTorchScript(context, **model, inputs);
  }
  if (!module)
    return 1;

  mlir::PassManager pm(&context);
  mlir::applyPassManagerCLOptions(pm);
  pm.enableTiming(rootTiming);
  // Import emits one get_param per access and one constant per use.
  pm.addPass(mlir::createCSEPass());
  if (mlir::failed(pm.run(*module)))
    return 1;

  if (emits(Stage::Slapo)) {
    mlir::OpPrintingFlags flags;
    flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
    module->print(output->os(), flags);
  }
  if (options.summary)
    printSummary(*module, output->os());
  if (options.checkImport) {
    mlir::TimingScope checkTiming = rootTiming.nest("check-import");
    if (mlir::failed(checkImport(*module, **model, options.tolerance,
                                 options.seed, output->os())))
      return 1;
  }
  output->keep();
  return 0;
}

} // namespace slapo
