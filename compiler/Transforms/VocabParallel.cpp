//===- VocabParallel.cpp - Megatron's vocabulary parallelism --------------===//
//
// Each rank holds a block of the vocabulary's rows (the token embedding's,
// tied with the LM head's): its lookups give zeros for the others' tokens,
// and the loss combines the ranks' blocks of the logits (or their
// log-sum-exps, under replace("cross_entropy")) without gathering them.
//
//===----------------------------------------------------------------------===//
#include "VocabParallel.h"
#include "LossWeighting.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/TensorBuilder.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace slapo {
namespace {

/// The first index of this rank's block of `size` indices, of `type`.
Value blockStart(TensorBuilder &g, int64_t size, Type type) {
  OpBuilder &builder = g.getBuilder();
  Value rank = builder.create<GroupRankOp>(
      g.getLoc(), RankedTensorType::get({}, builder.getI64Type()),
      ProcessGroup::tp);
  return g.mul(g.cast(rank, type), g.integerScalar(size, type));
}

/// `indices - start` where that lies in [0, size), else 0; `inRange` says
/// where.
Value localIndices(TensorBuilder &g, Value indices, Value start, int64_t size,
                   Value &inRange) {
  Type type = elementTypeOf(indices);
  Value local = g.sub(indices, start);
  Value atLeastZero =
      g.compare(ComparePredicate::ge, local, g.integerScalar(0, type));
  Value belowSize =
      g.compare(ComparePredicate::lt, local, g.integerScalar(size, type));
  inRange = g.where(atLeastZero, belowSize, atLeastZero);
  return g.where(inRange, local, g.integerScalar(0, type));
}

/// A lookup in this rank's rows: zero rows for the other ranks' indices.
void lowerVocabParallelEmbedding(EmbeddingOp embedding) {
  OpBuilder builder(embedding);
  ModulePathScope inModule(builder, embedding);
  TensorBuilder g(builder, embedding.getLoc());
  Value weight = embedding.getWeight(), indices = embedding.getIndices();
  int64_t rows = shapeOf(weight)[0];
  Value inRange;
  Value local = localIndices(
      g, indices, blockStart(g, rows, elementTypeOf(indices)), rows, inRange);
  Value looked = builder.create<EmbeddingOp>(
      embedding.getLoc(), embedding.getType(), weight, local, IntegerAttr());
  SmallVector<int64_t> maskShape(shapeOf(indices));
  maskShape.push_back(1);
  Value kept =
      g.where(g.reshape(inRange, maskShape), looked, g.scalarLike(0, looked));
  embedding.replaceAllUsesWith(kept);
  embedding.erase();
}

/// Each row's log-sum-exp of `value` [N, C], keeping the dim: [N, 1].
Value buildLogSumExp(TensorBuilder &g, Value value) {
  Value largest = g.max(value, {1}, /*keepdim=*/true);
  Value sum = g.sum(g.unary<ExpOp>(g.sub(value, largest)), {1}, true);
  return g.add(g.unary<LogOp>(sum), largest);
}

/// Each row's log-sum-exp [N] from this rank's over its classes,
/// `localLogSumExp` [N, 1]: the ranks' gathered, [N, tp], and combined.
Value gatherLogSumExp(TensorBuilder &g, Value localLogSumExp, int64_t tp) {
  int64_t rows = shapeOf(localLogSumExp)[0];
  Value ranksLogSumExp = g.getBuilder().create<AllGatherOp>(
      g.getLoc(),
      RankedTensorType::get({rows, tp}, elementTypeOf(localLogSumExp)),
      localLogSumExp, ProcessGroup::tp, 1);
  return g.reshape(buildLogSumExp(g, ranksLogSumExp), {rows});
}

/// The cross-entropy of rows whose log-sum-exp is `rowLogSumExp` [N]: minus
/// the target's logit, `ownTargetLogit` [N] on the rank that owns the
/// target and 0 on the others, added up by an all_reduce. As PyTorch's,
/// targets equal to ignore_index count neither in the sum nor in the mean.
Value buildVocabParallelLoss(TensorBuilder &g, Value rowLogSumExp,
                             Value ownTargetLogit, Value target,
                             int64_t ignoreIndex, Reduction reduction) {
  Type type = elementTypeOf(rowLogSumExp), indexType = elementTypeOf(target);
  Value targetLogit =
      g.getBuilder()
          .create<AllReduceOp>(g.getLoc(), ownTargetLogit, ProcessGroup::tp,
                               /*mean=*/false)
          .getResult(0);
  Value counted = g.cast(g.compare(ComparePredicate::ne, target,
                                   g.integerScalar(ignoreIndex, indexType)),
                         type);
  Value perRow = g.mul(g.sub(rowLogSumExp, targetLogit), counted);
  if (reduction == Reduction::none)
    return perRow;
  Value result = g.sum(perRow, {0}, /*keepdim=*/false);
  if (reduction == Reduction::mean)
    result =
        buildCountedMean(g, result, g.sum(counted, {0}, /*keepdim=*/false));
  return result;
}

/// Cross-entropy of logits [N, C/tp], this rank's classes.
void lowerVocabParallelCrossEntropy(CrossEntropyOp loss, int64_t tp) {
  OpBuilder builder(loss);
  ModulePathScope inModule(builder, loss);
  TensorBuilder g(builder, loss.getLoc());
  Value logits = loss.getLogits(), target = loss.getTarget();
  Type type = elementTypeOf(logits), indexType = elementTypeOf(target);
  int64_t classes = shapeOf(logits)[1];
  Value rowLogSumExp = gatherLogSumExp(g, buildLogSumExp(g, logits), tp);
  Value inRange;
  Value local = localIndices(g, target, blockStart(g, classes, indexType),
                             classes, inRange);
  Value ownTargetLogit = g.sum(
      g.mul(logits,
            g.oneHot(g.where(inRange, local, g.integerScalar(-1, indexType)),
                     classes, type)),
      {1}, /*keepdim=*/false);
  loss.replaceAllUsesWith(
      buildVocabParallelLoss(g, rowLogSumExp, ownTargetLogit, target,
                             loss.getIgnoreIndex(), loss.getReduction()));
  loss.erase();
}

/// replace("cross_entropy")'s LM head and loss with the weight (and bias)
/// [C/tp, H], this rank's classes: each row's log-sum-exp over them by
/// slapo.linear_log_sum_exp, which never holds the [N, C/tp] logits (its
/// gradient gives this rank's block of the weight's gradient and its term
/// of the hidden rows'), and the target's logit as the dot product of its
/// hidden row with the target's weight row (plus its bias), looked up on
/// the rank that owns it. The ranks' values meet in the IR's collectives,
/// as a split cross-entropy's do.
void lowerVocabParallelLinearCrossEntropy(LinearCrossEntropyOp loss,
                                          int64_t tp) {
  OpBuilder builder(loss);
  ModulePathScope inModule(builder, loss);
  Location loc = loss.getLoc();
  TensorBuilder g(builder, loc);
  Value hidden = loss.getHidden(), weight = loss.getWeight(),
        bias = loss.getBias(), target = loss.getTarget();
  Type type = elementTypeOf(hidden), indexType = elementTypeOf(target);
  int64_t rows = shapeOf(hidden)[0], features = shapeOf(hidden)[1],
          classes = shapeOf(weight)[0];
  Value logSumExp = builder.create<LinearLogSumExpOp>(
      loc, RankedTensorType::get({rows}, type), hidden, weight, bias);
  Value rowLogSumExp = gatherLogSumExp(g, g.reshape(logSumExp, {rows, 1}), tp);
  Value inRange;
  Value local = localIndices(g, target, blockStart(g, classes, indexType),
                             classes, inRange);
  Value targetRows = builder.create<EmbeddingOp>(
      loc, RankedTensorType::get({rows, features}, type), weight, local,
      IntegerAttr());
  Value targetLogit = g.sum(g.mul(hidden, targetRows), {1}, /*keepdim=*/false);
  if (bias) {
    Value targetBias = builder.create<EmbeddingOp>(
        loc, RankedTensorType::get({rows, 1}, type),
        g.reshape(bias, {classes, 1}), local, IntegerAttr());
    targetLogit = g.add(targetLogit, g.reshape(targetBias, {rows}));
  }
  Value ownTargetLogit =
      g.where(inRange, targetLogit, g.scalarLike(0, targetLogit));
  loss.getLoss().replaceAllUsesWith(
      buildVocabParallelLoss(g, rowLogSumExp, ownTargetLogit, target,
                             loss.getIgnoreIndex(), loss.getReduction()));
  loss.erase();
}

} // namespace

void lowerVocabParallel(Operation *op, int64_t tp) {
  llvm::TypeSwitch<Operation *>(op)
      .Case(
          [](EmbeddingOp embedding) { lowerVocabParallelEmbedding(embedding); })
      .Case([&](CrossEntropyOp loss) {
        lowerVocabParallelCrossEntropy(loss, tp);
      })
      .Case([&](LinearCrossEntropyOp loss) {
        lowerVocabParallelLinearCrossEntropy(loss, tp);
      })
      .Default([](Operation *) {
        llvm_unreachable("only embeddings and (linear) cross-entropies have "
                         "vocabulary-parallel rules");
      });
}

} // namespace slapo
