//===- MixedPrecision.cpp - bf16 contractions, f32 everything else --------===//
//
// Contractions (linear, matmul and convolutions) are where bf16 pays (AMX
// and AVX-512 BF16 multiply bf16 at several times the f32 rate) and where
// f32 accumulation keeps it accurate; elementwise ops, norms and reductions
// stay f32. A product's f32 sums are rounded to bf16, as torch.autocast's
// products are, where that costs no pass of its own: where its readers are
// elementwise chains (their fusion groups widen it as they read it, half
// the bytes of an f32 product written and read back) or other products
// (which take it in bf16 anyway). A product that a loss, a reduction or a
// collective reads (the logits, a batch norm's statistics) keeps its f32
// sums, as a replace("cross_entropy") LM head keeps its logits, and so does
// one whose chains reach an exponential (an attention's scores, before the
// softmax), which would amplify the rounding, as flash attention keeps its
// scores f32.
//
// A flash attention (replace("flash_attention")) runs in bf16 as a whole,
// as torch.autocast runs scaled_dot_product_attention: bf16 operands and
// results, f32 inside the kernel; on the GPU that is what runs it as
// cuDNN's fused attention on the tensor cores. An LM head replaced with its
// loss (replace("cross_entropy")) takes bf16 hidden states and weight, as
// autocast's bf16 LM head does: its kernel multiplies them in bf16 with f32
// sums and keeps logits, loss and gradients f32; so does its
// vocabulary-parallel form under tensor parallelism (linear_log_sum_exp).
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Dialect/TensorBuilder.h"

#include "llvm/ADT/TypeSwitch.h"

namespace slapo {
#define GEN_PASS_DEF_MIXEDPRECISION
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

/// Makes `attention` take and give bf16: its f32 operands (query, key,
/// value, bias) cast to bf16, its output bf16, cast back to f32 for its
/// users. The log-sum-exp stays f32 (the compute type of bf16, as it is
/// of f32), the keep mask and the dropout's step are not floats: they stay
/// as they are.
void runInBf16(FlashAttentionOp attention) {
  OpBuilder builder(attention);
  ModulePathScope inModule(builder, attention);
  TensorBuilder g(builder, attention.getLoc());
  Type bf16 = builder.getBF16Type();
  for (OpOperand &operand : attention->getOpOperands())
    if (elementTypeOf(operand.get()).isF32())
      operand.set(g.cast(operand.get(), bf16));
  builder.setInsertionPointAfter(attention);
  Value result = attention.getResult();
  Type f32 = elementTypeOf(result);
  result.setType(RankedTensorType::get(shapeOf(result), bf16));
  if (result.use_empty())
    return;
  Value widened = g.cast(result, f32);
  result.replaceAllUsesExcept(widened, widened.getDefiningOp());
}

/// Makes `lmHead` (slapo.linear_cross_entropy, or linear_log_sum_exp, its
/// vocabulary-parallel part) take its hidden states and weight in bf16; its
/// results stay f32. (The vocabulary-parallel target logit, a dot product
/// per row, stays f32.)
template <typename LmHeadOp> void runProductsInBf16(LmHeadOp lmHead) {
  OpBuilder builder(lmHead);
  ModulePathScope inModule(builder, lmHead);
  TensorBuilder g(builder, lmHead.getLoc());
  Type bf16 = builder.getBF16Type();
  lmHead.getHiddenMutable().assign(g.cast(lmHead.getHidden(), bf16));
  lmHead.getWeightMutable().assign(g.cast(lmHead.getWeight(), bf16));
}

/// The layout ops that move a value's elements without computing with them.
bool movesElements(Operation *op) {
  return isa<ReshapeOp, PermuteOp, SliceOp>(op);
}

/// Whether the readers of `value`, through the layout ops that only move
/// its elements, are all elementwise chains (with the row ops along the
/// last dim they end in), contractions or rotary embeddings of it: a
/// chain's fusion group reads a bf16 product in its loop, a contraction
/// takes it in bf16 anyway, and the rotary kernel widens its input as it
/// reads it (slapo-propagate-casts folds the cast into it: LLaMA's query
/// and key). A loss, a norm's statistics or a collective would read a
/// widened copy, written and read in a pass of its own.
bool isReadInBf16ForFree(Value value) {
  for (Operation *user : value.getUsers()) {
    if (movesElements(user)) {
      if (!isReadInBf16ForFree(user->getResult(0)))
        return false;
      continue;
    }
    auto rotary = dyn_cast<RotaryEmbeddingOp>(user);
    if (!isLoopFusible(user) && !isa<LinearOp, MatmulOp>(user) &&
        !(rotary && rotary.getInput() == value))
      return false;
  }
  return true;
}

/// Whether the elementwise chains that read `value` (through the layout ops)
/// reach an exponential (softmax, log_softmax, exp), which would amplify a
/// rounding of `value` into its result: an attention's scores, which flash
/// attention's kernel keeps f32 too.
bool reachesExponential(Value value,
                        llvm::SmallPtrSetImpl<Operation *> &visited) {
  for (Operation *user : value.getUsers()) {
    if (isa<SoftmaxOp, LogSoftmaxOp, ExpOp>(user))
      return true;
    if (visited.insert(user).second && user->getNumResults() == 1 &&
        (movesElements(user) ||
         user->hasTrait<OpTrait::FusibleElementwise>()) &&
        reachesExponential(user->getResult(0), visited))
      return true;
  }
  return false;
}

struct MixedPrecisionPass : impl::MixedPrecisionBase<MixedPrecisionPass> {
  using MixedPrecisionBase::MixedPrecisionBase;

  void runOnOperation() override {
    auto forward = lookupForward(getOperation(), "slapo-mixed-precision");
    if (!forward)
      return signalPassFailure();
    SmallVector<Operation *> contractions;
    SmallVector<FlashAttentionOp> attentions;
    SmallVector<Operation *> lmHeads;
    forward.walk([&](Operation *op) {
      if (!isa<LinearOp, MatmulOp, Conv2dOp, FlashAttentionOp,
               LinearCrossEntropyOp, LinearLogSumExpOp>(op) ||
          !elementTypeOf(op->getResult(0)).isF32())
        return;
      if (auto attention = dyn_cast<FlashAttentionOp>(op))
        attentions.push_back(attention);
      else if (isa<LinearCrossEntropyOp, LinearLogSumExpOp>(op))
        lmHeads.push_back(op);
      else
        contractions.push_back(op);
    });
    for (FlashAttentionOp attention : attentions)
      runInBf16(attention);
    for (Operation *lmHead : lmHeads)
      llvm::TypeSwitch<Operation *>(lmHead)
          .Case<LinearCrossEntropyOp, LinearLogSumExpOp>(
              [](auto op) { runProductsInBf16(op); });
    // Decided before any contraction is rewritten: a contraction read by
    // another is then read by the other's cast.
    SmallVector<bool> roundedResults =
        llvm::to_vector(llvm::map_range(contractions, [](Operation *op) {
          llvm::SmallPtrSet<Operation *, 16> visited;
          return isReadInBf16ForFree(op->getResult(0)) &&
                 !reachesExponential(op->getResult(0), visited);
        }));
    for (auto [op, rounded] : llvm::zip(contractions, roundedResults)) {
      OpBuilder builder(op);
      ModulePathScope inModule(builder, op);
      TensorBuilder g(builder, op->getLoc());
      Type bf16 = builder.getBF16Type();
      Value lhs = g.cast(op->getOperand(0), bf16);
      Value rhs = g.cast(op->getOperand(1), bf16);
      Type f32 = elementTypeOf(op->getResult(0));
      auto type = RankedTensorType::get(shapeOf(op->getResult(0)),
                                        rounded ? bf16 : f32);
      Value sums;
      Value bias;
      if (auto linear = dyn_cast<LinearOp>(op)) {
        sums = builder.create<LinearOp>(op->getLoc(), type, lhs, rhs, Value());
        bias = linear.getBias();
      } else if (auto conv = dyn_cast<Conv2dOp>(op)) {
        sums = builder.create<Conv2dOp>(
            op->getLoc(), type, lhs, rhs, Value(), conv.getStrideAttr(),
            conv.getPaddingAttr(), conv.getDilationAttr(),
            conv.getGroupsAttr());
        // bias[O] broadcast over the batch and the image as [O, 1, 1].
        if (Value convBias = conv.getBias())
          bias = g.reshape(convBias, {shapeOf(convBias)[0], 1, 1});
      } else {
        sums = builder.create<MatmulOp>(op->getLoc(), type, lhs, rhs);
      }
      if (rounded)
        sums = g.cast(sums, f32);
      if (bias)
        sums = g.add(sums, bias);
      op->getResult(0).replaceAllUsesWith(sums);
      op->erase();
    }
  }
};

} // namespace
} // namespace slapo
