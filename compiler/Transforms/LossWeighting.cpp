//===- LossWeighting.cpp - a loss computed in parts -----------------------===//
#include "LossWeighting.h"

#include "slapo/Dialect/SlapoOps.h"

#include <optional>

using namespace mlir;

namespace slapo {

/// Marks the division of buildCountedMean; the passes that combine parts run
/// one after the other, so the mark only has to survive cloning.
static constexpr llvm::StringLiteral kCountedMeanAttrName =
    "slapo.counted_mean";

/// Marks the count of markCountedTargetsOfReceivedLoss, in the same way.
static constexpr llvm::StringLiteral kReceivedLossTargetsAttrName =
    "slapo.received_loss_targets";

static DivOp getCountedMean(Value loss) {
  auto div = loss.getDefiningOp<DivOp>();
  return div && div->hasAttr(kCountedMeanAttrName) ? div : DivOp();
}

/// The count of targets marked for `loss`, a loss received from another
/// pipeline stage, or null.
static Value getCountedTargetsOfReceivedLoss(Value loss) {
  auto recv = loss.getDefiningOp<StageRecvOp>();
  if (!recv)
    return {};
  for (Operation &op : *recv->getBlock())
    if (op.hasAttr(kReceivedLossTargetsAttrName))
      return op.getResult(0);
  return {};
}

/// The targets, ignored index and reduction of a cross-entropy `loss`
/// (slapo.cross_entropy, or the loss of slapo.linear_cross_entropy that
/// replace("cross_entropy") makes of one).
struct CrossEntropyLoss {
  Value target;
  int64_t ignoreIndex;
  Reduction reduction;
};
static std::optional<CrossEntropyLoss> getCrossEntropyLoss(Value loss) {
  if (auto crossEntropy = loss.getDefiningOp<CrossEntropyOp>())
    return CrossEntropyLoss{crossEntropy.getTarget(),
                            int64_t(crossEntropy.getIgnoreIndex()),
                            crossEntropy.getReduction()};
  if (auto fused = loss.getDefiningOp<LinearCrossEntropyOp>();
      fused && fused.getLoss() == loss)
    return CrossEntropyLoss{fused.getTarget(), int64_t(fused.getIgnoreIndex()),
                            fused.getReduction()};
  return std::nullopt;
}

LossWeighting getLossWeighting(Value loss) {
  if (std::optional<CrossEntropyLoss> crossEntropy = getCrossEntropyLoss(loss))
    return crossEntropy->reduction == Reduction::mean
               ? LossWeighting::CountedTargets
               : LossWeighting::Sum;
  if (getCountedMean(loss) || getCountedTargetsOfReceivedLoss(loss))
    return LossWeighting::CountedTargets;
  if (loss.getDefiningOp<SumOp>())
    return LossWeighting::Sum;
  return LossWeighting::MeanOfEqualShares;
}

Value buildCountedTargets(TensorBuilder &g, Value loss) {
  if (DivOp mean = getCountedMean(loss))
    return mean.getRhs();
  if (Value count = getCountedTargetsOfReceivedLoss(loss))
    return count;
  std::optional<CrossEntropyLoss> crossEntropy = getCrossEntropyLoss(loss);
  assert(crossEntropy && crossEntropy->reduction == Reduction::mean &&
         "not a mean over counted targets");
  Value kept = g.maskUnequal(crossEntropy->target, crossEntropy->ignoreIndex,
                             elementTypeOf(loss));
  return g.sum(kept, {0}, /*keepdim=*/false);
}

Value buildCountedMean(TensorBuilder &g, Value sum, Value count) {
  Value mean = g.div(sum, g.cast(count, elementTypeOf(sum)));
  mean.getDefiningOp()->setAttr(kCountedMeanAttrName,
                                g.getBuilder().getUnitAttr());
  return mean;
}

void markCountedTargetsOfReceivedLoss(Value count) {
  count.getDefiningOp()->setAttr(kReceivedLossTargetsAttrName,
                                 UnitAttr::get(count.getContext()));
}

Value weighPart(TensorBuilder &g, Value value, Value weight, Value count) {
  Value counted =
      g.compare(ComparePredicate::gt, count, g.scalarLike(0, count));
  return g.where(counted, g.mul(value, g.cast(weight, elementTypeOf(value))),
                 g.scalarLike(0, value));
}

} // namespace slapo
