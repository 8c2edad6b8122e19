//===- FoldLogitsSlice.cpp - the loss of some rows as ignored targets -----===//
//
// A causal LM's loss pairs each position's logits with the next token:
// cross_entropy(logits[:, :-1], labels[:, 1:]). The slice copies the
// largest activation of the model, [batch, seq, vocab] in f32, but for one
// row per sequence, and its gradient, the loss's gradient joined to zeros
// by a concat, copies it again. The loss of all the rows, with the labels of
// the rows the slice drops set to ignore_index, is the same number (an
// ignored row adds 0 to the sum and is not counted by the mean) and has the
// same gradient (an ignored row's is zero), without either copy.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "DeadOps.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Dialect/TensorBuilder.h"

#include <numeric>

namespace slapo {
#define GEN_PASS_DEF_FOLDLOGITSSLICE
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

/// `loss`'s ignore_index as an element of its targets' type, if it names
/// no class (the gradient of such a target's row is zeros whatever the
/// logits, as the slice's gradient pads it) and the type can hold it.
IntegerAttr getIgnoredTarget(CrossEntropyOp loss) {
  auto type = elementTypeOf(loss.getTarget()).cast<IntegerType>();
  auto ignored = static_cast<int64_t>(loss.getIgnoreIndex());
  int64_t classes = shapeOf(loss.getLogits()).back();
  if ((ignored >= 0 && ignored < classes) ||
      !llvm::isIntN(type.getWidth(), ignored))
    return nullptr;
  return IntegerAttr::get(type, ignored);
}

/// The slice whose rows `loss` reads, through reshapes that keep each row
/// of classes whole and last, each value of the chain read by the next op
/// alone; null if there is none, or if it slices the classes.
SliceOp getSlicedLogits(CrossEntropyOp loss) {
  if (loss.getReduction() == Reduction::none)
    return nullptr; // the result has a loss per row
  Value logits = loss.getLogits();
  while (auto reshape = logits.getDefiningOp<ReshapeOp>()) {
    if (!logits.hasOneUse() ||
        shapeOf(reshape.getInput()).back() != shapeOf(logits).back())
      return nullptr;
    logits = reshape.getInput();
  }
  auto slice = logits.getDefiningOp<SliceOp>();
  if (!slice || !logits.hasOneUse() ||
      static_cast<int64_t>(slice.getDim()) == rankOf(logits) - 1)
    return nullptr;
  return slice;
}

/// `loss` of the rows `slice` keeps, as the loss of all of its input's
/// rows with the others' targets `ignored`.
void foldSlice(CrossEntropyOp loss, SliceOp slice, IntegerAttr ignored) {
  OpBuilder builder(loss);
  ModulePathScope inModule(builder, loss);
  TensorBuilder g(builder, loss.getLoc());
  Value logits = slice.getInput();
  ArrayRef<int64_t> shape = shapeOf(logits);
  int64_t classes = shape.back();
  int64_t rows = std::accumulate(shape.begin(), shape.end() - 1, int64_t(1),
                                 std::multiplies<int64_t>());
  Value keptTargets =
      g.reshape(loss.getTarget(), shapeOf(slice.getResult()).drop_back());
  Value targets = g.padSlice(keptTargets, shape.drop_back(), slice.getDim(),
                             slice.getStart(), slice.getStep(), ignored);
  Value logitRows = g.reshape(logits, {rows, classes});
  Value targetRows = g.reshape(targets, {rows});
  auto whole = builder.create<CrossEntropyOp>(
      loss.getLoc(), loss.getType(), logitRows, targetRows,
      loss.getIgnoreIndexAttr(), loss.getReductionAttr());
  loss.getResult().replaceAllUsesWith(whole.getResult());
  eraseDeadChain(loss);
}

struct FoldLogitsSlicePass : impl::FoldLogitsSliceBase<FoldLogitsSlicePass> {
  void runOnOperation() override {
    SmallVector<std::tuple<CrossEntropyOp, SliceOp, IntegerAttr>> folds;
    getOperation().walk([&](CrossEntropyOp loss) {
      SliceOp slice = getSlicedLogits(loss);
      IntegerAttr ignored = slice ? getIgnoredTarget(loss) : nullptr;
      if (ignored)
        folds.push_back({loss, slice, ignored});
    });
    for (auto [loss, slice, ignored] : folds)
      foldSlice(loss, slice, ignored);
  }
};

} // namespace
} // namespace slapo
