//===- Pipeline.cpp - the pass pipeline of a training step ----------------===//
#include "slapo/Transforms/Pipeline.h"

#include "slapo/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace slapo {

/// The primitives whose sharding slapo-propagate-sharding gives every value
/// and checks, also where tp is 1.
static bool isShardingPrimitive(llvm::StringRef pass) {
  llvm::StringRef name = pass.take_until([](char c) { return c == '{'; });
  return name == "slapo-shard" || name == "slapo-sync" ||
         name == "slapo-fork-rng";
}

static LogicalResult buildStagePipeline(OpPassManager &pm,
                                        const TrainingPipelineOptions &options,
                                        llvm::raw_ostream &errors);

LogicalResult buildTrainingPipeline(OpPassManager &pm,
                                    const TrainingPipelineOptions &options,
                                    llvm::raw_ostream &errors,
                                    PipelinePart part) {
  if (options.precision != "fp32" && options.precision != "bf16") {
    errors << "precision must be fp32 or bf16, not '" << options.precision
           << "'\n";
    return failure();
  }
  if (options.fusion != "none" && options.fusion != "auto") {
    errors << "fusion must be none or auto, not '" << options.fusion << "'\n";
    return failure();
  }
  if (options.pp < 1 || options.stage < 0 || options.stage >= options.pp) {
    errors << "stage " << options.stage
           << " is not one of the pp=" << options.pp << " pipeline stages\n";
    return failure();
  }
  if (part == PipelinePart::Stage)
    return buildStagePipeline(pm, options, errors);
  // The model's spelled-out activations, before anything else sees them.
  pm.addPass(createRecognizeGelu());
  pm.addPass(createRecognizeRotary());
  bool shards = options.tp > 1;
  for (const std::string &primitive : options.primitives) {
    if (failed(parsePassPipeline(primitive, pm, errors)))
      return failure();
    shards |= isShardingPrimitive(primitive);
  }
  if (shards)
    pm.addPass(createPropagateSharding(PropagateShardingOptions{options.tp}));
  pm.addPass(createFoldLogitsSlice());

  if (options.precision == "bf16")
    pm.addPass(createMixedPrecision());
  pm.addPass(createAutodiffPass());
  if (options.microbatches != 1)
    pm.addPass(createMicrobatch(MicrobatchOptions{options.microbatches}));
  if (part == PipelinePart::Shared)
    return success();
  return buildStagePipeline(pm, options, errors);
}

/// The passes after the microbatches: one stage's part of the step (all of
/// it without stages), then what each rank applies to its gradients.
static LogicalResult buildStagePipeline(OpPassManager &pm,
                                        const TrainingPipelineOptions &options,
                                        llvm::raw_ostream &errors) {
  if (options.pp > 1) {
    pm.addPass(
        createPipelineRank(PipelineRankOptions{options.stage, options.dp}));
    pm.addPass(createPipelineSchedule(
        PipelineScheduleOptions{options.stage, options.pp}));
  }
  if (options.dp > 1)
    pm.addPass(createDataParallel());
  OptimizerOptions optimizer;
  optimizer.optimizer = options.optimizer;
  optimizer.lr = options.lr;
  optimizer.beta1 = options.beta1;
  optimizer.beta2 = options.beta2;
  optimizer.eps = options.eps;
  optimizer.weightDecay = options.weightDecay;
  optimizer.momentum = options.momentum;
  optimizer.gradClip = options.gradClip;
  optimizer.lrSchedule = options.lrSchedule;
  optimizer.warmupSteps = options.warmupSteps;
  optimizer.pp = options.pp;
  pm.addPass(createOptimizer(optimizer));
  // Autodiff and the optimizer build one constant per use.
  pm.addPass(createCSE());
  pm.addPass(createPropagateCasts());
  pm.addPass(createFoldPermutes());
  pm.addPass(createPackQkv());
  if (!options.checkpoint.empty() || options.memoryBudget) {
    // The pass's options refer to lists they do not own.
    std::vector<ModelName> modules(options.checkpoint.begin(),
                                   options.checkpoint.end());
    std::vector<ModelName> candidates(options.checkpointCandidates.begin(),
                                      options.checkpointCandidates.end());
    CheckpointOptions checkpoint;
    checkpoint.modules = modules;
    checkpoint.memoryBudget = options.memoryBudget;
    checkpoint.candidates = candidates;
    pm.addPass(createCheckpoint(checkpoint));
  }
  // On the final step, recomputation included; before the plan, so that
  // the values a group keeps to itself get no bytes. The named kinds first:
  // their patterns are checked on ops no other group has taken.
  for (const std::string &kind : options.fuseKinds)
    if (failed(parsePassPipeline(kind, pm, errors)))
      return failure();
  if (options.fusion == "auto") {
    pm.addPass(createFoldAddends());
    pm.addPass(createFuseElementwise());
  } else if (!options.fuse.empty()) {
    std::vector<ModelName> modules(options.fuse.begin(), options.fuse.end());
    FuseElementwiseOptions fuse;
    fuse.modules = modules;
    pm.addPass(createFuseElementwise(fuse));
  }
  pm.addPass(createPlanMemoryPass());
  return success();
}

static std::string printPass(Pass &pass) {
  std::string text;
  llvm::raw_string_ostream os(text);
  pass.printAsTextualPipeline(os);
  return os.str();
}

std::string getPrimitiveLocationName(llvm::StringRef primitive) {
  OpPassManager pm(ModuleOp::getOperationName());
  std::string errors;
  llvm::raw_string_ostream errorStream(errors);
  if (failed(parsePassPipeline(primitive, pm, errorStream)) || pm.size() != 1)
    return "";
  return printPass(*pm.getPasses().begin());
}

Location getPrimitiveLocation(Operation *op, Pass &pass) {
  std::string name = printPass(pass);
  auto isPrimitive = [&](Location loc) {
    auto named = loc.dyn_cast<NameLoc>();
    return named && named.getName() == name;
  };
  // Fused with nothing else (an op of unknown location), it is all there is.
  if (isPrimitive(op->getLoc()))
    return op->getLoc();
  if (auto fused = op->getLoc().dyn_cast<FusedLoc>())
    for (Location loc : fused.getLocations())
      if (isPrimitive(loc))
        return loc;
  return op->getLoc();
}

Location getModelLocation(Operation *op) {
  auto fused = op->getLoc().dyn_cast<FusedLoc>();
  if (!fused)
    return op->getLoc();
  // A primitive's location is named after its pass (slapo-sync{...}); the
  // model's are named after module paths, Python names without a '-'.
  SmallVector<Location> model;
  for (Location loc : fused.getLocations())
    if (auto named = loc.dyn_cast<NameLoc>();
        !named || !named.getName().strref().startswith("slapo-"))
      model.push_back(loc);
  return model.empty() ? op->getLoc() : FusedLoc::get(op->getContext(), model);
}

void registerTrainingPipeline() {
  registerPassPipeline(
      "slapo-training",
      "the imported forward to the planned training step: the schedule's "
      "primitives, autodiff, the optimizer, checkpointing, fusion, the "
      "memory plan",
      [](OpPassManager &pm, llvm::StringRef text,
         llvm::function_ref<LogicalResult(const llvm::Twine &)> onError) {
        TrainingPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        std::string message;
        llvm::raw_string_ostream errors(message);
        if (failed(buildTrainingPipeline(pm, options, errors)))
          return onError(errors.str());
        return success();
      },
      [](llvm::function_ref<void(const detail::PassOptions &)> printHelp) {
        printHelp(TrainingPipelineOptions());
      });
}

} // namespace slapo
