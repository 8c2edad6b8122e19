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

#include "CheckedPatterns.h"
#include "DeadOps.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Dialect/TensorBuilder.h"
#include "slapo/Transforms/Pipeline.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"

namespace slapo {
#define GEN_PASS_DEF_REPLACE
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

/// The ops of one attention, from the product query x key^T to the product
/// with the values.
struct AttentionMatch {
  MatmulOp scores;
  double scale = 1.0;
  Value keep, bias;
  double maskedScore = 0.0;
  /// The dropout of the probabilities, which the kernel draws as it would.
  DropoutOp dropout;
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

/// Records the first difference from a pattern; the checks every pattern
/// makes.
struct PatternMatcher {
  Mismatch &mismatch;

  LogicalResult fail(Operation *op, const Twine &message) {
    mismatch = {message.str(), op};
    return failure();
  }

  /// Each intermediate of a kernel is read by the next op of the pattern
  /// alone: a second reader would need the tensor the kernel never makes.
  LogicalResult checkOnlyReader(Value value, Operation *producer,
                                Operation *consumer) {
    for (Operation *user : value.getUsers())
      if (user != consumer)
        return failExtraReader(producer, user);
    return success();
  }

  /// The same for a chain that is no line (a mean read by two subs): what
  /// each op of `chain` but `last` computes is read within `chain` alone.
  LogicalResult checkReadersWithin(ArrayRef<Operation *> chain,
                                   Operation *last) {
    llvm::SmallPtrSet<Operation *, 16> members(chain.begin(), chain.end());
    for (Operation *op : chain)
      if (op != last)
        for (Operation *user : op->getUsers())
          if (!members.contains(user))
            return failExtraReader(op, user);
    return success();
  }

private:
  LogicalResult failExtraReader(Operation *producer, Operation *user) {
    return fail(user, "the result of " + describeOp(producer) +
                          " (an intermediate of the kernel) is also read by " +
                          describeOp(user) + ": the kernel never stores it");
  }
};

/// Matches the attention around `softmax`, outwards: the scores before it,
/// the product with the values after it.
FailureOr<AttentionMatch> matchAttention(SoftmaxOp softmax,
                                         Mismatch &mismatch) {
  PatternMatcher matcher{mismatch};
  auto fail = [&](Operation *op, const Twine &message) {
    return matcher.fail(op, message);
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

  auto checkSingleUse = [&](Value value, Operation *producer,
                            Operation *consumer) {
    return matcher.checkOnlyReader(value, producer, consumer);
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
  if (isa_and_nonnull<DropoutOp>(op))
    return fail(op, "the scores are dropped before the softmax: "
                    "flash_attention drops the probabilities after it alone");
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

  // Forwards from the softmax: the attention's dropout, if any (p > 0: the
  // importer drops the others), which the kernel draws as slapo.dropout
  // would (the mask of the probabilities [B, H, T, S] it reads), then the
  // product with the values.
  Value probabilities = softmax.getResult();
  Operation *producer = softmax;
  for (Operation *user : probabilities.getUsers())
    if (auto dropout = dyn_cast<DropoutOp>(user)) {
      if (failed(checkSingleUse(probabilities, softmax, dropout)))
        return failure();
      match.dropout = dropout;
      producer = dropout;
      probabilities = dropout.getResult();
      break;
    }
  if (probabilities.use_empty())
    return fail(producer, "the probabilities are read by no op");
  // The product is the reader that should be there; any other is extra.
  Operation *next = *probabilities.getUsers().begin();
  for (Operation *user : probabilities.getUsers())
    if (auto product = dyn_cast<MatmulOp>(user);
        product && product.getLhs() == probabilities)
      next = user;
  if (failed(checkSingleUse(probabilities, producer, next)))
    return failure();
  if (isa<DropoutOp>(next))
    return fail(next, "the probabilities are dropped twice: flash_attention "
                      "draws one mask");
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
  if (match.dropout)
    match.ops.push_back(match.dropout);
  match.ops.push_back(output);
  return match;
}

/// Erases a replaced chain (in program order, each op read by the next
/// alone) and what only it read: a transposed key, constants.
void eraseChain(ArrayRef<Operation *> chain) {
  llvm::SetVector<Operation *> inputs;
  for (Operation *op : chain)
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && isa<PermuteOp, ConstantOp>(def))
        inputs.insert(def);
  for (Operation *op : llvm::reverse(chain))
    op->erase();
  for (Operation *op : inputs)
    if (op->use_empty())
      op->erase();
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

/// The key or value heads that `repeated` [B, H, S, D] repeats H / Hk times
/// each, as Hugging Face's repeat_kv does for grouped-query attention
/// (reshape to [B, Hk, 1, S, D], broadcast to [B, Hk, H / Hk, S, D],
/// reshape to [B, H, S, D]): the [B, Hk, S, D] tensor, which flash_attention
/// reads as it is instead of the copy; `repeated` itself otherwise.
Value getRepeatedHeads(Value repeated) {
  auto merge = repeated.getDefiningOp<ReshapeOp>();
  auto broadcast =
      merge ? merge.getInput().getDefiningOp<BroadcastOp>() : BroadcastOp();
  auto unsqueeze =
      broadcast ? broadcast.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
  if (!unsqueeze)
    return repeated;
  Value heads = unsqueeze.getInput();
  ArrayRef<int64_t> shape = shapeOf(heads), expanded = shapeOf(broadcast);
  if (shape.size() != 4)
    return repeated;
  int64_t batch = shape[0], keyHeads = shape[1], length = shape[2],
          size = shape[3], group = expanded[2];
  bool repeats =
      shapeOf(unsqueeze) ==
          ArrayRef<int64_t>({batch, keyHeads, 1, length, size}) &&
      expanded == ArrayRef<int64_t>({batch, keyHeads, group, length, size}) &&
      shapeOf(repeated) ==
          ArrayRef<int64_t>({batch, keyHeads * group, length, size});
  return repeats ? heads : repeated;
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
  Value repeatedKey = transposeBack(builder, loc, keyT),
        repeatedValue = output.getRhs();
  // Grouped-query attention's key and value heads, read where they are.
  Value key = getRepeatedHeads(repeatedKey),
        value = getRepeatedHeads(repeatedValue);
  if (shapeOf(key)[1] != shapeOf(value)[1]) {
    key = repeatedKey;
    value = repeatedValue;
  }
  ArrayRef<int64_t> rows = shapeOf(output.getResult()).drop_back();
  auto lse = RankedTensorType::get(
      rows, FlashAttentionOp::getLogSumExpElementType(elementTypeOf(query)));
  // The dropout's mask as it drew it: p, stream and fork_rng (a step and a
  // split are given later, as to every dropout).
  DropoutOp dropout = match.dropout;
  auto attention = builder.create<FlashAttentionOp>(
      loc, output.getType(), lse, query, key, value, match.keep, match.bias,
      builder.getF64FloatAttr(match.scale),
      builder.getF64FloatAttr(match.maskedScore), /*step=*/Value(),
      dropout ? dropout.getPAttr() : FloatAttr(),
      dropout ? dropout.getStreamAttr() : IntegerAttr(),
      dropout ? dropout.getForkRngAttr() : UnitAttr(), /*shard_axis=*/nullptr,
      /*shard_chunks=*/nullptr, /*bshd=*/nullptr, /*packed_qkv=*/nullptr);
  output.getResult().replaceAllUsesWith(attention.getResult());
  eraseChain(match.ops);
  // The repeat_kv copies that the attention no longer reads (once, where
  // key and value are one tensor).
  Operation *keyProducer = repeatedKey.getDefiningOp(),
            *valueProducer = repeatedValue.getDefiningOp();
  if (keyProducer)
    eraseDeadChain(keyProducer);
  if (valueProducer && valueProducer != keyProducer)
    eraseDeadChain(valueProducer);
}

/// The ops of one RMSNorm: square, mean over the last dim, + eps, rsqrt,
/// the product with the input and, optionally, with the weight.
struct RmsNormMatch {
  Value input, weight;
  double eps = 0;
  Operation *last = nullptr;
  /// The chain, in program order.
  SmallVector<Operation *> ops;
};

/// The constant that `add` adds to a value (x + eps or eps + x), if it is
/// one; sets `x`.
std::optional<double> getAddedConstant(AddOp add, Value &x) {
  if (!add)
    return std::nullopt;
  for (auto [constant, other] : {std::pair(add.getRhs(), add.getLhs()),
                                 std::pair(add.getLhs(), add.getRhs())})
    if (std::optional<double> value = getSplatConstant(constant)) {
      x = other;
      return value;
    }
  return std::nullopt;
}

/// Whether `op` squares `x` (x * x, or pow(x, 2)); sets `x`.
bool isSquare(Operation *op, Value &x) {
  if (auto mul = dyn_cast_or_null<MulOp>(op);
      mul && mul.getLhs() == mul.getRhs()) {
    x = mul.getLhs();
    return true;
  }
  if (auto pow = dyn_cast_or_null<PowOp>(op);
      pow && getSplatConstant(pow.getRhs()) == 2.0) {
    x = pow.getLhs();
    return true;
  }
  return false;
}

/// Matches the RMSNorm around `rsqrt` (LLaMA's: x * rsqrt(mean(x^2, -1,
/// keepdim) + eps), times the weight), outwards.
FailureOr<RmsNormMatch> matchRmsNorm(RsqrtOp rsqrt, Mismatch &mismatch) {
  PatternMatcher matcher{mismatch};
  RmsNormMatch match;
  auto add = rsqrt.getInput().getDefiningOp<AddOp>();
  Value meanSquare;
  std::optional<double> eps = getAddedConstant(add, meanSquare);
  if (!eps)
    return matcher.fail(rsqrt, "the rsqrt's operand is not mean(x^2) plus a "
                               "constant eps");
  auto mean = meanSquare.getDefiningOp<MeanOp>();
  int64_t rank = rankOf(rsqrt.getResult());
  if (!mean || !mean.getKeepdim() || mean.getDims().size() != 1 ||
      mean.getDims()[0] != rank - 1)
    return matcher.fail(meanSquare.getDefiningOp() ? meanSquare.getDefiningOp()
                                                   : add.getOperation(),
                        "eps is not added to a mean over the last dim "
                        "(keepdim)");
  Value x;
  Operation *square = mean.getInput().getDefiningOp();
  if (!isSquare(square, x))
    return matcher.fail(square ? square : mean.getOperation(),
                        "the mean is not of the input squared (x * x or "
                        "pow(x, 2))");
  if (failed(matcher.checkOnlyReader(square->getResult(0), square, mean)) ||
      failed(matcher.checkOnlyReader(mean.getResult(), mean, add)) ||
      failed(matcher.checkOnlyReader(add.getResult(), add, rsqrt)))
    return failure();
  if (!rsqrt.getResult().hasOneUse())
    return matcher.checkOnlyReader(rsqrt.getResult(), rsqrt,
                                   *rsqrt.getResult().getUsers().begin());
  auto product = dyn_cast<MulOp>(*rsqrt.getResult().getUsers().begin());
  if (!product || (product.getLhs() != x && product.getRhs() != x))
    return matcher.fail(*rsqrt.getResult().getUsers().begin(),
                        "the rsqrt does not scale the input it was computed "
                        "from (x * rsqrt(...))");
  match.input = x;
  match.eps = *eps;
  match.ops = {square, mean, add, rsqrt, product};
  match.last = product;
  // The weight: a product of the normalized rows by a vector of their size.
  Value normalized = product.getResult();
  if (normalized.hasOneUse())
    if (auto scaled = dyn_cast<MulOp>(*normalized.getUsers().begin())) {
      Value weight =
          scaled.getLhs() == normalized ? scaled.getRhs() : scaled.getLhs();
      if (shapeOf(weight) == shapeOf(x).take_back() &&
          shapeOf(scaled.getResult()) == shapeOf(x) &&
          elementTypeOf(weight) == elementTypeOf(x)) {
        match.weight = weight;
        match.ops.push_back(scaled);
        match.last = scaled;
      }
    }
  return match;
}

void replaceRmsNorm(RmsNormMatch &match) {
  OpBuilder builder(match.last);
  ModulePathScope inModule(builder, match.last);
  SmallVector<Location> locations;
  for (Operation *op : match.ops)
    locations.push_back(op->getLoc());
  auto norm = builder.create<RmsNormOp>(
      FusedLoc::get(builder.getContext(), locations),
      match.last->getResult(0).getType(), match.input, match.weight,
      builder.getF64FloatAttr(match.eps));
  match.last->getResult(0).replaceAllUsesWith(norm.getResult());
  eraseChain(match.ops);
}

//===----------------------------------------------------------------------===//
// cross_entropy: the LM head's linear and the loss of its logits
//===----------------------------------------------------------------------===//

/// The LM head's linear, the views between it and the cross-entropy of its
/// logits (slices of rows, reshapes and permutes that keep the classes
/// last), and that cross-entropy.
struct LinearCrossEntropyMatch {
  LinearOp linear;
  SmallVector<Operation *> views;
  CrossEntropyOp loss;
};

/// Whether `view` only rearranges the rows of its input, each row of
/// classes kept whole and last: the same view then applies to the hidden
/// rows the linear maps to those logits.
bool viewsRowsOnly(Operation *view) {
  Value input = view->getOperand(0), result = view->getResult(0);
  int64_t last = rankOf(input) - 1;
  if (auto slice = dyn_cast<SliceOp>(view))
    return static_cast<int64_t>(slice.getDim()) != last;
  if (auto permute = dyn_cast<PermuteOp>(view))
    return permute.getPermutation().back() == last;
  if (isa<ReshapeOp>(view))
    return rankOf(result) >= 1 &&
           shapeOf(result).back() == shapeOf(input).back();
  return false;
}

/// Matches, from the LM head's `linear`, the views of its logits up to the
/// cross-entropy that is their only reader.
FailureOr<LinearCrossEntropyMatch> matchLinearCrossEntropy(LinearOp linear,
                                                           Mismatch &mismatch) {
  PatternMatcher matcher{mismatch};
  LinearCrossEntropyMatch match;
  match.linear = linear;
  if (!elementTypeOf(linear.getResult()).isF32())
    return matcher.fail(linear, "the linear's logits are not f32, the "
                                "kernel's element type");
  Operation *producer = linear;
  Value logits = linear.getResult();
  while (true) {
    if (logits.use_empty())
      return matcher.fail(producer, "the logits are read by no op");
    // The reader that should be there (the loss or a view); any other is
    // extra.
    Operation *next = *logits.getUsers().begin();
    for (Operation *user : logits.getUsers())
      if (isa<CrossEntropyOp, SliceOp, ReshapeOp, PermuteOp>(user))
        next = user;
    if (failed(matcher.checkOnlyReader(logits, producer, next)))
      return failure();
    if (auto loss = dyn_cast<CrossEntropyOp>(next)) {
      if (loss.getReduction() == Reduction::none)
        return matcher.fail(loss, "the cross-entropy has reduction='none': "
                                  "the kernel computes the gradients in the "
                                  "forward, for a scalar loss");
      match.loss = loss;
      return match;
    }
    if (!isa<SliceOp, ReshapeOp, PermuteOp>(next) || !viewsRowsOnly(next))
      return matcher.fail(next, "the logits are read by " + describeOp(next) +
                                    ", not by a cross-entropy (through "
                                    "slices, reshapes and permutes of rows "
                                    "that keep the classes last)");
    match.views.push_back(next);
    producer = next;
    logits = next->getResult(0);
  }
}

void replaceLinearCrossEntropy(LinearCrossEntropyMatch &match) {
  CrossEntropyOp loss = match.loss;
  LinearOp linear = match.linear;
  OpBuilder builder(loss);
  SmallVector<Location> locations = {linear.getLoc()};
  // The logits' views, applied to the hidden rows: the same ops with the
  // features last instead of the classes.
  Value hidden = linear.getInput();
  int64_t features = shapeOf(hidden).back();
  for (Operation *view : match.views) {
    locations.push_back(view->getLoc());
    Operation *rows = builder.clone(*view);
    rows->setOperand(0, hidden);
    SmallVector<int64_t> shape(shapeOf(view->getResult(0)));
    shape.back() = features;
    rows->getResult(0).setType(
        RankedTensorType::get(shape, elementTypeOf(hidden)));
    hidden = rows->getResult(0);
  }
  locations.push_back(loss.getLoc());
  ModulePathScope inModule(builder, linear);
  Value bias = linear.getBias();
  auto fused = builder.create<LinearCrossEntropyOp>(
      FusedLoc::get(builder.getContext(), locations),
      loss.getResult().getType(), hidden.getType(),
      linear.getWeight().getType(), bias ? bias.getType() : Type(), hidden,
      linear.getWeight(), loss.getTarget(), bias, loss.getIgnoreIndexAttr(),
      loss.getReductionAttr());
  loss.getResult().replaceAllUsesWith(fused.getLoss());
  SmallVector<Operation *> chain = {linear};
  chain.append(match.views);
  chain.push_back(loss);
  eraseChain(chain);
}

//===----------------------------------------------------------------------===//
// fused_layernorm
//===----------------------------------------------------------------------===//

/// One layer norm: the module's slapo.layer_norm, or the ops of one written
/// out by hand (x - mean(x), the mean of its square, + eps, divided by the
/// sqrt or times the rsqrt, then, optionally, times the weight and plus the
/// bias), over the last `normalizedRank` dims.
struct LayerNormMatch {
  Value input, weight, bias;
  int64_t normalizedRank = 0;
  double eps = 0;
  /// The op whose result is the norm's.
  Operation *last = nullptr;
  /// What the norm replaces, in program order: the slapo.layer_norm alone
  /// when the module already is one.
  SmallVector<Operation *> ops;
};

/// How many trailing dims `mean` averages over (keepdim), or 0 when its dims
/// are not the last ones.
int64_t getTrailingMeanRank(MeanOp mean) {
  ArrayRef<int64_t> dims = mean.getDims();
  int64_t rank = rankOf(mean.getInput());
  if (!mean.getKeepdim() || dims.empty() ||
      !llvm::equal(dims, llvm::seq<int64_t>(rank - dims.size(), rank)))
    return 0;
  return dims.size();
}

/// Matches `centered` = x - mean(x), the mean over `dims` (keepdim); sets
/// `x` and adds the sub and the mean to `ops`.
LogicalResult matchCentered(Value centered, ArrayRef<int64_t> dims,
                            PatternMatcher &matcher, Operation *reader,
                            Value &x, llvm::SetVector<Operation *> &ops) {
  auto sub = centered.getDefiningOp<SubOp>();
  auto mean = sub ? sub.getRhs().getDefiningOp<MeanOp>() : MeanOp();
  if (!mean || mean.getInput() != sub.getLhs())
    return matcher.fail(sub ? sub.getOperation() : reader,
                        describeOp(reader) +
                            " does not read the input minus its mean "
                            "(x - mean(x, keepdim=True))");
  if (!mean.getKeepdim() || mean.getDims() != dims)
    return matcher.fail(mean,
                        "the mean subtracted is over dims " +
                            shapeString(mean.getDims()) +
                            (mean.getKeepdim() ? "" : " without keepdim") +
                            ", the variance over dims " + shapeString(dims) +
                            ": a layer norm centres each row by its "
                            "own mean");
  x = sub.getLhs();
  ops.insert(mean);
  ops.insert(sub);
  return success();
}

/// The op of `value`'s readers that scales it by a vector of the normalized
/// shape: `OpT` (a product: the weight, a sum: the bias) with it and an
/// operand of type `affine`, if that is its one reader; sets `vector`.
template <typename OpT>
OpT getAffineReader(Value value, RankedTensorType affine, Value &vector) {
  if (!value.hasOneUse())
    return OpT();
  auto op = dyn_cast<OpT>(*value.getUsers().begin());
  if (!op || op.getResult().getType() != value.getType())
    return OpT();
  Value other = op.getLhs() == value ? op.getRhs() : op.getLhs();
  if (other == value || other.getType() != affine)
    return OpT();
  vector = other;
  return op;
}

/// Matches the layer norm that `anchor` (a slapo.layer_norm, or the sqrt or
/// rsqrt of a hand-written one) computes, outwards.
FailureOr<LayerNormMatch> matchLayerNorm(Operation *anchor,
                                         Mismatch &mismatch) {
  PatternMatcher matcher{mismatch};
  LayerNormMatch match;
  if (auto norm = dyn_cast<LayerNormOp>(anchor)) {
    match.last = norm;
    match.ops = {norm};
    return match;
  }
  StringRef root = isa<SqrtOp>(anchor) ? "sqrt" : "rsqrt";
  Value variance;
  std::optional<double> eps =
      getAddedConstant(anchor->getOperand(0).getDefiningOp<AddOp>(), variance);
  if (!eps)
    return matcher.fail(anchor, "the " + root +
                                    "'s operand is not the variance plus a "
                                    "constant eps (eps inside the " +
                                    root + ")");
  Operation *add = anchor->getOperand(0).getDefiningOp();
  auto mean = variance.getDefiningOp<MeanOp>();
  if (!mean) {
    Operation *def = variance.getDefiningOp();
    if (isa_and_nonnull<MulOp, DivOp>(def))
      return matcher.fail(def, "the variance is rescaled by " +
                                   describeOp(def) +
                                   " (an unbiased variance divides by n - 1); "
                                   "a layer norm's divides by n");
    return matcher.fail(def ? def : add,
                        "eps is not added to a variance (a mean over the last "
                        "dims, keepdim)");
  }
  match.normalizedRank = getTrailingMeanRank(mean);
  if (!match.normalizedRank)
    return matcher.fail(mean,
                        "the variance is a mean over dims " +
                            shapeString(mean.getDims()) +
                            (mean.getKeepdim() ? "" : " without keepdim") +
                            ", not over the last dims (keepdim)");
  Value deviation;
  Operation *square = mean.getInput().getDefiningOp();
  if (!isSquare(square, deviation))
    return matcher.fail(square ? square : mean.getOperation(),
                        "the variance is not the mean of a square (x * x or "
                        "pow(x, 2))");
  llvm::SetVector<Operation *> ops;
  Value x;
  if (failed(matchCentered(deviation, mean.getDims(), matcher, square, x, ops)))
    return failure();
  for (Operation *op : {square, mean.getOperation(), add, anchor})
    ops.insert(op);

  // The rows normalized: (x - mean) / sqrt(...) or (x - mean) * rsqrt(...).
  Operation *normalize = nullptr;
  Value centered;
  for (Operation *user : anchor->getUsers()) {
    Value other;
    if (auto div = dyn_cast<DivOp>(user);
        div && isa<SqrtOp>(anchor) && div.getRhs() == anchor->getResult(0))
      other = div.getLhs();
    if (auto mul = dyn_cast<MulOp>(user); mul && isa<RsqrtOp>(anchor))
      other =
          mul.getLhs() == anchor->getResult(0) ? mul.getRhs() : mul.getLhs();
    if (other && shapeOf(other) == shapeOf(x)) {
      normalize = user;
      centered = other;
      break;
    }
  }
  if (!normalize) {
    Operation *user =
        anchor->use_empty() ? anchor : *anchor->getUsers().begin();
    return matcher.fail(user, isa<SqrtOp>(anchor)
                                  ? "the sqrt does not divide the input minus "
                                    "its mean ((x - mean(x)) / sqrt(...))"
                                  : "the rsqrt does not scale the input minus "
                                    "its mean ((x - mean(x)) * rsqrt(...))");
  }
  Value normalizedInput;
  if (failed(matchCentered(centered, mean.getDims(), matcher, normalize,
                           normalizedInput, ops)))
    return failure();
  if (normalizedInput != x)
    return matcher.fail(normalize, "it normalizes another value than the "
                                   "one whose variance it took");
  ops.insert(normalize);
  match.input = x;
  match.eps = *eps;
  match.last = normalize;

  // The affine part: the weight, then the bias, each of the normalized shape.
  auto affine = RankedTensorType::get(
      shapeOf(x).take_back(match.normalizedRank), elementTypeOf(x));
  if (auto scaled = getAffineReader<MulOp>(match.last->getResult(0), affine,
                                           match.weight)) {
    ops.insert(scaled);
    match.last = scaled;
  }
  if (auto shifted = getAffineReader<AddOp>(match.last->getResult(0), affine,
                                            match.bias)) {
    ops.insert(shifted);
    match.last = shifted;
  }
  match.ops.assign(ops.begin(), ops.end());
  llvm::sort(match.ops,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  if (failed(matcher.checkReadersWithin(match.ops, match.last)))
    return failure();
  return match;
}

/// The module computes the layer norm and nothing else: each of `moduleOps`
/// is in `match`, or reads a parameter or makes a constant (the importer
/// shares constants between modules).
LogicalResult checkOnlyLayerNorm(ArrayRef<Operation *> moduleOps,
                                 const LayerNormMatch &match,
                                 Mismatch &mismatch) {
  llvm::SmallPtrSet<Operation *, 16> members(match.ops.begin(),
                                             match.ops.end());
  for (Operation *op : moduleOps) {
    if (members.contains(op) || isa<GetParamOp, ConstantOp>(op))
      continue;
    return PatternMatcher{mismatch}.fail(
        op, describeOp(op) + " is not part of the layer norm (the module must "
                             "compute one layer norm and nothing else)");
  }
  return success();
}

void replaceLayerNorm(LayerNormMatch &match) {
  if (isa<LayerNormOp>(match.last))
    return;
  OpBuilder builder(match.last);
  ModulePathScope inModule(builder, match.last);
  SmallVector<Location> locations;
  for (Operation *op : match.ops)
    locations.push_back(op->getLoc());
  auto norm = builder.create<LayerNormOp>(
      FusedLoc::get(builder.getContext(), locations),
      match.last->getResult(0).getType(), match.input, match.weight, match.bias,
      builder.getI64IntegerAttr(match.normalizedRank),
      builder.getF64FloatAttr(match.eps));
  match.last->getResult(0).replaceAllUsesWith(norm.getResult());
  eraseChain(match.ops);
}

struct ReplacePass : impl::ReplaceBase<ReplacePass> {
  using ReplaceBase::ReplaceBase;

  void runOnOperation() override;
  LogicalResult replaceFlashAttention(func::FuncOp forward, StringRef module);
  LogicalResult replaceFusedRmsNorm(func::FuncOp forward, StringRef module);
  LogicalResult replaceCrossEntropy(func::FuncOp forward, StringRef module);
  LogicalResult replaceFusedLayerNorm(func::FuncOp forward, StringRef module);
  /// The ops of `module` in @forward, in program order; an error if none.
  FailureOr<SmallVector<Operation *>> getModuleOps(func::FuncOp forward,
                                                   StringRef module);
  /// Replaces every match of `match` around the ops of type OpT in
  /// `module` (an anchor per kernel instance), or reports the first
  /// mismatch; `none` says what the module lacks when it has no anchor.
  template <typename OpT, typename MatchT>
  LogicalResult replaceAll(func::FuncOp forward, StringRef module,
                           StringRef none,
                           FailureOr<MatchT> (*match)(OpT, Mismatch &),
                           void (*replace)(MatchT &));
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
constexpr Kernel kKernels[] = {
    {"flash_attention", &ReplacePass::replaceFlashAttention},
    {"fused_layernorm", &ReplacePass::replaceFusedLayerNorm},
    {"fused_rmsnorm", &ReplacePass::replaceFusedRmsNorm},
    {"cross_entropy", &ReplacePass::replaceCrossEntropy},
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

FailureOr<SmallVector<Operation *>>
ReplacePass::getModuleOps(func::FuncOp forward, StringRef module) {
  SmallVector<Operation *> ops;
  forward.walk([&](Operation *op) {
    if (isInModule(op, module))
      ops.push_back(op);
  });
  if (ops.empty())
    return forward.emitError("replace(\"")
           << kernel << "\"): module '" << module << "' has no ops in @forward";
  return ops;
}

template <typename OpT, typename MatchT>
LogicalResult
ReplacePass::replaceAll(func::FuncOp forward, StringRef module, StringRef none,
                        FailureOr<MatchT> (*match)(OpT, Mismatch &),
                        void (*replace)(MatchT &)) {
  FailureOr<SmallVector<Operation *>> ops = getModuleOps(forward, module);
  if (failed(ops))
    return failure();
  SmallVector<OpT> anchors;
  for (Operation *op : *ops)
    if (auto anchor = dyn_cast<OpT>(op))
      anchors.push_back(anchor);
  if (anchors.empty()) {
    reportMismatch(ops->front(), module, {none.str(), nullptr});
    return failure();
  }
  SmallVector<MatchT> matches;
  for (OpT anchor : anchors) {
    Mismatch mismatch;
    FailureOr<MatchT> matched = match(anchor, mismatch);
    if (failed(matched)) {
      reportMismatch(anchor, module, mismatch);
      return failure();
    }
    matches.push_back(std::move(*matched));
  }
  for (MatchT &matched : matches)
    replace(matched);
  return success();
}

LogicalResult ReplacePass::replaceFlashAttention(func::FuncOp forward,
                                                 StringRef module) {
  return replaceAll<SoftmaxOp, AttentionMatch>(
      forward, module,
      "it computes no softmax (the attention's probabilities over the keys)",
      matchAttention, replaceAttention);
}

LogicalResult ReplacePass::replaceFusedRmsNorm(func::FuncOp forward,
                                               StringRef module) {
  return replaceAll<RsqrtOp, RmsNormMatch>(
      forward, module,
      "it computes no rsqrt (RMSNorm's 1 / sqrt(mean(x^2) + eps))",
      matchRmsNorm, replaceRmsNorm);
}

LogicalResult ReplacePass::replaceCrossEntropy(func::FuncOp forward,
                                               StringRef module) {
  return replaceAll<LinearOp, LinearCrossEntropyMatch>(
      forward, module,
      "it computes no linear (the LM head: hidden x weight^T, whose logits "
      "the cross-entropy reads)",
      matchLinearCrossEntropy, replaceLinearCrossEntropy);
}

/// One layer norm per module, already one op or written out; nothing else.
LogicalResult ReplacePass::replaceFusedLayerNorm(func::FuncOp forward,
                                                 StringRef module) {
  FailureOr<SmallVector<Operation *>> ops = getModuleOps(forward, module);
  if (failed(ops))
    return failure();
  auto anchor = llvm::find_if(*ops, [](Operation *op) {
    return isa<LayerNormOp, SqrtOp, RsqrtOp>(op);
  });
  if (anchor == ops->end()) {
    reportMismatch(ops->front(), module,
                   {"it computes no layer norm (neither 'slapo.layer_norm' "
                    "nor the sqrt or rsqrt of a variance plus eps)",
                    nullptr});
    return failure();
  }
  Mismatch mismatch;
  FailureOr<LayerNormMatch> match = matchLayerNorm(*anchor, mismatch);
  if (failed(match) || failed(checkOnlyLayerNorm(*ops, *match, mismatch))) {
    reportMismatch(*anchor, module, mismatch);
    return failure();
  }
  replaceLayerNorm(*match);
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
  // Kept here, not in getRegistryNames: a static there would be one per
  // entry type and size, shared by two registries that happened to match.
  static const SmallVector<StringRef> names = getRegistryNames(kKernels);
  return names;
}

} // namespace slapo
