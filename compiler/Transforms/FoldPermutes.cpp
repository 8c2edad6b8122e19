//===- FoldPermutes.cpp - matmuls through permutations, not copies --------===//
//
// The gradient rules of linear and matmul transpose their operands, and
// attention splits and merges heads with permutes: each one a strided copy
// of a whole activation or gradient (the LM head's weight gradient
// transposes a [tokens, vocab] tensor). oneDNN's matmul reads and writes
// strided tensors nearly as fast as dense ones, so the copies next to a
// matmul become its permutation attributes (slapo-propagate-casts has moved
// mixed precision's casts from between them), and the flash attention
// kernels read and write the heads in the projections' token-major layout,
// so the head splits and merges around them become their `bshd`. A rotary
// embedding between a head split and an attention (LLaMA's query and key),
// or between an attention's gradient and a head merge, rotates each head's
// rows the same in either layout: the swap moves to its other side, next to
// the attention, and the rotary runs token-major too.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Dialect/TensorBuilder.h"

#include "llvm/ADT/SetVector.h"

namespace slapo {
#define GEN_PASS_DEF_FOLDPERMUTES
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

/// The permutation that reads dim i of a tensor as dim outer[inner[i]]:
/// `inner` applied to a tensor that `outer` permuted.
SmallVector<int64_t> compose(ArrayRef<int64_t> outer, ArrayRef<int64_t> inner) {
  SmallVector<int64_t> composed;
  for (int64_t dim : inner)
    composed.push_back(outer[dim]);
  return composed;
}

SmallVector<int64_t> identity(int64_t rank) {
  return llvm::to_vector(llvm::seq<int64_t>(0, rank));
}

/// `order` as the attribute of a matmul, none for the identity.
DenseI64ArrayAttr toAttr(MLIRContext *context, ArrayRef<int64_t> order) {
  if (ArrayRef<int64_t>(identity(order.size())) == order)
    return nullptr;
  return DenseI64ArrayAttr::get(context, order);
}

/// The permutation that swaps the last two dims of a tensor of `rank`.
SmallVector<int64_t> transposition(int64_t rank) {
  SmallVector<int64_t> order = identity(rank);
  std::swap(order[rank - 2], order[rank - 1]);
  return order;
}

/// `order` as an attribute value, or the identity of `value`'s rank.
SmallVector<int64_t> orderOf(std::optional<ArrayRef<int64_t>> order,
                             Value value) {
  if (order)
    return SmallVector<int64_t>(*order);
  return identity(value.getType().cast<ShapedType>().getRank());
}

// oneDNN has fast kernels only where each matrix has dense rows or columns,
// the result dense rows; elsewhere it falls back to a reference loop a
// thousand times slower.

/// Whether an operand read through `order` (its dim i is stored dim
/// order[i]) has dense matrix rows or columns.
bool isDenseOperand(ArrayRef<int64_t> order) {
  int64_t innermost = order.size() - 1;
  return order.back() == innermost || order.end()[-2] == innermost;
}

/// Whether a result written through `order` (its stored dim i is dim
/// order[i]) has dense matrix rows or columns; the product itself or its
/// transpose then has dense rows.
bool isDenseResult(ArrayRef<int64_t> order) {
  return order.back() >= int64_t(order.size()) - 2;
}

/// A matmul operand: the tensor it reads and the permutation it reads it
/// through.
struct Operand {
  Value value;
  SmallVector<int64_t> order;
};

/// Folds the permutes that produce `operand` into its order.
void foldOperand(Operand &operand) {
  while (auto permute = operand.value.getDefiningOp<PermuteOp>()) {
    SmallVector<int64_t> next =
        compose(permute.getPermutation(), operand.order);
    if (!isDenseOperand(next))
      return;
    operand = {permute.getInput(), next};
  }
}

/// Folds the chain of permutes that alone read `matmul`'s result, returning
/// the result's permutation.
SmallVector<int64_t> foldResult(MatmulOp matmul) {
  Value result = matmul.getResult();
  SmallVector<int64_t> order = orderOf(matmul.getResultPermutation(), result);
  while (result.hasOneUse()) {
    auto permute = dyn_cast<PermuteOp>(*result.getUsers().begin());
    if (!permute)
      break;
    SmallVector<int64_t> next = compose(order, permute.getPermutation());
    if (!isDenseResult(next))
      break;
    // The permute's users come after it, hence after the matmul.
    order = next;
    result.setType(permute.getType());
    permute.getResult().replaceAllUsesWith(result);
    permute.erase();
  }
  return order;
}

void foldMatmul(MatmulOp matmul) {
  Operand lhs{matmul.getLhs(),
              orderOf(matmul.getLhsPermutation(), matmul.getLhs())};
  Operand rhs{matmul.getRhs(),
              orderOf(matmul.getRhsPermutation(), matmul.getRhs())};
  SmallVector<int64_t> order = foldResult(matmul);
  // A result whose stored rows are the product's columns is the transposed
  // product, rhs^T lhs^T, with dense rows.
  if (order.back() != int64_t(order.size()) - 1) {
    order = compose(transposition(order.size()), order);
    std::swap(lhs, rhs);
    lhs.order = compose(lhs.order, transposition(lhs.order.size()));
    rhs.order = compose(rhs.order, transposition(rhs.order.size()));
  }
  foldOperand(lhs);
  foldOperand(rhs);
  MLIRContext *context = matmul.getContext();
  matmul->setOperands({lhs.value, rhs.value});
  matmul.setLhsPermutationAttr(toAttr(context, lhs.order));
  matmul.setRhsPermutationAttr(toAttr(context, rhs.order));
  matmul.setResultPermutationAttr(toAttr(context, order));
}

/// The permute between [B, H, T, D] and [B, T, H, D] (its own inverse): a
/// head split's or merge's, and their gradients'.
bool isHeadsSwap(Operation *op) {
  auto permute = dyn_cast_or_null<PermuteOp>(op);
  return permute && permute.getPermutation() == ArrayRef<int64_t>({0, 2, 1, 3});
}

/// The heads-major attentions (flash_attention and its gradient) that can
/// all store their heads token-major with no copy: each reads its query,
/// key and value (the gradient also the result and its grad) through a
/// head swap or from another one's stored result, and each stored result
/// is read by head swaps and such attentions alone. Where one cannot, those
/// it shares a tensor with cannot either, and so on.
llvm::SetVector<Operation *> getFoldableAttentions(ModuleOp module) {
  llvm::SetVector<Operation *> foldable;
  module.walk([&](Operation *op) {
    if (auto attention = dyn_cast<FlashAttentionOp>(op);
        attention && !attention.getBshd())
      foldable.insert(op);
    if (auto grad = dyn_cast<FlashAttentionGradOp>(op); grad && !grad.getBshd())
      foldable.insert(op);
  });
  auto readsStored = [&](OpOperand &use) {
    Operation *user = use.getOwner();
    return isHeadsSwap(user) ||
           (foldable.contains(user) &&
            llvm::is_contained(getTokenMajorValues(user).operands, &use));
  };
  auto storesHeads = [&](Operation *op) {
    TokenMajorValues stored = getTokenMajorValues(op);
    for (OpOperand *operand : stored.operands) {
      Operation *def = operand->get().getDefiningOp();
      if (!isHeadsSwap(def) && !foldable.contains(def))
        return false;
    }
    for (Value result : stored.results)
      if (!llvm::all_of(result.getUses(), readsStored))
        return false;
    return true;
  };
  while (true) {
    SmallVector<Operation *> failing;
    llvm::copy_if(foldable, std::back_inserter(failing),
                  [&](Operation *op) { return !storesHeads(op); });
    if (failing.empty())
      return foldable;
    for (Operation *op : failing)
      foldable.remove(op);
  }
}

/// `angles` (a rotary embedding's cos or sin, broadcast to its [B, H, T, D]
/// rows, aligned at the last dim) for the same rows stored [B, T, H, D].
Value swapAngles(TensorBuilder &g, Value angles) {
  SmallVector<int64_t> shape(shapeOf(angles));
  shape.insert(shape.begin(), 4 - shape.size(), 1);
  SmallVector<int64_t> swapped = swapHeadsAndRows(shape, true);
  // Moving a dim of size 1 moves no element: a view.
  if (shape[1] == 1 || shape[2] == 1)
    return g.reshape(angles, swapped);
  return g.permute(g.reshape(angles, shape), {0, 2, 1, 3});
}

bool isAttention(Operation *op) {
  return isa_and_nonnull<FlashAttentionOp, FlashAttentionGradOp>(op);
}

/// rotary(swap(x)) -> swap(rotary(x)) where attentions alone read the
/// rotary, and swap(rotary(y)) -> rotary(swap(y)) where an attention's
/// gradient computes y and head swaps alone read the rotary: the swaps then
/// meet the attentions (getFoldableAttentions). The rotation pairs elements
/// along the last dim, which the swap keeps last.
void moveHeadSwapsThroughRotaries(ModuleOp module) {
  SmallVector<RotaryEmbeddingOp> rotaries;
  module.walk([&](RotaryEmbeddingOp op) { rotaries.push_back(op); });
  for (RotaryEmbeddingOp rotary : rotaries) {
    Value rows = rotary.getInput();
    Operation *producer = rows.getDefiningOp();
    bool swapBefore =
        isHeadsSwap(producer) && llvm::all_of(rotary->getUsers(), isAttention);
    bool swapAfter = isAttention(producer) && !rotary->use_empty() &&
                     llvm::all_of(rotary->getUsers(), isHeadsSwap);
    if (!swapBefore && !swapAfter)
      continue;
    OpBuilder builder(rotary);
    PlacementScope inPlace(builder, rotary);
    TensorBuilder g(builder, rotary.getLoc());
    Value input =
        swapBefore ? producer->getOperand(0) : g.permute(rows, {0, 2, 1, 3});
    Value cos = swapAngles(g, rotary.getCos());
    Value sin = swapAngles(g, rotary.getSin());
    Value swappedResult = builder.create<RotaryEmbeddingOp>(
        rotary.getLoc(),
        tensorType(rotary.getResult())
            .clone(swapHeadsAndRows(shapeOf(rotary.getResult()), true)),
        input, cos, sin, rotary.getTransposed());
    if (swapBefore) {
      rotary.getResult().replaceAllUsesWith(
          g.permute(swappedResult, {0, 2, 1, 3}));
      rotary.erase();
      if (producer->use_empty())
        producer->erase();
    } else {
      for (Operation *swap : llvm::to_vector(rotary->getUsers())) {
        swap->getResult(0).replaceAllUsesWith(swappedResult);
        swap->erase();
      }
      rotary.erase();
    }
  }
}

/// Gives `attentions` (getFoldableAttentions's) the token-major layout: the
/// head swaps after their results go, and they read the swaps' inputs.
void foldHeadSwaps(ArrayRef<Operation *> attentions) {
  for (Operation *op : attentions) {
    for (Value result : getTokenMajorValues(op).results) {
      auto type = tensorType(result);
      result.setType(type.clone(swapHeadsAndRows(type.getShape(), true)));
      for (Operation *user : llvm::make_early_inc_range(result.getUsers()))
        if (isHeadsSwap(user)) {
          user->getResult(0).replaceAllUsesWith(result);
          user->erase();
        }
    }
  }
  for (Operation *op : attentions) {
    for (OpOperand *operand : getTokenMajorValues(op).operands)
      if (auto permute = operand->get().getDefiningOp<PermuteOp>();
          isHeadsSwap(permute))
        operand->set(permute.getInput());
    if (auto attention = dyn_cast<FlashAttentionOp>(op))
      attention.setBshd(true);
    else
      cast<FlashAttentionGradOp>(op).setBshd(true);
  }
}

struct FoldPermutesPass : impl::FoldPermutesBase<FoldPermutesPass> {
  void runOnOperation() override {
    moveHeadSwapsThroughRotaries(getOperation());
    foldHeadSwaps(getFoldableAttentions(getOperation()).getArrayRef());
    // Collected first: folding erases the permutes after a matmul.
    SmallVector<MatmulOp> matmuls;
    getOperation().walk([&](MatmulOp matmul) { matmuls.push_back(matmul); });
    for (MatmulOp matmul : matmuls)
      foldMatmul(matmul);
    // Users before definitions, so that a chain of permutes goes at once.
    SmallVector<PermuteOp> permutes;
    getOperation().walk(
        [&](PermuteOp permute) { permutes.push_back(permute); });
    for (PermuteOp permute : llvm::reverse(permutes))
      if (permute.use_empty())
        permute.erase();
  }
};

} // namespace
} // namespace slapo
