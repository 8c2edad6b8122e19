//===- DataParallel.cpp - gradients averaged over the dp group ------------===//
//
// Buckets follow the order in which the backward finishes gradients, as
// PyTorch DDP's do, so that a runtime with asynchronous collectives can
// reduce a bucket while the backward computes the next one.
//
// Averaging the ranks' losses and gradients is the whole batch's mean only
// when every rank's loss is a mean over equally many rows. A mean over the
// targets a cross-entropy does not ignore is not (labels padded with
// ignore_index differ between ranks), so each rank first weighs its loss and
// gradients by its share of the group's counted targets: the average of the
// weighted parts is then the mean over all counted targets, as one device on
// the whole batch computes it (and as PyTorch DDP does not).
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "LossWeighting.h"

#include "slapo/Dialect/SlapoOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace slapo {
#define GEN_PASS_DEF_DATAPARALLEL
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

/// A rank's weight among the group's ranks: its count of counted targets
/// over the group's mean count.
struct RankWeight {
  Value count;
  Value share;
};

/// Builds the rank's weight right after the loss, in the loss's phase.
RankWeight buildRankWeight(OpBuilder &builder, Value loss) {
  Operation *lossOp = loss.getDefiningOp();
  builder.setInsertionPointAfter(lossOp);
  PhaseScope inLossPhase(builder, lossOp->getAttr(kPhaseAttrName));
  TensorBuilder g(builder, loss.getLoc());
  Value count = buildCountedTargets(g, loss);
  Value meanCount =
      builder
          .create<AllReduceOp>(loss.getLoc(), count, ProcessGroup::dp,
                               /*mean=*/true)
          .getResult(0);
  return {count, g.div(count, meanCount)};
}

struct DataParallelPass : impl::DataParallelBase<DataParallelPass> {
  using DataParallelBase::DataParallelBase;

  void runOnOperation() override {
    auto function =
        lookupForwardBackward(getOperation(), "slapo-data-parallel");
    if (!function)
      return signalPassFailure();
    Block &block = function.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    // Gradients computed before the backward starts (a forward value that
    // is a gradient as it is) are reduced at its start, with the first
    // bucket: the phases of the step must stay in order.
    Operation *backwardStart = ret;
    DenseMap<Operation *, unsigned> position;
    for (Operation &op : block) {
      position[&op] = position.size();
      if (backwardStart == ret && op.hasAttr(kPhaseAttrName))
        backwardStart = &op;
    }
    auto finishedAt = [&](unsigned operand) {
      Operation *def = ret.getOperand(operand).getDefiningOp();
      return def && def->hasAttr(kPhaseAttrName) ? position[def] : 0u;
    };
    SmallVector<unsigned> grads;
    for (unsigned i = 1; i < ret.getNumOperands(); ++i)
      grads.push_back(i);
    llvm::stable_sort(grads, [&](unsigned a, unsigned b) {
      return finishedAt(a) < finishedAt(b);
    });

    OpBuilder builder(&getContext());
    // A pipeline stage that receives the loss has counted its targets itself
    // (slapo-pipeline-rank): every stage of a rank weighs alike.
    std::optional<RankWeight> weight;
    if (getLossWeighting(ret.getOperand(0)) == LossWeighting::CountedTargets)
      weight = buildRankWeight(builder, ret.getOperand(0));
    Attribute backward = builder.getStringAttr("backward");
    PhaseScope inBackward(builder, backward);
    TensorBuilder g(builder, ret.getLoc());
    // The rank's part of the group's mean, weighted where ranks weigh alike.
    auto reduce = [&](ArrayRef<unsigned> operands) {
      SmallVector<Value> inputs;
      for (unsigned operand : operands) {
        Value part = ret.getOperand(operand);
        inputs.push_back(
            weight ? weighPart(g, part, weight->share, weight->count) : part);
      }
      auto allReduce = builder.create<AllReduceOp>(
          ret.getLoc(), inputs, ProcessGroup::dp, /*mean=*/true);
      for (auto [operand, result] : llvm::zip(operands, allReduce.getResults()))
        ret.setOperand(operand, result);
    };
    Operation *weightReady = weight ? weight->share.getDefiningOp() : nullptr;
    SmallVector<unsigned> bucket;
    int64_t bytes = 0;
    for (unsigned operand : grads) {
      bucket.push_back(operand);
      auto type = ret.getOperand(operand).getType().cast<RankedTensorType>();
      bytes += type.getNumElements() * type.getElementTypeBitWidth() / 8;
      if (bytes < bucketBytes && operand != grads.back())
        continue;
      Operation *last = finishedAt(operand)
                            ? ret.getOperand(operand).getDefiningOp()
                            : nullptr;
      // Not before the rank's weight exists: with microbatches, gradients
      // finish before the last microbatch's loss, in the backward.
      if (weightReady && !weightReady->isBeforeInBlock(backwardStart) &&
          (!last || last->isBeforeInBlock(weightReady)))
        last = weightReady;
      if (last)
        builder.setInsertionPointAfter(last);
      else
        builder.setInsertionPoint(backwardStart);
      reduce(bucket);
      bucket.clear();
      bytes = 0;
    }
    // The loss last: reporting it needs no gradient to wait.
    builder.setInsertionPoint(ret);
    reduce({0});
  }
};

} // namespace
} // namespace slapo
