//===- Replace.cpp - schedule primitive replace(kernel) -------------------===//
//
// Slapo's replace() swaps a module's computation for a library kernel. A
// kernel computes one thing; a module that computes something else (a
// different mask, a dropout the kernel cannot draw) must not be swapped
// silently, so each kernel has a pattern, matched op by op, and the first op
// that differs is the error.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Dialect/TensorBuilder.h"
#include "slapo/Transforms/Pipeline.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include <sstream>

namespace slapo {
#define GEN_PASS_DEF_REPLACE
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

/// Why a module's ops are not the kernel's: the message and the op that
/// differs (null when the module lacks an op the pattern needs).
struct Mismatch {
  std::string message;
  Operation *op = nullptr;
};

/// The ops of one attention, from the product query x key^T to the product
/// with the values.
struct AttentionMatch {
  MatmulOp scores;
  double scale = 1.0;
  Value keep, bias;
  double maskedScore = 0.0;
  MatmulOp output;
  /// The chain, in program order.
  SmallVector<Operation *> ops;
};

/// The single value of a splat constant, if `value` is one.
std::optional<double> getSplatConstant(Value value) {
  DenseElementsAttr attr;
  if (!matchPattern(value, m_Constant(&attr)) || !attr.isSplat() ||
      !attr.getElementType().isa<FloatType>())
    return std::nullopt;
  return attr.getSplatValue<APFloat>().convertToDouble();
}

/// `'slapo.div'` for messages.
std::string describeOp(Operation *op) {
  return "'" + op->getName().getStringRef().str() + "'";
}

/// Whether `value` is computed from a parameter (not a buffer): such a bias
/// would need a gradient, which flash_attention does not give its masks.
bool dependsOnParameter(Value value) {
  SmallVector<Value> work = {value};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || !seen.insert(op).second)
      continue;
    if (auto get = dyn_cast<GetParamOp>(op)) {
      auto param =
          SymbolTable::lookupNearestSymbolFrom<ParamOp>(op, get.getNameAttr());
      if (param && !param.getBuffer())
        return true;
      continue;
    }
    work.append(op->getOperands().begin(), op->getOperands().end());
  }
  return false;
}

/// Matches the attention around `softmax`, outwards: the scores before it,
/// the product with the values after it.
FailureOr<AttentionMatch> matchAttention(SoftmaxOp softmax,
                                         Mismatch &mismatch) {
  auto fail = [&](Operation *op, const Twine &message) {
    mismatch = {message.str(), op};
    return failure();
  };
  AttentionMatch match;
  int64_t rank = rankOf(softmax.getResult());
  if (rank != 4)
    return fail(softmax, "the softmax's operand has shape " +
                             shapeString(shapeOf(softmax.getResult())) +
                             ", not the scores [batch, heads, seq, seq]");
  if (static_cast<int64_t>(softmax.getDim()) != rank - 1)
    return fail(softmax, "the softmax is over dim " + Twine(softmax.getDim()) +
                             ", not the keys (the last dim)");

  // Each intermediate is read by the next op alone: a second reader would
  // need the [seq, seq] tensor the kernel never makes.
  auto checkSingleUse = [&](Value value, Operation *producer,
                            Operation *consumer) -> LogicalResult {
    for (Operation *user : value.getUsers())
      if (user != consumer)
        return fail(user, "the result of " + describeOp(producer) +
                              " (an intermediate of the attention) is also "
                              "read by " +
                              describeOp(user) +
                              ": flash_attention never stores it");
    return success();
  };

  // Backwards from the softmax: bias, mask, scale, product.
  Value scores = softmax.getInput();
  SmallVector<Operation *> before;
  Operation *consumer = softmax;
  auto step = [&](Operation *op, Value next) -> LogicalResult {
    if (failed(checkSingleUse(scores, op, consumer)))
      return failure();
    before.push_back(op);
    consumer = op;
    scores = next;
    return success();
  };
  Operation *op = scores.getDefiningOp();
  if (auto add = dyn_cast_or_null<AddOp>(op)) {
    // The scores are the operand of the scores' shape; the other one, the
    // mask, broadcasts to it.
    bool lhsIsScores = shapeOf(add.getLhs()) == shapeOf(add.getResult());
    Value bias = lhsIsScores ? add.getRhs() : add.getLhs();
    if (dependsOnParameter(bias))
      return fail(add, "the additive mask is computed from a parameter (a "
                       "learned bias needs a gradient, and flash_attention "
                       "gives its masks none)");
    match.bias = bias;
    if (failed(step(add, lhsIsScores ? add.getLhs() : add.getRhs())))
      return failure();
    op = scores.getDefiningOp();
  }
  if (auto where = dyn_cast_or_null<WhereOp>(op)) {
    std::optional<double> fill = getSplatConstant(where.getOnFalse());
    if (!fill || shapeOf(where.getOnTrue()) != shapeOf(where.getResult()))
      return fail(where, "the mask keeps the scores where its condition is "
                         "true and puts a constant elsewhere "
                         "(where(mask, scores, constant)); this 'slapo.where' "
                         "does not");
    match.keep = where.getCondition();
    match.maskedScore = *fill;
    if (failed(step(where, where.getOnTrue())))
      return failure();
    op = scores.getDefiningOp();
  }
  if (isa_and_nonnull<DivOp, MulOp>(op)) {
    Value lhs = op->getOperand(0), rhs = op->getOperand(1);
    bool divides = isa<DivOp>(op);
    std::optional<double> factor = getSplatConstant(rhs);
    Value product = lhs;
    if (!factor && !divides) {
      factor = getSplatConstant(lhs);
      product = rhs;
    }
    if (!factor || shapeOf(product) != shapeOf(op->getResult(0)))
      return fail(op, "the scores are scaled by " + describeOp(op) +
                          " of a tensor, not of a scalar constant");
    match.scale = divides ? 1.0 / *factor : *factor;
    if (failed(step(op, product)))
      return failure();
    op = scores.getDefiningOp();
  }
  auto product = dyn_cast_or_null<MatmulOp>(op);
  if (!product)
    return fail(op, op ? "the scores are computed by " + describeOp(op) +
                             ", not by the product query x key^T "
                             "('slapo.matmul')"
                       : std::string("the scores are an argument of "
                                     "@forward, not the product query x "
                                     "key^T"));
  if (failed(checkSingleUse(scores, product, consumer)))
    return failure();
  if (shapeOf(product.getLhs()).take_front(2) !=
          shapeOf(product.getResult()).take_front(2) ||
      shapeOf(product.getRhs()).take_front(2) !=
          shapeOf(product.getResult()).take_front(2))
    return fail(product, "the product query x key^T broadcasts its batch or "
                         "head dims; flash_attention takes query and key of "
                         "one shape [batch, heads, seq, head size]");
  match.scores = product;

  // Forwards from the softmax: the product with the values. A dropout in
  // between has p > 0 (the importer drops the others).
  Value probabilities = softmax.getResult();
  for (Operation *user : probabilities.getUsers())
    if (auto dropout = dyn_cast<DropoutOp>(user)) {
      // p as the model wrote it (0.1), the shortest decimal that reads back.
      std::ostringstream p;
      p << dropout.getP().convertToDouble();
      return fail(dropout, "the attention's dropout has p=" + p.str() +
                               ": flash_attention draws no dropout masks; "
                               "train the model without attention dropout "
                               "(p=0) or leave the module unreplaced");
    }
  if (probabilities.use_empty())
    return fail(softmax, "the probabilities are read by no op");
  // The product is the reader that should be there; any other is extra.
  Operation *next = *probabilities.getUsers().begin();
  for (Operation *user : probabilities.getUsers())
    if (auto product = dyn_cast<MatmulOp>(user);
        product && product.getLhs() == probabilities)
      next = user;
  if (failed(checkSingleUse(probabilities, softmax, next)))
    return failure();
  auto output = dyn_cast<MatmulOp>(next);
  if (!output || output.getLhs() != probabilities)
    return fail(next, "the probabilities are read by " + describeOp(next) +
                          ", not by the product probabilities x value "
                          "('slapo.matmul')");
  if (shapeOf(output.getRhs()).take_front(2) !=
      shapeOf(output.getResult()).take_front(2))
    return fail(output, "the product probabilities x value broadcasts its "
                        "batch or head dims");
  match.output = output;

  match.ops.push_back(product);
  match.ops.append(before.rbegin(), before.rend());
  match.ops.push_back(softmax);
  match.ops.push_back(output);
  return match;
}

/// `keyT` transposed back: the permute that made it, undone, or a permute.
Value transposeBack(OpBuilder &builder, Location loc, Value keyT) {
  SmallVector<int64_t> swap = {0, 1, 3, 2};
  Value source = keyT;
  SmallVector<int64_t> permutation = swap;
  if (auto permute = keyT.getDefiningOp<PermuteOp>()) {
    // permute(permute(x, p), s) = permute(x, [p[s[i]]]).
    ArrayRef<int64_t> first = permute.getPermutation();
    source = permute.getInput();
    for (auto [i, dim] : llvm::enumerate(swap))
      permutation[i] = first[dim];
  }
  if (llvm::equal(permutation, llvm::seq<int64_t>(0, 4)))
    return source;
  return TensorBuilder(builder, loc).permute(source, permutation);
}

void replaceAttention(AttentionMatch &match) {
  MatmulOp output = match.output;
  OpBuilder builder(output);
  ModulePathScope inModule(builder, output);
  SmallVector<Location> locations;
  for (Operation *op : match.ops)
    locations.push_back(op->getLoc());
  Location loc = FusedLoc::get(builder.getContext(), locations);
  Value query = match.scores.getLhs();
  Value keyT = match.scores.getRhs();
  Value key = transposeBack(builder, loc, keyT);
  ArrayRef<int64_t> rows = shapeOf(output.getResult()).drop_back();
  auto lse = RankedTensorType::get(rows, elementTypeOf(query));
  auto attention = builder.create<FlashAttentionOp>(
      loc, output.getType(), lse, query, key, output.getRhs(), match.keep,
      match.bias, builder.getF64FloatAttr(match.scale),
      builder.getF64FloatAttr(match.maskedScore));
  output.getResult().replaceAllUsesWith(attention.getResult());
  // What only the chain read goes with it: the transposed key, the scale
  // and the masked score.
  llvm::SetVector<Operation *> inputs;
  for (Operation *op : match.ops)
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && isa<PermuteOp, ConstantOp>(def))
        inputs.insert(def);
  for (Operation *op : llvm::reverse(match.ops))
    op->erase();
  for (Operation *op : inputs)
    if (op->use_empty())
      op->erase();
}

struct ReplacePass : impl::ReplaceBase<ReplacePass> {
  using ReplaceBase::ReplaceBase;

  void runOnOperation() override;
  LogicalResult replaceFlashAttention(func::FuncOp forward, StringRef module);
  /// The error for `module`, at the schedule line of the primitive (found
  /// from `at`, an op of the module) with a note at the op that differs.
  void reportMismatch(Operation *at, StringRef module,
                      const Mismatch &mismatch);
};

/// The registry: each kernel's name and the function that matches and
/// replaces its pattern in one module.
struct Kernel {
  StringRef name;
  LogicalResult (ReplacePass::*replace)(func::FuncOp, StringRef);
};
const Kernel kKernels[] = {
    {"flash_attention", &ReplacePass::replaceFlashAttention},
};

void ReplacePass::reportMismatch(Operation *at, StringRef module,
                                 const Mismatch &mismatch) {
  InFlightDiagnostic error = emitError(getPrimitiveLocation(at, *this))
                             << "replace(\"" << kernel << "\"): module '"
                             << module << "' does not compute what " << kernel
                             << " computes: " << mismatch.message;
  if (mismatch.op)
    error.attachNote(getModelLocation(mismatch.op)) << "the op that differs";
}

LogicalResult ReplacePass::replaceFlashAttention(func::FuncOp forward,
                                                 StringRef module) {
  SmallVector<Operation *> ops;
  SmallVector<SoftmaxOp> softmaxes;
  forward.walk([&](Operation *op) {
    if (!isInModule(op, module))
      return;
    ops.push_back(op);
    if (auto softmax = dyn_cast<SoftmaxOp>(op))
      softmaxes.push_back(softmax);
  });
  if (ops.empty()) {
    forward.emitError("replace(\"")
        << kernel << "\"): module '" << module << "' has no ops in @forward";
    return failure();
  }
  if (softmaxes.empty()) {
    reportMismatch(ops.front(), module,
                   {"it computes no softmax (the attention's probabilities "
                    "over the keys)",
                    nullptr});
    return failure();
  }
  SmallVector<AttentionMatch> matches;
  for (SoftmaxOp softmax : softmaxes) {
    Mismatch mismatch;
    FailureOr<AttentionMatch> match = matchAttention(softmax, mismatch);
    if (failed(match)) {
      reportMismatch(softmax, module, mismatch);
      return failure();
    }
    matches.push_back(std::move(*match));
  }
  for (AttentionMatch &match : matches)
    replaceAttention(match);
  return success();
}

void ReplacePass::runOnOperation() {
  func::FuncOp forward = lookupForward(getOperation(), "slapo-replace");
  if (!forward)
    return signalPassFailure();
  const Kernel *entry = llvm::find_if(
      kKernels, [&](const Kernel &known) { return known.name == kernel; });
  if (entry == std::end(kKernels)) {
    getOperation().emitError("slapo-replace: unknown kernel '")
        << kernel << "' (known: " << llvm::join(getReplaceKernels(), ", ")
        << ")";
    return signalPassFailure();
  }
  for (const std::string &module : modules)
    if (failed((this->*(entry->replace))(forward, module)))
      return signalPassFailure();
}

} // namespace

ArrayRef<StringRef> getReplaceKernels() {
  static const SmallVector<StringRef> names = [] {
    SmallVector<StringRef> list;
    for (const Kernel &known : kKernels)
      list.push_back(known.name);
    return list;
  }();
  return names;
}

} // namespace slapo
