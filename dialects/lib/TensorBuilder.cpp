//===- TensorBuilder.cpp - slapo ops written as tensor formulas -----------===//
#include "slapo/Dialect/TensorBuilder.h"

#include "llvm/ADT/STLExtras.h"

#include <functional>
#include <numeric>

using namespace mlir;

namespace slapo {

int64_t product(ArrayRef<int64_t> sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t(1),
                         std::multiplies<int64_t>());
}

static RankedTensorType withShape(Value like, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, elementTypeOf(like));
}

template <typename OpT>
Value TensorBuilder::broadcasting(Value lhs, Value rhs) {
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes(shapeOf(lhs), shapeOf(rhs));
  assert(succeeded(shape) && "formula combines shapes that do not "
                             "broadcast");
  return builder.create<OpT>(loc, withShape(lhs, *shape), lhs, rhs);
}

Value TensorBuilder::add(Value lhs, Value rhs) {
  return broadcasting<AddOp>(lhs, rhs);
}
Value TensorBuilder::sub(Value lhs, Value rhs) {
  return broadcasting<SubOp>(lhs, rhs);
}
Value TensorBuilder::mul(Value lhs, Value rhs) {
  return broadcasting<MulOp>(lhs, rhs);
}
Value TensorBuilder::div(Value lhs, Value rhs) {
  return broadcasting<DivOp>(lhs, rhs);
}
Value TensorBuilder::pow(Value lhs, Value rhs) {
  return broadcasting<PowOp>(lhs, rhs);
}

Value TensorBuilder::maximum(Value lhs, Value rhs) {
  return broadcasting<MaximumOp>(lhs, rhs);
}
Value TensorBuilder::minimum(Value lhs, Value rhs) {
  return broadcasting<MinimumOp>(lhs, rhs);
}

Value TensorBuilder::scale(Value value, double factor) {
  return mul(value, scalarLike(factor, value));
}

Value TensorBuilder::compare(ComparePredicate predicate, Value lhs, Value rhs) {
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes(shapeOf(lhs), shapeOf(rhs));
  assert(succeeded(shape) && "comparison of shapes that do not broadcast");
  auto type = RankedTensorType::get(*shape, builder.getI1Type());
  return builder.create<CompareOp>(loc, type, predicate, lhs, rhs);
}

Value TensorBuilder::where(Value condition, Value onTrue, Value onFalse) {
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes(shapeOf(onTrue), shapeOf(onFalse));
  if (succeeded(shape))
    shape = broadcastShapes(*shape, shapeOf(condition));
  assert(succeeded(shape) && "where of shapes that do not broadcast");
  return builder.create<WhereOp>(loc, withShape(onTrue, *shape), condition,
                                 onTrue, onFalse);
}

Value TensorBuilder::cast(Value input, Type elementType) {
  if (elementTypeOf(input) == elementType)
    return input;
  return builder.create<CastOp>(
      loc, RankedTensorType::get(shapeOf(input), elementType), input);
}

Value TensorBuilder::maskUnequal(Value values, int64_t excluded,
                                 Type elementType) {
  return cast(compare(ComparePredicate::ne, values,
                      integerScalar(excluded, elementTypeOf(values))),
              elementType);
}

Value TensorBuilder::scalar(double value, Type elementType) {
  auto type = RankedTensorType::get({}, elementType);
  return builder.create<ConstantOp>(
      loc,
      DenseElementsAttr::get(type, builder.getFloatAttr(elementType, value)));
}

Value TensorBuilder::integerScalar(int64_t value, Type elementType) {
  auto type = RankedTensorType::get({}, elementType);
  return builder.create<ConstantOp>(
      loc,
      DenseElementsAttr::get(type, builder.getIntegerAttr(elementType, value)));
}

Value TensorBuilder::splat(RankedTensorType type, Attribute element) {
  Type elementType = type.getElementType();
  if (!element)
    element = elementType.isa<FloatType>()
                  ? Attribute(builder.getFloatAttr(elementType, 0.0))
                  : Attribute(builder.getIntegerAttr(elementType, 0));
  return builder.create<ConstantOp>(loc, DenseElementsAttr::get(type, element));
}

Value TensorBuilder::splatWithDim(RankedTensorType type, int64_t dim,
                                  int64_t size, Attribute element) {
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = size;
  return splat(RankedTensorType::get(shape, type.getElementType()), element);
}

Value TensorBuilder::arange(int64_t size, Type elementType) {
  return builder.create<ArangeOp>(
      loc, RankedTensorType::get({size}, elementType),
      builder.getF64FloatAttr(0), builder.getF64FloatAttr(1));
}

Value TensorBuilder::oneHot(Value indices, int64_t classes, Type elementType) {
  // indices[..., None] == arange(classes), broadcasting to [..., classes].
  SmallVector<int64_t> column(shapeOf(indices));
  column.push_back(1);
  Value classIds = arange(classes, elementTypeOf(indices));
  Value hit = compare(ComparePredicate::eq, reshape(indices, column), classIds);
  return cast(hit, elementType);
}

/// The type of a reduction of `input` over `dims`.
static RankedTensorType reducedType(Value input, ArrayRef<int64_t> dims,
                                    bool keepdim) {
  SmallVector<int64_t> shape;
  for (auto [dim, size] : llvm::enumerate(shapeOf(input))) {
    if (!llvm::is_contained(dims, static_cast<int64_t>(dim)))
      shape.push_back(size);
    else if (keepdim)
      shape.push_back(1);
  }
  return withShape(input, shape);
}

// An empty dims list reduces nothing in slapo (unlike PyTorch's dim=[]).
Value TensorBuilder::sum(Value input, ArrayRef<int64_t> dims, bool keepdim) {
  if (dims.empty())
    return input;
  return builder.create<SumOp>(loc, reducedType(input, dims, keepdim), input,
                               dims, keepdim);
}

Value TensorBuilder::mean(Value input, ArrayRef<int64_t> dims, bool keepdim) {
  if (dims.empty())
    return input;
  return builder.create<MeanOp>(loc, reducedType(input, dims, keepdim), input,
                                dims, keepdim);
}

Value TensorBuilder::max(Value input, ArrayRef<int64_t> dims, bool keepdim) {
  if (dims.empty())
    return input;
  return builder.create<MaxOp>(loc, reducedType(input, dims, keepdim), input,
                               dims, keepdim);
}

Value TensorBuilder::matmul(Value lhs, Value rhs) {
  ArrayRef<int64_t> lhsShape = shapeOf(lhs), rhsShape = shapeOf(rhs);
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes(lhsShape.drop_back(2), rhsShape.drop_back(2));
  assert(succeeded(shape) && "matmul batch dims do not broadcast");
  shape->append({lhsShape.end()[-2], rhsShape.back()});
  return builder.create<MatmulOp>(loc, withShape(lhs, *shape), lhs, rhs);
}

Value TensorBuilder::reshape(Value input, ArrayRef<int64_t> shape) {
  if (shapeOf(input) == shape)
    return input;
  return builder.create<ReshapeOp>(loc, withShape(input, shape), input);
}

Value TensorBuilder::permute(Value input, ArrayRef<int64_t> permutation) {
  SmallVector<int64_t> shape;
  for (int64_t dim : permutation)
    shape.push_back(shapeOf(input)[dim]);
  return builder.create<PermuteOp>(loc, withShape(input, shape), input,
                                   permutation);
}

Value TensorBuilder::transpose(Value input) {
  SmallVector<int64_t> permutation =
      llvm::to_vector(llvm::seq<int64_t>(0, tensorType(input).getRank()));
  std::swap(permutation.end()[-1], permutation.end()[-2]);
  return permute(input, permutation);
}

Value TensorBuilder::slice(Value input, int64_t dim, int64_t start, int64_t end,
                           int64_t step) {
  SmallVector<int64_t> shape(shapeOf(input));
  shape[dim] = start == end ? 0 : (end - start - 1) / step + 1;
  return builder.create<SliceOp>(loc, withShape(input, shape), input, dim,
                                 start, end, step);
}

Value TensorBuilder::concat(ValueRange inputs, int64_t dim) {
  if (inputs.size() == 1)
    return inputs.front();
  SmallVector<int64_t> shape(shapeOf(inputs.front()));
  shape[dim] = 0;
  for (Value input : inputs)
    shape[dim] += shapeOf(input)[dim];
  return builder.create<ConcatOp>(loc, withShape(inputs.front(), shape), inputs,
                                  dim);
}

Value TensorBuilder::padSlice(Value value, ArrayRef<int64_t> shape, int64_t dim,
                              int64_t start, int64_t step, Attribute fill) {
  auto type = RankedTensorType::get(shape, elementTypeOf(value));
  int64_t size = shape[dim];
  int64_t count = shapeOf(value)[dim];

  Value spread = value;
  if (step > 1 && count > 0) {
    // [..., count, ...] -> [..., count, 1, ...] ++ zeros [..., count,
    // step - 1, ...] along dim + 1 -> [..., count * step, ...].
    SmallVector<int64_t> split(shapeOf(value));
    split.insert(split.begin() + dim + 1, 1);
    Value column = reshape(value, split);
    Value gaps = splatWithDim(tensorType(column), dim + 1, step - 1, fill);
    SmallVector<int64_t> joined(shapeOf(value));
    joined[dim] = count * step;
    spread = reshape(concat({column, gaps}, dim + 1), joined);
    // The last element's trailing zeros may run past the end.
    if (count * step > size - start)
      spread = slice(spread, dim, 0, size - start);
  }

  SmallVector<Value> pieces;
  if (start > 0)
    pieces.push_back(splatWithDim(type, dim, start, fill));
  pieces.push_back(spread);
  int64_t after = size - start - shapeOf(spread)[dim];
  if (after > 0)
    pieces.push_back(splatWithDim(type, dim, after, fill));
  return concat(pieces, dim);
}

Value TensorBuilder::sliceScatter(Value input, Value value, int64_t dim,
                                  int64_t start, int64_t step) {
  int64_t size = shapeOf(input)[dim];
  int64_t count = shapeOf(value)[dim];
  if (count == 0)
    return input;
  if (step > 1) {
    // Interleaved positions: padSlice places the values and, applied to
    // `true`s, says which positions they take.
    Value everywhere =
        broadcastTo(integerScalar(1, builder.getI1Type()), shapeOf(value));
    Value taken = padSlice(everywhere, shapeOf(input), dim, start, step);
    return where(taken, padSlice(value, shapeOf(input), dim, start, step),
                 input);
  }
  SmallVector<Value> pieces;
  if (start > 0)
    pieces.push_back(slice(input, dim, 0, start));
  pieces.push_back(value);
  if (start + count < size)
    pieces.push_back(slice(input, dim, start + count, size));
  return concat(pieces, dim);
}

Value TensorBuilder::broadcastTo(Value input, ArrayRef<int64_t> shape) {
  if (shapeOf(input) == shape)
    return input;
  return builder.create<BroadcastOp>(loc, withShape(input, shape), input);
}

Value TensorBuilder::sumToShape(Value grad, RankedTensorType type) {
  ArrayRef<int64_t> from = shapeOf(grad), to = type.getShape();
  if (from == to)
    return grad;
  assert(from.size() >= to.size() && "sumToShape to a higher rank");
  size_t leading = from.size() - to.size();
  SmallVector<int64_t> dims;
  for (size_t dim = 0; dim < from.size(); ++dim)
    if (dim < leading || (to[dim - leading] == 1 && from[dim] != 1))
      dims.push_back(dim);
  return reshape(sum(grad, dims, /*keepdim=*/false), to);
}

Value TensorBuilder::restoreReducedDims(Value grad, RankedTensorType inputType,
                                        ArrayRef<int64_t> dims) {
  SmallVector<int64_t> shape(inputType.getShape());
  for (int64_t dim : dims)
    shape[dim] = 1;
  return reshape(grad, shape);
}

} // namespace slapo
