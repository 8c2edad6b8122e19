//===- Passes.h - slapo transformation passes -------------------*- C++ -*-===//
#ifndef SLAPO_TRANSFORMS_PASSES_H
#define SLAPO_TRANSFORMS_PASSES_H

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoDialect.h"
#include "slapo/Transforms/PassOptions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace slapo {

/// Name of the result attribute of @forward_backward that names the
/// parameter a gradient belongs to.
constexpr llvm::StringLiteral kGradOfAttrName = "slapo.grad_of";

/// The microbatch (0, 1, ...) whose forward or backward an op of
/// @forward_backward computes, set by slapo-microbatch: a pipeline stage
/// orders them by its schedule (slapo-pipeline-schedule).
constexpr llvm::StringLiteral kMicrobatchAttrName = "slapo.microbatch";

/// A unit attribute of a slapo.param on the last pipeline stage that holds
/// a copy of a parameter tied to the first stage's (slapo-pipeline-rank):
/// the global gradient norm counts the first stage's copy only.
constexpr llvm::StringLiteral kTiedCopyAttrName = "slapo.tied_copy";

/// The function the autodiff pass adds next to @forward.
constexpr llvm::StringLiteral kForwardBackwardName = "forward_backward";

/// The function slapo-optimizer adds: one whole training step.
constexpr llvm::StringLiteral kTrainStepName = "train_step";

/// Attribute naming the phase of the step an op belongs to: "backward" (set
/// by slapo-autodiff) or "optimizer" (set by slapo-optimizer); ops without it
/// are the forward. Code generation emits one function per phase.
constexpr llvm::StringLiteral kPhaseAttrName = "slapo.phase";

/// Whether `op` is in the forward: it has no phase.
inline bool isForwardOp(mlir::Operation *op) {
  return !op->hasAttr(kPhaseAttrName);
}

/// While alive, gives every op that `builder` inserts the phase `phase` (a
/// null one: the forward, no mark); the builder's own listener still hears
/// of every insertion.
class PhaseScope : public mlir::OpBuilder::Listener {
public:
  PhaseScope(mlir::OpBuilder &builder, mlir::Attribute phase)
      : builder(builder), previous(builder.getListener()), phase(phase) {
    builder.setListener(this);
  }
  ~PhaseScope() override { builder.setListener(previous); }
  PhaseScope(const PhaseScope &) = delete;
  PhaseScope &operator=(const PhaseScope &) = delete;

  void notifyOperationInserted(mlir::Operation *op) override {
    if (phase)
      op->setAttr(kPhaseAttrName, phase);
    if (previous)
      previous->notifyOperationInserted(op);
  }

private:
  mlir::OpBuilder &builder;
  mlir::OpBuilder::Listener *previous;
  mlir::Attribute phase;
};

/// Whether the forward and backward of `step` run as one: with microbatches
/// (ops of `step` carry slapo.microbatch), whose backwards run before later
/// microbatches' forwards, or where a forward op (a constant aside) follows
/// an op of the backward otherwise. A pipeline stage that runs all its
/// forwards first (1F1B's first stage of two) runs them as one too, as its
/// peers, whose messages it passes, do.
bool interleavesForwardAndBackward(mlir::func::FuncOp step);

/// slapo-checkpoint's marks: a clone of a forward op that the backward
/// computes again, and the module's summary of what is recomputed.
constexpr llvm::StringLiteral kRecomputedAttrName = "slapo.recomputed";
constexpr llvm::StringLiteral kRecomputationAttrName = "slapo.recomputation";

/// Whether `a` and `b` belong to one computation of the step: the forward,
/// one recomputation of it, the backward or the optimizer, of one
/// microbatch.
inline bool isSameComputation(mlir::Operation *a, mlir::Operation *b) {
  for (llvm::StringRef name :
       {kPhaseAttrName, kRecomputedAttrName, kMicrobatchAttrName})
    if (a->getAttr(name) != b->getAttr(name))
      return false;
  return true;
}

/// Gives `op` the place in the step of `origin`: its module path, pipeline
/// stage, phase, microbatch and recomputation (each removed where `origin`
/// has none), as an op that replaces `origin`, or is computed for it, has.
inline void placeLike(mlir::Operation *op, mlir::Operation *origin) {
  for (llvm::StringRef name :
       {llvm::StringRef(kModulePathAttrName), llvm::StringRef(kStageAttrName),
        llvm::StringRef(kPhaseAttrName), llvm::StringRef(kMicrobatchAttrName),
        llvm::StringRef(kRecomputedAttrName)}) {
    if (mlir::Attribute value = origin->getAttr(name))
      op->setAttr(name, value);
    else
      op->removeAttr(name);
  }
}

/// While alive, places every op that `builder` inserts like `origin`
/// (placeLike); the builder's own listener still hears of every insertion.
class PlacementScope : public mlir::OpBuilder::Listener {
public:
  PlacementScope(mlir::OpBuilder &builder, mlir::Operation *origin)
      : builder(builder), previous(builder.getListener()), origin(origin) {
    builder.setListener(this);
  }
  ~PlacementScope() override { builder.setListener(previous); }
  PlacementScope(const PlacementScope &) = delete;
  PlacementScope &operator=(const PlacementScope &) = delete;

  void notifyOperationInserted(mlir::Operation *op) override {
    placeLike(op, origin);
    if (previous)
      previous->notifyOperationInserted(op);
  }

private:
  mlir::OpBuilder &builder;
  mlir::OpBuilder::Listener *previous;
  mlir::Operation *origin;
};

/// slapo-cut-pipeline-stage's estimate of how balanced its stages are (a
/// module attribute): the modules cut after, each stage's estimated FLOPs
/// (its contractions' forward and backward, per microbatch), and the cuts
/// whose most expensive stage costs least with their stages' FLOPs.
constexpr llvm::StringLiteral kPipelineBalanceAttrName =
    "slapo.pipeline_balance";
constexpr llvm::StringLiteral kCutsKey = "cuts";
constexpr llvm::StringLiteral kStageFlopsKey = "stage_flops";
constexpr llvm::StringLiteral kBalancedCutsKey = "balanced_cuts";
constexpr llvm::StringLiteral kBalancedStageFlopsKey = "balanced_stage_flops";

/// Attributes of the memory plan (slapo-plan-memory): the arena offset of a
/// persistent symbol or argument, the offsets of an op's results, the
/// offset and bytes of an op's workspace (WorkspaceOpInterface), and the
/// module's summary.
constexpr llvm::StringLiteral kOffsetAttrName = "slapo.offset";
constexpr llvm::StringLiteral kOffsetsAttrName = "slapo.offsets";
constexpr llvm::StringLiteral kWorkspaceAttrName = "slapo.workspace";
constexpr llvm::StringLiteral kMemoryAttrName = "slapo.memory";
/// The summary's counts beside its bytes, where the step has microbatches:
/// how many, and the most whose activations the plan holds at once (the
/// microbatches in flight: 1 without pipeline stages, under 1F1B at most
/// pp - stage); and the most bytes of activations live at once, which the
/// summary's peak (that of all transient bytes) may not hold.
constexpr llvm::StringLiteral kMicrobatchesKey = "microbatches";
constexpr llvm::StringLiteral kMicrobatchesInFlightKey =
    "microbatches_in_flight";
constexpr llvm::StringLiteral kActivationsInFlightKey = "activations_in_flight";

/// The model's @forward, or null after an error at `module` saying that
/// `pass` needs it.
inline mlir::func::FuncOp lookupForward(mlir::ModuleOp module,
                                        llvm::StringRef pass) {
  auto forward = module.lookupSymbol<mlir::func::FuncOp>("forward");
  if (!forward)
    module.emitError(pass) << " needs @forward";
  return forward;
}

/// The step slapo-autodiff built, or null after an error at `module` saying
/// that `pass` needs it.
inline mlir::func::FuncOp lookupForwardBackward(mlir::ModuleOp module,
                                                llvm::StringRef pass) {
  auto function = module.lookupSymbol<mlir::func::FuncOp>(kForwardBackwardName);
  if (!function)
    module.emitError(pass) << " needs @" << kForwardBackwardName
                           << " (run slapo-autodiff first)";
  return function;
}

/// See Passes.td (slapo-optimizer is created by the generated
/// createOptimizer(OptimizerOptions)).
std::unique_ptr<mlir::Pass> createAutodiffPass();
std::unique_ptr<mlir::Pass> createPlanMemoryPass();

/// Plans @train_step's memory as slapo-plan-memory does; fails, with an
/// error at `module`, where there is no one-block @train_step.
mlir::LogicalResult planMemory(mlir::ModuleOp module);

/// The bytes a tensor of `type` takes in the arena (i1 takes one byte).
int64_t getStorageBytes(mlir::Type type);

/// `bytes` for people: "512 B", "3.5 KiB", "12.0 MiB", "1.50 GiB".
std::string formatBytes(int64_t bytes);

/// `flops` for people: exact below a million, where tests compute them by
/// hand ("192 FLOP"), then "13.92 MFLOP", "1.50 GFLOP".
std::string formatFlops(int64_t flops);

/// The kernels slapo-replace knows (replace("flash_attention")), in the
/// order the schedule documents them.
llvm::ArrayRef<llvm::StringRef> getReplaceKernels();

/// The named kinds slapo-fuse-elementwise knows (fuse("bias_gelu")), in the
/// order the schedule documents them.
llvm::ArrayRef<llvm::StringRef> getFuseKinds();

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "slapo/Transforms/Passes.h.inc"

} // namespace slapo

#endif // SLAPO_TRANSFORMS_PASSES_H
