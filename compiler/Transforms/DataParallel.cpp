//===- DataParallel.cpp - gradients averaged over the dp group ------------===//
//
// Buckets follow the order in which the backward finishes gradients, as
// PyTorch DDP's do, so that a runtime with asynchronous collectives can
// reduce a bucket while the backward computes the next one.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

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
    auto reduce = [&](ArrayRef<unsigned> operands, Operation *after) {
      if (after)
        builder.setInsertionPointAfter(after);
      else
        builder.setInsertionPoint(backwardStart);
      SmallVector<Value> inputs;
      for (unsigned operand : operands)
        inputs.push_back(ret.getOperand(operand));
      auto allReduce = builder.create<AllReduceOp>(
          ret.getLoc(), inputs, ProcessGroup::dp, /*mean=*/true);
      allReduce->setAttr(kPhaseAttrName, builder.getStringAttr("backward"));
      for (auto [operand, result] : llvm::zip(operands, allReduce.getResults()))
        ret.setOperand(operand, result);
    };
    SmallVector<unsigned> bucket;
    int64_t bytes = 0;
    for (unsigned operand : grads) {
      bucket.push_back(operand);
      auto type = ret.getOperand(operand).getType().cast<RankedTensorType>();
      bytes += type.getNumElements() * type.getElementTypeBitWidth() / 8;
      if (bytes < bucketBytes && operand != grads.back())
        continue;
      Operation *last = ret.getOperand(operand).getDefiningOp();
      reduce(bucket, finishedAt(operand) ? last : nullptr);
      bucket.clear();
      bytes = 0;
    }
    // The loss last: reporting it needs no gradient to wait.
    builder.setInsertionPoint(ret);
    auto loss = builder.create<AllReduceOp>(ret.getLoc(), ret.getOperand(0),
                                            ProcessGroup::dp, /*mean=*/true);
    loss->setAttr(kPhaseAttrName, builder.getStringAttr("backward"));
    ret.setOperand(0, loss.getResult(0));
  }
};

} // namespace
} // namespace slapo
