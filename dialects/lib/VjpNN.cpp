//===- VjpNN.cpp - gradient rules of contractions and neural-network ops --===//
//
// The formulas are PyTorch's (linear and matmul through their mm/bmm
// decompositions, convolution_backward, max_pool2d_with_indices_backward,
// native_layer_norm_backward, softmax_backward_data,
// nll_loss_backward), so that gradients agree with autograd to rounding.
//
//===----------------------------------------------------------------------===//
#include "slapo/Dialect/TensorBuilder.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace slapo {

LogicalResult LinearOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  // With the leading dims of input and gradient flattened into rows:
  // input' = grad W, W' = grad^T input, bias' = the column sums of grad.
  // In mixed precision the products take the gradient in the operands' bf16;
  // the bias's sum stays in the result's type.
  TensorBuilder g(builder, getLoc());
  Value grad = singleResultGrad(resultGrads), input = getInput(),
        weight = getWeight();
  int64_t rows = product(shapeOf(input).drop_back());
  int64_t inFeatures = shapeOf(weight)[1], outFeatures = shapeOf(weight)[0];
  Value gradRows = g.reshape(grad, {rows, outFeatures});
  Value operandGradRows = g.cast(gradRows, elementTypeOf(input));
  Value inputRows = g.reshape(input, {rows, inFeatures});
  operandGrads.push_back(
      g.reshape(g.matmul(operandGradRows, weight), shapeOf(input)));
  operandGrads.push_back(g.matmul(g.transpose(operandGradRows), inputRows));
  if (getBias())
    operandGrads.push_back(g.sum(gradRows, {0}, /*keepdim=*/false));
  return success();
}

LogicalResult MatmulOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  // lhs' = grad rhs^T, rhs' = lhs^T grad, each summed over the batch dims
  // its operand was broadcast along.
  if (getLhsPermutation() || getRhsPermutation() || getResultPermutation())
    return emitOpError("with permutations has no gradient rule: "
                       "slapo-fold-permutes must run after slapo-autodiff");
  TensorBuilder g(builder, getLoc());
  Value lhs = getLhs(), rhs = getRhs();
  // In mixed precision the products take the gradient in the operands' bf16.
  Value grad = g.cast(singleResultGrad(resultGrads), elementTypeOf(lhs));
  operandGrads.push_back(
      g.sumToShape(g.matmul(grad, g.transpose(rhs)), tensorType(lhs)));
  operandGrads.push_back(
      g.sumToShape(g.matmul(g.transpose(lhs), grad), tensorType(rhs)));
  return success();
}

LogicalResult Conv2dOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  // input' is the transposed convolution of grad by the weight, weight' the
  // correlation of the input with grad (convolution_backward's two
  // products), bias' the sums of grad over batch and space. In mixed
  // precision the products take the gradient in the operands' bf16; the
  // bias's sum stays in the result's type.
  TensorBuilder g(builder, getLoc());
  Value grad = singleResultGrad(resultGrads);
  Value operandGrad = g.cast(grad, elementTypeOf(getInput()));
  operandGrads.push_back(builder.create<Conv2dGradInputOp>(
      getLoc(), getInput().getType(), operandGrad, getWeight(), getStrideAttr(),
      getPaddingAttr(), getDilationAttr(), getGroupsAttr()));
  operandGrads.push_back(builder.create<Conv2dGradWeightOp>(
      getLoc(), getWeight().getType(), operandGrad, getInput(), getStrideAttr(),
      getPaddingAttr(), getDilationAttr(), getGroupsAttr()));
  if (getBias())
    operandGrads.push_back(g.sum(grad, {0, 2, 3}, /*keepdim=*/false));
  return success();
}

LogicalResult MaxPool2dOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // Each window's gradient goes to the element it took the maximum from,
  // found again from the input.
  operandGrads.push_back(builder.create<MaxPool2dGradOp>(
      getLoc(), getInput().getType(), singleResultGrad(resultGrads), getInput(),
      getKernelSizeAttr(), getStrideAttr(), getPaddingAttr(),
      getDilationAttr()));
  return success();
}

LogicalResult EmbeddingOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // weight'[v] = the sum of grad rows whose index is v; the padding row
  // gets no gradient.
  operandGrads.push_back(builder.create<EmbeddingGradOp>(
      getLoc(), getWeight().getType(), singleResultGrad(resultGrads),
      getIndices(), getPaddingIdxAttr()));
  operandGrads.push_back(nullptr);
  return success();
}

LogicalResult LayerNormOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // One op, the fused kernel's (its description has the formulas): it
  // recomputes each row's mean and rstd from the input. The weight's and
  // the bias's gradients have the normalized shape; a norm without them
  // reads neither.
  Value input = getInput();
  RankedTensorType inputType = tensorType(input);
  auto affine =
      RankedTensorType::get(inputType.getShape().take_back(getNormalizedRank()),
                            inputType.getElementType());
  auto grad = builder.create<LayerNormGradOp>(
      getLoc(), inputType, affine, affine, singleResultGrad(resultGrads), input,
      getWeight(), /*addend=*/Value(), getNormalizedRankAttr(), getEpsAttr());
  operandGrads.push_back(grad.getGradInput());
  if (getWeight())
    operandGrads.push_back(grad.getGradWeight());
  if (getBias())
    operandGrads.push_back(grad.getGradBias());
  return success();
}

LogicalResult RmsNormOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  // One op, the fused kernel's (its description has the formulas), as for
  // layer_norm: it recomputes each row's rstd from the input.
  Value input = getInput();
  RankedTensorType inputType = tensorType(input);
  auto lastDim = RankedTensorType::get(inputType.getShape().take_back(),
                                       inputType.getElementType());
  auto grad = builder.create<RmsNormGradOp>(
      getLoc(), inputType, lastDim, singleResultGrad(resultGrads), input,
      getWeight(), /*addend=*/Value(), getEpsAttr());
  operandGrads.push_back(grad.getGradInput());
  if (getWeight())
    operandGrads.push_back(grad.getGradWeight());
  return success();
}

LogicalResult SoftmaxOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  // y * (grad - sum(grad * y)) along dim.
  TensorBuilder g(builder, getLoc());
  Value grad = singleResultGrad(resultGrads), y = getResult();
  int64_t dim = getDim();
  Value dot = g.sum(g.mul(grad, y), {dim}, /*keepdim=*/true);
  operandGrads.push_back(g.mul(y, g.sub(grad, dot)));
  return success();
}

LogicalResult LogSoftmaxOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  // grad - exp(y) * sum(grad) along dim.
  TensorBuilder g(builder, getLoc());
  Value grad = singleResultGrad(resultGrads), y = getResult();
  int64_t dim = getDim();
  Value total = g.sum(grad, {dim}, /*keepdim=*/true);
  operandGrads.push_back(g.sub(grad, g.mul(g.unary<ExpOp>(y), total)));
  return success();
}

LogicalResult CrossEntropyOp::buildVjp(OpBuilder &builder,
                                       ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  // logits' = (softmax(logits) - one_hot(target)) * w per row, where w is
  // the row's loss gradient (grad, or grad / count for the mean over the
  // count of targets not ignored) and 0 for ignored targets.
  TensorBuilder g(builder, getLoc());
  Value grad = singleResultGrad(resultGrads), logits = getLogits(),
        target = getTarget();
  Type floatType = elementTypeOf(logits);
  Value kept =
      g.maskUnequal(target, static_cast<int64_t>(getIgnoreIndex()), floatType);
  Value rowGrad = getReduction() == Reduction::mean
                      ? g.div(grad, g.sum(kept, {0}, /*keepdim=*/false))
                      : grad;
  Value rowWeight = g.mul(kept, rowGrad);
  operandGrads.push_back(builder.create<CrossEntropyGradOp>(
      getLoc(), logits.getType(), logits, target, rowWeight));
  operandGrads.push_back(nullptr);
  return success();
}

LogicalResult
LinearCrossEntropyOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  // The forward computed the gradients for a loss gradient of 1 (the loss
  // ends the forward); the rule scales them by the loss's gradient, which
  // is 1 or the weight of a microbatch or a data-parallel rank.
  for (Value grad : resultGrads.drop_front())
    if (grad)
      return emitOpError("has no gradient rule for its gradient results");
  // The gradients are f32; bf16 operands (precision="bf16") get theirs
  // rounded to bf16, as torch.autocast's backward of a bf16 LM head gives
  // them.
  TensorBuilder g(builder, getLoc());
  Value grad = resultGrads[0];
  operandGrads.push_back(
      g.cast(g.mul(getGradHidden(), grad), elementTypeOf(getHidden())));
  operandGrads.push_back(
      g.cast(g.mul(getGradWeight(), grad), elementTypeOf(getWeight())));
  operandGrads.push_back(nullptr);
  if (Value gradBias = getGradBias())
    operandGrads.push_back(g.mul(gradBias, grad));
  return success();
}

LogicalResult
LinearLogSumExpOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  // The softmax times each row's gradient, a chunk of rows at a time,
  // recomputed from the saved log-sum-exp as flash attention's backward
  // recomputes its probabilities.
  // The gradients are f32 (the log-sum-exp's type); bf16 operands get
  // theirs rounded to bf16, as linear_cross_entropy's rule gives them.
  Value bias = getBias();
  Type biasType = bias ? bias.getType() : Type();
  Type f32 = elementTypeOf(getLogsumexp());
  auto f32Like = [&](Value value) {
    return RankedTensorType::get(shapeOf(value), f32);
  };
  auto grad = builder.create<LinearLogSumExpGradOp>(
      getLoc(), f32Like(getHidden()), f32Like(getWeight()), biasType,
      getHidden(), getWeight(), bias, getLogsumexp(), resultGrads[0]);
  TensorBuilder g(builder, getLoc());
  operandGrads.push_back(
      g.cast(grad.getGradHidden(), elementTypeOf(getHidden())));
  operandGrads.push_back(
      g.cast(grad.getGradWeight(), elementTypeOf(getWeight())));
  if (bias)
    operandGrads.push_back(grad.getGradBias());
  return success();
}

LogicalResult
RotaryEmbeddingOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  // Linear in the input: the gradient is the transposed map of the grad.
  // cos and sin are positions' angles (slapo-recognize-rotary makes the op
  // only of angles no parameter reaches): no gradient.
  operandGrads.push_back(builder.create<RotaryEmbeddingOp>(
      getLoc(), getInput().getType(), resultGrads[0], getCos(), getSin(),
      !getTransposed()));
  operandGrads.append({nullptr, nullptr});
  return success();
}

LogicalResult FlashAttentionOp::buildVjp(OpBuilder &builder,
                                         ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  // FlashAttention-2's backward, one op: it recomputes the probabilities
  // from the saved row log-sum-exp rather than reading them. The
  // log-sum-exp is the kernel's own bookkeeping: nothing else reads it.
  if (resultGrads[1])
    return emitOpError("has no gradient rule for its logsumexp result");
  // Its dropout draws the forward's mask again: the same attributes and
  // step.
  // With packed_qkv the one gradient is the packed tensor's: its other two
  // uses add nothing.
  SmallVector<Type> gradTypes = {getQuery().getType()};
  if (!getPackedQkv())
    gradTypes.append({getKey().getType(), getValue().getType()});
  auto grad = builder.create<FlashAttentionGradOp>(
      getLoc(), gradTypes, getQuery(), getKey(), getValue(), getKeep(),
      getBias(), getResult(), getLogsumexp(), resultGrads[0], getScaleAttr(),
      getMaskedScoreAttr(), getStep(), getDropoutPAttr(),
      getDropoutStreamAttr(), getForkRngAttr(), getShardAxisAttr(),
      getShardChunksAttr(), getBshdAttr(), getPackedQkvAttr());
  operandGrads.append(grad.getResults().begin(), grad.getResults().end());
  if (getPackedQkv())
    operandGrads.append({nullptr, nullptr});
  for (Value noGradient : {getKeep(), getBias(), getStep()})
    if (noGradient)
      operandGrads.push_back(nullptr);
  return success();
}

} // namespace slapo
