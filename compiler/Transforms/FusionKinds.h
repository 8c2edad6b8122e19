//===- FusionKinds.h - the named kinds of fuse(kind) ------------*- C++ -*-===//
//
// A named fusion kind (fuse("bias_gelu")) is a checked pattern: the module
// must compute it, and its ops are prepared (a linear's bias split off) so
// that slapo-fuse-elementwise's grouping, restricted to them, makes the
// kind's groups.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_TRANSFORMS_FUSIONKINDS_H
#define SLAPO_TRANSFORMS_FUSIONKINDS_H

#include "CheckedPatterns.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace slapo {

/// What `kind` computes, for messages ("gelu(x W^T + b)"); empty for a kind
/// that getFuseKinds() does not list.
llvm::StringRef getFuseKindPattern(llvm::StringRef kind);

/// Gives each reader of a widened value (mixed precision's bf16 product
/// widened, or that plus a bias row: a linear layer's output before its
/// activation) in another computation (a recomputation, the backward) that
/// `mayFuse` (a reader that a fusion group may hold) a copy of its own of
/// the cast (and the add), returned in `copies`: the fusion group of each
/// widens the bf16 tensor as it reads it, and the f32 value is never
/// written; the bf16 tensor is what the backward keeps, in half the bytes.
/// Other readers (an optimizer's update, a norm's gradient, an op no group
/// may hold) read the f32 tensor as it is: a copy for them would be one
/// more pass.
void widenAgainInEachComputation(
    mlir::func::FuncOp step,
    llvm::function_ref<bool(mlir::Operation *)> mayFuse,
    llvm::SmallVectorImpl<mlir::Operation *> &copies);

/// Checks that the forward of `module` in `step` (a training step) computes
/// `kind`'s pattern, prepares the matched ops and adds to `members` the ops
/// the kind's groups may hold: the matched ops, their recomputations, the
/// elementwise ops of their gradients and mixed precision's casts at their
/// ends (the bf16 they read and write); a module without forward ops
/// (of another pipeline stage) has nothing to fuse. Fails where the
/// module's ops differ, with `mismatch` saying why and `at` set to an op of
/// the module.
mlir::LogicalResult
prepareFuseKind(llvm::StringRef kind, mlir::func::FuncOp step,
                llvm::StringRef module,
                llvm::SmallPtrSetImpl<mlir::Operation *> &members,
                Mismatch &mismatch, mlir::Operation *&at);

/// Moves each bias add (a row of the last dim added to a product) that only
/// a reshape keeping the last dim reads after that reshape, where the add
/// and a reader of the reshape satisfy `isElementwiseCandidate`: HF's Conv1D
/// adds its bias to the [B*T, N] product that the model then views as
/// [B, T, N] for the gelu or the residual add, and only ops of one shape
/// are one loop. The values are the same, bit for bit.
void sinkBiasAddsPastReshapes(
    mlir::func::FuncOp step,
    llvm::function_ref<bool(mlir::Operation *)> isElementwiseCandidate);

} // namespace slapo

#endif // SLAPO_TRANSFORMS_FUSIONKINDS_H
