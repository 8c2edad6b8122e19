//===- Passes.h - slapo transformation passes -------------------*- C++ -*-===//
#ifndef SLAPO_TRANSFORMS_PASSES_H
#define SLAPO_TRANSFORMS_PASSES_H

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

/// Whether a forward op of `step` (a constant aside) follows an op of the
/// backward: with microbatches each one's backward runs before the next
/// one's forward.
bool interleavesForwardAndBackward(mlir::func::FuncOp step);

/// slapo-checkpoint's marks: a clone of a forward op that the backward
/// computes again, and the module's summary of what is recomputed.
constexpr llvm::StringLiteral kRecomputedAttrName = "slapo.recomputed";
constexpr llvm::StringLiteral kRecomputationAttrName = "slapo.recomputation";

/// Attributes of the memory plan (slapo-plan-memory): the arena offset of a
/// persistent symbol or argument, the offsets of an op's results, and the
/// module's summary.
constexpr llvm::StringLiteral kOffsetAttrName = "slapo.offset";
constexpr llvm::StringLiteral kOffsetsAttrName = "slapo.offsets";
constexpr llvm::StringLiteral kMemoryAttrName = "slapo.memory";

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

/// The kernels slapo-replace knows (replace("flash_attention")), in the
/// order the schedule documents them.
llvm::ArrayRef<llvm::StringRef> getReplaceKernels();

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "slapo/Transforms/Passes.h.inc"

} // namespace slapo

#endif // SLAPO_TRANSFORMS_PASSES_H
