//===- SlapoOps.cpp - slapo dialect operations ----------------------------===//
#include "slapo/Dialect/SlapoOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

using namespace mlir;

namespace slapo {

FailureOr<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> lhs,
                                                ArrayRef<int64_t> rhs) {
  size_t rank = std::max(lhs.size(), rhs.size());
  SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t l = i < lhs.size() ? lhs[lhs.size() - 1 - i] : 1;
    int64_t r = i < rhs.size() ? rhs[rhs.size() - 1 - i] : 1;
    if (l != r && l != 1 && r != 1)
      return failure();
    result[rank - 1 - i] = l == 1 ? r : l;
  }
  return result;
}

static RankedTensorType tensorType(Value value) {
  return value.getType().cast<RankedTensorType>();
}

static std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(shape, os);
  os << "]";
  return os.str();
}

/// Checks that `operands` broadcast to `result`'s shape; with
/// `sameElementType`, also that all element types equal the result's.
static LogicalResult verifyBroadcasting(Operation *op, ValueRange operands,
                                        Value result, bool sameElementType) {
  SmallVector<int64_t> shape;
  for (Value operand : operands) {
    auto broadcast = broadcastShapes(shape, tensorType(operand).getShape());
    if (failed(broadcast))
      return op->emitOpError("operand shapes do not broadcast: ")
             << shapeString(shape) << " and "
             << shapeString(tensorType(operand).getShape());
    shape = *broadcast;
    if (sameElementType && tensorType(operand).getElementType() !=
                               tensorType(result).getElementType())
      return op->emitOpError("operand element type ")
             << tensorType(operand).getElementType()
             << " differs from the result's "
             << tensorType(result).getElementType();
  }
  if (ArrayRef<int64_t>(shape) != tensorType(result).getShape())
    return op->emitOpError("result shape ")
           << shapeString(tensorType(result).getShape())
           << " is not the broadcast shape " << shapeString(shape);
  return success();
}

static LogicalResult verifyDim(Operation *op, int64_t dim, int64_t rank,
                               StringRef what = "dim") {
  if (dim < 0 || dim >= rank)
    return op->emitOpError() << what << " " << dim << " is out of range for rank "
                             << rank;
  return success();
}

static LogicalResult verifySameElementType(Operation *op, Value a, Value b) {
  if (tensorType(a).getElementType() != tensorType(b).getElementType())
    return op->emitOpError("element types differ: ")
           << tensorType(a).getElementType() << " and "
           << tensorType(b).getElementType();
  return success();
}

//===----------------------------------------------------------------------===//
// Parameters and constants.
//===----------------------------------------------------------------------===//

LogicalResult GetParamOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto param = symbols.lookupNearestSymbolFrom<ParamOp>(*this, getNameAttr());
  if (!param)
    return emitOpError("'") << getName() << "' is not a slapo.param";
  if (param.getType() != tensorType(getResult()))
    return emitOpError("result type ")
           << tensorType(getResult()) << " differs from the parameter's "
           << param.getType();
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult ArangeOp::verify() {
  if (getType().getRank() != 1)
    return emitOpError("result must be 1-D");
  if (getStep().convertToDouble() == 0)
    return emitOpError("step must not be zero");
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise ops.
//===----------------------------------------------------------------------===//

LogicalResult CastOp::verify() {
  if (tensorType(getInput()).getShape() != getType().getShape())
    return emitOpError("cast must keep the shape");
  return success();
}

#define SLAPO_BINARY_VERIFIER(OpClass)                                         \
  LogicalResult OpClass::verify() {                                            \
    return verifyBroadcasting(*this, getOperands(), getResult(), true);        \
  }
SLAPO_BINARY_VERIFIER(AddOp)
SLAPO_BINARY_VERIFIER(SubOp)
SLAPO_BINARY_VERIFIER(MulOp)
SLAPO_BINARY_VERIFIER(DivOp)
SLAPO_BINARY_VERIFIER(PowOp)
SLAPO_BINARY_VERIFIER(MaximumOp)
SLAPO_BINARY_VERIFIER(MinimumOp)
#undef SLAPO_BINARY_VERIFIER

LogicalResult CompareOp::verify() {
  if (failed(verifySameElementType(*this, getLhs(), getRhs())))
    return failure();
  return verifyBroadcasting(*this, getOperands(), getResult(), false);
}

LogicalResult WhereOp::verify() {
  if (failed(verifySameElementType(*this, getOnTrue(), getResult())) ||
      failed(verifySameElementType(*this, getOnFalse(), getResult())))
    return failure();
  return verifyBroadcasting(*this, getOperands(), getResult(), false);
}

LogicalResult DropoutOp::verify() {
  double p = getP().convertToDouble();
  if (!(p > 0 && p < 1))
    return emitOpError("p must be in (0, 1), got ") << p;
  return success();
}

LogicalResult TriangularOp::verify() {
  if (getType().getRank() < 2)
    return emitOpError("input must have rank >= 2");
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions and neural-network ops.
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::verify() {
  RankedTensorType input = tensorType(getInput()), weight = tensorType(getWeight());
  if (input.getRank() < 1 || weight.getRank() != 2)
    return emitOpError("expects input of rank >= 1 and a 2-D weight");
  if (input.getShape().back() != weight.getDimSize(1))
    return emitOpError("input features ")
           << input.getShape().back() << " differ from weight dim 1 ("
           << weight.getDimSize(1) << ")";
  if (failed(verifySameElementType(*this, getInput(), getWeight())) ||
      failed(verifySameElementType(*this, getInput(), getResult())))
    return failure();
  if (Value bias = getBias()) {
    if (tensorType(bias).getShape() != ArrayRef<int64_t>{weight.getDimSize(0)})
      return emitOpError("bias must be 1-D of size ") << weight.getDimSize(0);
    if (failed(verifySameElementType(*this, bias, getResult())))
      return failure();
  }
  SmallVector<int64_t> shape(input.getShape());
  shape.back() = weight.getDimSize(0);
  if (ArrayRef<int64_t>(shape) != getType().getShape())
    return emitOpError("result shape must be ") << shapeString(shape);
  return success();
}

LogicalResult MatmulOp::verify() {
  RankedTensorType lhs = tensorType(getLhs()), rhs = tensorType(getRhs());
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOpError("operands must have rank >= 2");
  if (failed(verifySameElementType(*this, getLhs(), getRhs())) ||
      failed(verifySameElementType(*this, getLhs(), getResult())))
    return failure();
  int64_t k = lhs.getShape().back(), rhsK = rhs.getShape().drop_back().back();
  if (k != rhsK)
    return emitOpError("contraction sizes differ: ") << k << " and " << rhsK;
  auto batch = broadcastShapes(lhs.getShape().drop_back(2),
                               rhs.getShape().drop_back(2));
  if (failed(batch))
    return emitOpError("batch dims do not broadcast");
  SmallVector<int64_t> shape = *batch;
  shape.push_back(lhs.getShape().drop_back().back());
  shape.push_back(rhs.getShape().back());
  if (ArrayRef<int64_t>(shape) != getType().getShape())
    return emitOpError("result shape must be ") << shapeString(shape);
  return success();
}

LogicalResult EmbeddingOp::verify() {
  RankedTensorType weight = tensorType(getWeight());
  if (weight.getRank() != 2)
    return emitOpError("weight must be 2-D");
  if (failed(verifySameElementType(*this, getWeight(), getResult())))
    return failure();
  SmallVector<int64_t> shape(tensorType(getIndices()).getShape());
  shape.push_back(weight.getDimSize(1));
  if (ArrayRef<int64_t>(shape) != getType().getShape())
    return emitOpError("result shape must be ") << shapeString(shape);
  if (auto padding = getPaddingIdx())
    if (*padding < 0 || *padding >= weight.getDimSize(0))
      return emitOpError("padding_idx ") << *padding << " is out of range";
  return success();
}

LogicalResult LayerNormOp::verify() {
  RankedTensorType input = tensorType(getInput());
  int64_t rank = getNormalizedRank();
  if (rank < 1 || rank > input.getRank())
    return emitOpError("normalized_rank ")
           << rank << " must be in [1, " << input.getRank() << "]";
  if (input != getType())
    return emitOpError("result type must equal the input type");
  ArrayRef<int64_t> normalized = input.getShape().take_back(rank);
  for (Value affine : {getWeight(), getBias()}) {
    if (!affine)
      continue;
    if (tensorType(affine).getShape() != normalized)
      return emitOpError("weight and bias must have shape ")
             << shapeString(normalized);
    if (failed(verifySameElementType(*this, affine, getInput())))
      return failure();
  }
  if (getEps().convertToDouble() <= 0)
    return emitOpError("eps must be positive");
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return verifyDim(*this, getDim(), getType().getRank());
}
LogicalResult LogSoftmaxOp::verify() {
  return verifyDim(*this, getDim(), getType().getRank());
}

LogicalResult CrossEntropyOp::verify() {
  RankedTensorType logits = tensorType(getLogits()),
                   target = tensorType(getTarget());
  if (logits.getRank() != 2 || target.getRank() != 1 ||
      logits.getDimSize(0) != target.getDimSize(0))
    return emitOpError("expects logits [N, C] and target [N]");
  if (failed(verifySameElementType(*this, getLogits(), getResult())))
    return failure();
  SmallVector<int64_t> shape;
  if (getReduction() == Reduction::none)
    shape.push_back(logits.getDimSize(0));
  if (ArrayRef<int64_t>(shape) != getType().getShape())
    return emitOpError("result shape must be ") << shapeString(shape);
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

static LogicalResult verifyReduction(Operation *op, Value input, Value result,
                                     ArrayRef<int64_t> dims, bool keepdim) {
  RankedTensorType inputType = tensorType(input);
  if (failed(verifySameElementType(op, input, result)))
    return failure();
  llvm::SmallSet<int64_t, 4> reduced;
  for (int64_t dim : dims) {
    if (failed(verifyDim(op, dim, inputType.getRank())))
      return failure();
    if (!reduced.insert(dim).second)
      return op->emitOpError("dim ") << dim << " is reduced twice";
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < inputType.getRank(); ++i) {
    if (!reduced.contains(i))
      shape.push_back(inputType.getDimSize(i));
    else if (keepdim)
      shape.push_back(1);
  }
  if (ArrayRef<int64_t>(shape) != tensorType(result).getShape())
    return op->emitOpError("result shape must be ") << shapeString(shape);
  return success();
}

#define SLAPO_REDUCE_VERIFIER(OpClass)                                         \
  LogicalResult OpClass::verify() {                                            \
    return verifyReduction(*this, getInput(), getResult(), getDims(),          \
                           getKeepdim());                                      \
  }
SLAPO_REDUCE_VERIFIER(SumOp)
SLAPO_REDUCE_VERIFIER(MeanOp)
SLAPO_REDUCE_VERIFIER(MaxOp)
#undef SLAPO_REDUCE_VERIFIER

//===----------------------------------------------------------------------===//
// Shape and data movement.
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  if (failed(verifySameElementType(*this, getInput(), getResult())))
    return failure();
  if (tensorType(getInput()).getNumElements() != getType().getNumElements())
    return emitOpError("element count changes from ")
           << tensorType(getInput()).getNumElements() << " to "
           << getType().getNumElements();
  return success();
}

LogicalResult PermuteOp::verify() {
  RankedTensorType input = tensorType(getInput());
  ArrayRef<int64_t> permutation = getPermutation();
  if (failed(verifySameElementType(*this, getInput(), getResult())))
    return failure();
  if ((int64_t)permutation.size() != input.getRank())
    return emitOpError("permutation size must equal the rank ")
           << input.getRank();
  SmallVector<bool> seen(permutation.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t dim : permutation) {
    if (failed(verifyDim(*this, dim, input.getRank())) || seen[dim])
      return emitOpError("is not a permutation: ") << shapeString(permutation);
    seen[dim] = true;
    shape.push_back(input.getDimSize(dim));
  }
  if (ArrayRef<int64_t>(shape) != getType().getShape())
    return emitOpError("result shape must be ") << shapeString(shape);
  return success();
}

LogicalResult SliceOp::verify() {
  RankedTensorType input = tensorType(getInput());
  if (failed(verifySameElementType(*this, getInput(), getResult())) ||
      failed(verifyDim(*this, getDim(), input.getRank())))
    return failure();
  int64_t size = input.getDimSize(getDim());
  if (getStep() < 1)
    return emitOpError("step must be positive");
  if (getStart() < 0 || getStart() > getEnd() || getEnd() > size)
    return emitOpError("needs 0 <= start <= end <= ") << size;
  SmallVector<int64_t> shape(input.getShape());
  shape[getDim()] = (getEnd() - getStart() + getStep() - 1) / getStep();
  if (ArrayRef<int64_t>(shape) != getType().getShape())
    return emitOpError("result shape must be ") << shapeString(shape);
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  RankedTensorType result = tensorType(getResult());
  if (failed(verifyDim(*this, getDim(), result.getRank())))
    return failure();
  int64_t total = 0;
  for (Value input : getInputs()) {
    RankedTensorType type = tensorType(input);
    if (failed(verifySameElementType(*this, input, getResult())))
      return failure();
    if (type.getRank() != result.getRank())
      return emitOpError("inputs must have the result's rank");
    for (int64_t i = 0; i < type.getRank(); ++i)
      if (i != getDim() && type.getDimSize(i) != result.getDimSize(i))
        return emitOpError("inputs differ from the result in dim ") << i;
    total += type.getDimSize(getDim());
  }
  if (total != result.getDimSize(getDim()))
    return emitOpError("result dim ") << getDim() << " must be " << total;
  return success();
}

LogicalResult BroadcastOp::verify() {
  if (failed(verifySameElementType(*this, getInput(), getResult())))
    return failure();
  auto shape =
      broadcastShapes(tensorType(getInput()).getShape(), getType().getShape());
  if (failed(shape) || ArrayRef<int64_t>(*shape) != getType().getShape())
    return emitOpError("cannot broadcast ")
           << shapeString(tensorType(getInput()).getShape()) << " to "
           << shapeString(getType().getShape());
  return success();
}

} // namespace slapo

#define GET_OP_CLASSES
#include "slapo/Dialect/SlapoOps.cpp.inc"
