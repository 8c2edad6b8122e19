//===- PackQkv.cpp - attention reads its fused projection in place --------===//
//
// GPT-2 projects query, key and value with one linear (c_attn: [B, T, 3C])
// and splits its output with three slices along the last dim, each a copy
// of a third of it; the gradient concatenates their three gradients back,
// another copy of the whole. A token-major flash attention (`bshd`, from
// slapo-fold-permutes) reads the heads of a token side by side, so query,
// key and value are the projection's thirds of heads, viewed [B, T, 3H, D]:
// the kernels read them where the projection wrote them, and the gradient
// writes its three where the concat would have put them.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Dialect/TensorBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"

namespace slapo {
#define GEN_PASS_DEF_PACKQKV
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

/// The [B, T, 3C] tensor whose thirds along its last dim are `query`, `key`
/// and `value` in that order, each [B, T, C] reshaped to the same
/// [B, T, H, D], or null.
Value getPackedSource(ValueRange queryKeyValue) {
  Value source;
  for (auto [part, operand] : llvm::enumerate(queryKeyValue)) {
    auto reshape = operand.getDefiningOp<ReshapeOp>();
    auto slice =
        reshape ? reshape.getInput().getDefiningOp<SliceOp>() : nullptr;
    if (!slice || (source && slice.getInput() != source) ||
        operand.getType() != queryKeyValue[0].getType())
      return nullptr;
    source = slice.getInput();
    ArrayRef<int64_t> whole = shapeOf(source), window = shapeOf(operand);
    int64_t third = whole.size() == 3 ? whole[2] / 3 : 0;
    if (!third || whole[2] != 3 * third || slice.getDim() != 2 ||
        slice.getStep() != 1 || slice.getStart() != int64_t(part) * third ||
        slice.getEnd() != int64_t(part + 1) * third ||
        window.take_front(2) != whole.take_front(2))
      return nullptr;
  }
  return source;
}

/// The concat that alone reads `grad`'s three gradients, each reshaped
/// back to the [B, T, C] of its slice, joining them in order along the
/// last dim: the gradient of the projection's output. Null if there is
/// none.
ConcatOp getPackedGradient(FlashAttentionGradOp grad, Value source) {
  ConcatOp concat;
  for (auto [part, result] : llvm::enumerate(grad.getGrads())) {
    if (!result.hasOneUse())
      return nullptr;
    auto reshape = dyn_cast<ReshapeOp>(*result.getUsers().begin());
    if (!reshape || !reshape.getResult().hasOneUse())
      return nullptr;
    auto user = dyn_cast<ConcatOp>(*reshape.getResult().getUsers().begin());
    if (!user || (concat && user != concat) || user.getDim() != 2 ||
        user.getInputs().size() != 3 ||
        user.getInputs()[part] != reshape.getResult())
      return nullptr;
    concat = user;
  }
  if (concat.getType() != source.getType())
    return nullptr;
  return concat;
}

class Packer {
public:
  /// Packs `op` (a flash attention or its gradient) if its query, key and
  /// value are the thirds of one tensor (and the gradient's are
  /// concatenated back).
  void pack(Operation *op);
  /// Erases the slices and reshapes the packed ops left without users.
  void eraseDeadSplits();

private:
  /// The view [B, T, 3H, D] of `source` for `queryKeyValue`, made before
  /// the first op that reads it.
  Value getPackedView(Value source, ValueRange queryKeyValue,
                      Operation *before);

  DenseMap<Value, Value> views;
  /// Each query's, key's and value's reshape and slice, in that order.
  llvm::SetVector<Operation *> splits;
};

Value Packer::getPackedView(Value source, ValueRange queryKeyValue,
                            Operation *before) {
  Value &view = views[source];
  if (view)
    return view;
  SmallVector<int64_t> shape(shapeOf(queryKeyValue[0]));
  shape[2] *= 3;
  auto queryReshape = queryKeyValue[0].getDefiningOp<ReshapeOp>();
  OpBuilder builder(before);
  auto reshape = builder.create<ReshapeOp>(
      queryReshape.getLoc(), tensorType(source).clone(shape), source);
  reshape->setAttrs(queryReshape->getAttrDictionary());
  view = reshape.getResult();
  return view;
}

void Packer::pack(Operation *op) {
  auto grad = dyn_cast<FlashAttentionGradOp>(op);
  ValueRange queryKeyValue = op->getOperands().take_front(3);
  Value source = getPackedSource(queryKeyValue);
  if (!source)
    return;
  ConcatOp concat = grad ? getPackedGradient(grad, source) : nullptr;
  if (grad && !concat)
    return;
  for (Value operand : queryKeyValue) {
    splits.insert(operand.getDefiningOp());
    splits.insert(operand.getDefiningOp()->getOperand(0).getDefiningOp());
  }
  Value view = getPackedView(source, queryKeyValue, op);
  if (auto attention = dyn_cast<FlashAttentionOp>(op)) {
    for (OpOperand &operand : op->getOpOperands().take_front(3))
      operand.set(view);
    attention.setPackedQkv(true);
    return;
  }
  // The gradient: one result, the view's gradient, reshaped to the concat's.
  OpBuilder builder(grad);
  SmallVector<Value> operands(grad->getOperands());
  std::fill_n(operands.begin(), 3, view);
  auto packed = builder.create<FlashAttentionGradOp>(
      grad.getLoc(), TypeRange{view.getType()}, operands, grad->getAttrs());
  packed.setPackedQkv(true);
  Operation *queryReshape = *grad.getGradQuery().getUsers().begin();
  auto reshape = builder.create<ReshapeOp>(
      queryReshape->getLoc(), concat.getType(), packed.getGrads()[0]);
  reshape->setAttrs(queryReshape->getAttrDictionary());
  concat.getResult().replaceAllUsesWith(reshape.getResult());
  concat.erase();
  for (Value result : grad.getGrads())
    (*result.getUsers().begin())->erase();
  grad.erase();
}

void Packer::eraseDeadSplits() {
  // Reshapes before the slices they read.
  for (Operation *op : splits)
    if (op->use_empty())
      op->erase();
}

struct PackQkvPass : impl::PackQkvBase<PackQkvPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp function) {
      // Collected first: packing a gradient erases the ops after it.
      SmallVector<Operation *> attentions;
      for (Operation &op : function.getBody().getOps()) {
        auto attention = dyn_cast<FlashAttentionOp>(op);
        auto grad = dyn_cast<FlashAttentionGradOp>(op);
        if ((attention && attention.getBshd() && !attention.getPackedQkv()) ||
            (grad && grad.getBshd() && !grad.getPackedQkv()))
          attentions.push_back(&op);
      }
      Packer packer;
      for (Operation *op : attentions)
        packer.pack(op);
      packer.eraseDeadSplits();
    });
  }
};

} // namespace
} // namespace slapo
