//===- LossWeighting.h - a loss computed in parts -----------------*- C++
//-*-===//
//
// A step computed in parts (the microbatches of a rank, the ranks of a
// data-parallel group) trains as one device on the whole batch only if the
// parts' losses and gradients are weighted as the loss weighs its rows. A
// mean-reduced cross-entropy is the mean over the targets it does not ignore,
// so a part counts as many times as it has such targets; padding with the
// ignored index makes those counts differ between parts.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_TRANSFORMS_LOSSWEIGHTING_H
#define SLAPO_TRANSFORMS_LOSSWEIGHTING_H

#include "slapo/Dialect/TensorBuilder.h"

namespace slapo {

/// How the whole batch's loss follows from its parts' losses.
enum class LossWeighting {
  /// A mean over the counted targets (a mean-reduced cross-entropy, or a
  /// combination of them that buildCountedMean built): each part's loss
  /// counts as many times as it has counted targets.
  CountedTargets,
  /// A sum-reduced cross-entropy, or a sum, adds the parts' losses.
  Sum,
  /// Any other loss is taken for a mean over equally many rows per part.
  MeanOfEqualShares,
};

LossWeighting getLossWeighting(mlir::Value loss);

/// The number of targets a CountedTargets loss counts, a scalar of the
/// loss's element type, built with `g` (after the loss).
mlir::Value buildCountedTargets(TensorBuilder &g, mlir::Value loss);

/// `sum / count`, marked as a mean over `count` counted targets, so that
/// getLossWeighting and buildCountedTargets find them again.
mlir::Value buildCountedMean(TensorBuilder &g, mlir::Value sum,
                             mlir::Value count);

/// On a pipeline stage that receives the loss from the last stage, marks
/// `count`, the targets that loss counts, which this stage counts itself from
/// the labels every stage reads: getLossWeighting and buildCountedTargets of
/// the received loss find it.
void markCountedTargetsOfReceivedLoss(mlir::Value count);

/// `value`, weighted by `weight` for its part: `value * weight`, or 0 where
/// the part counts no target (its mean, 0 / 0, adds nothing to the whole).
mlir::Value weighPart(TensorBuilder &g, mlir::Value value, mlir::Value weight,
                      mlir::Value count);

} // namespace slapo

#endif // SLAPO_TRANSFORMS_LOSSWEIGHTING_H
