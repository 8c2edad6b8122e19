//===- VocabParallel.cpp - Megatron's vocabulary parallelism --------------===//
//
// Each rank holds a block of the vocabulary's rows (the token embedding's,
// tied with the LM head's): its lookups give zeros for the others' tokens,
// and the loss combines the ranks' blocks of the logits without gathering
// them.
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

/// Cross-entropy of logits [N, C/tp], this rank's classes: each row's
/// log-sum-exp from the ranks' own (N values per rank, gathered), minus the
/// target's logit, which only its owner adds to an all_reduce. As PyTorch's,
/// targets equal to ignore_index count neither in the sum nor in the mean.
void lowerVocabParallelCrossEntropy(CrossEntropyOp loss, int64_t tp) {
  OpBuilder builder(loss);
  ModulePathScope inModule(builder, loss);
  Location loc = loss.getLoc();
  TensorBuilder g(builder, loc);
  Value logits = loss.getLogits(), target = loss.getTarget();
  Type type = elementTypeOf(logits), indexType = elementTypeOf(target);
  int64_t rows = shapeOf(logits)[0], classes = shapeOf(logits)[1];
  auto logSumExp = [&](Value value) {
    Value largest = g.max(value, {1}, /*keepdim=*/true);
    Value sum = g.sum(g.unary<ExpOp>(g.sub(value, largest)), {1}, true);
    return g.add(g.unary<LogOp>(sum), largest);
  };
  Value ranksLogSumExp =
      builder.create<AllGatherOp>(loc, RankedTensorType::get({rows, tp}, type),
                                  logSumExp(logits), ProcessGroup::tp, 1);
  Value rowLogSumExp = g.reshape(logSumExp(ranksLogSumExp), {rows});
  Value inRange;
  Value local = localIndices(g, target, blockStart(g, classes, indexType),
                             classes, inRange);
  Value ownTargetLogit = g.sum(
      g.mul(logits,
            g.oneHot(g.where(inRange, local, g.integerScalar(-1, indexType)),
                     classes, type)),
      {1}, /*keepdim=*/false);
  Value targetLogit =
      builder
          .create<AllReduceOp>(loc, ownTargetLogit, ProcessGroup::tp,
                               /*mean=*/false)
          .getResult(0);
  Value counted =
      g.cast(g.compare(ComparePredicate::ne, target,
                       g.integerScalar(loss.getIgnoreIndex(), indexType)),
             type);
  Value perRow = g.mul(g.sub(rowLogSumExp, targetLogit), counted);
  Value result = perRow;
  if (loss.getReduction() != Reduction::none) {
    result = g.sum(perRow, {0}, /*keepdim=*/false);
    if (loss.getReduction() == Reduction::mean)
      result =
          buildCountedMean(g, result, g.sum(counted, {0}, /*keepdim=*/false));
  }
  loss.replaceAllUsesWith(result);
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
      .Default([](Operation *) {
        llvm_unreachable("only embeddings and cross-entropies have "
                         "vocabulary-parallel rules");
      });
}

} // namespace slapo
