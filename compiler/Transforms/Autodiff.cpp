//===- Autodiff.cpp - reverse-mode differentiation of @forward ------------===//
//
// @forward_backward is a copy of @forward followed by the reverse sweep: each
// op's VjpOpInterface rule, in reverse program order, turns the gradients of
// its results into gradients of its operands. Rules build ordinary slapo ops
// located at their forward op, so the backward of `transformer.h.3.attn`
// carries that module path too. Ops the loss does not need (the forward's
// other results, rules' gradients of constants) are removed at the end.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "ActiveValues.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Dialect/TensorBuilder.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <map>

namespace slapo {
#define GEN_PASS_DEF_AUTODIFF
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

/// "module 'a.b'" or "the root module", for diagnostics.
std::string describeModule(Operation *op) {
  StringRef path = getModulePath(op);
  return path.empty() ? "the root module" : "module '" + path.str() + "'";
}

bool isFloatTensor(Type type) {
  auto tensor = type.dyn_cast<RankedTensorType>();
  return tensor && tensor.getElementType().isa<FloatType>();
}

/// The reverse sweep over the body of @forward_backward (a copy of
/// @forward, still ending in its return).
class ReverseSweep {
public:
  explicit ReverseSweep(func::FuncOp func)
      : block(func.getBody().front()), builder(block.getTerminator()) {}

  /// Builds the gradient of `loss` with respect to every parameter it
  /// depends on. Fails after emitting an error at the offending op.
  LogicalResult run(Value loss, SymbolTable &symbols);

  /// The gradient of the parameter `name`, empty if the loss does not
  /// depend on it: one part per pipeline stage that reads it (in stage
  /// order), whose sum it is, or the whole gradient without stages.
  SmallVector<Value> getParamGradParts(StringAttr name) const {
    SmallVector<Value> grads;
    auto parts = paramGrads.find(name);
    if (parts != paramGrads.end())
      for (auto [stage, grad] : parts->second)
        grads.push_back(grad);
    return grads;
  }

private:
  LogicalResult differentiate(Operation *op, ArrayRef<Value> resultGrads);
  /// Adds `grad` to the gradient `sum` (null while there is none).
  void accumulate(Value &sum, Value grad, Location loc);

  Block &block;
  OpBuilder builder;
  DenseSet<Value> active;
  DenseMap<Value, Value> grads;
  /// Parameter -> its gradient's part summed on each stage that reads it
  /// (-1: no stages).
  DenseMap<StringAttr, std::map<int64_t, Value>> paramGrads;
};

/// Whether `value` is a constant of zeros.
bool isZeros(Value value) {
  DenseFPElementsAttr constant;
  return matchPattern(value, m_Constant(&constant)) && constant.isSplat() &&
         constant.getSplatValue<APFloat>().isZero();
}

/// A stretch [start, end) of a concat's dim and the value there.
struct Piece {
  int64_t start, end;
  Value value;
};

/// The pieces of `value` along `dim` that are not zeros, if it is a concat
/// along `dim` (null: any); a slice's gradient is one, padded with zeros
/// (TensorBuilder::padSlice).
std::optional<SmallVector<Piece>> getNonZeroPieces(Value value,
                                                   std::optional<int64_t> dim) {
  auto concat = value.getDefiningOp<ConcatOp>();
  if (!concat || (dim && concat.getDim() != *dim))
    return std::nullopt;
  SmallVector<Piece> pieces;
  int64_t offset = 0;
  for (Value input : concat.getInputs()) {
    int64_t size =
        input.getType().cast<RankedTensorType>().getDimSize(concat.getDim());
    if (!isZeros(input))
      pieces.push_back({offset, offset + size, input});
    offset += size;
  }
  return pieces;
}

/// sum + grad as one concat when both are concats along one dim whose
/// non-zero pieces do not overlap: the gradients of slices of one tensor
/// (q, k and v split from one projection) then fill one tensor, instead of
/// each being padded to the whole tensor with zeros and the whole tensors
/// added. Null otherwise.
Value addDisjointPieces(OpBuilder &builder, Location loc, Value sum,
                        Value grad) {
  auto sumPieces = getNonZeroPieces(sum, std::nullopt);
  if (!sumPieces)
    return nullptr;
  int64_t dim = sum.getDefiningOp<ConcatOp>().getDim();
  auto gradPieces = getNonZeroPieces(grad, dim);
  if (!gradPieces)
    return nullptr;
  SmallVector<Piece> pieces(*sumPieces);
  llvm::append_range(pieces, *gradPieces);
  llvm::sort(pieces,
             [](const Piece &a, const Piece &b) { return a.start < b.start; });
  auto type = sum.getType().cast<RankedTensorType>();
  TensorBuilder g(builder, loc);
  SmallVector<Value> inputs;
  int64_t offset = 0;
  for (const Piece &piece : pieces) {
    if (piece.start < offset)
      return nullptr; // they overlap: a sum
    if (piece.start > offset)
      inputs.push_back(g.zerosWithDim(type, dim, piece.start - offset));
    inputs.push_back(piece.value);
    offset = piece.end;
  }
  if (offset < type.getDimSize(dim))
    inputs.push_back(g.zerosWithDim(type, dim, type.getDimSize(dim) - offset));
  return inputs.size() == 1 ? inputs.front() : g.concat(inputs, dim);
}

void ReverseSweep::accumulate(Value &sum, Value grad, Location loc) {
  if (!sum) {
    sum = grad;
    return;
  }
  if (Value pieces = addDisjointPieces(builder, loc, sum, grad)) {
    sum = pieces;
    return;
  }
  sum = builder.create<AddOp>(loc, grad.getType(), sum, grad);
}

LogicalResult ReverseSweep::differentiate(Operation *op,
                                          ArrayRef<Value> resultGrads) {
  auto rule = dyn_cast<VjpOpInterface>(op);
  if (!rule)
    return op->emitError("'")
           << op->getName() << "' in " << describeModule(op)
           << " has no gradient rule (VjpOpInterface), but the loss depends "
              "on a parameter through it";
  // The backward of an op, and the sums of the gradients it gives, belong
  // to the op's module.
  ModulePathScope inModule(builder, op);
  SmallVector<Value> operandGrads;
  if (failed(rule.buildVjp(builder, resultGrads, operandGrads)))
    return failure();
  if (operandGrads.size() != op->getNumOperands())
    return op->emitError("gradient rule of '")
           << op->getName() << "' gave " << operandGrads.size()
           << " gradients for " << op->getNumOperands() << " operands";
  for (auto [index, grad] : llvm::enumerate(operandGrads)) {
    Value operand = op->getOperand(index);
    if (!grad || !active.count(operand))
      continue;
    if (grad.getType() != operand.getType())
      return op->emitError("gradient rule of '")
             << op->getName() << "' gave a " << grad.getType()
             << " gradient for operand #" << index << " of type "
             << operand.getType();
    accumulate(grads[operand], grad, op->getLoc());
  }
  return success();
}

LogicalResult ReverseSweep::run(Value loss, SymbolTable &symbols) {
  active = findActiveValues(block, symbols);
  if (!active.count(loss))
    return success();
  auto lossType = loss.getType().cast<RankedTensorType>();
  {
    Operation *lossOp = loss.getDefiningOp();
    ModulePathScope inLossModule(builder,
                                 lossOp ? getModulePath(lossOp) : StringRef());
    grads[loss] = builder.create<ConstantOp>(
        loss.getLoc(),
        DenseElementsAttr::get(
            lossType, builder.getFloatAttr(lossType.getElementType(), 1.0)));
  }

  SmallVector<Operation *> forwardOps;
  for (Operation &op : block.without_terminator())
    forwardOps.push_back(&op);
  for (Operation *op : llvm::reverse(forwardOps)) {
    SmallVector<Value> resultGrads;
    for (Value result : op->getResults())
      resultGrads.push_back(grads.lookup(result));
    if (llvm::all_of(resultGrads, [](Value grad) { return !grad; }))
      continue;
    // A parameter read is a leaf: tied parameters read through several
    // get_param ops of one symbol sum their gradients, each pipeline stage
    // its own part (the stages that hold a copy sum those later).
    if (auto getParam = dyn_cast<GetParamOp>(op)) {
      ModulePathScope inModule(builder, op);
      auto stage = op->getAttrOfType<IntegerAttr>(kStageAttrName);
      accumulate(paramGrads[getParam.getNameAttr().getAttr()]
                           [stage ? stage.getInt() : -1],
                 resultGrads[0], op->getLoc());
      continue;
    }
    if (failed(differentiate(op, resultGrads)))
      return failure();
  }
  return success();
}

/// Removes the ops whose results nothing uses, users before producers.
void eraseDeadOps(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
    if (isOpTriviallyDead(&op))
      op.erase();
}

struct AutodiffPass : impl::AutodiffBase<AutodiffPass> {
  void runOnOperation() override;
  LogicalResult buildForwardBackward(func::FuncOp forward);
};

LogicalResult AutodiffPass::buildForwardBackward(func::FuncOp forward) {
  ModuleOp module = getOperation();
  if (!forward.getBody().hasOneBlock())
    return forward.emitError("slapo-autodiff: @forward must have one block");
  FunctionType forwardType = forward.getFunctionType();
  if (forwardType.getNumResults() == 0)
    return forward.emitError("slapo-autodiff: @forward returns nothing; its "
                             "first result must be the loss, a 0-d float "
                             "tensor");
  Type lossType = forwardType.getResult(0);
  if (!isFloatTensor(lossType) ||
      lossType.cast<RankedTensorType>().getRank() != 0)
    return forward.emitError("slapo-autodiff: the first result of @forward "
                             "must be the loss, a 0-d float tensor, not ")
           << lossType;
  if (Operation *existing = module.lookupSymbol(kForwardBackwardName))
    return existing->emitError("slapo-autodiff: @")
           << kForwardBackwardName << " exists already";

  SymbolTable symbols(module);
  auto func = forward.clone();
  func.setSymName(kForwardBackwardName);
  symbols.insert(func, std::next(Block::iterator(forward)));

  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  Value loss = ret.getOperand(0);
  llvm::SmallPtrSet<Operation *, 32> forwardOps;
  for (Operation &op : func.getBody().front())
    forwardOps.insert(&op);
  ReverseSweep sweep(func);
  if (failed(sweep.run(loss, symbols))) {
    func.erase();
    return failure();
  }
  for (Operation &op : func.getBody().front().without_terminator())
    if (!forwardOps.contains(&op))
      op.setAttr(kPhaseAttrName, StringAttr::get(&getContext(), "backward"));

  // Results: the loss, then the parameters' gradients in module order (a
  // parameter read on several pipeline stages: its parts, each the
  // gradient of the stage's copy before slapo-pipeline-rank sums them).
  SmallVector<Value> results{loss};
  SmallVector<DictionaryAttr> resultAttrs{DictionaryAttr::get(&getContext())};
  OpBuilder builder(ret);
  for (auto param : module.getOps<ParamOp>()) {
    if (param.getBuffer())
      continue;
    for (Value grad : sweep.getParamGradParts(param.getSymNameAttr())) {
      results.push_back(grad);
      resultAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
          kGradOfAttrName, FlatSymbolRefAttr::get(param.getSymNameAttr()))));
    }
  }
  builder.create<func::ReturnOp>(ret.getLoc(), results);
  ret.erase();
  func.setType(builder.getFunctionType(forwardType.getInputs(),
                                       ValueRange(results).getTypes()));
  func.setAllResultAttrs(resultAttrs);
  eraseDeadOps(func.getBody().front());
  return success();
}

void AutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward) {
    module.emitError("slapo-autodiff: there is no func.func @forward");
    return signalPassFailure();
  }
  if (failed(buildForwardBackward(forward)))
    signalPassFailure();
}

} // namespace

std::unique_ptr<Pass> createAutodiffPass() {
  return std::make_unique<AutodiffPass>();
}

} // namespace slapo
