//===- Driver.cpp - the slapoc pipeline -----------------------------------===//
#include "slapo/Driver/Driver.h"

#include "Output.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Frontend/ImportCheck.h"
#include "slapo/Frontend/TorchScriptImporter.h"
#include "slapo/Frontend/TrainingLoss.h"
#include "slapo/Frontend/Verify.h"
#include "slapo/Schedule/MLIRDiagnostics.h"
#include "slapo/Schedule/Parser.h"
#include "slapo/Schedule/Plan.h"
#include "slapo/Schedule/Schedule.h"
#include "slapo/Transforms/Passes.h"
#include "slapo/Transforms/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/xxhash.h"

#include <unistd.h>

namespace cl = llvm::cl;

namespace slapo {
namespace {

/// The stages --emit can print, in pipeline order.
enum class Stage { Torch, Slapo, Schedule, Train, Cpp };

struct Options {
  cl::OptionCategory category{"slapoc options"};
  cl::opt<std::string> model{cl::Positional, cl::desc("<model.pt>"),
                             cl::Required, cl::cat(category)};
  cl::opt<std::string> schedule{
      "schedule",
      cl::desc("the schedule: how to train the model (see "
               "schedules/README.md)"),
      cl::value_desc("file.sched"), cl::cat(category)};
  cl::list<std::string> inputs{
      "input",
      cl::desc("a forward argument, in order: NAME=DTYPE[D0,D1,...] "
               "(dtypes f32 f64 bf16 f16 i64 i32 i8 i1); with a schedule "
               "that declares input()s, it must repeat them exactly"),
      cl::value_desc("spec"), cl::cat(category)};
  cl::list<Stage> emit{
      "emit", cl::desc("stages to print, in pipeline order"),
      cl::CommaSeparated,
      cl::values(clEnumValN(Stage::Torch, "torch",
                            "the TorchScript forward graph, inlined"),
                 clEnumValN(Stage::Slapo, "slapo",
                            "the imported slapo IR (with a schedule, the "
                            "selected ops carry its locations)"),
                 clEnumValN(Stage::Schedule, "schedule",
                            "the schedule's declarations and pass pipeline, "
                            "planned without running it"),
                 clEnumValN(Stage::Train, "train",
                            "the training step with its memory plan"),
                 clEnumValN(Stage::Cpp, "cpp",
                            "write the output directory with the rank "
                            "programs' sources, without compiling them")),
      cl::cat(category)};
  cl::opt<std::string> output{
      "o",
      cl::desc("where to write: the output directory when compiling (and "
               "with --emit=cpp), else the file to print to (default: "
               "stdout)"),
      cl::value_desc("path"), cl::init("-"), cl::cat(category)};
  cl::opt<std::string> target{
      "target",
      cl::desc("the device the rank programs train on: cpu (the default) or "
               "cuda (one NVIDIA GPU per rank; step.cu compiled with nvcc)"),
      cl::init("cpu"), cl::cat(category)};
  cl::opt<std::string> cudaArch{
      "cuda-arch",
      cl::desc("with --target=cuda: the GPU architecture the kernels are "
               "compiled for, as sm_NN (PTX for it is embedded too, so newer "
               "GPUs run them)"),
      cl::init("sm_90"), cl::cat(category)};
  cl::opt<bool> summary{
      "summary", cl::desc("print op counts per module and the parameter count"),
      cl::cat(category)};
  cl::opt<bool> checkImport{
      "check-import",
      cl::desc("run the model and the imported IR on random inputs and "
               "compare their outputs"),
      cl::cat(category)};
  cl::opt<double> tolerance{
      "check-tolerance",
      cl::desc("largest relative error --check-import accepts"), cl::init(1e-5),
      cl::cat(category)};
  cl::opt<uint64_t> seed{
      "seed", cl::desc("seed of --check-import's and --verify's inputs"),
      cl::init(0), cl::cat(category)};
  cl::opt<bool> verify{
      "verify",
      cl::desc("after compiling, run one step of the program and compare its "
               "loss and every gradient with LibTorch autograd on the model; "
               "the output is written only if they agree (without -o, "
               "nothing is written)"),
      cl::cat(category)};
  cl::opt<double> verifyTolerance{
      "verify-tolerance",
      cl::desc("largest relative error of the loss and of any gradient "
               "--verify accepts"),
      cl::init(1e-4), cl::cat(category)};
  cl::opt<bool> verifyDiagnostics{
      "verify-diagnostics",
      cl::desc("check the diagnostics against the expected-error, "
               "expected-note... comments in the schedule, as mlir-opt "
               "does; exit 0 iff they match"),
      cl::cat(category)};
};

/// How a compilation ended.
enum class Outcome {
  Success,
  /// Failed with MLIR diagnostics, which --verify-diagnostics checks.
  Diagnosed,
  /// Failed with a message of its own (a file that cannot be read, ...).
  Failed,
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
      ++counts[getModulePath(op).str()][op->getName().stripDialect()];
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

/// A schedule is a short text file: one larger than this (or an endless one,
/// such as /dev/zero) is a mistake, refused before it fills the memory.
constexpr size_t kMaxScheduleBytes = 1 << 20;

/// The schedule file `path`, read up to its end or the size limit (it may
/// be a pipe, whose size is unknown until read).
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readSchedule(llvm::StringRef path) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--schedule " + path + ": " + why);
  };
  llvm::Expected<llvm::sys::fs::file_t> file =
      llvm::sys::fs::openNativeFileForRead(path);
  if (!file)
    return fail(llvm::toString(file.takeError()));
  auto close = llvm::make_scope_exit([&] { llvm::sys::fs::closeFile(*file); });
  llvm::SmallString<4096> text;
  constexpr size_t kChunk = 64 << 10;
  while (true) {
    size_t size = text.size();
    text.resize_for_overwrite(size + kChunk);
    llvm::Expected<size_t> read = llvm::sys::fs::readNativeFile(
        *file, llvm::MutableArrayRef<char>(text.data() + size, kChunk));
    if (!read)
      return fail(llvm::toString(read.takeError()));
    text.truncate(size + *read);
    if (*read == 0)
      break;
    if (text.size() > kMaxScheduleBytes)
      return fail("larger than " + llvm::Twine(kMaxScheduleBytes >> 20) +
                  " MiB, which no schedule is; give the .sched file");
  }
  return llvm::MemoryBuffer::getMemBufferCopy(text, path);
}

/// Lets the first warnings through to the handlers registered before it and
/// drops the rest, as the schedule's errors are limited: a warning repeated
/// for every line of a long schedule would bury everything else.
class WarningLimit {
public:
  static constexpr unsigned kLimit =
      schedule::DiagnosticReporter::kDefaultErrorLimit;

  explicit WarningLimit(mlir::MLIRContext &context) : context(context) {
    handler = context.getDiagEngine().registerHandler(
        [this](mlir::Diagnostic &diagnostic) {
          if (diagnostic.getSeverity() != mlir::DiagnosticSeverity::Warning ||
              ++warnings <= kLimit)
            return mlir::failure(); // Not handled here: printed.
          return mlir::success();
        });
  }
  ~WarningLimit() { context.getDiagEngine().eraseHandler(handler); }

  /// Says how many warnings were dropped, if any.
  void reportDropped() const {
    if (warnings > kLimit)
      llvm::WithColor::note(llvm::errs(), "slapoc")
          << warnings - kLimit << " more warnings not shown (the first "
          << kLimit << " are)\n";
  }

private:
  mlir::MLIRContext &context;
  mlir::DiagnosticEngine::HandlerID handler;
  unsigned warnings = 0;
};

/// Reports a problem that is not an MLIR diagnostic.
Outcome fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "slapoc") << message << "\n";
  return Outcome::Failed;
}

/// The train() options as they were compiled, for the manifest.
std::string trainOptionsJson(const schedule::TrainOptions &train) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::json::OStream json(os);
  json.object([&] {
    json.attribute("optimizer", train.optimizer);
    json.attribute("lr", train.lr);
    json.attribute("beta1", train.beta1);
    json.attribute("beta2", train.beta2);
    json.attribute("eps", train.eps);
    json.attribute("weight_decay", train.weightDecay);
    json.attribute("momentum", train.momentum);
    json.attribute("grad_clip", train.gradClip);
    json.attribute("lr_schedule", train.lrSchedule);
    json.attribute("warmup_steps", train.warmupSteps);
    json.attribute("precision", train.precision);
    json.attribute("seed", train.seed);
    if (train.memoryBudget)
      json.attribute("memory_budget", train.memoryBudget);
  });
  return os.str();
}

/// The arena of each rank of ranks [first, first + ranks) and what fills it
/// at the planned peak; the ranks of a pipeline stage plan alike.
void printMemoryPlan(mlir::ModuleOp planned, int64_t first, int64_t ranks,
                     llvm::raw_ostream &os) {
  auto memory = planned->getAttrOfType<mlir::DictionaryAttr>(kMemoryAttrName);
  auto bytes = [&](llvm::StringRef key) {
    return formatBytes(memory.getAs<mlir::IntegerAttr>(key).getInt());
  };
  if (ranks == 1)
    os << "rank " << first;
  else
    os << "each of ranks " << first << "-" << first + ranks - 1;
  os << " planned memory: " << bytes("arena_bytes") << " arena = weights "
     << bytes("weights") << ", optimizer state " << bytes("optimizer_state")
     << ", inputs " << bytes("inputs") << ", constants " << bytes("constants")
     << ", and at the peak gradients " << bytes("gradients") << ", activations "
     << bytes("activations");
  if (auto inFlight = memory.getAs<mlir::IntegerAttr>(kMicrobatchesInFlightKey))
    os << " (at most " << inFlight.getInt() << " of "
       << memory.getAs<mlir::IntegerAttr>(kMicrobatchesKey).getInt()
       << " microbatches in flight: " << bytes(kActivationsInFlightKey) << ")";
  os << ", temporaries " << bytes("temporaries") << ", kernel workspaces "
     << bytes("workspaces") << "\n";
  auto recomputation =
      planned->getAttrOfType<mlir::DictionaryAttr>(kRecomputationAttrName);
  if (!recomputation)
    return;
  auto integer = [&](llvm::StringRef key) {
    return recomputation.getAs<mlir::IntegerAttr>(key).getInt();
  };
  auto names = [&](llvm::StringRef key) {
    auto list = recomputation.getAs<mlir::ArrayAttr>(key);
    return std::make_pair(
        list.size(),
        llvm::join(
            llvm::map_range(list.getAsValueRange<mlir::StringAttr>(),
                            [](llvm::StringRef name) { return name.str(); }),
            ", "));
  };
  if (recomputation.get("budget")) {
    auto [count, chosen] = names("chosen");
    os << "memory_budget " << formatBytes(integer("budget")) << ": "
       << (count ? "checkpointing " + std::to_string(count) +
                       " more module(s): " + chosen
                 : std::string("met without checkpointing more"))
       << "\n";
  }
  auto [count, modules] = names("modules");
  if (count)
    os << "checkpointing recomputes " << count << " module(s) in the backward ("
       << modules << "): " << formatBytes(integer("activation_bytes_not_kept"))
       << " of activations not kept, an arena of " << bytes("arena_bytes")
       << " instead of " << formatBytes(integer("arena_bytes_without")) << ", "
       << llvm::formatv("{0:f3}", integer("matmul_flops") / 1e9)
       << " GFLOP of matmuls more per step\n";
}

/// The estimated cost of pipeline stage `stage` of `planned`'s pipeline
/// (slapo-cut-pipeline-stage's), against its most expensive stage's.
void printStageCost(mlir::ModuleOp planned, size_t stage,
                    llvm::raw_ostream &os) {
  auto balance =
      planned->getAttrOfType<mlir::DictionaryAttr>(kPipelineBalanceAttrName);
  llvm::SmallVector<int64_t> flops = llvm::to_vector(llvm::map_range(
      balance.getAs<mlir::ArrayAttr>(kStageFlopsKey)
          .getAsValueRange<mlir::IntegerAttr>(),
      [](const llvm::APInt &value) { return value.getSExtValue(); }));
  int64_t costliest = *std::max_element(flops.begin(), flops.end());
  os << "pipeline stage " << stage << ": estimated "
     << formatFlops(flops[stage])
     << " of contractions per microbatch, forward and backward";
  if (costliest)
    os << llvm::formatv(" ({0:f2} of the most expensive stage's)",
                        double(flops[stage]) / costliest);
  os << "\n";
}

/// One run of slapoc, as a sequence of stages. Each stage returns
/// Outcome::Success to go on, or how the compilation ended. The schedule, if
/// any, is the main buffer of `sourceMgr`; its diagnostics go through
/// `context`.
class Compilation {
public:
  Compilation(Options &options, mlir::MLIRContext &context,
              llvm::SourceMgr &sourceMgr)
      : options(options), context(context), sourceMgr(sourceMgr),
        reporter(sourceMgr, context) {
    mlir::applyDefaultTimingManagerCLOptions(timing);
    rootTiming = timing.getRootScope();
  }

  Outcome run() {
    Outcome outcome = Outcome::Success;
    auto proceed = [&](Outcome stage) {
      outcome = stage;
      return stage == Outcome::Success;
    };
    if (!proceed(checkOptions()) || !proceed(readSchedule()) ||
        !proceed(loadModel()) || !proceed(claimOutput()) ||
        !proceed(importModel()) || !proceed(planSchedule()) ||
        !proceed(buildPipeline()) || !proceed(printPlanningStages()))
      return outcome;
    if (!lowers) {
      output->keep();
      return Outcome::Success;
    }
    if (!proceed(lowerToTrainingStep()))
      return outcome;
    if (emits(Stage::Train))
      return printTrainingStep();
    if (!proceed(writeRankPrograms()) || !proceed(verifyRankPrograms()))
      return outcome;
    return publishOutput();
  }

private:
  bool emits(Stage stage) const { return llvm::is_contained(stages, stage); }
  /// The planned module of each pipeline stage (the one module without).
  std::vector<mlir::ModuleOp> getStagePrograms() {
    if (stageModules.empty())
      return {*module};
    std::vector<mlir::ModuleOp> programs;
    for (auto &stageModule : stageModules)
      programs.push_back(*stageModule);
    return programs;
  }

  /// The command line: the inputs it declares, what it prints or writes.
  Outcome checkOptions();
  /// Parses the schedule, which comes first: its input() declarations say
  /// how to import, each rank's program with its own share of the batch.
  Outcome readSchedule();
  Outcome loadModel();
  /// The output is claimed before any work, so that a bad -o fails fast and
  /// a failed compilation leaves nothing behind.
  Outcome claimOutput();
  /// Prints --emit=torch, imports the rank's forward and merges the
  /// duplicates import makes.
  Outcome importModel();
  /// The model's forward for `given` (the schedule's inputs, the global
  /// batch or one share of it), with train(loss=)'s loss; null after errors.
  mlir::OwningOpRef<mlir::ModuleOp>
  importForward(llvm::ArrayRef<InputSpec> given);
  /// Checks the schedule against the model.
  Outcome planSchedule();
  /// The training pipeline of the plan (slapo/Transforms/Pipeline.h).
  Outcome buildPipeline();
  /// --emit=slapo, --summary, --check-import, --emit=schedule.
  Outcome printPlanningStages();
  Outcome lowerToTrainingStep();
  Outcome printTrainingStep();
  /// The rank programs (sources only with --emit=cpp), the manifest and the
  /// launcher, in the staged output directory.
  Outcome writeRankPrograms();
  /// --verify: one step of the program against LibTorch autograd.
  Outcome verifyRankPrograms();
  Outcome publishOutput();

  Options &options;
  mlir::MLIRContext &context;
  llvm::SourceMgr &sourceMgr;
  schedule::MLIRDiagnosticReporter reporter;
  mlir::DefaultTimingManager timing;
  mlir::TimingScope rootTiming;

  std::vector<Stage> stages;
  /// Whether the output is a directory (else a file printed to), and
  /// whether the training step is built.
  bool writesDirectory = false, lowers = false;
  unsigned cudaArch = 0;
  /// The schedule's inputs (the global batch), and one microbatch of one
  /// rank's share (the shapes the model is imported with).
  std::vector<InputSpec> inputs, microbatchInputs;
  std::optional<schedule::Schedule> scheduleSpec;
  /// With errors in the schedule, the model is still imported and checked
  /// so that one run reports every problem, but nothing is printed.
  bool scheduleValid = true;
  schedule::Mesh mesh;
  schedule::TrainOptions train;
  std::unique_ptr<TorchScriptModel> model;
  std::unique_ptr<llvm::ToolOutputFile> output;
  std::optional<StagedDirectory> outputDir;
  /// --verify without -o stages an output it never publishes, next to a
  /// fresh name in the temporary directory.
  llvm::SmallString<256> scratch;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// With pipeline stages, each stage's copy of `module` after the shared
  /// part of the pipeline, lowered by its own (stagePipelines).
  std::vector<mlir::OwningOpRef<mlir::ModuleOp>> stageModules;
  std::optional<schedule::Plan> plan;
  std::unique_ptr<mlir::PassManager> pipeline;
  std::vector<std::unique_ptr<mlir::PassManager>> stagePipelines;
  /// With pipeline stages, what --emit=schedule prints: stage 0's pipeline.
  std::unique_ptr<mlir::PassManager> printedPipeline;
  /// The rank programs were compiled (not only written, --emit=cpp).
  bool compilesPrograms = false;
};

Outcome Compilation::checkOptions() {
  for (const std::string &text : options.inputs) {
    auto spec = parseInputSpec(text);
    if (!spec)
      return fail(llvm::toString(spec.takeError()));
    inputs.push_back(*spec);
  }
  stages.assign(options.emit.begin(), options.emit.end());
  // Without --emit, --summary or --check-import, slapoc compiles all the way
  // and writes the output directory.
  bool compilesFully =
      stages.empty() && !options.summary && !options.checkImport;
  writesDirectory = compilesFully || emits(Stage::Cpp);
  if (options.verify && !compilesFully)
    return fail("--verify compiles and runs the program; it does not "
                "combine with --emit, --summary or --check-import");
  lowers = writesDirectory || emits(Stage::Train);
  if (emits(Stage::Schedule) && options.schedule.empty())
    return fail("--emit=schedule needs --schedule");
  if (writesDirectory &&
      (stages.size() > 1 || options.summary || options.checkImport))
    return fail("--emit=cpp writes the output directory; it does not combine "
                "with printing stages, --summary or --check-import");
  if (writesDirectory && options.output == "-" && !options.verify)
    return fail("compiling writes a directory: give it with -o DIR");
  if (options.target != "cpu" && options.target != "cuda")
    return fail("--target must be cpu or cuda, not '" + options.target + "'");
  llvm::StringRef arch = options.cudaArch.getValue();
  if (!arch.consume_front("sm_") || arch.getAsInteger(10, cudaArch) ||
      cudaArch < 75)
    return fail("--cuda-arch must be sm_NN with NN at least 75 (CUDA 13's "
                "oldest), not '" +
                options.cudaArch + "'");
  if (options.target == "cuda" && options.verify)
    return fail("--verify runs the program on this machine's CPU: compile "
                "with --target=cpu to verify");
  return Outcome::Success;
}

Outcome Compilation::readSchedule() {
  if (options.schedule.empty()) {
    microbatchInputs = inputs;
    return Outcome::Success;
  }
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  std::vector<schedule::ast::Statement> statements =
      schedule::parseSchedule(buffer->getBuffer(), reporter);
  scheduleSpec = schedule::buildSchedule(
      statements, llvm::SMLoc::getFromPointer(buffer->getBufferStart()),
      reporter);
  if (!scheduleSpec->inputsValid || reporter.stopped())
    return Outcome::Diagnosed;
  auto resolved = schedule::resolveInputs(*scheduleSpec, inputs, reporter);
  if (!resolved)
    return Outcome::Diagnosed;
  inputs = std::move(*resolved);
  for (InputSpec &input : inputs)
    for (const schedule::InputDeclaration &declared : scheduleSpec->inputs)
      if (declared.spec.name == input.name)
        input.declaration =
            schedule::getScheduleLocation(sourceMgr, declared.loc, &context);
  auto local =
      schedule::splitBatchIntoMicrobatches(*scheduleSpec, inputs, reporter);
  if (!local)
    return Outcome::Diagnosed;
  microbatchInputs = std::move(*local);
  scheduleValid = !reporter.hadErrors();
  mesh = scheduleSpec->mesh;
  train = scheduleSpec->train;
  return Outcome::Success;
}

Outcome Compilation::loadModel() {
  auto loaded = TorchScriptModel::load(options.model);
  if (!loaded)
    return fail(llvm::toString(loaded.takeError()));
  model = std::move(*loaded);
  return Outcome::Success;
}

Outcome Compilation::claimOutput() {
  if (!writesDirectory) {
    std::string error;
    output = mlir::openOutputFile(options.output, &error);
    return output ? Outcome::Success : fail(error);
  }
  if (options.output == "-")
    llvm::sys::fs::createUniquePath("slapoc-verify-%%%%%%%%", scratch,
                                    /*MakeAbsolute=*/true);
  auto staged =
      StagedDirectory::create(scratch.empty() ? llvm::StringRef(options.output)
                                              : llvm::StringRef(scratch));
  if (!staged)
    return fail(llvm::toString(staged.takeError()));
  outputDir.emplace(std::move(*staged));
  return Outcome::Success;
}

Outcome Compilation::importModel() {
  if (emits(Stage::Torch) && scheduleValid)
    output->os() << model->printInlinedForward();
  {
    mlir::TimingScope importTiming = rootTiming.nest("TorchScript import");
    module = importForward(microbatchInputs);
  }
  if (!module)
    return Outcome::Diagnosed;
  mlir::PassManager pm(&context);
  mlir::applyPassManagerCLOptions(pm);
  pm.enableTiming(rootTiming);
  // Import emits one get_param per access and one constant per use.
  pm.addPass(createCSE());
  return mlir::succeeded(pm.run(*module)) ? Outcome::Success
                                          : Outcome::Diagnosed;
}

mlir::OwningOpRef<mlir::ModuleOp>
Compilation::importForward(llvm::ArrayRef<InputSpec> given) {
  if (train.loss == "forward")
    return importTorchScript(context, *model, given);
  // The loss's targets are the last input(), declared after the forward's.
  if (given.empty()) {
    reporter.error(train.lossLoc,
                   "loss=\"" + train.loss +
                       "\" needs its targets: declare them with input() "
                       "after the forward's inputs");
    return nullptr;
  }
  const InputSpec &targets = given.back();
  mlir::Location where =
      targets.declaration
          ? *targets.declaration
          : schedule::getScheduleLocation(sourceMgr, train.lossLoc, &context);
  if (mlir::failed(checkCrossEntropyTargets(targets, where)))
    return nullptr;
  mlir::OwningOpRef<mlir::ModuleOp> imported =
      importTorchScript(context, *model, given.drop_back());
  if (!imported || mlir::failed(appendCrossEntropyLoss(
                       imported->lookupSymbol<mlir::func::FuncOp>("forward"),
                       targets, where)))
    return nullptr;
  return imported;
}

Outcome Compilation::planSchedule() {
  if (!scheduleSpec)
    return Outcome::Success;
  mlir::TimingScope scheduleTiming = rootTiming.nest("schedule");
  plan = schedule::planSchedule(*scheduleSpec, *module, reporter);
  if (!plan || !scheduleValid)
    return Outcome::Diagnosed;
  schedule::attachScheduleLocations(*plan, *module, sourceMgr);
  return Outcome::Success;
}

Outcome Compilation::buildPipeline() {
  TrainingPipelineOptions pipelineOptions;
  schedule::setTrainingPipelineOptions(mesh, train, plan ? &*plan : nullptr,
                                       pipelineOptions);
  pipeline = std::make_unique<mlir::PassManager>(&context);
  std::string error;
  llvm::raw_string_ostream errors(error);
  // Each stage's program shares the pipeline up to the microbatches.
  bool staged = mesh.pp > 1;
  if (mlir::failed(buildTrainingPipeline(*pipeline, pipelineOptions, errors,
                                         staged ? PipelinePart::Shared
                                                : PipelinePart::Whole)))
    return fail("the training pipeline: " + errors.str());
  // --emit=schedule prints the first stage's whole pipeline; the others
  // differ in their stage only.
  if (staged) {
    printedPipeline = std::make_unique<mlir::PassManager>(&context);
    if (mlir::failed(
            buildTrainingPipeline(*printedPipeline, pipelineOptions, errors)))
      return fail("the training pipeline: " + errors.str());
  }
  for (int64_t stage = 0; staged && stage < mesh.pp; ++stage) {
    pipelineOptions.stage = stage;
    auto &stagePipeline = stagePipelines.emplace_back(
        std::make_unique<mlir::PassManager>(&context));
    if (mlir::failed(buildTrainingPipeline(*stagePipeline, pipelineOptions,
                                           errors, PipelinePart::Stage)))
      return fail("the training pipeline: " + errors.str());
  }
  return Outcome::Success;
}

Outcome Compilation::printPlanningStages() {
  if (emits(Stage::Slapo)) {
    mlir::OpPrintingFlags flags;
    flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
    module->print(output->os(), flags);
  }
  if (options.summary)
    printSummary(*module, output->os());
  if (options.checkImport) {
    mlir::TimingScope checkTiming = rootTiming.nest("check-import");
    if (mlir::failed(checkImport(*module, *model, options.tolerance,
                                 options.seed, output->os())))
      return Outcome::Diagnosed;
  }
  if (emits(Stage::Schedule))
    schedule::printPlan(*scheduleSpec, inputs, *plan,
                        printedPipeline ? *printedPipeline : *pipeline,
                        output->os());
  return Outcome::Success;
}

Outcome Compilation::lowerToTrainingStep() {
  mlir::applyPassManagerCLOptions(*pipeline);
  pipeline->enableTiming(rootTiming);
  if (mlir::failed(pipeline->run(*module)))
    return Outcome::Diagnosed;
  for (auto &stagePipeline : stagePipelines) {
    mlir::applyPassManagerCLOptions(*stagePipeline);
    stagePipeline->enableTiming(rootTiming);
    stageModules.emplace_back(module->clone());
    if (mlir::failed(stagePipeline->run(*stageModules.back())))
      return Outcome::Diagnosed;
  }
  return Outcome::Success;
}

Outcome Compilation::printTrainingStep() {
  mlir::OpPrintingFlags flags;
  flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  std::vector<mlir::ModuleOp> programs = getStagePrograms();
  for (auto [stage, program] : llvm::enumerate(programs)) {
    if (programs.size() > 1)
      output->os() << "// pipeline stage " << stage << "\n";
    program.print(output->os(), flags);
  }
  output->keep();
  return Outcome::Success;
}

Outcome Compilation::writeRankPrograms() {
  mlir::TimingScope outputTiming = rootTiming.nest("rank programs");
  HostBuild build;
  build.target = options.target;
  build.cudaArch = cudaArch;
  build.compile = compilesPrograms = !emits(Stage::Cpp);
  RankProgramInfo info;
  info.modelName = options.model;
  info.target = options.target;
  info.seed = train.seed;
  info.dp = mesh.dp;
  info.tp = mesh.tp;
  std::vector<mlir::ModuleOp> programs = getStagePrograms();
  auto command = writeRanks(outputDir->getPath(), programs, *model, info, build,
                            outputTiming);
  if (!command)
    return fail(llvm::toString(command.takeError()));
  ManifestInfo manifest;
  manifest.compilerVersion = SLAPO_VERSION;
  if (scheduleSpec) {
    llvm::StringRef text =
        sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())->getBuffer();
    manifest.schedulePath = options.schedule;
    manifest.scheduleHash =
        llvm::utohexstr(llvm::xxHash64(text), /*LowerCase=*/true);
    manifest.dp = mesh.dp;
    manifest.tp = mesh.tp;
    manifest.pp = mesh.pp;
  }
  manifest.trainOptions = trainOptionsJson(train);
  if (llvm::Error e = writeManifestAndLauncher(outputDir->getPath(), programs,
                                               manifest, build, *command))
    return fail(llvm::toString(std::move(e)));
  return Outcome::Success;
}

Outcome Compilation::verifyRankPrograms() {
  if (!options.verify)
    return Outcome::Success;
  mlir::TimingScope verifyTiming = rootTiming.nest("verify");
  llvm::SmallString<256> workDir(outputDir->getPath()), launch;
  llvm::sys::path::append(workDir, "verify");
  launch = outputDir->getPath();
  llvm::sys::path::append(launch, "launch");
  if (std::error_code code = llvm::sys::fs::create_directories(workDir))
    return fail(workDir + ": " + code.message());
  int64_t worldSize = mesh.getWorldSize();
  auto runStep = [&](llvm::StringRef batch, llvm::StringRef log,
                     llvm::StringRef grads) -> llvm::Error {
    // A mesh runs under the MPI this slapoc was built with (OpenMPI's
    // mpiexec), its ranks sharing this machine's cores.
    std::vector<std::string> args;
    if (worldSize > 1) {
      args = {SLAPO_MPIEXEC,     "-n",        std::to_string(worldSize),
              "--oversubscribe", "--bind-to", "none"};
      if (geteuid() == 0)
        args.push_back("--allow-run-as-root");
    }
    args.insert(args.end(),
                {launch.str().str(), "--steps", "1", "--data", batch.str(),
                 "--log-json", log.str(), "--save-grads", grads.str(),
                 "--quiet", "--threads", worldSize > 1 ? "1" : "0"});
    std::vector<llvm::StringRef> argRefs(args.begin(), args.end());
    std::string message;
    int status = llvm::sys::ExecuteAndWait(args[0], argRefs, std::nullopt, {},
                                           0, 0, &message);
    if (status != 0)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          message.empty() ? "exit status " + std::to_string(status) : message);
    return llvm::Error::success();
  };
  // The reference sees the global batch, the schedule's inputs, which the
  // ranks of a mesh share.
  mlir::OwningOpRef<mlir::ModuleOp> reference = importForward(inputs);
  if (!reference)
    return Outcome::Diagnosed;
  auto forward = reference->lookupSymbol<mlir::func::FuncOp>("forward");
  if (mlir::failed(verifyTraining(*model, forward, options.seed,
                                  options.verifyTolerance, workDir, runStep,
                                  llvm::outs())))
    return Outcome::Diagnosed;
  llvm::sys::fs::remove_directories(workDir);
  llvm::outs() << "verify: the compiled step computes what LibTorch "
                  "computes\n";
  return Outcome::Success;
}

Outcome Compilation::publishOutput() {
  // --verify without -o only checks.
  if (!scratch.empty())
    return Outcome::Success;
  if (llvm::Error e = outputDir->publish())
    return fail(llvm::toString(std::move(e)));
  std::vector<mlir::ModuleOp> programs = getStagePrograms();
  int64_t stageSize = mesh.dp * mesh.tp;
  std::string written = "sources only";
  if (compilesPrograms) {
    written.clear();
    for (size_t stage = 0; stage < programs.size(); ++stage)
      written += (stage ? ", rank" : "rank") +
                 std::to_string(stage * stageSize) + "/train";
  }
  llvm::outs() << "slapoc: wrote " << options.output << " (" << written
               << "; run it with " << options.output << "/launch)\n";
  for (size_t stage = 0; programs.size() > 1 && stage < programs.size();
       ++stage)
    printStageCost(programs[stage], stage, llvm::outs());
  for (auto [stage, program] : llvm::enumerate(programs)) {
    if (programs.size() > 1)
      llvm::outs() << "pipeline stage " << stage << ": ";
    printMemoryPlan(program, static_cast<int64_t>(stage) * stageSize, stageSize,
                    llvm::outs());
  }
  return Outcome::Success;
}

} // namespace

int runSlapocMain(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  // The plan names the primitives' passes by their registered names.
  registerSlapoTransformsPasses();
  registerTrainingPipeline();
  Options options;
  cl::HideUnrelatedOptions(options.category);
  cl::SetVersionPrinter(printVersion);
  cl::ParseCommandLineOptions(
      argc, argv,
      "slapoc: compiles a TorchScript model and a schedule into training "
      "programs\n\n  MLIR's --mlir-print-ir-after-all, --mlir-timing and "
      "--mlir-elide-elementsattrs-if-larger work too.\n");

  mlir::MLIRContext context;
  // Diagnostics name the op, its module path and its source; the op's
  // generic form would only repeat them less readably.
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  if (!options.schedule.empty()) {
    auto file = readSchedule(options.schedule);
    if (!file) {
      fail(llvm::toString(file.takeError()));
      return 1;
    }
    sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
  }
  // The verifier reads the expected diagnostics of the buffers already in
  // the SourceMgr: it is created after the schedule was added.
  if (options.verifyDiagnostics) {
    mlir::SourceMgrDiagnosticVerifierHandler verifier(sourceMgr, &context);
    Outcome outcome = Compilation(options, context, sourceMgr).run();
    return outcome != Outcome::Failed && mlir::succeeded(verifier.verify()) ? 0
                                                                            : 1;
  }
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  WarningLimit warningLimit(context);
  Outcome outcome = Compilation(options, context, sourceMgr).run();
  warningLimit.reportDropped();
  return outcome == Outcome::Success ? 0 : 1;
}

} // namespace slapo
