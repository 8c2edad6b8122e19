//===- OpLowerings.cpp - ATen ops to slapo ops ----------------------------===//
//
// One function per ATen op family. Result types always come from the node's
// meta shadow (NodeLowering::outputType): lowerings decide which slapo ops
// compute the value, never what shape or dtype it has. Operands are cast to
// the dtype the op computes in, which makes PyTorch's type promotion explicit.
//
//===----------------------------------------------------------------------===//
#include "Importer.h"

#include "slapo/Dialect/TensorBuilder.h"
#include "slapo/Reference/Interpreter.h"

#include "llvm/Support/FormatVariadic.h"

#include <ATen/ATen.h>
#include <ATen/core/Reduction.h>

namespace slapo::torchscript {
namespace {

using mlir::failure;
using mlir::LogicalResult;
using mlir::success;

mlir::RankedTensorType typeOf(mlir::Value value) {
  return value.getType().cast<mlir::RankedTensorType>();
}

/// Sets output 0 to `value`, reshaped to the output type if needed.
LogicalResult finish(NodeLowering &lower, mlir::Value value) {
  if (!value)
    return failure();
  if (typeOf(value) != lower.outputType())
    value = lower.create<ReshapeOp>(lower.outputType(), value);
  lower.setOutput(0, value);
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise.
//===----------------------------------------------------------------------===//

/// `value` times the op's `alpha` (input 2), or null if alpha is not a
/// compile-time number.
mlir::Value scaleByAlpha(NodeLowering &lower, mlir::Value value) {
  std::optional<double> alpha = lower.doubleConstant(2);
  if (!alpha)
    return nullptr;
  if (*alpha == 1)
    return value;
  return lower.create<MulOp>(
      typeOf(value), value,
      lower.scalar(*alpha, typeOf(value).getElementType()));
}

/// `lhs op rhs` for ops whose inputs 0 and 1 are the operands and whose
/// optional input 2 (`alpha`) scales rhs.
template <typename OpTy> LogicalResult lowerBinary(NodeLowering &lower) {
  mlir::Type elementType = lower.outputElementType();
  mlir::Value lhs = lower.tensor(0, elementType);
  mlir::Value rhs = lower.tensor(1, elementType);
  if (!lhs || !rhs)
    return failure();
  constexpr bool hasAlpha =
      std::is_same_v<OpTy, AddOp> || std::is_same_v<OpTy, SubOp>;
  if (hasAlpha && lower.numInputs() == 3 && !(rhs = scaleByAlpha(lower, rhs)))
    return failure();
  return finish(lower, lower.create<OpTy>(lower.outputType(), lhs, rhs));
}

/// aten::rsub(self, other, alpha) = other - alpha * self.
LogicalResult lowerRsub(NodeLowering &lower) {
  mlir::Type elementType = lower.outputElementType();
  mlir::Value self = lower.tensor(0, elementType);
  mlir::Value other = lower.tensor(1, elementType);
  if (!self || !other || !(self = scaleByAlpha(lower, self)))
    return failure();
  return finish(lower, lower.create<SubOp>(lower.outputType(), other, self));
}

LogicalResult lowerDiv(NodeLowering &lower) {
  if (lower.numInputs() == 3 && !lower.isNone(2))
    return lower.error("division with a rounding mode is not supported");
  return lowerBinary<DivOp>(lower);
}

LogicalResult lowerPow(NodeLowering &lower) {
  if (!lower.outputElementType().isa<mlir::FloatType>())
    return lower.error("integer pow is not supported");
  return lowerBinary<PowOp>(lower);
}

template <ComparePredicate predicate>
LogicalResult lowerCompare(NodeLowering &lower) {
  // The comparison happens in the dtype PyTorch promotes both operands to.
  auto operand = [&](size_t i) -> c10::IValue {
    at::Tensor shadow = lower.shadowOf(i);
    if (shadow.defined())
      return shadow;
    return lower.input(i).constant;
  };
  c10::IValue lhs = operand(0), rhs = operand(1);
  at::ScalarType dtype;
  if (lhs.isTensor() && rhs.isTensor())
    dtype = at::result_type(lhs.toTensor(), rhs.toTensor());
  else if (lhs.isTensor())
    dtype = at::result_type(lhs.toTensor(), rhs.toScalar());
  else
    dtype = at::result_type(lhs.toScalar(), rhs.toTensor());
  mlir::Type elementType = reference::toElementType(dtype, lower.getContext());
  mlir::Value l = lower.tensor(0, elementType),
              r = lower.tensor(1, elementType);
  if (!l || !r)
    return failure();
  return finish(lower,
                lower.getBuilder()
                    .create<CompareOp>(lower.getLoc(), lower.outputType(),
                                       predicate, l, r)
                    .getResult());
}

/// bitwise_and/or (and `&`, `|`, `&=`, `|=`) of bool tensors: the minimum and
/// maximum of bools, which is what PyTorch computes for them.
template <typename OpTy> LogicalResult lowerBoolean(NodeLowering &lower) {
  if (!lower.outputElementType().isInteger(1))
    return lower.error("bitwise ops are supported on bool tensors only");
  return lowerBinary<OpTy>(lower);
}

/// bitwise_not of a bool tensor: whether it equals false.
LogicalResult lowerBooleanNot(NodeLowering &lower) {
  mlir::Type boolType = lower.outputElementType();
  if (!boolType.isInteger(1))
    return lower.error("bitwise ops are supported on bool tensors only");
  mlir::Value input = lower.tensor(0, boolType);
  if (!input)
    return failure();
  return finish(lower,
                lower.getBuilder()
                    .create<CompareOp>(lower.getLoc(), lower.outputType(),
                                       ComparePredicate::eq, input,
                                       lower.scalar(0, boolType))
                    .getResult());
}

template <typename OpTy> LogicalResult lowerUnary(NodeLowering &lower) {
  mlir::Value input = lower.tensor(0, lower.outputElementType());
  if (!input)
    return failure();
  return finish(lower, lower.create<OpTy>(lower.outputType(), input));
}

LogicalResult lowerReciprocal(NodeLowering &lower) {
  mlir::Type elementType = lower.outputElementType();
  mlir::Value input = lower.tensor(0, elementType);
  if (!input)
    return failure();
  return finish(lower,
                lower.create<DivOp>(lower.outputType(),
                                    lower.scalar(1, elementType), input));
}

LogicalResult lowerGelu(NodeLowering &lower) {
  mlir::Value input = lower.tensor(0, lower.outputElementType());
  std::optional<c10::IValue> approximate = lower.constant(1);
  if (!input || !approximate)
    return failure();
  std::string mode = approximate->toStringRef();
  if (mode != "none" && mode != "tanh")
    return lower.error("unknown gelu approximation '" + mode + "'");
  auto approximation = GeluApproximationAttr::get(
      lower.getContext(),
      mode == "tanh" ? GeluApproximation::tanh : GeluApproximation::erf);
  return finish(lower,
                lower.create<GeluOp>(lower.outputType(), input, approximation));
}

LogicalResult lowerWhere(NodeLowering &lower) {
  mlir::Type elementType = lower.outputElementType();
  mlir::Value condition = lower.tensor(0);
  mlir::Value onTrue = lower.tensor(1, elementType);
  mlir::Value onFalse = lower.tensor(2, elementType);
  if (!condition || !onTrue || !onFalse)
    return failure();
  return finish(lower, lower.create<WhereOp>(lower.outputType(), condition,
                                             onTrue, onFalse));
}

/// masked_fill(self, mask, value) = where(mask, value, self).
LogicalResult lowerMaskedFill(NodeLowering &lower) {
  mlir::Type elementType = lower.outputElementType();
  mlir::Value self = lower.tensor(0, elementType);
  mlir::Value mask = lower.tensor(1);
  mlir::Value value = lower.tensor(2, elementType);
  if (!self || !mask || !value)
    return failure();
  return finish(lower,
                lower.create<WhereOp>(lower.outputType(), mask, value, self));
}

LogicalResult lowerDropout(NodeLowering &lower) {
  std::optional<double> p = lower.doubleConstant(1);
  std::optional<c10::IValue> train = lower.constant(2);
  mlir::Value input = lower.tensor(0);
  if (!p || !train || !input)
    return failure();
  // Eval-mode dropout is the identity.
  if (!train->toBool() || *p == 0)
    return finish(lower, input);
  if (*p >= 1)
    return lower.error("dropout with p >= 1 zeroes everything");
  mlir::OpBuilder &b = lower.getBuilder();
  return finish(lower, lower.create<DropoutOp>(
                           lower.outputType(), input, /*step=*/mlir::Value(),
                           b.getF64FloatAttr(*p),
                           b.getI64IntegerAttr(lower.takeRandomStream()),
                           /*fork_rng=*/mlir::UnitAttr(),
                           /*shard_axis=*/mlir::IntegerAttr(),
                           /*shard_chunks=*/mlir::IntegerAttr()));
}

template <bool lower_> LogicalResult lowerTriangular(NodeLowering &lower) {
  mlir::Value input = lower.tensor(0);
  std::optional<int64_t> diagonal = lower.intConstant(1);
  if (!input || !diagonal)
    return failure();
  mlir::OpBuilder &b = lower.getBuilder();
  return finish(lower, lower.create<TriangularOp>(
                           lower.outputType(), input, b.getBoolAttr(lower_),
                           b.getI64IntegerAttr(*diagonal)));
}

/// zeros_like, ones_like, full_like, new_zeros, new_ones, new_full: a splat
/// of the output type; only the value depends on the op.
LogicalResult lowerFillLike(NodeLowering &lower) {
  llvm::StringRef kind = lower.getNode()->kind().toUnqualString();
  double value = 0;
  if (kind.contains("ones"))
    value = 1;
  else if (kind.contains("full")) {
    std::optional<double> fill =
        lower.doubleConstant(kind.startswith("new_") ? 2 : 1);
    if (!fill)
      return failure();
    value = *fill;
  }
  mlir::Value splat = lower.scalar(value, lower.outputElementType());
  return finish(lower, lower.create<BroadcastOp>(lower.outputType(), splat));
}

LogicalResult lowerArange(NodeLowering &lower) {
  // arange(end, ...), arange(start, end, ...), arange(start, end, step, ...):
  // the dtype/layout/device/pin_memory tail is 4 inputs.
  size_t numbers = lower.numInputs() - 4;
  std::optional<double> start = numbers >= 2 ? lower.doubleConstant(0) : 0.0;
  std::optional<double> step = numbers >= 3 ? lower.doubleConstant(2) : 1.0;
  if (!start || !step)
    return failure();
  mlir::OpBuilder &b = lower.getBuilder();
  return finish(lower, lower.getBuilder()
                           .create<ArangeOp>(lower.getLoc(), lower.outputType(),
                                             b.getF64FloatAttr(*start),
                                             b.getF64FloatAttr(*step))
                           .getResult());
}

//===----------------------------------------------------------------------===//
// Contractions and neural-network ops.
//===----------------------------------------------------------------------===//

LogicalResult lowerLinear(NodeLowering &lower) {
  mlir::Type elementType = lower.outputElementType();
  mlir::Value input = lower.tensor(0, elementType);
  mlir::Value weight = lower.tensor(1, elementType);
  mlir::Value bias = lower.optionalTensor(2, elementType);
  if (!input || !weight || (!lower.isNone(2) && !bias))
    return failure();
  if (typeOf(weight).getRank() != 2)
    return lower.error("weight must be 2-D");
  return finish(
      lower, lower.create<LinearOp>(lower.outputType(), input, weight, bias));
}

/// torch.matmul: 1-D operands become matrices, then batched matmul.
LogicalResult lowerMatmul(NodeLowering &lower) {
  mlir::Type elementType = lower.outputElementType();
  mlir::Value lhs = lower.tensor(0, elementType);
  mlir::Value rhs = lower.tensor(1, elementType);
  if (!lhs || !rhs)
    return failure();
  auto asMatrix = [&](mlir::Value v, bool isLhs) {
    mlir::RankedTensorType type = typeOf(v);
    if (type.getRank() != 1)
      return v;
    llvm::SmallVector<int64_t> shape{type.getDimSize(0)};
    shape.insert(isLhs ? shape.begin() : shape.end(), 1);
    return lower.create<ReshapeOp>(type.clone(shape), v);
  };
  lhs = asMatrix(lhs, true);
  rhs = asMatrix(rhs, false);
  llvm::ArrayRef<int64_t> l = typeOf(lhs).getShape(),
                          r = typeOf(rhs).getShape();
  auto batch = broadcastShapes(l.drop_back(2), r.drop_back(2));
  if (mlir::failed(batch))
    return lower.error("batch dims do not broadcast");
  llvm::SmallVector<int64_t> shape = *batch;
  shape.push_back(l[l.size() - 2]);
  shape.push_back(r.back());
  return finish(lower,
                lower.create<MatmulOp>(
                    mlir::RankedTensorType::get(shape, elementType), lhs, rhs));
}

/// addmm / baddbmm(self, a, b, beta, alpha) = beta * self + alpha * (a @ b).
LogicalResult lowerAddMatmul(NodeLowering &lower) {
  mlir::Type elementType = lower.outputElementType();
  mlir::Value self = lower.tensor(0, elementType);
  mlir::Value a = lower.tensor(1, elementType);
  mlir::Value b = lower.tensor(2, elementType);
  std::optional<double> beta = lower.doubleConstant(3);
  std::optional<double> alpha = lower.doubleConstant(4);
  if (!self || !a || !b || !beta || !alpha)
    return failure();
  mlir::RankedTensorType type = lower.outputType();
  mlir::Value product = lower.create<MatmulOp>(type, a, b);
  if (*alpha != 1)
    product =
        lower.create<MulOp>(type, product, lower.scalar(*alpha, elementType));
  if (*beta != 1)
    self = lower.create<MulOp>(typeOf(self), self,
                               lower.scalar(*beta, elementType));
  return finish(lower, lower.create<AddOp>(type, self, product));
}

LogicalResult lowerEmbedding(NodeLowering &lower) {
  mlir::Value weight = lower.tensor(0);
  mlir::Value indices = lower.tensor(1);
  std::optional<int64_t> paddingIdx = lower.intConstant(2);
  std::optional<c10::IValue> scaleGrad = lower.constant(3);
  std::optional<c10::IValue> sparse = lower.constant(4);
  if (!weight || !indices || !paddingIdx || !scaleGrad || !sparse)
    return failure();
  if (scaleGrad->toBool() || sparse->toBool())
    return lower.error("scale_grad_by_freq and sparse are not supported");
  mlir::IntegerAttr padding;
  if (*paddingIdx >= 0)
    padding = lower.getBuilder().getI64IntegerAttr(*paddingIdx);
  return finish(lower, lower.create<EmbeddingOp>(lower.outputType(), weight,
                                                 indices, padding));
}

/// index(self, [ids]): rows of `self` picked by one integer tensor (as
/// rotary embeddings read their cos/sin tables, `cos[position_ids]`), an
/// embedding lookup in `self` viewed as [rows, rest]. Negative ids count from
/// the end, as in PyTorch.
LogicalResult lowerIndex(NodeLowering &lower) {
  const Known &list = lower.input(1);
  if (!list.is(Known::Kind::Aggregate) || list.elements->size() != 1 ||
      !list.elements->front().is(Known::Kind::Tensor))
    return lower.error("only indexing dim 0 by one tensor (`table[ids]`) is "
                       "supported");
  const Known &ids = list.elements->front();
  at::ScalarType idType = ids.shadow.scalar_type();
  if (idType == at::kBool || idType == at::kByte)
    return lower.error("indexing by a mask selects a number of elements that "
                       "depends on tensor data");
  if (idType != at::kLong && idType != at::kInt)
    return lower.error("index tensors must be int64 or int32");
  mlir::Type elementType = lower.outputElementType();
  if (!elementType.isa<mlir::FloatType>())
    return lower.error("indexing by a tensor is supported on float tensors "
                       "only");
  mlir::Value self = lower.tensor(0, elementType);
  mlir::Value indices = lower.read(ids);
  if (!self || !indices)
    return failure();
  llvm::ArrayRef<int64_t> shape = typeOf(self).getShape();
  int64_t rows = shape.front();
  bool neverNegative =
      ids.isConstant() && ids.constant.toTensor().ge(0).all().item<bool>();
  if (!neverNegative) {
    mlir::RankedTensorType idsType = typeOf(indices);
    mlir::Type idElementType = idsType.getElementType();
    mlir::Value negative = lower.getBuilder().create<CompareOp>(
        lower.getLoc(), idsType.clone(lower.getBuilder().getI1Type()),
        ComparePredicate::lt, indices, lower.scalar(0, idElementType));
    mlir::Value fromEnd = lower.create<AddOp>(
        idsType, indices, lower.scalar(rows, idElementType));
    indices = lower.create<WhereOp>(idsType, negative, fromEnd, indices);
  }
  int64_t rest = 1;
  for (int64_t size : shape.drop_front())
    rest *= size;
  mlir::Value table = self;
  if (shape.size() != 2)
    table = lower.create<ReshapeOp>(typeOf(self).clone({rows, rest}), self);
  llvm::SmallVector<int64_t> picked(typeOf(indices).getShape());
  picked.push_back(rest);
  return finish(lower, lower.create<EmbeddingOp>(
                           typeOf(self).clone(picked), table, indices,
                           /*padding_idx=*/mlir::IntegerAttr()));
}

/// gather(self, dim, index): out[i] is self[i with coordinate `dim` replaced
/// by index[i]] (as GPT-J reads its sin/cos table by position ids), an
/// embedding lookup in `self` viewed as a column of its elements, at
/// index * stride(dim) plus the offset of i's other coordinates, a constant.
/// An index outside its dim, which PyTorch rejects, becomes id -1, which the
/// embedding rejects at run time.
LogicalResult lowerGather(NodeLowering &lower) {
  mlir::Type elementType = lower.outputElementType();
  if (!elementType.isa<mlir::FloatType>())
    return lower.error("gather is supported on float tensors only");
  mlir::Type idType = lower.getBuilder().getI64Type();
  std::optional<int64_t> given = lower.intConstant(1);
  mlir::Value self = lower.tensor(0, elementType);
  mlir::Value index = lower.tensor(2, idType);
  if (!given || !self || !index)
    return failure();
  llvm::ArrayRef<int64_t> shape = typeOf(self).getShape();
  std::optional<int64_t> dim = lower.dim(*given, shape.size());
  if (!dim)
    return failure();
  mlir::RankedTensorType idsType = typeOf(index);
  std::vector<int64_t> picked(idsType.getShape().begin(),
                              idsType.getShape().end());
  at::Tensor offsets = at::zeros(picked, at::kLong);
  int64_t stride = 1;
  int64_t dimStride = 1;
  for (int64_t d = shape.size() - 1; d >= 0; --d) {
    if (d == *dim) {
      dimStride = stride;
    } else {
      std::vector<int64_t> along(picked.size(), 1);
      along[d] = picked[d];
      offsets += at::arange(picked[d], at::kLong).view(along) * stride;
    }
    stride *= shape[d];
  }
  mlir::Value scaled =
      lower.create<MulOp>(idsType, index, lower.scalar(dimStride, idType));
  mlir::Value ids =
      lower.create<AddOp>(idsType, scaled, lower.materialize(offsets));
  mlir::OpBuilder &b = lower.getBuilder();
  mlir::Type boolType = idsType.clone(b.getI1Type());
  mlir::Value notNegative =
      b.create<CompareOp>(lower.getLoc(), boolType, ComparePredicate::ge, index,
                          lower.scalar(0, idType));
  mlir::Value belowSize =
      b.create<CompareOp>(lower.getLoc(), boolType, ComparePredicate::lt, index,
                          lower.scalar(shape[*dim], idType));
  mlir::Value inDim = lower.create<MinimumOp>(boolType, notNegative, belowSize);
  ids = lower.create<WhereOp>(idsType, inDim, ids, lower.scalar(-1, idType));
  mlir::Value column =
      lower.create<ReshapeOp>(typeOf(self).clone({stride, 1}), self);
  picked.push_back(1);
  return finish(
      lower, lower.create<EmbeddingOp>(typeOf(self).clone(picked), column, ids,
                                       /*padding_idx=*/mlir::IntegerAttr()));
}

LogicalResult lowerLayerNorm(NodeLowering &lower) {
  mlir::Type elementType = lower.outputElementType();
  mlir::Value input = lower.tensor(0, elementType);
  std::optional<std::vector<int64_t>> shape = lower.intListConstant(1);
  mlir::Value weight = lower.optionalTensor(2, elementType);
  mlir::Value bias = lower.optionalTensor(3, elementType);
  std::optional<double> eps = lower.doubleConstant(4);
  if (!input || !shape || !eps)
    return failure();
  mlir::OpBuilder &b = lower.getBuilder();
  return finish(
      lower, lower.create<LayerNormOp>(lower.outputType(), input, weight, bias,
                                       b.getI64IntegerAttr(shape->size()),
                                       b.getF64FloatAttr(*eps)));
}

/// Input 0 in the result's dtype, to which PyTorch casts first (softmax's
/// dtype argument, cumsum's integers summed as int64), and the dim that
/// input 1 names, of ops along a dim; nullopt after an error.
std::optional<std::pair<mlir::Value, int64_t>>
inputAlongDim(NodeLowering &lower) {
  mlir::Value input = lower.tensor(0, lower.outputElementType());
  std::optional<int64_t> d = lower.intConstant(1);
  if (!input || !d)
    return std::nullopt;
  std::optional<int64_t> dim = lower.dim(*d, typeOf(input).getRank());
  if (!dim)
    return std::nullopt;
  return std::make_pair(input, *dim);
}

template <typename OpTy> LogicalResult lowerSoftmax(NodeLowering &lower) {
  auto along = inputAlongDim(lower);
  if (!along)
    return failure();
  return finish(lower, lower.create<OpTy>(lower.outputType(), along->first,
                                          lower.getBuilder().getI64IntegerAttr(
                                              along->second)));
}

LogicalResult lowerCrossEntropy(NodeLowering &lower) {
  mlir::Value logits = lower.tensor(0);
  mlir::Value target = lower.tensor(1);
  std::optional<int64_t> reduction = lower.intConstant(3);
  std::optional<int64_t> ignoreIndex = lower.intConstant(4);
  std::optional<double> smoothing = lower.doubleConstant(5);
  if (!logits || !target || !reduction || !ignoreIndex || !smoothing)
    return failure();
  if (!lower.isNone(2))
    return lower.error("class weights are not supported");
  if (*smoothing != 0)
    return lower.error("label smoothing is not supported");
  if (typeOf(logits).getRank() != 2 || typeOf(target).getRank() != 1)
    return lower.error("expects logits [N, C] and class-index targets [N]; "
                       "reshape to 2-D first");
  Reduction mode = *reduction == at::Reduction::None   ? Reduction::none
                   : *reduction == at::Reduction::Mean ? Reduction::mean
                                                       : Reduction::sum;
  mlir::OpBuilder &b = lower.getBuilder();
  return finish(lower, lower.create<CrossEntropyOp>(
                           lower.outputType(), logits, target,
                           b.getI64IntegerAttr(*ignoreIndex),
                           ReductionAttr::get(lower.getContext(), mode)));
}

//===----------------------------------------------------------------------===//
// Convolution, pooling and batch norm.
//===----------------------------------------------------------------------===//

/// Input i, a list of one or two integers, as [height, width] (PyTorch
/// repeats a single value); an empty list gives `ifEmpty` (pooling's stride
/// defaults to the kernel). nullopt after an error.
std::optional<llvm::SmallVector<int64_t, 2>>
pair2d(NodeLowering &lower, size_t i,
       llvm::ArrayRef<int64_t> ifEmpty = std::nullopt) {
  std::optional<std::vector<int64_t>> values = lower.intListConstant(i);
  if (!values)
    return std::nullopt;
  if (values->empty() && ifEmpty.size() == 2)
    return llvm::SmallVector<int64_t, 2>(ifEmpty);
  if (values->size() == 1)
    return llvm::SmallVector<int64_t, 2>{values->front(), values->front()};
  if (values->size() == 2)
    return llvm::SmallVector<int64_t, 2>(values->begin(), values->end());
  lower.report("input " + std::to_string(i) +
               " must list one or two sizes of a 2-d window, not " +
               std::to_string(values->size()));
  return std::nullopt;
}

/// `input` [C, H, W] of an op on an unbatched image as [1, C, H, W]; the
/// result's reshape (finish) drops the dim again. Null for other ranks.
mlir::Value batched4d(NodeLowering &lower, mlir::Value input,
                      llvm::StringRef op) {
  if (!input)
    return nullptr;
  llvm::ArrayRef<int64_t> shape = typeOf(input).getShape();
  if (shape.size() == 4)
    return input;
  if (shape.size() != 3) {
    lower.report(op +
                 " is supported on [N, C, H, W] and [C, H, W] inputs, "
                 "not rank " +
                 std::to_string(shape.size()));
    return nullptr;
  }
  llvm::SmallVector<int64_t> batched{1};
  batched.append(shape.begin(), shape.end());
  return lower.create<ReshapeOp>(typeOf(input).clone(batched), input);
}

/// The 4-d result type of a 2-d window op on the batched `input`: the
/// output's, with the batch dim of an unbatched one.
mlir::RankedTensorType batchedOutputType(NodeLowering &lower,
                                         mlir::Value input) {
  mlir::RankedTensorType type = lower.outputType();
  if (type.getRank() == 4)
    return type;
  llvm::SmallVector<int64_t> shape{typeOf(input).getDimSize(0)};
  shape.append(type.getShape().begin(), type.getShape().end());
  return mlir::RankedTensorType::get(shape, type.getElementType());
}

/// aten::conv2d(input, weight, bias, stride, padding, dilation, groups) and
/// the traced aten::_convolution(input, weight, bias, stride, padding,
/// dilation, transposed, output_padding, groups, ...) of a 2-d convolution.
LogicalResult lowerConvolution(NodeLowering &lower) {
  bool traced = llvm::StringRef(lower.getNode()->kind().toUnqualString()) ==
                "_convolution";
  mlir::Type elementType = lower.outputElementType();
  mlir::Value weight = lower.tensor(1, elementType);
  if (!weight)
    return failure();
  if (typeOf(weight).getRank() != 4)
    return lower.error("only 2-d convolutions (4-d weights) are supported; "
                       "this weight has rank " +
                       std::to_string(typeOf(weight).getRank()));
  if (traced) {
    std::optional<c10::IValue> transposed = lower.constant(6);
    if (!transposed)
      return failure();
    if (transposed->toBool())
      return lower.error("transposed convolutions are not supported");
  }
  mlir::Value input =
      batched4d(lower, lower.tensor(0, elementType), "convolution");
  mlir::Value bias = lower.optionalTensor(2, elementType);
  auto stride = pair2d(lower, 3), padding = pair2d(lower, 4),
       dilation = pair2d(lower, 5);
  std::optional<int64_t> groups = lower.intConstant(traced ? 8 : 6);
  if (!input || !stride || !padding || !dilation || !groups)
    return failure();
  mlir::OpBuilder &b = lower.getBuilder();
  return finish(lower, lower.create<Conv2dOp>(batchedOutputType(lower, input),
                                              input, weight, bias,
                                              b.getDenseI64ArrayAttr(*stride),
                                              b.getDenseI64ArrayAttr(*padding),
                                              b.getDenseI64ArrayAttr(*dilation),
                                              b.getI64IntegerAttr(*groups)));
}

/// max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode):
/// ceil_mode is in the output's size.
LogicalResult lowerMaxPool2d(NodeLowering &lower) {
  mlir::Value input = batched4d(
      lower, lower.tensor(0, lower.outputElementType()), "max_pool2d");
  auto kernel = pair2d(lower, 1);
  if (!input || !kernel)
    return failure();
  auto stride = pair2d(lower, 2, *kernel), padding = pair2d(lower, 3),
       dilation = pair2d(lower, 4);
  if (!stride || !padding || !dilation)
    return failure();
  mlir::OpBuilder &b = lower.getBuilder();
  return finish(
      lower, lower.create<MaxPool2dOp>(batchedOutputType(lower, input), input,
                                       b.getDenseI64ArrayAttr(*kernel),
                                       b.getDenseI64ArrayAttr(*stride),
                                       b.getDenseI64ArrayAttr(*padding),
                                       b.getDenseI64ArrayAttr(*dilation)));
}

/// The mean of each `window` [kH, kW] of the last two dims of `input` when
/// the windows tile them (as a reshape that splits each dim and a mean over
/// the window dims, exactly the average PyTorch takes); nullopt where they
/// do not.
std::optional<mlir::Value> tiledMean(NodeLowering &lower, mlir::Value input,
                                     llvm::ArrayRef<int64_t> window) {
  llvm::ArrayRef<int64_t> shape = typeOf(input).getShape();
  int64_t rank = shape.size();
  if (rank < 2 || window[0] < 1 || window[1] < 1 ||
      shape[rank - 2] % window[0] || shape[rank - 1] % window[1])
    return std::nullopt;
  llvm::SmallVector<int64_t> split(shape.drop_back(2));
  split.append({shape[rank - 2] / window[0], window[0],
                shape[rank - 1] / window[1], window[1]});
  TensorBuilder g(lower.getBuilder(), lower.getLoc());
  return g.mean(g.reshape(input, split), {rank - 1, rank + 1},
                /*keepdim=*/false);
}

/// avg_pool2d(input, kernel_size, stride, padding, ceil_mode,
/// count_include_pad, divisor_override), where the windows tile the input.
LogicalResult lowerAvgPool2d(NodeLowering &lower) {
  mlir::Value input = lower.tensor(0, lower.outputElementType());
  auto kernel = pair2d(lower, 1);
  if (!input || !kernel)
    return failure();
  auto stride = pair2d(lower, 2, *kernel), padding = pair2d(lower, 3);
  if (!stride || !padding)
    return failure();
  bool divisorOverridden = lower.numInputs() > 6 && !lower.isNone(6);
  std::optional<mlir::Value> mean;
  if (*stride == *kernel &&
      llvm::all_of(*padding, [](int64_t p) { return p == 0; }) &&
      !divisorOverridden)
    mean = tiledMean(lower, input, *kernel);
  if (!mean)
    return lower.error(
        "slapoc supports avg_pool2d only where its windows tile the input "
        "(stride equal to the kernel, no padding, no divisor_override, and "
        "sizes the kernel divides): here kernel " +
        shapeString(*kernel) + ", stride " + shapeString(*stride) +
        ", padding " + shapeString(*padding) + " on an input of shape " +
        shapeString(typeOf(input).getShape()));
  return finish(lower, *mean);
}

/// adaptive_avg_pool2d(input, output_size), where the output size divides
/// the input's (then PyTorch's adaptive windows tile it).
LogicalResult lowerAdaptiveAvgPool2d(NodeLowering &lower) {
  mlir::Value input = lower.tensor(0, lower.outputElementType());
  auto outputSize = pair2d(lower, 1);
  if (!input || !outputSize)
    return failure();
  llvm::ArrayRef<int64_t> shape = typeOf(input).getShape();
  std::optional<mlir::Value> mean;
  if (shape.size() >= 2 && (*outputSize)[0] > 0 && (*outputSize)[1] > 0 &&
      shape[shape.size() - 2] % (*outputSize)[0] == 0 &&
      shape.back() % (*outputSize)[1] == 0)
    mean = tiledMean(lower, input,
                     {shape[shape.size() - 2] / (*outputSize)[0],
                      shape.back() / (*outputSize)[1]});
  if (!mean)
    return lower.error(
        "slapoc supports adaptive_avg_pool2d only where the output size "
        "divides the input's (equal windows that tile it): output " +
        shapeString(*outputSize) + " from an input of shape " +
        shapeString(shape));
  return finish(lower, *mean);
}

/// batch_norm(input, weight, bias, running_mean, running_var, training,
/// momentum, eps, cudnn_enabled) over dim 1 of input [N, C, ...], as
/// PyTorch's CPU kernel: in training, the batch's mean and biased variance
/// normalize, and the running statistics (if any) become (1 - momentum) of
/// theirs plus momentum times the batch's, with the unbiased variance;
/// otherwise the running statistics normalize.
LogicalResult lowerBatchNorm(NodeLowering &lower) {
  mlir::Type elementType = lower.outputElementType();
  mlir::Value input = lower.tensor(0, elementType);
  mlir::Value weight = lower.optionalTensor(1, elementType);
  mlir::Value bias = lower.optionalTensor(2, elementType);
  std::optional<c10::IValue> training = lower.constant(5);
  std::optional<double> momentum = lower.doubleConstant(6);
  std::optional<double> eps = lower.doubleConstant(7);
  if (!input || !training || !momentum || !eps)
    return failure();
  llvm::ArrayRef<int64_t> shape = typeOf(input).getShape();
  int64_t rank = shape.size();
  if (rank < 2)
    return lower.error("batch_norm needs an input [N, C, ...], not rank " +
                       std::to_string(rank));
  int64_t channels = shape[1];
  // Per-channel vectors broadcast along the dims after the channels.
  llvm::SmallVector<int64_t> channelShape(rank - 1, 1);
  channelShape[0] = channels;
  llvm::SmallVector<int64_t> reduced{0};
  for (int64_t d = 2; d < rank; ++d)
    reduced.push_back(d);
  TensorBuilder g(lower.getBuilder(), lower.getLoc());
  bool tracked = !lower.isNone(3) && !lower.isNone(4);

  mlir::Value mean, variance;
  if (training->toBool()) {
    int64_t count = product(shape) / std::max<int64_t>(channels, 1);
    if (count < 2)
      return lower.error("batch_norm in training mode needs more than one "
                         "value per channel, the input " +
                         shapeString(shape) + " has " + std::to_string(count));
    mean = g.mean(input, reduced, /*keepdim=*/true);
    mlir::Value centered = g.sub(input, mean);
    variance = g.mean(g.mul(centered, centered), reduced, /*keepdim=*/true);
    if (tracked) {
      mlir::Value runningMean = lower.tensor(3, elementType);
      mlir::Value runningVar = lower.tensor(4, elementType);
      if (!runningMean || !runningVar)
        return failure();
      auto update = [&](mlir::Value running, mlir::Value batch, double unbias) {
        return g.add(g.scale(g.reshape(batch, {channels}), *momentum * unbias),
                     g.scale(running, 1 - *momentum));
      };
      double unbias = double(count) / double(count - 1);
      if (failed(lower.writeInput(3, update(runningMean, mean, 1))) ||
          failed(lower.writeInput(4, update(runningVar, variance, unbias))))
        return failure();
    }
  } else {
    mean = lower.tensor(3, elementType);
    variance = lower.tensor(4, elementType);
    if (!mean || !variance)
      return failure();
    mean = g.reshape(mean, channelShape);
    variance = g.reshape(variance, channelShape);
  }
  mlir::Value result =
      g.mul(g.sub(input, mean),
            g.unary<RsqrtOp>(g.add(variance, g.scalar(*eps, elementType))));
  if (weight)
    result = g.mul(result, g.reshape(weight, channelShape));
  if (bias)
    result = g.add(result, g.reshape(bias, channelShape));
  return finish(lower, result);
}

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

/// `input` reduced by OpTy to the output type, null after an error. The dims
/// are those of sum/mean(self, dtype) over everything, sum/mean(self, dim,
/// keepdim, dtype), amax/amin(self, dim, keepdim), max/min(self).
template <typename OpTy>
mlir::Value reduce(NodeLowering &lower, mlir::Value input) {
  int64_t rank = typeOf(input).getRank();
  llvm::SmallVector<int64_t> dims;
  bool keepdim = false;
  bool overDims = lower.numInputs() >= 3;
  if (overDims && !lower.isNone(1)) {
    std::optional<std::vector<int64_t>> given = lower.intListConstant(1);
    if (!given)
      return nullptr;
    for (int64_t d : *given) {
      std::optional<int64_t> dim = lower.dim(d, rank);
      if (!dim)
        return nullptr;
      dims.push_back(*dim);
    }
  }
  if (overDims) {
    std::optional<c10::IValue> keep = lower.constant(2);
    if (!keep)
      return nullptr;
    keepdim = keep->toBool();
  }
  if (dims.empty())
    for (int64_t d = 0; d < rank; ++d)
      dims.push_back(d);
  llvm::sort(dims);
  mlir::OpBuilder &b = lower.getBuilder();
  return lower.create<OpTy>(lower.outputType(), input,
                            b.getDenseI64ArrayAttr(dims),
                            b.getBoolAttr(keepdim));
}

template <typename OpTy> LogicalResult lowerReduce(NodeLowering &lower) {
  mlir::Value input = lower.tensor(0, lower.outputElementType());
  return finish(lower, input ? reduce<OpTy>(lower, input) : nullptr);
}

/// var(self, unbiased), var.dim(self, dim, unbiased, keepdim) and
/// var.correction(self, dim, *, correction, keepdim), spelled out as a
/// hand-written layer norm writes it: mean((x - mean(x))^2) over the dims,
/// times n / (n - correction) when corrected (the factor that
/// replace("fused_layernorm") finds and refuses).
LogicalResult lowerVar(NodeLowering &lower) {
  mlir::Type elementType = lower.outputElementType();
  if (!elementType.isa<mlir::FloatType>())
    return lower.error("var is supported on float tensors only");
  mlir::Value input = lower.tensor(0, elementType);
  if (!input)
    return failure();
  llvm::ArrayRef<int64_t> shape = typeOf(input).getShape();
  llvm::SmallVector<int64_t> dims;
  bool keepdim = false;
  double correction = 1;
  if (lower.numInputs() == 2) {
    std::optional<c10::IValue> unbiased = lower.constant(1);
    if (!unbiased)
      return failure();
    correction = unbiased->toBool() ? 1 : 0;
  } else {
    if (!lower.isNone(1)) {
      std::optional<std::vector<int64_t>> given = lower.intListConstant(1);
      if (!given)
        return failure();
      for (int64_t d : *given) {
        std::optional<int64_t> dim = lower.dim(d, shape.size());
        if (!dim)
          return failure();
        dims.push_back(*dim);
      }
    }
    bool byCorrection =
        lower.getNode()->schema().overload_name() == "correction";
    if (!byCorrection || !lower.isNone(2)) {
      std::optional<c10::IValue> given = lower.constant(2);
      if (!given)
        return failure();
      correction = byCorrection ? given->toScalar().toDouble()
                                : (given->toBool() ? 1 : 0);
    }
    std::optional<c10::IValue> keep = lower.constant(3);
    if (!keep)
      return failure();
    keepdim = keep->toBool();
  }
  if (dims.empty())
    for (int64_t d = 0; d < int64_t(shape.size()); ++d)
      dims.push_back(d);
  llvm::sort(dims);
  int64_t count = 1;
  for (int64_t d : dims)
    count *= shape[d];
  if (count - correction <= 0)
    return lower.error(
        "var over " + std::to_string(count) + " values with correction " +
        llvm::formatv("{0}", correction).str() + " divides by zero or less");
  TensorBuilder g(lower.getBuilder(), lower.getLoc());
  mlir::Value centered = g.sub(input, g.mean(input, dims, /*keepdim=*/true));
  mlir::Value variance = g.mean(g.mul(centered, centered), dims, keepdim);
  if (correction != 0)
    variance = g.scale(variance, double(count) / (double(count) - correction));
  return finish(lower, variance);
}

/// amin(self, dim, keepdim) and min(self) of floats: -max(-self), exactly
/// (negation only flips the sign bit), with max's gradient.
LogicalResult lowerMinReduce(NodeLowering &lower) {
  mlir::Type elementType = lower.outputElementType();
  if (!elementType.isa<mlir::FloatType>())
    return lower.error("the minimum over dims is supported on float tensors "
                       "only");
  mlir::Value input = lower.tensor(0, elementType);
  if (!input)
    return failure();
  mlir::Value max =
      reduce<MaxOp>(lower, lower.create<NegOp>(typeOf(input), input));
  return finish(lower,
                max ? lower.create<NegOp>(lower.outputType(), max) : nullptr);
}

/// cumsum(self, dim, dtype).
LogicalResult lowerCumsum(NodeLowering &lower) {
  auto along = inputAlongDim(lower);
  if (!along)
    return failure();
  auto [input, dim] = *along;
  // A 0-d tensor is its own running sum.
  if (typeOf(input).getRank() == 0)
    return finish(lower, input);
  return finish(lower, lower.getBuilder()
                           .create<CumsumOp>(lower.getLoc(), input, dim,
                                             /*reverse=*/false)
                           .getResult());
}

/// max/min(self, other) elementwise, and max/min(self) over everything.
template <typename ElementwiseOpTy, LoweringFn lowerReduction>
LogicalResult lowerExtremum(NodeLowering &lower) {
  if (lower.getNode()->outputs().size() != 1)
    return lower.error("max and min with indices are not supported; use amax "
                       "or amin");
  if (lower.numInputs() == 2)
    return lowerBinary<ElementwiseOpTy>(lower);
  return lowerReduction(lower);
}

//===----------------------------------------------------------------------===//
// Shapes and data movement.
//===----------------------------------------------------------------------===//

llvm::ArrayRef<int64_t> sizesOf(const at::Tensor &tensor) {
  return {tensor.sizes().data(), tensor.sizes().size()};
}

/// A view that only gives input 0 the output's shape: reshapes (view,
/// reshape, flatten, unsqueeze, squeeze, ...) and broadcasts (expand,
/// expand_as, broadcast_to). No step when the input has that shape already.
template <ViewStep (*stepTo)(llvm::ArrayRef<int64_t>)>
LogicalResult viewToOutputShape(NodeLowering &lower,
                                std::vector<ViewPath> &paths) {
  llvm::ArrayRef<int64_t> shape = sizesOf(lower.outputShadow());
  if (sizesOf(lower.shadowOf(0)) == shape)
    paths.emplace_back();
  else
    paths.push_back({stepTo(shape)});
  return success();
}

/// Dtype conversions of every spelling (aten::to overloads, type_as) and
/// ops that are the identity on values (contiguous, clone, detach, alias):
/// whether they copy is PyTorch's decision.
LogicalResult viewIdentity(NodeLowering &lower, std::vector<ViewPath> &paths) {
  paths.emplace_back();
  return success();
}

LogicalResult viewPermute(NodeLowering &lower, std::vector<ViewPath> &paths) {
  std::optional<std::vector<int64_t>> given = lower.intListConstant(1);
  if (!given)
    return failure();
  llvm::SmallVector<int64_t> permutation;
  for (int64_t d : *given) {
    std::optional<int64_t> dim = lower.dim(d, lower.shadowOf(0).dim());
    if (!dim)
      return failure();
    permutation.push_back(*dim);
  }
  paths.push_back({ViewStep::permute(permutation)});
  return success();
}

/// transpose(self, d0, d1) and t(self).
LogicalResult viewTranspose(NodeLowering &lower, std::vector<ViewPath> &paths) {
  int64_t rank = lower.shadowOf(0).dim();
  if (rank < 2)
    return viewIdentity(lower, paths);
  llvm::SmallVector<int64_t> permutation =
      llvm::to_vector(llvm::seq<int64_t>(0, rank));
  int64_t d0 = rank - 2, d1 = rank - 1;
  if (lower.numInputs() == 3) {
    std::optional<int64_t> a = lower.intConstant(1), b = lower.intConstant(2);
    if (!a || !b)
      return failure();
    std::optional<int64_t> na = lower.dim(*a, rank), nb = lower.dim(*b, rank);
    if (!na || !nb)
      return failure();
    d0 = *na;
    d1 = *nb;
  }
  std::swap(permutation[d0], permutation[d1]);
  paths.push_back({ViewStep::permute(permutation)});
  return success();
}

/// The steps of input[start:end:step] along `dim`; none when that is all of
/// the input.
ViewPath slicePath(NodeLowering &lower, int64_t dim, int64_t start, int64_t end,
                   int64_t step) {
  if (start == 0 && end == lower.shadowOf(0).size(dim) && step == 1)
    return {};
  return {ViewStep::slice(dim, start, end, step)};
}

/// slice(self, dim, start, end, step) with Python's clamping of bounds.
LogicalResult viewSlice(NodeLowering &lower, std::vector<ViewPath> &paths) {
  std::optional<int64_t> d = lower.intConstant(1);
  std::optional<int64_t> step = lower.intConstant(4);
  if (!d || !step)
    return failure();
  std::optional<int64_t> dim = lower.dim(*d, lower.shadowOf(0).dim());
  if (!dim)
    return failure();
  int64_t size = lower.shadowOf(0).size(*dim);
  auto bound = [&](size_t i, int64_t fallback) -> std::optional<int64_t> {
    if (lower.isNone(i))
      return fallback;
    std::optional<int64_t> value = lower.intConstant(i);
    if (!value)
      return std::nullopt;
    int64_t v = *value < 0 ? *value + size : *value;
    return std::clamp<int64_t>(v, 0, size);
  };
  std::optional<int64_t> start = bound(2, 0), end = bound(3, size);
  if (!start || !end)
    return failure();
  if (*step < 1)
    return lower.error("slice step must be positive");
  paths.push_back(
      slicePath(lower, *dim, *start, std::max(*start, *end), *step));
  return success();
}

/// The steps of select(self, dim, index): a slice of size one, then the dim
/// dropped.
ViewPath selectPath(NodeLowering &lower, int64_t dim, int64_t index,
                    llvm::ArrayRef<int64_t> resultShape) {
  ViewPath path = slicePath(lower, dim, index, index + 1, 1);
  path.push_back(ViewStep::reshape(resultShape));
  return path;
}

LogicalResult viewSelect(NodeLowering &lower, std::vector<ViewPath> &paths) {
  std::optional<int64_t> d = lower.intConstant(1);
  std::optional<int64_t> index = lower.intConstant(2);
  if (!d || !index)
    return failure();
  std::optional<int64_t> dim = lower.dim(*d, lower.shadowOf(0).dim());
  if (!dim)
    return failure();
  int64_t size = lower.shadowOf(0).size(*dim);
  int64_t i = *index < 0 ? *index + size : *index;
  if (i < 0 || i >= size)
    return lower.error("index " + std::to_string(*index) +
                       " is out of range for size " + std::to_string(size));
  paths.push_back(selectPath(lower, *dim, i, sizesOf(lower.outputShadow())));
  return success();
}

/// narrow(self, dim, start, length).
LogicalResult viewNarrow(NodeLowering &lower, std::vector<ViewPath> &paths) {
  std::optional<int64_t> d = lower.intConstant(1);
  std::optional<int64_t> start = lower.intConstant(2);
  std::optional<int64_t> length = lower.intConstant(3);
  if (!d || !start || !length)
    return failure();
  std::optional<int64_t> dim = lower.dim(*d, lower.shadowOf(0).dim());
  if (!dim)
    return failure();
  int64_t begin = *start < 0 ? *start + lower.shadowOf(0).size(*dim) : *start;
  paths.push_back(slicePath(lower, *dim, begin, begin + *length, 1));
  return success();
}

/// split, split_with_sizes, chunk, unbind: consecutive slices whose sizes are
/// the sizes of the output list's shadows.
LogicalResult viewSplit(NodeLowering &lower, std::vector<ViewPath> &paths) {
  llvm::StringRef kind = lower.getNode()->kind().toUnqualString();
  bool unbind = kind == "unbind";
  std::optional<int64_t> d = lower.intConstant(unbind ? 1 : 2);
  if (!d)
    return failure();
  std::optional<int64_t> dim = lower.dim(*d, lower.shadowOf(0).dim());
  if (!dim)
    return failure();
  int64_t offset = 0;
  for (const Known &element : lower.outputElements()) {
    llvm::ArrayRef<int64_t> shape = sizesOf(element.shadow);
    if (unbind) {
      paths.push_back(selectPath(lower, *dim, offset++, shape));
      continue;
    }
    int64_t size = shape[*dim];
    paths.push_back(slicePath(lower, *dim, offset, offset + size, 1));
    offset += size;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// In-place writes of whole values.
//===----------------------------------------------------------------------===//

/// copy_(self, src), fill_(self, value), zero_(self): self's new value is the
/// source (0 for zero_), cast to self's dtype and broadcast to its shape.
LogicalResult lowerOverwrite(NodeLowering &lower) {
  mlir::Type elementType = lower.outputElementType();
  mlir::Value source = lower.numInputs() > 1 ? lower.tensor(1, elementType)
                                             : lower.scalar(0, elementType);
  if (!source)
    return failure();
  if (typeOf(source) == lower.outputType())
    return finish(lower, source);
  return finish(lower, lower.create<BroadcastOp>(lower.outputType(), source));
}

/// repeat(self, repeats): each dim of `self` (after leading dims of size 1
/// for the extra repeats) broadcast along a new dim before it, the pairs then
/// merged.
LogicalResult lowerRepeat(NodeLowering &lower) {
  mlir::Value input = lower.tensor(0);
  std::optional<std::vector<int64_t>> repeats = lower.intListConstant(1);
  if (!input || !repeats)
    return failure();
  llvm::ArrayRef<int64_t> shape = typeOf(input).getShape();
  size_t added = repeats->size() - shape.size();
  llvm::SmallVector<int64_t> once, repeated;
  for (auto [i, times] : llvm::enumerate(*repeats)) {
    int64_t size = i < added ? 1 : shape[i - added];
    once.append({1, size});
    repeated.append({times, size});
  }
  mlir::Value pairs = lower.create<ReshapeOp>(typeOf(input).clone(once), input);
  return finish(
      lower, lower.create<BroadcastOp>(typeOf(input).clone(repeated), pairs));
}

/// repeat_interleave(self, repeats, dim) with a number of repeats: each
/// element of `self` (flattened when dim is None) broadcast along a new dim
/// after `dim`, the pair then merged.
LogicalResult lowerRepeatInterleave(NodeLowering &lower) {
  if (lower.numInputs() != 4 || !lower.input(1).isConstant() ||
      !lower.input(1).constant.isInt())
    return lower.error("only a number of repeats is supported, not a tensor "
                       "of them");
  mlir::Value input = lower.tensor(0);
  std::optional<int64_t> repeats = lower.intConstant(1);
  if (!input || !repeats)
    return failure();
  llvm::SmallVector<int64_t> shape(typeOf(input).getShape());
  int64_t dim = 0;
  if (lower.isNone(2)) {
    int64_t elements = 1;
    for (int64_t size : shape)
      elements *= size;
    shape.assign({elements});
  } else {
    std::optional<int64_t> given = lower.intConstant(2);
    std::optional<int64_t> normalized =
        given ? lower.dim(*given, shape.size()) : std::nullopt;
    if (!normalized)
      return failure();
    dim = *normalized;
  }
  shape.insert(shape.begin() + dim + 1, 1);
  mlir::Value once = lower.create<ReshapeOp>(typeOf(input).clone(shape), input);
  shape[dim + 1] = *repeats;
  return finish(lower,
                lower.create<BroadcastOp>(typeOf(input).clone(shape), once));
}

/// The tensors of a list input, cast to `elementType`.
std::optional<llvm::SmallVector<mlir::Value>>
tensorList(NodeLowering &lower, size_t i, mlir::Type elementType) {
  const Known &list = lower.input(i);
  if (!list.is(Known::Kind::Aggregate)) {
    lower.report("expects a list of tensors built in the model");
    return std::nullopt;
  }
  llvm::SmallVector<mlir::Value> values;
  for (const Known &element : *list.elements) {
    if (!element.is(Known::Kind::Tensor)) {
      lower.report("list elements must be tensors");
      return std::nullopt;
    }
    mlir::Value value = lower.read(element);
    if (!value)
      return std::nullopt;
    values.push_back(lower.cast(value, elementType));
  }
  return values;
}

/// cat(tensors, dim) and stack(tensors, dim) (a cat of unsqueezed inputs).
LogicalResult lowerConcat(NodeLowering &lower) {
  auto inputs = tensorList(lower, 0, lower.outputElementType());
  std::optional<int64_t> d = lower.intConstant(1);
  if (!inputs || !d || inputs->empty())
    return failure();
  bool stack =
      llvm::StringRef(lower.getNode()->kind().toUnqualString()) == "stack";
  std::optional<int64_t> dim = lower.dim(*d, lower.outputType().getRank());
  if (!dim)
    return failure();
  if (stack)
    for (mlir::Value &input : *inputs) {
      llvm::SmallVector<int64_t> shape(typeOf(input).getShape());
      shape.insert(shape.begin() + *dim, 1);
      input = lower.create<ReshapeOp>(typeOf(input).clone(shape), input);
    }
  return finish(lower, lower.create<ConcatOp>(
                           lower.outputType(), *inputs,
                           lower.getBuilder().getI64IntegerAttr(*dim)));
}

} // namespace

const llvm::StringMap<LoweringFn> &getLowerings() {
  static const llvm::StringMap<LoweringFn> lowerings = {
      {"aten::add", lowerBinary<AddOp>},
      {"aten::sub", lowerBinary<SubOp>},
      {"aten::mul", lowerBinary<MulOp>},
      {"aten::div", lowerDiv},
      {"aten::rsub", lowerRsub},
      {"aten::pow", lowerPow},
      {"aten::maximum", lowerBinary<MaximumOp>},
      {"aten::minimum", lowerBinary<MinimumOp>},
      {"aten::eq", lowerCompare<ComparePredicate::eq>},
      {"aten::ne", lowerCompare<ComparePredicate::ne>},
      {"aten::lt", lowerCompare<ComparePredicate::lt>},
      {"aten::le", lowerCompare<ComparePredicate::le>},
      {"aten::gt", lowerCompare<ComparePredicate::gt>},
      {"aten::ge", lowerCompare<ComparePredicate::ge>},
      {"aten::bitwise_and", lowerBoolean<MinimumOp>},
      {"aten::__and__", lowerBoolean<MinimumOp>},
      {"aten::__iand__", lowerBoolean<MinimumOp>},
      {"aten::bitwise_or", lowerBoolean<MaximumOp>},
      {"aten::__or__", lowerBoolean<MaximumOp>},
      {"aten::__ior__", lowerBoolean<MaximumOp>},
      {"aten::bitwise_not", lowerBooleanNot},
      {"aten::neg", lowerUnary<NegOp>},
      {"aten::abs", lowerUnary<AbsOp>},
      {"aten::exp", lowerUnary<ExpOp>},
      {"aten::log", lowerUnary<LogOp>},
      {"aten::sqrt", lowerUnary<SqrtOp>},
      {"aten::rsqrt", lowerUnary<RsqrtOp>},
      {"aten::tanh", lowerUnary<TanhOp>},
      {"aten::sigmoid", lowerUnary<SigmoidOp>},
      {"aten::relu", lowerUnary<ReluOp>},
      {"aten::silu", lowerUnary<SiluOp>},
      {"aten::sin", lowerUnary<SinOp>},
      {"aten::cos", lowerUnary<CosOp>},
      {"aten::reciprocal", lowerReciprocal},
      {"aten::gelu", lowerGelu},
      {"aten::where", lowerWhere},
      {"aten::masked_fill", lowerMaskedFill},
      {"aten::dropout", lowerDropout},
      {"aten::tril", lowerTriangular<true>},
      {"aten::triu", lowerTriangular<false>},
      {"aten::zeros_like", lowerFillLike},
      {"aten::ones_like", lowerFillLike},
      {"aten::full_like", lowerFillLike},
      {"aten::new_zeros", lowerFillLike},
      {"aten::new_ones", lowerFillLike},
      {"aten::new_full", lowerFillLike},
      {"aten::arange", lowerArange},
      {"aten::linear", lowerLinear},
      {"aten::matmul", lowerMatmul},
      {"aten::mm", lowerMatmul},
      {"aten::bmm", lowerMatmul},
      {"aten::addmm", lowerAddMatmul},
      {"aten::baddbmm", lowerAddMatmul},
      {"aten::embedding", lowerEmbedding},
      {"aten::index", lowerIndex},
      {"aten::gather", lowerGather},
      {"aten::layer_norm", lowerLayerNorm},
      {"aten::batch_norm", lowerBatchNorm},
      {"aten::conv2d", lowerConvolution},
      {"aten::_convolution", lowerConvolution},
      {"aten::max_pool2d", lowerMaxPool2d},
      {"aten::avg_pool2d", lowerAvgPool2d},
      {"aten::adaptive_avg_pool2d", lowerAdaptiveAvgPool2d},
      {"aten::softmax", lowerSoftmax<SoftmaxOp>},
      {"aten::log_softmax", lowerSoftmax<LogSoftmaxOp>},
      {"aten::cross_entropy_loss", lowerCrossEntropy},
      {"aten::sum", lowerReduce<SumOp>},
      {"aten::mean", lowerReduce<MeanOp>},
      {"aten::var", lowerVar},
      {"aten::amax", lowerReduce<MaxOp>},
      {"aten::max", lowerExtremum<MaximumOp, lowerReduce<MaxOp>>},
      {"aten::amin", lowerMinReduce},
      {"aten::cumsum", lowerCumsum},
      {"aten::min", lowerExtremum<MinimumOp, lowerMinReduce>},
      {"aten::cat", lowerConcat},
      {"aten::stack", lowerConcat},
      {"aten::repeat", lowerRepeat},
      {"aten::repeat_interleave", lowerRepeatInterleave},
      {"aten::copy_", lowerOverwrite},
      {"aten::fill_", lowerOverwrite},
      {"aten::zero_", lowerOverwrite},
  };
  return lowerings;
}

const llvm::StringMap<ViewFn> &getViewLowerings() {
  constexpr ViewFn reshape = viewToOutputShape<ViewStep::reshape>;
  constexpr ViewFn broadcast = viewToOutputShape<ViewStep::broadcast>;
  static const llvm::StringMap<ViewFn> views = {
      {"aten::to", viewIdentity},
      {"aten::type_as", viewIdentity},
      {"aten::contiguous", viewIdentity},
      {"aten::clone", viewIdentity},
      {"aten::detach", viewIdentity},
      {"aten::alias", viewIdentity},
      {"aten::view", reshape},
      {"aten::reshape", reshape},
      {"aten::view_as", reshape},
      {"aten::reshape_as", reshape},
      {"aten::flatten", reshape},
      {"aten::unflatten", reshape},
      {"aten::unsqueeze", reshape},
      {"aten::squeeze", reshape},
      {"aten::permute", viewPermute},
      {"aten::transpose", viewTranspose},
      {"aten::t", viewTranspose},
      {"aten::slice", viewSlice},
      {"aten::select", viewSelect},
      {"aten::narrow", viewNarrow},
      {"aten::split", viewSplit},
      {"aten::split_with_sizes", viewSplit},
      {"aten::chunk", viewSplit},
      {"aten::unbind", viewSplit},
      {"aten::expand", broadcast},
      {"aten::expand_as", broadcast},
      {"aten::broadcast_to", broadcast},
  };
  return views;
}

} // namespace slapo::torchscript
