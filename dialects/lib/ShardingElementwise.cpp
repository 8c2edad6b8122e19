//===- ShardingElementwise.cpp - sharding rules of the elementwise ops ----===//
//
// An element of an elementwise op's result comes from the same element of
// each operand (aligned from the trailing dims, as broadcasting aligns
// them), so split operands keep their split, and a partial sum stays one
// only through what is linear in it: each op states which of its operands
// that is.
//
//===----------------------------------------------------------------------===//
#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/TensorBuilder.h"

using namespace mlir;

namespace slapo {

namespace {

/// What an elementwise op makes of its partial-sum operands when none is
/// split; `replicated` are its other operands.
using PartialSumRule = llvm::function_ref<LogicalResult(
    ArrayRef<Value> partials, ArrayRef<Value> replicated)>;

/// The rule all elementwise ops share, over `operands` (a dropout's input,
/// not its step). Split operands must be split alike, and a replicated
/// one must be 1 along the split dim: every rank holds the whole of it, but
/// only its block of the split ones. Partial sums go to
/// `partialSumRule`; without one, `op` needs them complete.
LogicalResult propagateElementwise(Operation *op, ShardingContext &context,
                                   ValueRange operands,
                                   PartialSumRule partialSumRule = nullptr) {
  int64_t rank = rankOf(op->getResult(0));
  std::optional<Sharding> split;
  SmallVector<Value> partials, replicated;
  for (Value operand : operands) {
    Sharding sharding = context.getSharding(operand);
    if (sharding.isPartial()) {
      partials.push_back(operand);
      continue;
    }
    if (sharding.isReplicated()) {
      replicated.push_back(operand);
      continue;
    }
    sharding.dim += rank - rankOf(operand);
    if (split && *split != sharding)
      return context.error(op) << "combines operands " << split->str()
                               << " and " << sharding.str();
    split = sharding;
  }
  if (split) {
    if (!partials.empty())
      return context.partialReaches(op, partials.front());
    // A replicated operand broadcast along the split dim meets every
    // block whole; one as long as the split dim meets each block with its
    // own block (T5's position bias, replicated, added to scores split by
    // heads), which each rank reads alone; in each chunk where the split is
    // in chunks (Bloom's ALiBi biases, [batch * heads, 1, keys], added to
    // scores whose heads are split within each batch's chunk).
    for (Value operand : replicated) {
      int64_t dim = split->dim - (rank - rankOf(operand));
      if (dim < 0 || shapeOf(operand)[dim] == 1)
        continue;
      for (OpOperand &use : op->getOpOperands())
        if (use.get() == operand)
          context.takeBlockOfReplicated(use, dim, split->chunks);
    }
    context.setResult(op, *split);
    return success();
  }
  if (partials.empty()) {
    context.setResult(op, Sharding::replicated());
    return success();
  }
  if (!partialSumRule)
    return context.partialReaches(op, partials.front());
  return partialSumRule(partials, replicated);
}

/// The rule over all of `op`'s operands.
LogicalResult propagateElementwise(Operation *op, ShardingContext &context,
                                   PartialSumRule partialSumRule = nullptr) {
  return propagateElementwise(op, context, op->getOperands(), partialSumRule);
}

/// The result is a partial sum where `op` is `linear` in its partial-sum
/// operands (the ranks' terms add up to the whole result); otherwise they
/// must be complete.
LogicalResult partialIfLinear(Operation *op, ShardingContext &context,
                              ArrayRef<Value> partials, bool linear) {
  if (!linear)
    return context.partialReaches(op, partials.front());
  context.setResult(op, Sharding::partial());
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Ops without operands: every rank computes them alike.
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::propagateSharding(ShardingContext &context) {
  context.setResult(*this, Sharding::replicated());
  return success();
}

LogicalResult ArangeOp::propagateSharding(ShardingContext &context) {
  context.setResult(*this, Sharding::replicated());
  return success();
}

//===----------------------------------------------------------------------===//
// Unary ops.
//===----------------------------------------------------------------------===//

LogicalResult NegOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(
      *this, context, [&](ArrayRef<Value> partials, auto) {
        return partialIfLinear(*this, context, partials, /*linear=*/true);
      });
}

LogicalResult CastOp::propagateSharding(ShardingContext &context) {
  // Widening or narrowing floats is linear up to rounding; a cast to an
  // integer type is not.
  return propagateElementwise(
      *this, context, [&](ArrayRef<Value> partials, auto) {
        return partialIfLinear(*this, context, partials,
                               elementTypeOf(getResult()).isa<FloatType>());
      });
}

LogicalResult RotaryEmbeddingOp::propagateSharding(ShardingContext &context) {
  // Elementwise, but the halves of the last dim meet: it is whole on every
  // rank. Linear in the input, whose partial sums then stay partial.
  int64_t rank = rankOf(getResult());
  for (Value operand : getOperands()) {
    Sharding sharding = context.getSharding(operand);
    if (sharding.isSplit() && sharding.dim + rank - rankOf(operand) == rank - 1)
      return context.error(*this)
             << "'rotary_embedding' rotates the halves of the last dim, "
                "which is split over the ranks";
  }
  return propagateElementwise(
      *this, context, [&](ArrayRef<Value> partials, auto) {
        return partialIfLinear(*this, context, partials,
                               partials.size() == 1 &&
                                   partials.front() == getInput());
      });
}

LogicalResult AbsOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(*this, context);
}
LogicalResult ExpOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(*this, context);
}
LogicalResult LogOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(*this, context);
}
LogicalResult SqrtOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(*this, context);
}
LogicalResult RsqrtOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(*this, context);
}
LogicalResult TanhOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(*this, context);
}
LogicalResult SigmoidOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(*this, context);
}
LogicalResult ReluOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(*this, context);
}
LogicalResult SiluOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(*this, context);
}
LogicalResult SinOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(*this, context);
}
LogicalResult CosOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(*this, context);
}
LogicalResult GeluOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(*this, context);
}

//===----------------------------------------------------------------------===//
// Binary ops.
//===----------------------------------------------------------------------===//

LogicalResult AddOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(
      *this, context,
      [&](ArrayRef<Value> partials, ArrayRef<Value> replicated) {
        // Sums of partial sums are partial sums of the sum.
        if (replicated.empty())
          return partialIfLinear(*this, context, partials, /*linear=*/true);
        // partial + bias (one of each, the op being binary): the bias is
        // added once, after the sum is complete, if it broadcasts along the
        // sum's trailing dims.
        Value partial = partials.front(), bias = replicated.front();
        if (shapeOf(partial).take_back(rankOf(bias)) != shapeOf(bias))
          return context.partialReaches(*this, partial);
        context.setPartialDeferringBiases(*this, bias);
        context.onRewrite([add = *this, partial]() mutable {
          add.getResult().replaceAllUsesWith(partial);
          add.erase();
        });
        return success();
      });
}

bool AddOp::takesPendingBiases() { return true; }

LogicalResult SubOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(
      *this, context,
      [&](ArrayRef<Value> partials, ArrayRef<Value> replicated) {
        return partialIfLinear(*this, context, partials, replicated.empty());
      });
}

LogicalResult MulOp::propagateSharding(ShardingContext &context) {
  // Scaling a partial sum scales each term; a product of two is no sum.
  return propagateElementwise(
      *this, context, [&](ArrayRef<Value> partials, auto) {
        return partialIfLinear(*this, context, partials, partials.size() == 1);
      });
}

LogicalResult DivOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(
      *this, context, [&](ArrayRef<Value> partials, auto) {
        return partialIfLinear(*this, context, partials,
                               partials.size() == 1 &&
                                   partials.front() == getLhs());
      });
}

LogicalResult PowOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(*this, context);
}
LogicalResult MaximumOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(*this, context);
}
LogicalResult MinimumOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(*this, context);
}
LogicalResult CompareOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(*this, context);
}
LogicalResult WhereOp::propagateSharding(ShardingContext &context) {
  return propagateElementwise(*this, context);
}

//===----------------------------------------------------------------------===//
// Dropout and triangular masks.
//===----------------------------------------------------------------------===//

/// Without fork_rng every rank draws its part of the whole value's mask,
/// which suits every sharding: a replicated value stays so, and the terms
/// of a partial sum are dropped alike (dropout is linear for a fixed mask).
/// Forked masks differ per rank: only a split value, whose elements differ
/// per rank anyway, takes them.
LogicalResult DropoutOp::propagateSharding(ShardingContext &context) {
  Sharding input = context.getSharding(getInput());
  if (getForkRng() && !input.isSplit())
    return context.error(*this)
           << "fork_rng() gives each rank its own dropout mask, but the "
              "input of 'dropout' in "
           << describeModuleOf(*this) << " is " << input.str()
           << (input.isPartial() ? ": the ranks' terms would be dropped unalike"
                                 : ": the ranks' copies would differ")
           << "; fork only modules whose dropouts meet split activations";
  if (failed(propagateElementwise(
          *this, context, getInput(), [&](ArrayRef<Value> partials, auto) {
            return partialIfLinear(*this, context, partials, /*linear=*/true);
          })))
    return failure();
  // A split operand's mask is its part of the whole value's.
  if (input.isSplit())
    context.onRewrite([dropout = *this, input]() mutable {
      dropout.setShardAxis(input.dim);
      if (input.chunks > 1)
        dropout.setShardChunks(input.chunks);
    });
  return success();
}

LogicalResult TriangularOp::propagateSharding(ShardingContext &context) {
  Sharding sharding = context.getSharding(getInput());
  if (sharding.isSplit() && sharding.dim >= rankOf(getInput()) - 2)
    return context.error(*this) << "tril/triu of a tensor split along one of "
                                   "its last two dims";
  context.setResult(*this, sharding);
  return success();
}

} // namespace slapo
