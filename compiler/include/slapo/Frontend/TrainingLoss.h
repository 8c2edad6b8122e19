//===- TrainingLoss.h - the loss train(loss=) adds to a forward -*- C++ -*-===//
//
// A model whose forward returns logits trains with train(loss=
// "cross_entropy"): the compiler appends the loss that PyTorch users write
// after the forward, so the same export trains and serves.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_FRONTEND_TRAININGLOSS_H
#define SLAPO_FRONTEND_TRAININGLOSS_H

#include "slapo/Frontend/InputSpec.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace slapo {

/// Marks a forward whose last argument is the targets of a loss the
/// compiler appended (its value: the loss), not an argument of the model's
/// own forward.
constexpr llvm::StringLiteral kAppendedLossAttrName = "slapo.appended_loss";

/// The target the appended loss ignores: PyTorch's default ignore_index,
/// which Hugging Face's padded labels use.
constexpr int64_t kIgnoredTarget = -100;

/// Checks that `targets`, the last input(), can be the class indices of
/// train(loss="cross_entropy"): before the forward is imported without it,
/// so that a forgotten declaration is reported as that.
mlir::LogicalResult checkCrossEntropyTargets(const InputSpec &targets,
                                             mlir::Location where);

/// Makes `forward`, which returns logits [..., classes], return the mean
/// cross-entropy of their rows against `targets` (class indices [...], the
/// rows' shape), a new last argument: what
/// torch.nn.functional.cross_entropy(logits.flatten(0, -2),
/// targets.flatten()) computes, targets equal to -100 (Hugging Face's
/// padding) ignored. The new ops are located at `where`, the targets'
/// input(). A forward that returns anything else, or targets of another
/// shape, is an error there; `forward` is then unchanged.
mlir::LogicalResult appendCrossEntropyLoss(mlir::func::FuncOp forward,
                                           const InputSpec &targets,
                                           mlir::Location where);

} // namespace slapo

#endif // SLAPO_FRONTEND_TRAININGLOSS_H
