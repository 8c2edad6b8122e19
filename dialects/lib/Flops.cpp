//===- Flops.cpp - the FLOPs of contractions and of their gradients -------===//
//
// 2 FLOPs per multiply-add, from the static shapes. A gradient of a
// contraction with respect to one operand is a contraction over the same
// three sizes, as many FLOPs as the forward: the rules in VjpNN.cpp build
// one per operand that gets a gradient.
//
//===----------------------------------------------------------------------===//
#include "slapo/Dialect/SlapoOps.h"

using namespace mlir;

namespace slapo {

namespace {

int64_t getNumElements(Value value) {
  return value.getType().cast<RankedTensorType>().getNumElements();
}

ArrayRef<int64_t> getShape(Value value) {
  return value.getType().cast<RankedTensorType>().getShape();
}

/// The forward's FLOPs once per operand among the first `contracted` that
/// gets a gradient: a bias or a mask gets none from a contraction.
int64_t countOperandGradients(int64_t forwardFlops,
                              ArrayRef<bool> operandHasGradient,
                              size_t contracted) {
  return forwardFlops *
         llvm::count(operandHasGradient.take_front(contracted), true);
}

} // namespace

int64_t LinearOp::getForwardFlops() {
  return 2 * getNumElements(getResult()) * getShape(getInput()).back();
}

int64_t LinearOp::getBackwardFlops(ArrayRef<bool> operandHasGradient) {
  // input' = grad W and W' = grad^T input; bias' is a sum.
  return countOperandGradients(getForwardFlops(), operandHasGradient, 2);
}

int64_t MatmulOp::getForwardFlops() {
  // The contracted dim is the permuted lhs's last one.
  ArrayRef<int64_t> lhs = getShape(getLhs());
  int64_t contracted = lhs.size() - 1;
  if (std::optional<ArrayRef<int64_t>> permutation = getLhsPermutation())
    contracted = (*permutation)[lhs.size() - 1];
  return 2 * getNumElements(getResult()) * lhs[contracted];
}

int64_t MatmulOp::getBackwardFlops(ArrayRef<bool> operandHasGradient) {
  // lhs' = grad rhs^T and rhs' = lhs^T grad.
  return countOperandGradients(getForwardFlops(), operandHasGradient, 2);
}

int64_t Conv2dOp::getForwardFlops() {
  // Each output element sums C/groups x kH x kW products.
  ArrayRef<int64_t> weight = getShape(getWeight());
  return 2 * getNumElements(getResult()) * weight[1] * weight[2] * weight[3];
}

int64_t Conv2dOp::getBackwardFlops(ArrayRef<bool> operandHasGradient) {
  // conv2d_grad_input and conv2d_grad_weight; bias' is a sum.
  return countOperandGradients(getForwardFlops(), operandHasGradient, 2);
}

namespace {

/// query x key^T [B, H, T, S] and probabilities x value [B, H, T, E] of an
/// attention: the FLOPs of each product.
struct AttentionProducts {
  int64_t scores, values;
};

AttentionProducts getAttentionProducts(FlashAttentionOp op) {
  bool bshd = op.getBshd(), packed = op.getPackedQkv();
  SmallVector<int64_t> query = getHeadsMajorShape(op.getQuery(), bshd, packed);
  int64_t keys = getHeadsMajorShape(op.getKey(), bshd, packed)[2];
  int64_t queryElements = query[0] * query[1] * query[2] * query[3];
  return {2 * queryElements * keys, 2 * getNumElements(op.getResult()) * keys};
}

} // namespace

int64_t FlashAttentionOp::getForwardFlops() {
  AttentionProducts products = getAttentionProducts(*this);
  return products.scores + products.values;
}

int64_t FlashAttentionOp::getBackwardFlops(ArrayRef<bool> operandHasGradient) {
  // slapo.flash_attention_grad computes all three gradients at once, from
  // the scores recomputed (one scores product), grad x value^T (one values
  // product), and grad_query, grad_key, grad_value (two scores products and
  // one values product).
  if (!llvm::is_contained(operandHasGradient.take_front(3), true))
    return 0;
  AttentionProducts products = getAttentionProducts(*this);
  return 3 * products.scores + 2 * products.values;
}

int64_t LinearCrossEntropyOp::getForwardFlops() {
  // The logits hidden x weight^T [N, V] and, since the forward computes
  // them too, grad_hidden = dlogits x weight and grad_weight = dlogits^T x
  // hidden: three products over N x V x H.
  return 3 * 2 * getShape(getHidden()).front() * getNumElements(getWeight());
}

int64_t LinearCrossEntropyOp::getBackwardFlops(ArrayRef<bool>) {
  // The rule only scales the gradients the forward computed.
  return 0;
}

} // namespace slapo
