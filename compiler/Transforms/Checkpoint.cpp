//===- Checkpoint.cpp - schedule primitive checkpoint() -------------------===//
//
// Activation checkpointing on the whole training step, where every value's
// lifetime is explicit: recomputing a module is cloning its forward ops next
// to its backward, and what that saves is what slapo-plan-memory then plans.
// So a memory budget is met by trial plans at compile time instead of trial
// runs. It runs after CSE, which would merge the clones back into the
// originals. With microbatches each microbatch's backward recomputes its
// own forward, in the order slapo-pipeline-schedule gave them; on a
// pipeline stage, each stage checkpoints the modules it computes.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace slapo {
#define GEN_PASS_DEF_CHECKPOINT
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

constexpr llvm::StringLiteral kBackwardPhase = "backward";

/// What checkpointing one module clones, and what that buys and costs.
struct Recomputation {
  /// The module's forward ops its backward needs again, in block order: one
  /// list per microbatch (one in all without microbatches), since each
  /// microbatch's backward recomputes its own forward.
  SmallVector<SmallVector<Operation *>> perMicrobatch;
  /// Bytes of the results of `ops` that the module's backward reads: kept
  /// until then without checkpointing.
  int64_t savedBytes = 0;
  int64_t matmulFlops = 0;
};

/// Ops whose result the clones read from the originals: a parameter or a
/// constant, as cheap to keep as to recompute, and a value received from
/// another pipeline stage, which sends it once.
bool isKept(Operation *op) {
  return isa<GetParamOp, ConstantOp, StageRecvOp>(op);
}

/// The microbatch whose forward or backward `op` computes: null without
/// microbatches, and for what serves them all (a weight's cast).
Attribute getMicrobatch(Operation *op) {
  return op->getAttr(kMicrobatchAttrName);
}

bool isBackwardOf(Operation *op, StringRef module) {
  auto phase = op->getAttrOfType<StringAttr>(kPhaseAttrName);
  return phase && phase.getValue() == kBackwardPhase && isInModule(op, module);
}

/// The FLOPs of recomputing `op`: its contractions'.
int64_t getRecomputedFlops(Operation *op) {
  auto contraction = dyn_cast<FlopCountOpInterface>(op);
  return contraction ? contraction.getForwardFlops() : 0;
}

/// What checkpointing `module` in `step` clones, or the reason it cannot be
/// checkpointed (with the op to report it at, if any).
struct Analysis {
  std::optional<Recomputation> recomputation;
  /// On a pipeline stage, the module is another stage's: that stage
  /// checkpoints it.
  bool onOtherStage = false;
  std::string problem;
  Operation *problemOp = nullptr;
};

Analysis analyze(func::FuncOp step, StringRef module) {
  Block &block = step.getBody().front();
  llvm::SmallPtrSet<Operation *, 32> forward;
  Operation *computing = nullptr;
  // On a pipeline stage, the module is this stage's if it computes an op of
  // the stage: what only reads the step's inputs and constants (a causal
  // mask) carries no stage, as every stage computes it.
  bool pipelineStage = false, onThisStage = false;
  for (Operation &op : block.without_terminator()) {
    pipelineStage |= op.hasAttr(kStageAttrName);
    if (!isForwardOp(&op) || !isInModule(&op, module))
      continue;
    forward.insert(&op);
    if (isKept(&op))
      continue;
    onThisStage |= op.hasAttr(kStageAttrName);
    if (!computing)
      computing = &op;
  }
  Analysis analysis;
  if (pipelineStage && !onThisStage) {
    analysis.recomputation = Recomputation();
    analysis.onOtherStage = true;
    return analysis;
  }
  if (!computing) {
    analysis.problem = "module '" + module.str() +
                       "' computes nothing in the forward: there is "
                       "nothing to recompute";
    return analysis;
  }
  for (Value result : block.getTerminator()->getOperands())
    if (Operation *def = result.getDefiningOp(); def && forward.contains(def)) {
      analysis.problem =
          "module '" + module.str() +
          "' computes the loss: its backward follows its forward at once, "
          "so checkpointing it frees nothing; checkpoint the blocks before it";
      analysis.problemOp = def;
      return analysis;
    }

  // The forward values the module's backward reads, then what they are
  // computed from inside the module, each microbatch's from its own: what
  // serves all microbatches is kept.
  Recomputation recomputation;
  llvm::SmallPtrSet<Operation *, 32> needed;
  SmallVector<Operation *> worklist;
  auto isRecomputable = [&](Operation *def, Operation *user) {
    return def && forward.contains(def) && !isKept(def) &&
           getMicrobatch(def) == getMicrobatch(user);
  };
  for (Operation &op : block) {
    if (!isBackwardOf(&op, module))
      continue;
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!isRecomputable(def, &op))
        continue;
      if (needed.insert(def).second) {
        worklist.push_back(def);
        if (!getSameBytesSource(def))
          recomputation.savedBytes += getStorageBytes(operand.getType());
      }
    }
  }
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp();
          isRecomputable(def, op) && needed.insert(def).second)
        worklist.push_back(def);
  }
  llvm::MapVector<Attribute, SmallVector<Operation *>> perMicrobatch;
  for (Operation &op : block)
    if (needed.contains(&op)) {
      perMicrobatch[getMicrobatch(&op)].push_back(&op);
      recomputation.matmulFlops += getRecomputedFlops(&op);
    }
  for (auto &[microbatch, ops] : perMicrobatch)
    recomputation.perMicrobatch.push_back(std::move(ops));
  analysis.recomputation = std::move(recomputation);
  return analysis;
}

/// Clones `ops`, one microbatch's part of a recomputation, before the first
/// backward op of `module` that reads one of them, and makes the module's
/// backward read the clones.
void recompute(func::FuncOp step, StringRef module, ArrayRef<Operation *> ops) {
  llvm::SmallPtrSet<Operation *, 32> cloned(ops.begin(), ops.end());
  llvm::SmallPtrSet<Operation *, 32> readers;
  Operation *firstReader = nullptr;
  for (Operation &op : step.getBody().front()) {
    if (!isBackwardOf(&op, module) ||
        llvm::none_of(op.getOperands(), [&](Value operand) {
          return cloned.contains(operand.getDefiningOp());
        }))
      continue;
    readers.insert(&op);
    if (!firstReader)
      firstReader = &op;
  }
  OpBuilder builder(firstReader);
  IRMapping mapping;
  Attribute phase = firstReader->getAttr(kPhaseAttrName);
  for (Operation *op : ops) {
    Operation *clone = builder.clone(*op, mapping);
    clone->setAttr(kPhaseAttrName, phase);
    clone->setAttr(kRecomputedAttrName, builder.getUnitAttr());
  }
  for (Operation *op : ops)
    for (Value result : op->getResults())
      result.replaceUsesWithIf(mapping.lookup(result), [&](OpOperand &use) {
        return readers.contains(use.getOwner());
      });
}

/// Each microbatch's backward of `module` recomputes its forward.
void apply(func::FuncOp step, StringRef module,
           const Recomputation &recomputation) {
  for (ArrayRef<Operation *> ops : recomputation.perMicrobatch)
    recompute(step, module, ops);
}

/// `paths` without those inside another of them: checkpointing a module
/// recomputes its submodules too.
SmallVector<std::string> getOutermost(ArrayRef<ModelName> paths) {
  SmallVector<std::string> outermost;
  for (const std::string &path : paths)
    if (llvm::none_of(paths,
                      [&](const std::string &other) {
                        return other != path && isWithinModule(path, other);
                      }) &&
        !llvm::is_contained(outermost, path))
      outermost.push_back(path);
  return outermost;
}

struct CheckpointPass : impl::CheckpointBase<CheckpointPass> {
  using CheckpointBase::CheckpointBase;

  void runOnOperation() override;

private:
  /// The arena slapo-plan-memory plans for the module with `paths`
  /// checkpointed.
  FailureOr<int64_t> planArena(ArrayRef<std::string> paths);
  /// The candidates to add to `selected`, fewest first, to fit the budget.
  FailureOr<SmallVector<std::string>>
  chooseForBudget(ArrayRef<std::string> selected);
};

FailureOr<int64_t> CheckpointPass::planArena(ArrayRef<std::string> paths) {
  OwningOpRef<ModuleOp> trial = getOperation().clone();
  auto step = trial->lookupSymbol<func::FuncOp>(kTrainStepName);
  for (const std::string &path : paths)
    apply(step, path, *analyze(step, path).recomputation);
  if (failed(planMemory(*trial)))
    return failure();
  return (*trial)
      ->getAttrOfType<DictionaryAttr>(kMemoryAttrName)
      .getAs<IntegerAttr>("arena_bytes")
      .getInt();
}

FailureOr<SmallVector<std::string>>
CheckpointPass::chooseForBudget(ArrayRef<std::string> selected) {
  ModuleOp module = getOperation();
  auto step = module.lookupSymbol<func::FuncOp>(kTrainStepName);
  FailureOr<int64_t> arena = planArena(selected);
  if (failed(arena))
    return failure();
  if (*arena <= memoryBudget)
    return SmallVector<std::string>();

  // Cheapest recomputation per byte kept first; the schedule's order
  // between equals.
  struct Candidate {
    std::string path;
    double flopsPerByte;
  };
  SmallVector<Candidate> ranked;
  for (const std::string &path : getOutermost(candidates)) {
    if (llvm::any_of(selected, [&](const std::string &chosen) {
          return isWithinModule(path, chosen) || isWithinModule(chosen, path);
        }))
      continue;
    Analysis analysis = analyze(step, path);
    if (!analysis.recomputation || analysis.recomputation->savedBytes == 0)
      continue;
    ranked.push_back({path, double(analysis.recomputation->matmulFlops) /
                                analysis.recomputation->savedBytes});
  }
  llvm::stable_sort(ranked, [](const Candidate &a, const Candidate &b) {
    return a.flopsPerByte < b.flopsPerByte;
  });
  auto withFirst = [&](size_t count) {
    SmallVector<std::string> paths(selected.begin(), selected.end());
    for (size_t i = 0; i < count; ++i)
      paths.push_back(ranked[i].path);
    return paths;
  };
  FailureOr<int64_t> smallest = planArena(withFirst(ranked.size()));
  if (failed(smallest))
    return failure();
  if (*smallest > memoryBudget) {
    module.emitError() << "memory_budget of " << formatBytes(memoryBudget)
                       << " cannot be met: the planned arena is "
                       << formatBytes(*arena) << ", and checkpointing "
                       << (ranked.empty() ? "" : "all ") << ranked.size()
                       << " more module(s) reaches no less than "
                       << formatBytes(*smallest);
    return failure();
  }
  // The arena shrinks as modules are added: the fewest that fit, by
  // bisection over the ranking.
  size_t fits = ranked.size(), fails = 0;
  while (fits - fails > 1) {
    size_t middle = (fits + fails) / 2;
    FailureOr<int64_t> trial = planArena(withFirst(middle));
    if (failed(trial))
      return failure();
    (*trial <= memoryBudget ? fits : fails) = middle;
  }
  SmallVector<std::string> chosen;
  for (size_t i = 0; i < fits; ++i)
    chosen.push_back(ranked[i].path);
  // Bytes saved are not bytes off the peak (the last block's backward
  // comes first, so recomputing it saves nothing): a chosen module without
  // which the budget is still met is left out, the costliest first.
  for (size_t i = chosen.size(); i-- > 0;) {
    SmallVector<std::string> without(selected.begin(), selected.end());
    for (size_t j = 0; j < chosen.size(); ++j)
      if (j != i)
        without.push_back(chosen[j]);
    FailureOr<int64_t> trial = planArena(without);
    if (failed(trial))
      return failure();
    if (*trial <= memoryBudget)
      chosen.erase(chosen.begin() + i);
  }
  return chosen;
}

void CheckpointPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto step = module.lookupSymbol<func::FuncOp>(kTrainStepName);
  if (!step || !step.getBody().hasOneBlock()) {
    module.emitError("slapo-checkpoint: there is no one-block func.func @")
        << kTrainStepName << " (run slapo-optimizer first)";
    return signalPassFailure();
  }
  SmallVector<std::string> paths;
  for (const std::string &path : getOutermost(modules)) {
    Analysis analysis = analyze(step, path);
    if (analysis.onOtherStage)
      continue;
    if (!analysis.recomputation) {
      (analysis.problemOp ? analysis.problemOp->emitError()
                          : module.emitError())
          << "checkpoint(): " << analysis.problem;
      return signalPassFailure();
    }
    paths.push_back(path);
  }
  FailureOr<int64_t> arenaWithout = planArena({});
  if (failed(arenaWithout))
    return signalPassFailure();
  SmallVector<std::string> chosen;
  if (memoryBudget > 0) {
    FailureOr<SmallVector<std::string>> choice = chooseForBudget(paths);
    if (failed(choice))
      return signalPassFailure();
    chosen = std::move(*choice);
    paths.append(chosen.begin(), chosen.end());
  }

  int64_t matmulFlops = 0, savedBytes = 0;
  for (const std::string &path : paths) {
    Analysis analysis = analyze(step, path);
    if (analysis.recomputation->perMicrobatch.empty())
      step.emitWarning() << "checkpoint(): module '" << path
                         << "' keeps nothing for its backward: there is "
                            "nothing to recompute";
    matmulFlops += analysis.recomputation->matmulFlops;
    savedBytes += analysis.recomputation->savedBytes;
    apply(step, path, *analysis.recomputation);
  }

  Builder builder(module.getContext());
  auto strings = [&](ArrayRef<std::string> values) {
    return builder.getStrArrayAttr(llvm::to_vector(llvm::map_range(
        values, [](const std::string &value) { return StringRef(value); })));
  };
  SmallVector<NamedAttribute> summary = {
      builder.getNamedAttr("modules", strings(paths)),
      builder.getNamedAttr("matmul_flops",
                           builder.getI64IntegerAttr(matmulFlops)),
      builder.getNamedAttr("arena_bytes_without",
                           builder.getI64IntegerAttr(*arenaWithout)),
      builder.getNamedAttr("activation_bytes_not_kept",
                           builder.getI64IntegerAttr(savedBytes))};
  if (memoryBudget > 0) {
    summary.push_back(builder.getNamedAttr(
        "budget", builder.getI64IntegerAttr(memoryBudget)));
    summary.push_back(builder.getNamedAttr("chosen", strings(chosen)));
  }
  module->setAttr(kRecomputationAttrName, builder.getDictionaryAttr(summary));
}

} // namespace
} // namespace slapo
