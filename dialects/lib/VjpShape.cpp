//===- VjpShape.cpp - gradient rules of reductions and data movement ------===//
#include "slapo/Dialect/TensorBuilder.h"

using namespace mlir;

namespace slapo {

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

LogicalResult SumOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  // Every summed element gets the gradient of its sum, in the input's type
  // (a sum into a wider type: the gradient of the widening).
  TensorBuilder g(builder, getLoc());
  RankedTensorType inputType = tensorType(getInput());
  Value grad =
      g.restoreReducedDims(singleResultGrad(resultGrads), inputType, getDims());
  operandGrads.push_back(g.cast(g.broadcastTo(grad, inputType.getShape()),
                                inputType.getElementType()));
  return success();
}

LogicalResult MeanOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  // The sum's rule, divided by the number of elements each mean averages.
  TensorBuilder g(builder, getLoc());
  RankedTensorType inputType = tensorType(getInput());
  Value grad =
      g.restoreReducedDims(singleResultGrad(resultGrads), inputType, getDims());
  int64_t count = 1;
  for (int64_t dim : getDims())
    count *= inputType.getDimSize(dim);
  Value spread = g.broadcastTo(grad, inputType.getShape());
  operandGrads.push_back(
      count == 1 ? spread : g.div(spread, g.scalarLike(count, spread)));
  return success();
}

LogicalResult MaxOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  // amax: the gradient goes to the elements equal to the maximum, split
  // evenly among ties, as PyTorch's amax backward does.
  TensorBuilder g(builder, getLoc());
  Value input = getInput();
  RankedTensorType inputType = tensorType(input);
  Value grad =
      g.restoreReducedDims(singleResultGrad(resultGrads), inputType, getDims());
  Value maximum = g.restoreReducedDims(getResult(), inputType, getDims());
  Value isMaximum = g.cast(g.compare(ComparePredicate::eq, input, maximum),
                           inputType.getElementType());
  Value ties = g.sum(isMaximum, getDims(), /*keepdim=*/true);
  operandGrads.push_back(g.mul(g.div(grad, ties), isMaximum));
  return success();
}

LogicalResult CumsumOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  // Each element is in the running sums from its own on: its gradient sums
  // theirs, from the last (PyTorch's reversed_cumsum), or from the first
  // for a reversed cumsum.
  Value grad = singleResultGrad(resultGrads);
  operandGrads.push_back(builder.create<CumsumOp>(
      getLoc(), grad.getType(), grad, getDimAttr(),
      getReverse() ? UnitAttr() : builder.getUnitAttr()));
  return success();
}

//===----------------------------------------------------------------------===//
// Shape and data movement.
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  TensorBuilder g(builder, getLoc());
  operandGrads.push_back(
      g.reshape(singleResultGrad(resultGrads), shapeOf(getInput())));
  return success();
}

LogicalResult PermuteOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  // The inverse permutation moves every dim back.
  TensorBuilder g(builder, getLoc());
  ArrayRef<int64_t> permutation = getPermutation();
  SmallVector<int64_t> inverse(permutation.size());
  for (auto [resultDim, inputDim] : llvm::enumerate(permutation))
    inverse[inputDim] = resultDim;
  operandGrads.push_back(g.permute(singleResultGrad(resultGrads), inverse));
  return success();
}

LogicalResult SliceOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  // The gradient lands at the positions the slice read; every other position
  // gets zero.
  TensorBuilder g(builder, getLoc());
  operandGrads.push_back(g.padSlice(singleResultGrad(resultGrads),
                                    shapeOf(getInput()), getDim(), getStart(),
                                    getStep()));
  return success();
}

LogicalResult ConcatOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  // Each input gets its own stretch of the gradient.
  TensorBuilder g(builder, getLoc());
  Value grad = singleResultGrad(resultGrads);
  int64_t dim = getDim(), offset = 0;
  for (Value input : getInputs()) {
    int64_t size = shapeOf(input)[dim];
    operandGrads.push_back(g.slice(grad, dim, offset, offset + size));
    offset += size;
  }
  return success();
}

LogicalResult BroadcastOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  TensorBuilder g(builder, getLoc());
  operandGrads.push_back(
      g.sumToShape(singleResultGrad(resultGrads), tensorType(getInput())));
  return success();
}

} // namespace slapo
