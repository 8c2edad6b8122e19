//===- SlapoOps.cpp - slapo dialect operations ----------------------------===//
#include "slapo/Dialect/SlapoOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/FunctionInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdlib>
#include <limits>

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

std::optional<BroadcastIndexing> getBroadcastIndexing(ArrayRef<int64_t> shape,
                                                      ArrayRef<int64_t> loop) {
  if (shape.size() > loop.size())
    return std::nullopt;
  size_t pad = loop.size() - shape.size();
  // Dims of size 1 in the loop index nothing: only the others decide.
  int64_t inner = 1, count = 1;
  bool kept = false, keptEnded = false;
  for (size_t d = loop.size(); d-- > 0;) {
    int64_t size = d < pad ? 1 : shape[d - pad];
    if (loop[d] == 1 && size != 1)
      return std::nullopt;
    if (loop[d] == 1 || (size == 1 && !kept)) {
      inner *= kept ? 1 : loop[d];
      continue;
    }
    if (size == 1) {
      keptEnded = true;
      continue;
    }
    if (size != loop[d] || keptEnded)
      return std::nullopt;
    kept = true;
    count *= size;
  }
  return BroadcastIndexing{kept ? inner : 1, count};
}

Value getSameBytesSource(Operation *op) {
  if (isa<ReshapeOp, GradAllReduceOp>(op))
    return op->getOperand(0);
  return Value();
}

std::optional<IndexRange> getIndexRange(Value value) {
  if (auto arg = value.dyn_cast<BlockArgument>())
    if (auto function =
            dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp()))
      if (auto bound = function.getArgAttrOfType<IntegerAttr>(
              arg.getArgNumber(), kIndexBoundAttrName)) {
        IndexRange range{bound.getInt(), std::nullopt};
        if (auto ignored = function.getArgAttrOfType<IntegerAttr>(
                arg.getArgNumber(), kIndexIgnoredAttrName))
          range.ignored = ignored.getInt();
        return range;
      }
  std::optional<IndexRange> range;
  auto consider = [&](IndexRange use) {
    if (!range)
      range = use;
    else if (range->ignored != use.ignored)
      range = IndexRange{std::min(range->rows, use.rows), std::nullopt};
    else
      range->rows = std::min(range->rows, use.rows);
  };
  for (Operation *user : value.getUsers()) {
    if (auto embedding = dyn_cast<EmbeddingOp>(user))
      consider(
          {embedding.getWeight().getType().cast<ShapedType>().getDimSize(0),
           std::nullopt});
    else if (auto loss = dyn_cast<CrossEntropyOp>(user))
      consider({loss.getLogits().getType().cast<ShapedType>().getDimSize(1),
                loss.getIgnoreIndex()});
    else if (auto loss = dyn_cast<LinearCrossEntropyOp>(user);
             loss && loss.getTarget() == value)
      consider({loss.getWeight().getType().cast<ShapedType>().getDimSize(0),
                loss.getIgnoreIndex()});
    else if (isa<ReshapeOp, SliceOp, PermuteOp, BroadcastOp, ConcatOp>(user))
      if (auto use = getIndexRange(user->getResult(0)))
        consider(*use);
  }
  return range;
}

void setIndexRange(FunctionOpInterface function, unsigned argument,
                   const IndexRange &range) {
  auto i64 = IntegerType::get(function.getContext(), 64);
  function.setArgAttr(argument, kIndexBoundAttrName,
                      IntegerAttr::get(i64, range.rows));
  if (range.ignored)
    function.setArgAttr(argument, kIndexIgnoredAttrName,
                        IntegerAttr::get(i64, *range.ignored));
}

static RankedTensorType tensorType(Value value) {
  return value.getType().cast<RankedTensorType>();
}

bool holdsExactly(Type wide, Type narrow) {
  auto w = wide.dyn_cast<FloatType>(), n = narrow.dyn_cast<FloatType>();
  if (!w || !n || w.getWidth() <= n.getWidth())
    return false;
  const llvm::fltSemantics &ws = w.getFloatSemantics();
  const llvm::fltSemantics &ns = n.getFloatSemantics();
  return llvm::APFloat::semanticsPrecision(ws) >=
             llvm::APFloat::semanticsPrecision(ns) &&
         llvm::APFloat::semanticsMaxExponent(ws) >=
             llvm::APFloat::semanticsMaxExponent(ns) &&
         llvm::APFloat::semanticsMinExponent(ws) <=
             llvm::APFloat::semanticsMinExponent(ns);
}

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(shape, os, [&](int64_t size) {
    if (ShapedType::isDynamic(size))
      os << "?";
    else
      os << size;
  });
  os << "]";
  return os.str();
}

/// Prints `value` with the fewest digits that read back as the same double.
static std::string numberString(double value) {
  std::string text;
  for (int precision = 1; precision <= 17; ++precision) {
    text = llvm::formatv("{0}", llvm::format("%.*g", precision, value));
    if (std::strtod(text.c_str(), nullptr) == value)
      break;
  }
  return text;
}

/// Checks that `operands` broadcast to `result`'s shape; with
/// `sameElementType`, also that all element types equal the result's.
static LogicalResult verifyBroadcasting(Operation *op, ValueRange operands,
                                        Value result, bool sameElementType) {
  SmallVector<int64_t> shape;
  for (auto [index, operand] : llvm::enumerate(operands)) {
    ArrayRef<int64_t> operandShape = tensorType(operand).getShape();
    auto broadcast = broadcastShapes(shape, operandShape);
    if (failed(broadcast))
      return op->emitOpError("operand #")
             << index << " shape " << shapeString(operandShape)
             << " does not broadcast with " << shapeString(shape);
    shape = *broadcast;
    if (sameElementType && tensorType(operand).getElementType() !=
                               tensorType(result).getElementType())
      return op->emitOpError("operand #")
             << index << " element type "
             << tensorType(operand).getElementType()
             << " differs from the result element type "
             << tensorType(result).getElementType();
  }
  if (ArrayRef<int64_t>(shape) != tensorType(result).getShape())
    return op->emitOpError("result shape ")
           << shapeString(tensorType(result).getShape())
           << " is not the broadcast shape " << shapeString(shape);
  return success();
}

/// Checks that `dim` indexes a dimension of a tensor of rank `rank`.
static LogicalResult verifyDim(Operation *op, int64_t dim, int64_t rank,
                               const Twine &what = "dim") {
  if (dim < 0 || dim >= rank)
    return op->emitOpError()
           << what << " " << dim << " is out of range for rank " << rank;
  return success();
}

/// `shape` permuted as slapo.permute permutes it (dim i of the result is dim
/// permutation[i]), after checking that `permutation`, called `name`, is a
/// permutation of its dims.
static FailureOr<SmallVector<int64_t>>
permuteShape(Operation *op, ArrayRef<int64_t> permutation,
             ArrayRef<int64_t> shape, StringRef name) {
  if (permutation.size() != shape.size())
    return op->emitOpError()
           << name << " " << shapeString(permutation) << " has "
           << permutation.size() << " entries for a tensor of rank "
           << shape.size();
  SmallVector<bool> seen(permutation.size(), false);
  SmallVector<int64_t> permuted;
  for (int64_t dim : permutation) {
    if (failed(verifyDim(op, dim, shape.size(), Twine(name) + " entry")))
      return failure();
    if (seen[dim])
      return op->emitOpError()
             << name << " " << shapeString(permutation) << " repeats " << dim;
    seen[dim] = true;
    permuted.push_back(shape[dim]);
  }
  return permuted;
}

/// Checks that `value`, called `name`, has rank `rank`, or at least `rank`
/// with `atLeast`.
static LogicalResult verifyRank(Operation *op, Value value, StringRef name,
                                int64_t rank, bool atLeast = false) {
  RankedTensorType type = tensorType(value);
  if (type.getRank() == rank || (atLeast && type.getRank() > rank))
    return success();
  return op->emitOpError() << name << " must have rank "
                           << (atLeast ? ">= " : "") << rank << ", got shape "
                           << shapeString(type.getShape());
}

/// Checks that the shape of `value`, called `name`, is `expected`, which the
/// message calls `expectedName`.
static LogicalResult verifyShape(Operation *op, Value value, StringRef name,
                                 ArrayRef<int64_t> expected,
                                 const Twine &expectedName = "expected shape") {
  ArrayRef<int64_t> shape = tensorType(value).getShape();
  if (shape == expected)
    return success();
  return op->emitOpError() << name << " shape " << shapeString(shape)
                           << " differs from " << shapeString(expected)
                           << ", the " << expectedName;
}

/// Checks that `a` and `b`, called `aName` and `bName`, have one element type.
static LogicalResult verifySameElementType(Operation *op, Value a,
                                           StringRef aName, Value b,
                                           StringRef bName) {
  Type aType = tensorType(a).getElementType();
  Type bType = tensorType(b).getElementType();
  if (aType != bType)
    return op->emitOpError()
           << aName << " element type " << aType << " differs from the "
           << bName << " element type " << bType;
  return success();
}

/// Checks a tensor-parallel layout (`shard_axis`, `shard_chunks`) of a
/// tensor of `type`, as slapo.param and slapo.dropout carry it.
static LogicalResult verifyShardLayout(Operation *op,
                                       std::optional<uint64_t> axis,
                                       std::optional<uint64_t> chunks,
                                       RankedTensorType type) {
  if (axis && *axis >= uint64_t(type.getRank()))
    return op->emitOpError("shard_axis ")
           << *axis << " is not a dim of " << type;
  if (chunks && (!axis || *chunks < 1))
    return op->emitOpError(
        "shard_chunks needs shard_axis and must be positive");
  return success();
}

//===----------------------------------------------------------------------===//
// Parameters and constants.
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  // PyTorch forbids empty parameter and buffer names.
  if (getSymName().empty())
    return emitOpError("name must not be empty");
  if (failed(verifyShardLayout(*this, getShardAxis(), getShardChunks(),
                               getTensorType())))
    return failure();
  ArrayAttr aliases = getAliasesAttr();
  if (!aliases)
    return success();
  llvm::SmallDenseSet<StringRef> seen;
  for (Attribute alias : aliases) {
    StringRef name = alias.cast<StringAttr>().getValue();
    if (name.empty())
      return emitOpError("aliases must not be empty");
    if (name == getSymName())
      return emitOpError("alias ") << alias << " is the parameter's own name";
    if (!seen.insert(name).second)
      return emitOpError("alias ") << alias << " is listed twice";
  }
  return success();
}

LogicalResult ParamOp::verifySymbolUses(SymbolTableCollection &symbols) {
  ArrayAttr aliases = getAliasesAttr();
  if (!aliases)
    return success();
  // Aliases are state_dict names too: none may name another symbol.
  for (Attribute alias : aliases)
    if (Operation *other =
            symbols.lookupNearestSymbolFrom(*this, alias.cast<StringAttr>()))
      return emitOpError("alias ")
             << alias << " is also the name of a '" << other->getName() << "'";
  return success();
}

LogicalResult GetParamOp::verifySymbolUses(SymbolTableCollection &symbols) {
  Operation *symbol = symbols.lookupNearestSymbolFrom(*this, getNameAttr());
  if (!symbol)
    return emitOpError("there is no symbol named ") << getNameAttr();
  auto param = dyn_cast<ParamOp>(symbol);
  if (!param)
    return emitOpError() << getNameAttr() << " is a '" << symbol->getName()
                         << "', not a 'slapo.param'";
  if (param.getType() != getType())
    return emitOpError("result type ")
           << getType() << " differs from the type " << param.getType()
           << " of " << getNameAttr();
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult ArangeOp::verify() {
  if (failed(verifyRank(*this, getResult(), "result", 1)))
    return failure();
  double start = getStart().convertToDouble();
  double step = getStep().convertToDouble();
  if (!std::isfinite(start) || !std::isfinite(step))
    return emitOpError("start and step must be finite, got ")
           << numberString(start) << " and " << numberString(step);
  if (step == 0)
    return emitOpError("step must not be zero");
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise ops.
//===----------------------------------------------------------------------===//

LogicalResult CastOp::verify() {
  return verifyShape(*this, getResult(), "result",
                     tensorType(getInput()).getShape(), "input shape");
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
  if (failed(verifySameElementType(*this, getLhs(), "lhs", getRhs(), "rhs")))
    return failure();
  return verifyBroadcasting(*this, getOperands(), getResult(), false);
}

LogicalResult WhereOp::verify() {
  if (failed(verifySameElementType(*this, getOnTrue(), "on_true", getResult(),
                                   "result")) ||
      failed(verifySameElementType(*this, getOnFalse(), "on_false", getResult(),
                                   "result")))
    return failure();
  return verifyBroadcasting(*this, getOperands(), getResult(), false);
}

LogicalResult DropoutOp::verify() {
  double p = getP().convertToDouble();
  if (!(p > 0 && p < 1))
    return emitOpError("p must be in (0, 1), got ") << numberString(p);
  return verifyShardLayout(*this, getShardAxis(), getShardChunks(),
                           tensorType(getInput()));
}

LogicalResult TriangularOp::verify() {
  return verifyRank(*this, getInput(), "input", 2, /*atLeast=*/true);
}

//===----------------------------------------------------------------------===//
// Contractions and neural-network ops.
//===----------------------------------------------------------------------===//

/// The operands of a contraction have one element type; its result has it
/// too, or f32 when they are bf16 (mixed precision accumulates in f32).
static LogicalResult verifyContractionTypes(Operation *op, Value lhs,
                                            StringRef lhsName, Value rhs,
                                            StringRef rhsName, Value result) {
  Type operand = tensorType(lhs).getElementType();
  Type produced = tensorType(result).getElementType();
  if (operand.isBF16() && produced.isF32())
    return verifySameElementType(op, rhs, rhsName, lhs, lhsName);
  if (failed(verifySameElementType(op, lhs, lhsName, result, "result")) ||
      failed(verifySameElementType(op, rhs, rhsName, result, "result")))
    return failure();
  return success();
}

LogicalResult LinearOp::verify() {
  if (failed(verifyRank(*this, getInput(), "input", 1, /*atLeast=*/true)) ||
      failed(verifyRank(*this, getWeight(), "weight", 2)))
    return failure();
  RankedTensorType input = tensorType(getInput()),
                   weight = tensorType(getWeight());
  if (input.getShape().back() != weight.getDimSize(1))
    return emitOpError("input ")
           << shapeString(input.getShape()) << " has "
           << input.getShape().back() << " features, weight "
           << shapeString(weight.getShape()) << " expects "
           << weight.getDimSize(1);
  if (failed(verifyContractionTypes(*this, getInput(), "input", getWeight(),
                                    "weight", getResult())))
    return failure();
  if (Value bias = getBias())
    if (failed(verifyShape(*this, bias, "bias", {weight.getDimSize(0)})) ||
        failed(
            verifySameElementType(*this, bias, "bias", getResult(), "result")))
      return failure();
  SmallVector<int64_t> shape(input.getShape());
  shape.back() = weight.getDimSize(0);
  return verifyShape(*this, getResult(), "result", shape);
}

LogicalResult MatmulOp::verify() {
  if (failed(verifyRank(*this, getLhs(), "lhs", 2, /*atLeast=*/true)) ||
      failed(verifyRank(*this, getRhs(), "rhs", 2, /*atLeast=*/true)) ||
      failed(verifyContractionTypes(*this, getLhs(), "lhs", getRhs(), "rhs",
                                    getResult())))
    return failure();
  // The operands as the product reads them.
  auto permuted = [&](Value operand, std::optional<ArrayRef<int64_t>> order,
                      StringRef name) -> FailureOr<SmallVector<int64_t>> {
    ArrayRef<int64_t> shape = tensorType(operand).getShape();
    if (!order)
      return SmallVector<int64_t>(shape);
    return permuteShape(*this, *order, shape, name);
  };
  auto lhsShape = permuted(getLhs(), getLhsPermutation(), "lhs_permutation");
  auto rhsShape = permuted(getRhs(), getRhsPermutation(), "rhs_permutation");
  if (failed(lhsShape) || failed(rhsShape))
    return failure();
  ArrayRef<int64_t> lhs = *lhsShape, rhs = *rhsShape;
  int64_t m = lhs.end()[-2], k = lhs.back(), rhsK = rhs.end()[-2],
          n = rhs.back();
  if (k != rhsK)
    return emitOpError("contraction sizes differ: lhs ")
           << shapeString(lhs) << " has " << k << " columns, rhs "
           << shapeString(rhs) << " has " << rhsK << " rows";
  auto batch = broadcastShapes(lhs.drop_back(2), rhs.drop_back(2));
  if (failed(batch))
    return emitOpError("batch dims ")
           << shapeString(lhs.drop_back(2)) << " of lhs and "
           << shapeString(rhs.drop_back(2)) << " of rhs do not broadcast";
  SmallVector<int64_t> shape = *batch;
  shape.append({m, n});
  if (std::optional<ArrayRef<int64_t>> order = getResultPermutation()) {
    auto stored = permuteShape(*this, *order, shape, "result_permutation");
    if (failed(stored))
      return failure();
    shape = *stored;
  }
  return verifyShape(*this, getResult(), "result", shape);
}

LogicalResult EmbeddingOp::verify() {
  if (failed(verifyRank(*this, getWeight(), "weight", 2)) ||
      failed(verifySameElementType(*this, getWeight(), "weight", getResult(),
                                   "result")))
    return failure();
  RankedTensorType weight = tensorType(getWeight());
  SmallVector<int64_t> shape(tensorType(getIndices()).getShape());
  shape.push_back(weight.getDimSize(1));
  if (failed(verifyShape(*this, getResult(), "result", shape)))
    return failure();
  // The I64Attr accessor returns uint64_t: read the value signed.
  if (IntegerAttr paddingAttr = getPaddingIdxAttr()) {
    int64_t padding = paddingAttr.getInt();
    if (padding < 0 || padding >= weight.getDimSize(0))
      return emitOpError("padding_idx ")
             << padding << " is out of range for " << weight.getDimSize(0)
             << " embeddings";
  }
  return success();
}

/// What the norms and their gradients check alike: `rows` (the norm's
/// result, the gradient's grad) of the input's shape and its element type
/// or a narrower one the input's holds exactly (an f32 norm's bf16 rows:
/// computed in f32 and rounded once, or read and widened), `same` (the
/// input's gradient) of the input's type, `affine` (the weight, the bias,
/// their gradients; null where absent) of the input's trailing `rank` dims
/// (`dims` names them in messages) and the input's element type.
static LogicalResult
verifyNormOperands(Operation *op, Value input, int64_t rank, StringRef dims,
                   std::pair<Value, const char *> rows,
                   ArrayRef<std::pair<Value, const char *>> same,
                   ArrayRef<std::pair<Value, const char *>> affine) {
  RankedTensorType type = tensorType(input);
  RankedTensorType rowsType = tensorType(rows.first);
  if (rowsType.getShape() != type.getShape() ||
      (rowsType.getElementType() != type.getElementType() &&
       !holdsExactly(type.getElementType(), rowsType.getElementType())))
    return op->emitOpError(rows.second)
           << " type " << rowsType << " is neither the input type " << type
           << " nor of its shape with a narrower element type that "
           << type.getElementType() << " holds exactly";
  for (auto [value, name] : same)
    if (value && value.getType() != type)
      return op->emitOpError(name) << " type " << value.getType()
                                   << " differs from the input type " << type;
  ArrayRef<int64_t> normalized = type.getShape().take_back(rank);
  for (auto [value, name] : affine) {
    if (!value)
      continue;
    if (failed(verifyShape(op, value, name, normalized, dims)) ||
        failed(verifySameElementType(op, value, name, input, "input")))
      return failure();
  }
  return success();
}

/// layer_norm and its gradient: normalized_rank within the input's rank,
/// the operands (verifyNormOperands), eps positive.
static LogicalResult
verifyLayerNorm(Operation *op, Value input, int64_t rank, double eps,
                std::pair<Value, const char *> rows,
                ArrayRef<std::pair<Value, const char *>> same,
                ArrayRef<std::pair<Value, const char *>> affine) {
  RankedTensorType type = tensorType(input);
  if (rank < 1 || rank > type.getRank())
    return op->emitOpError("normalized_rank ")
           << rank << " is not in [1, " << type.getRank()
           << "] for input shape " << shapeString(type.getShape());
  if (failed(verifyNormOperands(op, input, rank, "normalized shape", rows, same,
                                affine)))
    return failure();
  if (!(eps > 0) || !std::isfinite(eps))
    return op->emitOpError("eps must be positive and finite, got ")
           << numberString(eps);
  return success();
}

LogicalResult LayerNormOp::verify() {
  return verifyLayerNorm(*this, getInput(), getNormalizedRank(),
                         getEps().convertToDouble(), {getResult(), "result"},
                         {}, {{getWeight(), "weight"}, {getBias(), "bias"}});
}

LogicalResult LayerNormGradOp::verify() {
  return verifyLayerNorm(
      *this, getInput(), getNormalizedRank(), getEps().convertToDouble(),
      {getGrad(), "grad"},
      {{getGradInput(), "grad_input"}, {getAddend(), "addend"}},
      {{getWeight(), "weight"},
       {getGradWeight(), "grad_weight"},
       {getGradBias(), "grad_bias"}});
}

/// rms_norm and its gradient: over the last dim of an input of rank 1 or
/// more, the operands (verifyNormOperands), eps non-negative (LLaMA-style
/// modules may add none).
static LogicalResult
verifyRmsNorm(Operation *op, Value input, double eps,
              std::pair<Value, const char *> rows,
              ArrayRef<std::pair<Value, const char *>> same,
              ArrayRef<std::pair<Value, const char *>> affine) {
  if (failed(verifyRank(op, input, "input", 1, /*atLeast=*/true)) ||
      failed(verifyNormOperands(op, input, 1, "last dim", rows, same, affine)))
    return failure();
  if (!(eps >= 0) || !std::isfinite(eps))
    return op->emitOpError("eps must be non-negative and finite, got ")
           << numberString(eps);
  return success();
}

bool dependsOnParameter(Value value) {
  SmallVector<Value> work = {value};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || !seen.insert(op).second)
      continue;
    if (auto get = dyn_cast<GetParamOp>(op)) {
      auto param =
          SymbolTable::lookupNearestSymbolFrom<ParamOp>(get, get.getNameAttr());
      if (param && !param.getBuffer())
        return true;
      continue;
    }
    work.append(op->getOperands().begin(), op->getOperands().end());
  }
  return false;
}

LogicalResult RotaryEmbeddingOp::verify() {
  // cos and sin broadcast to the input without stretching the last dim:
  // its halves meet different angles.
  if (failed(verifyRank(*this, getInput(), "input", 1, /*atLeast=*/true)) ||
      failed(verifyBroadcasting(*this, {getInput(), getCos(), getSin()},
                                getResult(), /*sameElementType=*/false)) ||
      failed(verifySameElementType(*this, getCos(), "cos", getSin(), "sin")))
    return failure();
  // The angles' type is the one computed in; the input may be narrower
  // (widened exactly: mixed precision's bf16 gradient), the result too
  // (rounded once: the bf16 operand of the next product).
  Type angles = tensorType(getCos()).getElementType();
  for (auto [value, name] :
       {std::pair(getInput(), "input"), std::pair(getResult(), "result")}) {
    Type element = tensorType(value).getElementType();
    if (element != angles && !holdsExactly(angles, element))
      return emitOpError() << name << " element type " << element
                           << " is neither the angles' " << angles
                           << " nor a narrower type that it holds exactly";
  }
  int64_t size = tensorType(getInput()).getShape().back();
  if (size % 2)
    return emitOpError("rotates the halves of the last dim, which has odd "
                       "size ")
           << size;
  for (auto [angles, name] :
       {std::pair(getCos(), "cos"), std::pair(getSin(), "sin")})
    if (tensorType(angles).getRank() == 0 ||
        tensorType(angles).getShape().back() != size)
      return emitOpError() << name << " shape "
                           << shapeString(tensorType(angles).getShape())
                           << " does not end in the last dim of the input, "
                           << size;
  return success();
}

LogicalResult RmsNormOp::verify() {
  return verifyRmsNorm(*this, getInput(), getEps().convertToDouble(),
                       {getResult(), "result"}, {}, {{getWeight(), "weight"}});
}

LogicalResult RmsNormGradOp::verify() {
  return verifyRmsNorm(
      *this, getInput(), getEps().convertToDouble(), {getGrad(), "grad"},
      {{getGradInput(), "grad_input"}, {getAddend(), "addend"}},
      {{getWeight(), "weight"}, {getGradWeight(), "grad_weight"}});
}

LogicalResult SoftmaxOp::verify() {
  return verifyDim(*this, getDim(), getType().getRank());
}
LogicalResult LogSoftmaxOp::verify() {
  return verifyDim(*this, getDim(), getType().getRank());
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(verifyRank(*this, getLogits(), "logits", 2)) ||
      failed(verifyRank(*this, getTarget(), "target", 1)) ||
      failed(verifySameElementType(*this, getLogits(), "logits", getResult(),
                                   "result")))
    return failure();
  int64_t batch = tensorType(getLogits()).getDimSize(0);
  if (failed(verifyShape(*this, getTarget(), "target", {batch},
                         "batch shape of the logits")))
    return failure();
  SmallVector<int64_t> shape;
  if (getReduction() == Reduction::none)
    shape.push_back(batch);
  return verifyShape(*this, getResult(), "result", shape,
                     "expected shape for reduction " +
                         stringifyReduction(getReduction()));
}

LogicalResult CrossEntropyGradOp::verify() {
  if (failed(verifyRank(*this, getLogits(), "logits", 2)) ||
      failed(verifySameElementType(*this, getLogits(), "logits", getRowWeight(),
                                   "row_weight")) ||
      failed(verifySameElementType(*this, getLogits(), "logits", getResult(),
                                   "result")))
    return failure();
  int64_t batch = tensorType(getLogits()).getDimSize(0);
  if (failed(verifyShape(*this, getTarget(), "target", {batch},
                         "batch shape of the logits")) ||
      failed(verifyShape(*this, getRowWeight(), "row_weight", {batch},
                         "batch shape of the logits")))
    return failure();
  return verifyShape(*this, getResult(), "result",
                     tensorType(getLogits()).getShape(), "logits' shape");
}

/// Checks the operands of an LM head's kernel (linear_cross_entropy,
/// linear_log_sum_exp and its gradient): hidden [rows, features], weight
/// [classes, features] of one element type and bias [classes] when given.
/// Hidden and weight are f32, or bf16 (under precision="bf16": the products
/// in bf16 as torch.autocast runs an LM head); every other float operand is
/// f32, the compute type.
static LogicalResult verifyLinearRows(Operation *op, Value hidden, Value weight,
                                      Value bias) {
  if (failed(verifyRank(op, hidden, "hidden", 2)) ||
      failed(verifyRank(op, weight, "weight", 2)) ||
      failed(verifySameElementType(op, weight, "weight", hidden, "hidden")))
    return failure();
  Type operandType = tensorType(hidden).getElementType();
  if (!operandType.isF32() && !operandType.isBF16())
    return op->emitOpError("hidden and weight must be f32 or bf16, got ")
           << operandType;
  for (Value value : op->getOperands().drop_front(2))
    if (auto type = tensorType(value); type.getElementType().isa<FloatType>() &&
                                       !type.getElementType().isF32())
      return op->emitOpError("operands other than hidden and weight must be "
                             "f32, got ")
             << type;
  int64_t features = tensorType(hidden).getDimSize(1);
  int64_t classes = tensorType(weight).getDimSize(0);
  if (failed(verifyShape(op, weight, "weight", {classes, features},
                         "[classes, features of hidden]")))
    return failure();
  if (bias)
    return verifyShape(op, bias, "bias", {classes}, "classes");
  return success();
}

/// Checks the gradients of hidden, weight and bias among an LM head
/// kernel's results: their operands' shapes, f32 (the compute type, whatever
/// the operands'), grad_bias iff a bias.
static LogicalResult verifyLinearRowsGrads(Operation *op, Value hidden,
                                           Value weight, Value bias,
                                           Value gradHidden, Value gradWeight,
                                           Value gradBias) {
  if (failed(verifyShape(op, gradHidden, "grad_hidden",
                         tensorType(hidden).getShape(), "hidden's shape")) ||
      failed(verifyShape(op, gradWeight, "grad_weight",
                         tensorType(weight).getShape(), "weight's shape")))
    return failure();
  if (bool(bias) != bool(gradBias))
    return op->emitOpError(
        "has a grad_bias result if and only if it has a bias");
  if (gradBias &&
      failed(verifyShape(op, gradBias, "grad_bias", tensorType(bias).getShape(),
                         "bias's shape")))
    return failure();
  for (Value grad : {gradHidden, gradWeight, gradBias})
    if (grad && !tensorType(grad).getElementType().isF32())
      return op->emitOpError("gradients must be f32, got ") << grad.getType();
  return success();
}

LogicalResult LinearCrossEntropyOp::verify() {
  if (failed(verifyLinearRows(*this, getHidden(), getWeight(), getBias())) ||
      failed(verifyRank(*this, getTarget(), "target", 1)))
    return failure();
  int64_t rows = tensorType(getHidden()).getDimSize(0);
  if (failed(
          verifyShape(*this, getTarget(), "target", {rows}, "rows of hidden")))
    return failure();
  if (getReduction() == Reduction::none)
    return emitOpError("reduction none is not supported: the gradients are "
                       "computed in the forward, for a scalar loss");
  if (failed(verifyShape(*this, getLoss(), "loss", {}, "scalar loss")))
    return failure();
  if (!tensorType(getLoss()).getElementType().isF32())
    return emitOpError("loss must be f32, got ") << getLoss().getType();
  return verifyLinearRowsGrads(*this, getHidden(), getWeight(), getBias(),
                               getGradHidden(), getGradWeight(), getGradBias());
}

LogicalResult LinearLogSumExpOp::verify() {
  if (failed(verifyLinearRows(*this, getHidden(), getWeight(), getBias())))
    return failure();
  if (failed(verifyShape(*this, getLogsumexp(), "logsumexp",
                         {tensorType(getHidden()).getDimSize(0)},
                         "rows of hidden")))
    return failure();
  if (!tensorType(getLogsumexp()).getElementType().isF32())
    return emitOpError("logsumexp must be f32, got ")
           << getLogsumexp().getType();
  return success();
}

LogicalResult LinearLogSumExpGradOp::verify() {
  if (failed(verifyLinearRows(*this, getHidden(), getWeight(), getBias())))
    return failure();
  int64_t rows = tensorType(getHidden()).getDimSize(0);
  if (failed(verifyShape(*this, getLogsumexp(), "logsumexp", {rows},
                         "rows of hidden")) ||
      failed(verifyShape(*this, getGrad(), "grad", {rows}, "rows of hidden")))
    return failure();
  return verifyLinearRowsGrads(*this, getHidden(), getWeight(), getBias(),
                               getGradHidden(), getGradWeight(), getGradBias());
}

SmallVector<int64_t> swapHeadsAndRows(ArrayRef<int64_t> shape, bool bshd) {
  SmallVector<int64_t> swapped(shape);
  if (bshd)
    std::swap(swapped[1], swapped[2]);
  return swapped;
}

SmallVector<int64_t> getHeadsMajorShape(Value operand, bool bshd,
                                        bool packedQkv) {
  SmallVector<int64_t> shape =
      swapHeadsAndRows(tensorType(operand).getShape(), bshd);
  if (packedQkv)
    shape[1] /= 3;
  return shape;
}

TokenMajorValues getTokenMajorValues(Operation *attention) {
  TokenMajorValues stored;
  if (auto forward = dyn_cast<FlashAttentionOp>(attention)) {
    for (OpOperand &operand : forward->getOpOperands().take_front(3))
      stored.operands.push_back(&operand);
    stored.results.push_back(forward.getResult());
    return stored;
  }
  auto grad = cast<FlashAttentionGradOp>(attention);
  for (MutableOperandRange range :
       {grad.getQueryMutable(), grad.getKeyMutable(), grad.getValueMutable(),
        grad.getResultMutable(), grad.getGradMutable()})
    stored.operands.push_back(
        &attention->getOpOperand(OperandRange(range).getBeginOperandIndex()));
  llvm::append_range(stored.results, grad.getResults());
  return stored;
}

/// Checks the one tensor of packed_qkv: query, key and value are it, and it
/// has 3H heads token-major.
static LogicalResult verifyPackedQkv(Operation *op, Value query, Value key,
                                     Value value, bool bshd) {
  if (!bshd)
    return op->emitOpError("packed_qkv needs bshd (the heads of a token side "
                           "by side)");
  if (key != query || value != query)
    return op->emitOpError(
        "packed_qkv needs query, key and value to be one tensor");
  int64_t heads = tensorType(query).getShape()[2];
  if (heads % 3)
    return op->emitOpError("packed_qkv needs 3H heads, got ") << heads;
  return success();
}

/// Checks the operands flash_attention and its gradient share: query
/// [B, H, T, D], key [B, Hk, S, D], value [B, Hk, S, E] of one element type,
/// Hk = H or, grouped-query attention, a divisor of H (each stored [B, T or
/// S, H or Hk, *] with `bshd`; one [B, T, 3H, D] with `packed_qkv`), and
/// masks that broadcast to the scores [B, H, T, S]; sets `scores`.
static LogicalResult verifyAttentionOperands(Operation *op, Value query,
                                             Value key, Value value, Value keep,
                                             Value bias, bool bshd,
                                             bool packedQkv,
                                             SmallVectorImpl<int64_t> &scores) {
  if (failed(verifyRank(op, query, "query", 4)) ||
      failed(verifyRank(op, key, "key", 4)) ||
      failed(verifyRank(op, value, "value", 4)) ||
      failed(verifySameElementType(op, query, "query", key, "key")) ||
      failed(verifySameElementType(op, query, "query", value, "value")))
    return failure();
  if (packedQkv && failed(verifyPackedQkv(op, query, key, value, bshd)))
    return failure();
  SmallVector<int64_t> q = getHeadsMajorShape(query, bshd, packedQkv);
  SmallVector<int64_t> k = getHeadsMajorShape(key, bshd, packedQkv);
  SmallVector<int64_t> v = getHeadsMajorShape(value, bshd, packedQkv);
  // The thirds of packed_qkv's one tensor agree by construction.
  if (!packedQkv && (k[1] < 1 || q[1] % k[1]))
    return op->emitOpError("key has ")
           << k[1] << " heads, which do not divide the query's " << q[1]
           << " (grouped-query attention shares each key and value head "
              "among H / Hk query heads)";
  if (!packedQkv &&
      (failed(verifyShape(op, key, "key",
                          swapHeadsAndRows({q[0], k[1], k[2], q[3]}, bshd),
                          "query's batch and head size")) ||
       failed(verifyShape(op, value, "value",
                          swapHeadsAndRows({q[0], k[1], k[2], v[3]}, bshd),
                          "key's batch, heads and length"))))
    return failure();
  scores.assign({q[0], q[1], q[2], k[2]});
  for (auto [mask, name] : {std::pair(keep, "keep"), std::pair(bias, "bias")}) {
    if (!mask)
      continue;
    auto broadcast = broadcastShapes(scores, tensorType(mask).getShape());
    if (failed(broadcast) ||
        ArrayRef<int64_t>(*broadcast) != ArrayRef<int64_t>(scores))
      return op->emitOpError()
             << name << " shape " << shapeString(tensorType(mask).getShape())
             << " does not broadcast to the scores' " << shapeString(scores);
  }
  if (bias && failed(verifySameElementType(op, query, "query", bias, "bias")))
    return failure();
  return success();
}

/// Checks the dropout of flash_attention or its gradient (`scores`: the
/// probabilities' shape [B, H, T, S], which the mask is drawn for): as
/// slapo.dropout's, and only with dropout_p; the kernels place a split of
/// the batch or the heads alone in the whole tensor.
template <typename OpT>
static LogicalResult verifyAttentionDropout(OpT op, ArrayRef<int64_t> scores) {
  std::optional<APFloat> p = op.getDropoutP();
  if (!p) {
    if (op.getDropoutStream() || op.getForkRng() || op.getShardAxis() ||
        op.getShardChunks() || op.getStep())
      return op.emitOpError("dropout_stream, fork_rng, shard_axis, "
                            "shard_chunks and step need dropout_p");
    return success();
  }
  double value = p->convertToDouble();
  if (!(value > 0 && value < 1))
    return op.emitOpError("dropout_p must be in (0, 1), got ")
           << numberString(value);
  if (!op.getDropoutStream())
    return op.emitOpError("dropout_p needs dropout_stream (the stream of the "
                          "dropout's masks)");
  if (std::optional<uint64_t> axis = op.getShardAxis(); axis && *axis > 1)
    return op.emitOpError("shard_axis ")
           << *axis << " is not the batch or the heads (0 or 1)";
  auto type =
      RankedTensorType::get(scores, tensorType(op.getQuery()).getElementType());
  return verifyShardLayout(op, op.getShardAxis(), op.getShardChunks(), type);
}

Type FlashAttentionOp::getLogSumExpElementType(Type elementType) {
  if (elementType.isF64())
    return elementType;
  return FloatType::getF32(elementType.getContext());
}

/// Checks that the `logsumexp` of flash_attention or its gradient is in the
/// compute type of `query`'s elements.
static LogicalResult verifyLogSumExpType(Operation *op, Value query,
                                         Value logsumexp) {
  Type element = tensorType(query).getElementType();
  Type expected = FlashAttentionOp::getLogSumExpElementType(element);
  Type actual = tensorType(logsumexp).getElementType();
  if (actual != expected)
    return op->emitOpError("logsumexp element type ")
           << actual << " is not " << expected << ", the compute type of the "
           << element << " query (the log-sum-exp is kept in f32, f64 for "
           << "f64 operands)";
  return success();
}

LogicalResult FlashAttentionOp::verify() {
  SmallVector<int64_t> scores;
  if (failed(verifyAttentionOperands(*this, getQuery(), getKey(), getValue(),
                                     getKeep(), getBias(), getBshd(),
                                     getPackedQkv(), scores)) ||
      failed(verifyAttentionDropout(*this, scores)))
    return failure();
  int64_t width = tensorType(getValue()).getShape()[3];
  if (failed(verifyShape(
          *this, getResult(), "result",
          swapHeadsAndRows({scores[0], scores[1], scores[2], width}, getBshd()),
          "query's rows of value's width")) ||
      failed(verifyShape(*this, getLogsumexp(), "logsumexp",
                         {scores[0], scores[1], scores[2]}, "query's rows")) ||
      failed(verifySameElementType(*this, getQuery(), "query", getResult(),
                                   "result")))
    return failure();
  return verifyLogSumExpType(*this, getQuery(), getLogsumexp());
}

LogicalResult FlashAttentionGradOp::verify() {
  SmallVector<int64_t> scores;
  if (failed(verifyAttentionOperands(*this, getQuery(), getKey(), getValue(),
                                     getKeep(), getBias(), getBshd(),
                                     getPackedQkv(), scores)) ||
      failed(verifyAttentionDropout(*this, scores)))
    return failure();
  int64_t width = tensorType(getValue()).getShape()[3];
  SmallVector<int64_t> rows =
      swapHeadsAndRows({scores[0], scores[1], scores[2], width}, getBshd());
  if (failed(verifyShape(*this, getResult(), "result", rows,
                         "query's rows of value's width")) ||
      failed(verifyShape(*this, getGrad(), "grad", rows, "result's shape")) ||
      failed(verifyShape(*this, getLogsumexp(), "logsumexp",
                         {scores[0], scores[1], scores[2]}, "query's rows")) ||
      failed(verifyLogSumExpType(*this, getQuery(), getLogsumexp())))
    return failure();
  // A gradient per operand: three, or the packed one's.
  SmallVector<Value> operands = {getQuery()};
  if (!getPackedQkv())
    operands.append({getKey(), getValue()});
  if (getGrads().size() != operands.size())
    return emitOpError("has ")
           << getGrads().size() << " gradients, not " << operands.size()
           << (getPackedQkv() ? " (of the packed query, key and value)"
                              : " (of query, key and value)");
  for (auto [operand, result] : llvm::zip(operands, getGrads()))
    if (operand.getType() != result.getType())
      return emitOpError("gradient type ")
             << result.getType() << " differs from its operand's "
             << operand.getType();
  return success();
}

/// The output size along one spatial dim of a window `kernel` wide sliding
/// over `in` elements padded by `padding` on both sides: PyTorch's floor, or
/// with `ceil` its ceil_mode (whose last window must start inside the input
/// or its left padding).
static int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride,
                                int64_t padding, int64_t dilation, bool ceil) {
  int64_t span = in + 2 * padding - dilation * (kernel - 1) - 1;
  if (span < 0)
    return 0;
  int64_t out = (ceil ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil && (out - 1) * stride >= in + padding)
    --out;
  return out;
}

/// Checks the 2-d window of a convolution or pooling that reads `input`
/// [N, C, H, W] with `kernel` [kH, kW] and writes `output` [N, C', H', W']:
/// two positive strides and dilations, two non-negative paddings, and H', W'
/// as PyTorch computes them (floor, or with `ceilAllowed` also ceil_mode's).
static LogicalResult
verifyWindow2d(Operation *op, Value input, ArrayRef<int64_t> kernel,
               ArrayRef<int64_t> stride, ArrayRef<int64_t> padding,
               ArrayRef<int64_t> dilation, Value output, bool ceilAllowed) {
  if (failed(verifyRank(op, input, "input", 4)) ||
      failed(verifyRank(op, output, "result", 4)))
    return failure();
  for (auto [name, values] :
       {std::pair<StringRef, ArrayRef<int64_t>>{"kernel_size", kernel},
        {"stride", stride},
        {"padding", padding},
        {"dilation", dilation}}) {
    if (values.size() != 2)
      return op->emitOpError()
             << name << " must have 2 values (height, width), got "
             << values.size();
    bool ok = llvm::all_of(
        values, [&](int64_t v) { return name == "padding" ? v >= 0 : v >= 1; });
    if (!ok)
      return op->emitOpError()
             << name << " " << shapeString(values) << " must be "
             << (name == "padding" ? "non-negative" : "positive");
  }
  ArrayRef<int64_t> in = tensorType(input).getShape(),
                    out = tensorType(output).getShape();
  for (int d = 0; d < 2; ++d) {
    int64_t floor = windowOutputSize(in[2 + d], kernel[d], stride[d],
                                     padding[d], dilation[d], false);
    int64_t ceil = windowOutputSize(in[2 + d], kernel[d], stride[d], padding[d],
                                    dilation[d], true);
    if (out[2 + d] != floor && !(ceilAllowed && out[2 + d] == ceil))
      return op->emitOpError("result ")
             << shapeString(out) << " has " << out[2 + d] << " "
             << (d ? "columns" : "rows") << ", the window over the input "
             << shapeString(in) << " gives " << floor
             << (ceilAllowed && ceil != floor
                     ? " (" + std::to_string(ceil) + " with ceil_mode)"
                     : std::string());
  }
  return success();
}

/// Checks a convolution of `input` [N, C, H, W] by `weight`
/// [O, C/groups, kH, kW] giving `output` [N, O, H', W'], of one element
/// type, or of bf16 operands giving f32 (mixed precision) as the
/// contractions are.
static LogicalResult verifyConv2d(Operation *op, Value input, Value weight,
                                  Value output, ArrayRef<int64_t> stride,
                                  ArrayRef<int64_t> padding,
                                  ArrayRef<int64_t> dilation, int64_t groups) {
  if (failed(verifyRank(op, weight, "weight", 4)) ||
      failed(
          verifyContractionTypes(op, input, "input", weight, "weight", output)))
    return failure();
  ArrayRef<int64_t> w = tensorType(weight).getShape();
  if (failed(verifyWindow2d(op, input, w.drop_front(2), stride, padding,
                            dilation, output, /*ceilAllowed=*/false)))
    return failure();
  ArrayRef<int64_t> in = tensorType(input).getShape(),
                    out = tensorType(output).getShape();
  if (groups < 1 || in[1] % groups || w[0] % groups)
    return op->emitOpError("groups ")
           << groups << " must divide the input's " << in[1]
           << " channels and the weight's " << w[0] << " outputs";
  if (w[1] * groups != in[1])
    return op->emitOpError("weight ")
           << shapeString(w) << " expects " << w[1] * groups
           << " input channels in " << groups << " groups, input "
           << shapeString(in) << " has " << in[1];
  if (out[0] != in[0] || out[1] != w[0])
    return op->emitOpError("result ")
           << shapeString(out) << " must have the input's batch " << in[0]
           << " and the weight's " << w[0] << " channels";
  return success();
}

LogicalResult Conv2dOp::verify() {
  if (failed(verifyConv2d(*this, getInput(), getWeight(), getResult(),
                          getStride(), getPadding(), getDilation(),
                          getGroups())))
    return failure();
  if (Value bias = getBias())
    return verifyShape(*this, bias, "bias",
                       {tensorType(getWeight()).getDimSize(0)},
                       "weight's output channels");
  return success();
}

LogicalResult Conv2dGradInputOp::verify() {
  return verifyConv2d(*this, getResult(), getWeight(), getGrad(), getStride(),
                      getPadding(), getDilation(), getGroups());
}

LogicalResult Conv2dGradWeightOp::verify() {
  return verifyConv2d(*this, getInput(), getResult(), getGrad(), getStride(),
                      getPadding(), getDilation(), getGroups());
}

/// Checks a pooling of `input` [N, C, H, W] giving `output` [N, C, H', W'].
static LogicalResult verifyPool2d(Operation *op, Value input, Value output,
                                  ArrayRef<int64_t> kernel,
                                  ArrayRef<int64_t> stride,
                                  ArrayRef<int64_t> padding,
                                  ArrayRef<int64_t> dilation) {
  if (failed(verifySameElementType(op, input, "input", output, "result")) ||
      failed(verifyWindow2d(op, input, kernel, stride, padding, dilation,
                            output, /*ceilAllowed=*/true)))
    return failure();
  for (int d = 0; d < 2; ++d)
    if (2 * padding[d] > kernel[d])
      return op->emitOpError("padding ")
             << shapeString(padding) << " exceeds half the kernel "
             << shapeString(kernel);
  ArrayRef<int64_t> in = tensorType(input).getShape(),
                    out = tensorType(output).getShape();
  if (out.take_front(2) != in.take_front(2))
    return op->emitOpError("result ")
           << shapeString(out) << " must have the batch and channels of "
           << shapeString(in);
  return success();
}

LogicalResult MaxPool2dOp::verify() {
  return verifyPool2d(*this, getInput(), getResult(), getKernelSize(),
                      getStride(), getPadding(), getDilation());
}

LogicalResult MaxPool2dGradOp::verify() {
  if (failed(verifyPool2d(*this, getInput(), getGrad(), getKernelSize(),
                          getStride(), getPadding(), getDilation())))
    return failure();
  return verifyShape(*this, getResult(), "result",
                     tensorType(getInput()).getShape(), "input's shape");
}

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

/// A reduction's dims and result shape; its result's element type is the
/// input's, or for a sum (`widens`) a float type that holds the input's
/// exactly (bf16 summed into f32, as slapo-propagate-casts folds a widening
/// cast into the sum that reads it).
static LogicalResult verifyReduction(Operation *op, Value input, Value result,
                                     ArrayRef<int64_t> dims, bool keepdim,
                                     bool widens = false) {
  Type from = tensorType(input).getElementType();
  Type to = tensorType(result).getElementType();
  if (widens && from != to) {
    if (!holdsExactly(to, from))
      return op->emitOpError("result element type ")
             << to << " must be the input's, " << from
             << ", or a float type that holds it exactly";
  } else if (failed(
                 verifySameElementType(op, input, "input", result, "result"))) {
    return failure();
  }
  RankedTensorType inputType = tensorType(input);
  llvm::SmallSet<int64_t, 4> reduced;
  for (int64_t dim : dims) {
    if (failed(verifyDim(op, dim, inputType.getRank())))
      return failure();
    if (!reduced.insert(dim).second)
      return op->emitOpError("dim ")
             << dim << " appears twice in dims " << shapeString(dims);
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < inputType.getRank(); ++i) {
    if (!reduced.contains(i))
      shape.push_back(inputType.getDimSize(i));
    else if (keepdim)
      shape.push_back(1);
  }
  return verifyShape(op, result, "result", shape);
}

#define SLAPO_REDUCE_VERIFIER(OpClass)                                         \
  LogicalResult OpClass::verify() {                                            \
    return verifyReduction(*this, getInput(), getResult(), getDims(),          \
                           getKeepdim());                                      \
  }
LogicalResult SumOp::verify() {
  return verifyReduction(*this, getInput(), getResult(), getDims(),
                         getKeepdim(), /*widens=*/true);
}
SLAPO_REDUCE_VERIFIER(MeanOp)
SLAPO_REDUCE_VERIFIER(MaxOp)
#undef SLAPO_REDUCE_VERIFIER

LogicalResult CumsumOp::verify() {
  return verifyDim(*this, getDim(), getType().getRank());
}

//===----------------------------------------------------------------------===//
// Shape and data movement.
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  if (failed(verifySameElementType(*this, getInput(), "input", getResult(),
                                   "result")))
    return failure();
  RankedTensorType input = tensorType(getInput());
  if (input.getNumElements() != getType().getNumElements())
    return emitOpError("reshape from ")
           << shapeString(input.getShape()) << " to "
           << shapeString(getType().getShape())
           << " changes the element count from " << input.getNumElements()
           << " to " << getType().getNumElements();
  return success();
}

LogicalResult PermuteOp::verify() {
  if (failed(verifySameElementType(*this, getInput(), "input", getResult(),
                                   "result")))
    return failure();
  auto shape = permuteShape(*this, getPermutation(),
                            tensorType(getInput()).getShape(), "permutation");
  if (failed(shape))
    return failure();
  return verifyShape(*this, getResult(), "result", *shape);
}

LogicalResult SliceOp::verify() {
  RankedTensorType input = tensorType(getInput());
  // The I64Attr accessors return uint64_t: read the values signed.
  int64_t dim = getDim(), start = getStart(), end = getEnd(), step = getStep();
  if (failed(verifySameElementType(*this, getInput(), "input", getResult(),
                                   "result")) ||
      failed(verifyDim(*this, dim, input.getRank())))
    return failure();
  int64_t size = input.getDimSize(dim);
  if (step < 1)
    return emitOpError("step must be positive, got ") << step;
  if (start < 0 || start > end || end > size)
    return emitOpError("needs 0 <= start <= end <= ")
           << size << " (the size of dim " << dim << "), got start " << start
           << " and end " << end;
  SmallVector<int64_t> shape(input.getShape());
  // ceil((end - start) / step), without overflow for huge steps.
  shape[dim] = start == end ? 0 : (end - start - 1) / step + 1;
  return verifyShape(*this, getResult(), "result", shape);
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  RankedTensorType result = tensorType(getResult());
  int64_t dim = getDim();
  if (failed(verifyDim(*this, dim, result.getRank())))
    return failure();
  int64_t total = 0;
  for (auto [index, input] : llvm::enumerate(getInputs())) {
    std::string name = "input #" + std::to_string(index);
    if (failed(
            verifySameElementType(*this, input, name, getResult(), "result")) ||
        failed(verifyRank(*this, input, name, result.getRank())))
      return failure();
    ArrayRef<int64_t> shape = tensorType(input).getShape();
    for (int64_t i = 0; i < result.getRank(); ++i)
      if (i != dim && shape[i] != result.getDimSize(i))
        return emitOpError()
               << name << " shape " << shapeString(shape)
               << " differs from the result shape "
               << shapeString(result.getShape()) << " in dim " << i
               << ", which is not the concatenated dim " << dim;
    total += shape[dim];
  }
  SmallVector<int64_t> shape(result.getShape());
  shape[dim] = total;
  return verifyShape(*this, getResult(), "result", shape);
}

LogicalResult BroadcastOp::verify() {
  if (failed(verifySameElementType(*this, getInput(), "input", getResult(),
                                   "result")))
    return failure();
  ArrayRef<int64_t> input = tensorType(getInput()).getShape();
  auto shape = broadcastShapes(input, getType().getShape());
  if (failed(shape) || ArrayRef<int64_t>(*shape) != getType().getShape())
    return emitOpError("cannot broadcast ")
           << shapeString(input) << " to " << shapeString(getType().getShape());
  return success();
}

//===----------------------------------------------------------------------===//
// Optimizer state and updates.
//===----------------------------------------------------------------------===//

/// The trainable parameter `name`, or an error at `op`.
static FailureOr<ParamOp> lookupTrainableParam(Operation *op,
                                               SymbolTableCollection &symbols,
                                               FlatSymbolRefAttr name) {
  auto param = dyn_cast_or_null<ParamOp>(
      symbols.lookupNearestSymbolFrom(op, name.getAttr()));
  if (!param)
    return op->emitOpError("there is no 'slapo.param' named ") << name;
  if (param.getBuffer())
    return op->emitOpError() << name << " is a buffer, not a trained parameter";
  return param;
}

LogicalResult
OptimizerStateOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto param = lookupTrainableParam(*this, symbols, getOfAttr());
  if (failed(param))
    return failure();
  if (param->getTensorType().getShape() != getTensorType().getShape())
    return emitOpError("shape ")
           << shapeString(getTensorType().getShape()) << " differs from "
           << shapeString(param->getTensorType().getShape()) << " of "
           << getOfAttr();
  return success();
}

/// Checks that `param` is a trainable f32 parameter of `grad`'s type and that
/// every state symbol is an optimizer_state of it.
static LogicalResult verifyUpdateSymbols(Operation *op,
                                         SymbolTableCollection &symbols,
                                         FlatSymbolRefAttr paramName,
                                         Value grad,
                                         ArrayRef<FlatSymbolRefAttr> states) {
  auto param = lookupTrainableParam(op, symbols, paramName);
  if (failed(param))
    return failure();
  // The parameter's type, or a bf16 gradient of an f32 parameter: the
  // update widens it exactly as it reads it.
  auto paramType = param->getType().cast<RankedTensorType>();
  auto gradType = grad.getType().cast<RankedTensorType>();
  bool widened = paramType.getElementType().isF32() &&
                 gradType.getElementType().isBF16() &&
                 paramType.getShape() == gradType.getShape();
  if (paramType != gradType && !widened)
    return op->emitOpError("gradient type ")
           << grad.getType() << " differs from the type " << param->getType()
           << " of " << paramName << " (and is not its bf16 counterpart)";
  for (FlatSymbolRefAttr name : states) {
    auto state = dyn_cast_or_null<OptimizerStateOp>(
        symbols.lookupNearestSymbolFrom(op, name.getAttr()));
    if (!state)
      return op->emitOpError("there is no 'slapo.optimizer_state' named ")
             << name;
    if (state.getOfAttr() != paramName)
      return op->emitOpError() << name << " is the state of "
                               << state.getOfAttr() << ", not of " << paramName;
  }
  return success();
}

/// Checks that the hyperparameter `name` lies in [low, high).
static LogicalResult verifyHyperparameter(Operation *op, StringRef name,
                                          double value, double low,
                                          double high) {
  if (std::isfinite(value) && value >= low && value < high)
    return success();
  return op->emitOpError() << name << " must lie in [" << numberString(low)
                           << ", " << numberString(high) << "), got "
                           << numberString(value);
}

LogicalResult ParamGradOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyUpdateSymbols(*this, symbols, getParamAttr(), getGrad(), {});
}

LogicalResult UpdateBufferOp::verifySymbolUses(SymbolTableCollection &symbols) {
  auto param = dyn_cast_or_null<ParamOp>(
      symbols.lookupNearestSymbolFrom(*this, getBufferAttr().getAttr()));
  if (!param)
    return emitOpError("there is no 'slapo.param' named ") << getBufferAttr();
  if (!param.getBuffer())
    return emitOpError() << getBufferAttr()
                         << " is a trained parameter, not a buffer";
  if (param.getType() != getValue().getType())
    return emitOpError("value type ")
           << getValue().getType() << " differs from the type "
           << param.getType() << " of " << getBufferAttr();
  return success();
}

LogicalResult SgdUpdateOp::verify() {
  double inf = std::numeric_limits<double>::infinity();
  if (failed(verifyHyperparameter(*this, "momentum",
                                  getMomentum().convertToDouble(), 0, inf)) ||
      failed(verifyHyperparameter(*this, "weight_decay",
                                  getWeightDecay().convertToDouble(), 0, inf)))
    return failure();
  if ((getMomentum().convertToDouble() != 0) != bool(getMomentumBufferAttr()))
    return emitOpError("a momentum buffer is needed exactly when momentum is "
                       "not 0");
  return success();
}

LogicalResult SgdUpdateOp::verifySymbolUses(SymbolTableCollection &symbols) {
  SmallVector<FlatSymbolRefAttr> states;
  if (auto buffer = getMomentumBufferAttr())
    states.push_back(buffer);
  return verifyUpdateSymbols(*this, symbols, getParamAttr(), getGrad(), states);
}

//===----------------------------------------------------------------------===//
// Fusion groups.
//===----------------------------------------------------------------------===//

SmallVector<int64_t> FusedOp::getLoopShape() {
  // Every value is of the loop's shape or of its rows' (smaller), and each
  // row op reads one of the loop's shape.
  RankedTensorType loop = tensorType(getResult(0));
  auto consider = [&](Value value) {
    if (tensorType(value).getNumElements() > loop.getNumElements())
      loop = tensorType(value);
  };
  for (Operation &op : getBody().front().without_terminator()) {
    consider(op.getResult(0));
    if (isa<FusibleRowOpInterface>(op))
      consider(op.getOperand(0));
  }
  return llvm::to_vector(loop.getShape());
}

bool CastOp::isWidening() {
  return holdsExactly(tensorType(getResult()).getElementType(),
                      tensorType(getInput()).getElementType());
}

bool CastOp::isNarrowing() {
  return holdsExactly(tensorType(getInput()).getElementType(),
                      tensorType(getResult()).getElementType());
}

bool isLoopFusible(Operation *op) {
  if (auto rowOp = dyn_cast<FusibleRowOpInterface>(op))
    return rowOp.isAlongLastDim();
  return op->hasTrait<OpTrait::FusibleElementwise>();
}

bool isColumnSum(Operation *op) {
  auto sum = dyn_cast<SumOp>(op);
  if (!sum || sum.getKeepdim())
    return false;
  ArrayRef<int64_t> shape = tensorType(sum.getInput()).getShape();
  if (shape.size() < 2 || shape.back() <= 1 ||
      sum.getDims().size() != shape.size() - 1)
    return false;
  // The verifier has made the dims distinct and in range.
  return llvm::none_of(sum.getDims(), [&](int64_t dim) {
    return dim == int64_t(shape.size()) - 1;
  });
}

bool FusedOp::hasRowOps() {
  return llvm::any_of(
      getBody().front().without_terminator(), [](Operation &op) {
        return isa<FusibleRowOpInterface>(op) && !isColumnSum(&op);
      });
}

bool FusedOp::hasColumnSums() {
  return llvm::any_of(getBody().front().without_terminator(),
                      [](Operation &op) { return isColumnSum(&op); });
}

/// The shape of a row value of a group whose loop is `loop`: its last dim 1.
static SmallVector<int64_t> getRowShape(ArrayRef<int64_t> loop) {
  SmallVector<int64_t> row(loop);
  if (!row.empty())
    row.back() = 1;
  return row;
}

LogicalResult FusedOp::verify() {
  if (getResults().empty())
    return emitOpError("needs at least one result");
  SmallVector<int64_t> loop = getLoopShape();
  SmallVector<int64_t> row = getRowShape(loop);
  bool rows = hasRowOps();
  bool columns = hasColumnSums();
  if (rows && columns)
    return emitOpError("holds both row ops and column sums");
  SmallVector<int64_t> column(loop.end() - 1, loop.end());
  Block &body = getBody().front();
  if (body.getArgumentTypes() != getInputs().getTypes())
    return emitOpError("the region's arguments must have the operands' types");
  for (auto [index, input] : llvm::enumerate(getInputs())) {
    ArrayRef<int64_t> shape = tensorType(input).getShape();
    if (!getBroadcastIndexing(shape, loop))
      return emitOpError("operand #")
             << index << " shape " << shapeString(shape)
             << " does not broadcast to the loop's " << shapeString(loop)
             << " as one block of its dims";
  }
  for (Operation &op : body.without_terminator()) {
    ArrayRef<int64_t> shape = tensorType(op.getResult(0)).getShape();
    if (isColumnSum(&op)) {
      if (tensorType(op.getOperand(0)).getShape() != ArrayRef(loop))
        return emitOpError("holds a column sum of a value of shape ")
               << shapeString(tensorType(op.getOperand(0)).getShape())
               << ", not the loop's " << shapeString(loop);
      // The loop has its columns' sums once it has taken every row.
      if (llvm::any_of(op.getUsers(),
                       [](Operation *user) { return !isa<YieldOp>(user); }))
        return emitOpError("holds a column sum that an op of the group reads "
                           "(only the yield may)");
      continue;
    }
    if (auto rowOp = dyn_cast<FusibleRowOpInterface>(op)) {
      if (!rowOp.isAlongLastDim() ||
          tensorType(op.getOperand(0)).getShape() != ArrayRef(loop))
        return emitOpError("holds '")
               << op.getName() << "', which is not along the last dim of the "
               << "loop's " << shapeString(loop);
      continue;
    }
    if (!op.hasTrait<OpTrait::FusibleElementwise>())
      return emitOpError("holds '")
             << op.getName() << "', which is not a fusible elementwise op";
    if (shape != ArrayRef(loop) && !(rows && shape == ArrayRef(row)))
      return emitOpError("holds '")
             << op.getName() << "' of shape " << shapeString(shape)
             << ", not the loop's " << shapeString(loop)
             << (rows ? " or its rows' " + shapeString(row) : std::string());
    // The emitted loops index each operand as one block of the op's dims.
    for (Value operand : op.getOperands())
      if (!getBroadcastIndexing(tensorType(operand).getShape(), shape))
        return emitOpError("holds '")
               << op.getName() << "' whose operand of shape "
               << shapeString(tensorType(operand).getShape())
               << " does not broadcast to its " << shapeString(shape)
               << " as one block of its dims";
  }
  for (Value result : body.getTerminator()->getOperands()) {
    ArrayRef<int64_t> shape = tensorType(result).getShape();
    if (shape != ArrayRef(loop) && shape != ArrayRef(row) &&
        !(columns && shape == ArrayRef(column)))
      return emitOpError("yields a value of shape ")
             << shapeString(shape) << ", not the loop's " << shapeString(loop)
             << (columns ? ", its rows' nor its columns'" : " nor its rows'");
  }
  if (body.getTerminator()->getOperandTypes() != getResultTypes())
    return emitOpError("yields values whose types are not its results'");
  return success();
}

/// A reduction along the last dim alone, keeping it.
static bool isReductionAlongLastDim(Value input, ArrayRef<int64_t> dims,
                                    bool keepdim) {
  int64_t rank = tensorType(input).getRank();
  return rank > 0 && keepdim && dims.size() == 1 && dims[0] == rank - 1 &&
         tensorType(input).getShape().back() > 1;
}
bool SumOp::isAlongLastDim() {
  return isReductionAlongLastDim(getInput(), getDims(), getKeepdim());
}
bool MeanOp::isAlongLastDim() {
  return isReductionAlongLastDim(getInput(), getDims(), getKeepdim());
}
bool MaxOp::isAlongLastDim() {
  return isReductionAlongLastDim(getInput(), getDims(), getKeepdim());
}
bool SoftmaxOp::isAlongLastDim() {
  return getDim() == getType().getRank() - 1 && getType().getShape().back() > 1;
}
bool LogSoftmaxOp::isAlongLastDim() {
  return getDim() == getType().getRank() - 1 && getType().getShape().back() > 1;
}

//===----------------------------------------------------------------------===//
// Collectives.
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location>,
                                            ValueRange operands, DictionaryAttr,
                                            RegionRange,
                                            SmallVectorImpl<Type> &inferred) {
  llvm::append_range(inferred, operands.getTypes());
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  auto grad = getGrad().getType().cast<RankedTensorType>();
  auto indices = getIndices().getType().cast<RankedTensorType>();
  auto result = getResult().getType().cast<RankedTensorType>();
  SmallVector<int64_t> lookups(indices.getShape());
  lookups.push_back(result.getRank() == 2 ? result.getDimSize(1) : -1);
  if (result.getRank() != 2 || grad.getShape() != ArrayRef<int64_t>(lookups) ||
      grad.getElementType() != result.getElementType())
    return emitOpError("grad ")
           << grad << " must be the indices' shape then the rows' width of "
           << result << " ([rows, width])";
  return success();
}

LogicalResult AllReduceOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one tensor");
  return success();
}

/// The full value's type has `dim` a whole multiple of the block's, and
/// every other dim and the element type equal.
static LogicalResult verifyBlocks(Operation *op, Value block, Value full,
                                  int64_t dim) {
  auto blockType = block.getType().cast<RankedTensorType>();
  auto fullType = full.getType().cast<RankedTensorType>();
  if (blockType.getElementType() != fullType.getElementType() ||
      blockType.getRank() != fullType.getRank())
    return op->emitOpError("block ")
           << blockType << " and full value " << fullType
           << " differ in element type or rank";
  if (dim < 0 || dim >= blockType.getRank())
    return op->emitOpError("dim ") << dim << " is not a dim of " << blockType;
  for (int64_t d = 0; d < blockType.getRank(); ++d) {
    int64_t blockSize = blockType.getDimSize(d);
    int64_t fullSize = fullType.getDimSize(d);
    bool fits = d == dim ? blockSize > 0 && fullSize % blockSize == 0
                         : blockSize == fullSize;
    if (!fits)
      return op->emitOpError("block ") << blockType << " does not tile "
                                       << fullType << " along dim " << dim;
  }
  return success();
}

LogicalResult AllGatherOp::verify() {
  return verifyBlocks(*this, getInput(), getResult(), getDim());
}
LogicalResult ScatterOp::verify() {
  return verifyBlocks(*this, getResult(), getInput(), getDim());
}
LogicalResult ReduceScatterOp::verify() {
  return verifyBlocks(*this, getResult(), getInput(), getDim());
}

LogicalResult StageBoundaryOp::verify() {
  auto from = static_cast<int64_t>(getFrom());
  auto to = static_cast<int64_t>(getTo());
  if (from < 0 || to < 0 || std::abs(from - to) != 1)
    return emitOpError("passes a value between adjacent pipeline stages, "
                       "not from ")
           << from << " to " << to;
  return success();
}

LogicalResult AdamwUpdateOp::verify() {
  double inf = std::numeric_limits<double>::infinity();
  if (failed(verifyHyperparameter(*this, "beta1", getBeta1().convertToDouble(),
                                  0, 1)) ||
      failed(verifyHyperparameter(*this, "beta2", getBeta2().convertToDouble(),
                                  0, 1)) ||
      failed(verifyHyperparameter(*this, "weight_decay",
                                  getWeightDecay().convertToDouble(), 0, inf)))
    return failure();
  double eps = getEps().convertToDouble();
  if (!(std::isfinite(eps) && eps > 0))
    return emitOpError("eps must be positive, got ") << numberString(eps);
  return success();
}

LogicalResult AdamwUpdateOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyUpdateSymbols(*this, symbols, getParamAttr(), getGrad(),
                             {getExpAvgAttr(), getExpAvgSqAttr()});
}

} // namespace slapo

#define GET_OP_CLASSES
#include "slapo/Dialect/SlapoOps.cpp.inc"
