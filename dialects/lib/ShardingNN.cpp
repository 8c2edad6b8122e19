//===- ShardingNN.cpp - sharding rules of contractions and nn ops ---------===//
//
// Megatron's layouts: a contraction (a convolution too) whose output
// features are split leaves each rank its block of the result
// (column-parallel), one whose contracted dim is split leaves each rank one
// term of it (row-parallel, a partial sum); an embedding or a cross-entropy
// over a vocabulary split along its rows is vocabulary-parallel. Ops that
// compute along some dims (softmax, norms) need those dims whole on each rank.
//
//===----------------------------------------------------------------------===//
#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/TensorBuilder.h"

using namespace mlir;

namespace slapo {

namespace {

/// The rule of an op that computes along `dims` of `input` (softmax,
/// norms): those dims must be whole on every rank, other splits pass
/// through; `replicated` (a norm's affine parameters) must be whole too.
LogicalResult propagateAlongDims(Operation *op, ShardingContext &context,
                                 Value input, ArrayRef<int64_t> dims,
                                 ValueRange replicated) {
  Sharding sharding = context.getSharding(input);
  if (sharding.isPartial())
    return context.partialReaches(op, input);
  if (sharding.isSplit() && llvm::is_contained(dims, sharding.dim))
    return context.error(op)
           << "'" << op->getName().stripDialect() << "' along dim "
           << sharding.dim << ", which is split over the ranks";
  for (Value value : replicated)
    if (!context.getSharding(value).isReplicated())
      return context.error(op) << "the affine parameters of a norm must be "
                                  "replicated, not "
                               << context.getSharding(value).str();
  context.setResult(op, sharding);
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Contractions.
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::propagateSharding(ShardingContext &context) {
  Sharding input = context.getSharding(getInput()),
           weight = context.getSharding(getWeight());
  Value bias = getBias();
  int64_t last = rankOf(getResult()) - 1;
  if (input.isPartial())
    return context.partialReaches(*this, getInput());
  if (input.isReplicated() && weight.isReplicated()) {
    if (bias && !context.getSharding(bias).isReplicated())
      return context.error(*this) << "a split bias with a replicated weight";
    context.setResult(*this, Sharding::replicated());
    return success();
  }
  // Column-parallel: each rank computes its output features.
  if (input.isReplicated() && weight.isSplit() && weight.dim == 0) {
    if (bias && context.getSharding(bias) != Sharding::split(0, weight.chunks))
      return context.error(*this)
             << "the bias of a weight " << weight.str()
             << " must be split alike, not " << context.getSharding(bias).str();
    context.setResult(*this, Sharding::split(last, weight.chunks));
    return success();
  }
  // Row-parallel: each rank sums its input features; the bias comes after.
  if (input.isSplit() && input.dim == last && weight.isSplit() &&
      weight.dim == 1 && input.chunks == weight.chunks) {
    if (!bias) {
      context.setResult(*this, Sharding::partial());
      return success();
    }
    if (!context.getSharding(bias).isReplicated())
      return context.error(*this)
             << "the bias of a row-parallel weight must be replicated, not "
             << context.getSharding(bias).str();
    context.setPartialDeferringBiases(*this, bias);
    context.onRewrite([linear = *this]() mutable {
      OpBuilder builder(linear);
      ModulePathScope inModule(builder, linear);
      Value unbiased = builder.create<LinearOp>(
          linear.getLoc(), linear.getType(), linear.getInput(),
          linear.getWeight(), Value());
      linear.replaceAllUsesWith(unbiased);
      linear.erase();
    });
    return success();
  }
  return context.error(*this)
         << "multiplies an input " << input.str() << " by a weight "
         << weight.str() << " ([out, in])";
}

LogicalResult Conv2dOp::propagateSharding(ShardingContext &context) {
  // A convolution is a contraction over the input channels (and the
  // window): its output channels split are column-parallel, its input
  // channels split on both sides row-parallel. The batch may be split too.
  Sharding input = context.getSharding(getInput()),
           weight = context.getSharding(getWeight());
  Value bias = getBias();
  if (input.isPartial())
    return context.partialReaches(*this, getInput());
  if (weight.isReplicated() &&
      (input.isReplicated() || (input.isSplit() && input.dim == 0))) {
    if (bias && !context.getSharding(bias).isReplicated())
      return context.error(*this) << "a split bias with a replicated weight";
    context.setResult(*this, input);
    return success();
  }
  if (!weight.isReplicated() && getGroups() != 1)
    return context.error(*this)
           << "a convolution in " << getGroups() << " groups with a weight "
           << weight.str()
           << ": only a convolution of one group may split its weight";
  // Column-parallel: each rank computes its output channels.
  if (input.isReplicated() && weight.isSplit() && weight.dim == 0) {
    if (bias && context.getSharding(bias) != Sharding::split(0, weight.chunks))
      return context.error(*this)
             << "the bias of a weight " << weight.str()
             << " must be split alike, not " << context.getSharding(bias).str();
    context.setResult(*this, Sharding::split(1, weight.chunks));
    return success();
  }
  // Row-parallel: each rank sums over its input channels.
  if (input.isSplit() && input.dim == 1 && weight.isSplit() &&
      weight.dim == 1 && input.chunks == weight.chunks) {
    // A deferred bias is added along the trailing dims, not the channels.
    if (bias)
      return context.error(*this)
             << "a row-parallel convolution (weight " << weight.str()
             << ") with a bias: its sum is completed after the convolution, "
                "where a bias [O] cannot be added; give it none or keep its "
                "input channels whole";
    context.setResult(*this, Sharding::partial());
    return success();
  }
  return context.error(*this)
         << "convolves an input " << input.str() << " by a weight "
         << weight.str() << " ([out channels, in channels, kH, kW])";
}

LogicalResult MaxPool2dOp::propagateSharding(ShardingContext &context) {
  // Each image plane pools alone: batch and channel splits pass through.
  return propagateAlongDims(*this, context, getInput(), {2, 3}, {});
}

LogicalResult UpdateBufferOp::propagateSharding(ShardingContext &context) {
  // Each rank keeps its block of a split buffer (a BatchNorm's running
  // statistics of the channels it computes): the new value must be split
  // as the buffer is, or replicated with it.
  auto buffer =
      SymbolTable::lookupNearestSymbolFrom<ParamOp>(*this, getBufferAttr());
  Sharding expected = Sharding::replicated();
  if (std::optional<uint64_t> axis = buffer.getShardAxis())
    expected = Sharding::split(*axis, buffer.getShardChunks().value_or(1));
  Sharding value = context.getSharding(getValue());
  if (value.isPartial())
    return context.partialReaches(*this, getValue());
  if (value != expected)
    return context.error(*this)
           << "the new value of buffer '" << getBuffer() << "' is "
           << value.str() << " and the buffer is " << expected.str()
           << ": shard the buffer as the value it is given";
  return success();
}

LogicalResult MatmulOp::propagateSharding(ShardingContext &context) {
  Value lhs = getLhs(), rhs = getRhs();
  Sharding l = context.getSharding(lhs), r = context.getSharding(rhs);
  int64_t rank = rankOf(getResult());
  int64_t lhsRank = rankOf(lhs), rhsRank = rankOf(rhs);
  // A product with one partial factor is a partial sum of products.
  if (l.isPartial() || r.isPartial()) {
    if ((l.isPartial() && r.isReplicated()) ||
        (r.isPartial() && l.isReplicated())) {
      context.setResult(*this, Sharding::partial());
      return success();
    }
    return context.partialReaches(*this, l.isPartial() ? lhs : rhs);
  }
  if (l.isReplicated() && r.isReplicated()) {
    context.setResult(*this, Sharding::replicated());
    return success();
  }
  // The contraction dim split on both sides: each rank sums its terms.
  bool lhsContracted = l.isSplit() && l.dim == lhsRank - 1;
  bool rhsContracted = r.isSplit() && r.dim == rhsRank - 2;
  if (lhsContracted || rhsContracted) {
    if (!(lhsContracted && rhsContracted) || l.chunks != r.chunks)
      return context.error(*this)
             << "multiplies lhs [..., M, K] " << l.str()
             << " by rhs [..., K, N] " << r.str()
             << ": splitting the contraction needs K split on both (lhs's "
                "last dim, rhs's second to last), in the same chunks";
    context.setResult(*this, Sharding::partial());
    return success();
  }
  // Otherwise each split is of an outer dim of the result: M, N or a batch
  // dim; at most one may be split, or both operands along the same batch
  // dim.
  auto toResult = [&](Sharding s, int64_t operandRank, bool isLhs) {
    if (isLhs && s.dim == operandRank - 2)
      s.dim = rank - 2;
    else if (!isLhs && s.dim == operandRank - 1)
      s.dim = rank - 1;
    else
      s.dim += rank - operandRank;
    return s;
  };
  std::optional<Sharding> fromLhs, fromRhs;
  if (l.isSplit())
    fromLhs = toResult(l, lhsRank, true);
  if (r.isSplit())
    fromRhs = toResult(r, rhsRank, false);
  if (fromLhs && fromRhs && *fromLhs != *fromRhs)
    return context.error(*this)
           << "multiplies operands " << l.str() << " and " << r.str()
           << ", which leaves no split on one rank";
  Sharding result = fromLhs ? *fromLhs : *fromRhs;
  // A batch dim split on one side only: the other side broadcasts along it.
  if (result.dim < rank - 2 && !(fromLhs && fromRhs)) {
    Value other = fromLhs ? rhs : lhs;
    int64_t dim = result.dim - (rank - rankOf(other));
    if (dim >= 0 && shapeOf(other)[dim] != 1)
      return context.error(*this)
             << "multiplies an operand split along batch dim " << result.dim
             << " with a replicated one";
  }
  context.setResult(*this, result);
  return success();
}

//===----------------------------------------------------------------------===//
// Embeddings and losses.
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::propagateSharding(ShardingContext &context) {
  Sharding weight = context.getSharding(getWeight());
  // Vocabulary-parallel: each rank looks up the rows it holds and gives
  // zeros for the others; the sum over the ranks is whole.
  if (weight.isSplit() && weight.dim == 0) {
    if (weight.chunks != 1 || getPaddingIdx())
      return context.error(*this)
             << "a vocabulary-parallel embedding needs its rows split in one "
                "chunk and no padding_idx";
    context.markVocabParallel(*this);
    context.setResult(*this, Sharding::partial());
    return success();
  }
  // Features split: each rank looks up its columns of every row.
  context.setResult(
      *this, weight.isSplit()
                 ? Sharding::split(rankOf(getResult()) - 1, weight.chunks)
                 : Sharding::replicated());
  return success();
}

LogicalResult CrossEntropyOp::propagateSharding(ShardingContext &context) {
  Sharding logits = context.getSharding(getLogits());
  if (logits.isPartial())
    return context.partialReaches(*this, getLogits());
  // Vocabulary-parallel: the ranks combine their blocks' log-sum-exps and
  // the owner's target logit; no rank holds all logits.
  if (logits.isSplit()) {
    if (logits.dim != 1 || logits.chunks != 1)
      return context.error(*this)
             << "cross-entropy of logits " << logits.str()
             << ": only classes (dim 1) split in one chunk are "
                "vocabulary-parallel";
    context.markVocabParallel(*this);
  }
  context.setResult(*this, Sharding::replicated());
  return success();
}

LogicalResult
LinearCrossEntropyOp::propagateSharding(ShardingContext &context) {
  // Vocabulary-parallel: the weight (and bias) split by classes, the
  // hidden rows and targets whole; each rank's log-sum-exps and the
  // owner's target logit are combined as a split cross-entropy's are.
  bool vocabParallel = false;
  for (Value operand : getOperation()->getOperands()) {
    Sharding sharding = context.getSharding(operand);
    if (sharding.isPartial())
      return context.partialReaches(*this, operand);
    if (sharding.isReplicated())
      continue;
    bool byClasses = (operand == getWeight() || operand == getBias()) &&
                     sharding.isSplit() && sharding.dim == 0 &&
                     sharding.chunks == 1;
    if (!byClasses)
      return context.error(*this)
             << "'linear_cross_entropy' (replace(\"cross_entropy\")) needs "
                "its hidden rows and targets whole on every rank and its "
                "weight and bias whole or split by classes (dim 0), but an "
                "operand is "
             << sharding.str();
    vocabParallel = true;
  }
  if (vocabParallel) {
    for (Value operand : {getWeight(), getBias()})
      if (operand && context.getSharding(operand).isReplicated())
        return context.error(*this)
               << "'linear_cross_entropy' (replace(\"cross_entropy\")) of a "
                  "weight and bias of which only one is split by classes: "
                  "shard both along axis 0";
    context.markVocabParallel(*this);
  }
  context.setResult(*this, Sharding::replicated());
  return success();
}

//===----------------------------------------------------------------------===//
// Softmax and norms.
//===----------------------------------------------------------------------===//

LogicalResult RmsNormOp::propagateSharding(ShardingContext &context) {
  SmallVector<Value> affine;
  if (Value weight = getWeight())
    affine.push_back(weight);
  return propagateAlongDims(*this, context, getInput(),
                            {rankOf(getInput()) - 1}, affine);
}

LogicalResult SoftmaxOp::propagateSharding(ShardingContext &context) {
  return propagateAlongDims(*this, context, getInput(), {int64_t(getDim())},
                            {});
}

LogicalResult LogSoftmaxOp::propagateSharding(ShardingContext &context) {
  return propagateAlongDims(*this, context, getInput(), {int64_t(getDim())},
                            {});
}

LogicalResult LayerNormOp::propagateSharding(ShardingContext &context) {
  SmallVector<int64_t> dims;
  int64_t rank = rankOf(getInput());
  for (int64_t d = rank - getNormalizedRank(); d < rank; ++d)
    dims.push_back(d);
  SmallVector<Value> affine;
  for (Value value : {getWeight(), getBias()})
    if (value)
      affine.push_back(value);
  return propagateAlongDims(*this, context, getInput(), dims, affine);
}

LogicalResult FlashAttentionOp::propagateSharding(ShardingContext &context) {
  // Attention is independent per batch row and head: query, key and value
  // split alike along one of those (heads, under Megatron's tensor
  // parallelism) give each rank its part of the result. The masks are
  // replicated and broadcast along that dim.
  // Token-major attentions come later (slapo-fold-permutes makes them,
  // after the split is propagated): their results would be split along
  // other dims (the heads are dim 2 of the result, 1 of the log-sum-exp).
  if (getBshd())
    return context.error(*this)
           << "'flash_attention' with bshd operands has no sharding rule: "
              "split the heads-major attention that slapo-fold-permutes "
              "makes bshd after tensor parallelism is propagated";
  Sharding sharding = context.getSharding(getQuery());
  for (Value operand : {getQuery(), getKey(), getValue()}) {
    Sharding other = context.getSharding(operand);
    if (other.isPartial())
      return context.partialReaches(*this, operand);
    if (other != sharding)
      return context.error(*this)
             << "query, key and value of 'flash_attention' must be split "
                "alike, but they are "
             << sharding.str() << " and " << other.str();
  }
  if (sharding.isSplit() && sharding.dim > 1)
    return context.error(*this)
           << "'flash_attention' with query, key and value " << sharding.str()
           << ": only the batch and head dims (0, 1) may be split";
  for (Value mask : {getKeep(), getBias()}) {
    if (!mask)
      continue;
    int64_t dim = sharding.dim - (4 - rankOf(mask));
    bool broadcast = !sharding.isSplit() || dim < 0 || shapeOf(mask)[dim] == 1;
    if (!context.getSharding(mask).isReplicated() || !broadcast)
      return context.error(*this)
             << "the masks of 'flash_attention' must be replicated and "
                "broadcast along the split dim, but one is "
             << context.getSharding(mask).str() << " with shape "
             << shapeString(shapeOf(mask));
  }
  // The dropout, as slapo.dropout's of the probabilities (split as the
  // query is): forked masks only for split heads or rows, and a split
  // operand's mask is its part of the whole tensor's.
  if (getForkRng() && !sharding.isSplit())
    return context.error(*this)
           << "fork_rng() gives each rank its own dropout mask, but the "
              "query, key and value of 'flash_attention' in "
           << describeModuleOf(*this) << " are " << sharding.str()
           << ": the ranks' copies would differ; fork only modules whose "
              "dropouts meet split activations";
  if (getDropoutP() && sharding.isSplit())
    context.onRewrite([attention = *this, sharding]() mutable {
      attention.setShardAxis(sharding.dim);
      if (sharding.chunks > 1)
        attention.setShardChunks(sharding.chunks);
    });
  context.setResult(*this, sharding);
  return success();
}

} // namespace slapo
