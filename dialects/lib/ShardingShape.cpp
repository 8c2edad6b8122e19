//===- ShardingShape.cpp - sharding rules of reductions and shape ops -----===//
//
// Views and data movement carry a split to the dim it becomes, as long as
// each rank's block stays one block of the result; reductions (and running
// sums) carry splits of the dims they keep, and a sum over the split dim
// leaves each rank one term of the result.
//
//===----------------------------------------------------------------------===//
#include "slapo/Dialect/TensorBuilder.h"

#include <numeric>

using namespace mlir;

namespace slapo {

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

namespace {

/// The rule of reductions of `input` over `dims`: a partial sum stays one
/// through a reduction `linear` in it, and the sum over a split dim is a
/// partial sum.
LogicalResult propagateReduction(Operation *op, ShardingContext &context,
                                 Value input, ArrayRef<int64_t> dims,
                                 bool keepdim, bool linear) {
  Sharding sharding = context.getSharding(input);
  if (sharding.isPartial() && !linear)
    return context.partialReaches(op, input);
  if (!sharding.isSplit()) {
    context.setResult(op, sharding);
    return success();
  }
  if (llvm::is_contained(dims, sharding.dim)) {
    if (!isa<SumOp>(op))
      return context.error(op)
             << "'" << op->getName().stripDialect() << "' over dim "
             << sharding.dim << ", which is split over the ranks";
    context.setResult(op, Sharding::partial());
    return success();
  }
  if (!keepdim)
    sharding.dim -=
        llvm::count_if(dims, [&](int64_t d) { return d < sharding.dim; });
  context.setResult(op, sharding);
  return success();
}

} // namespace

LogicalResult SumOp::propagateSharding(ShardingContext &context) {
  return propagateReduction(*this, context, getInput(), getDims(), getKeepdim(),
                            /*linear=*/true);
}

LogicalResult MeanOp::propagateSharding(ShardingContext &context) {
  return propagateReduction(*this, context, getInput(), getDims(), getKeepdim(),
                            /*linear=*/true);
}

LogicalResult MaxOp::propagateSharding(ShardingContext &context) {
  return propagateReduction(*this, context, getInput(), getDims(), getKeepdim(),
                            /*linear=*/false);
}

LogicalResult CumsumOp::propagateSharding(ShardingContext &context) {
  // Running sums reduce along their dim and keep every dim.
  return propagateReduction(*this, context, getInput(), {int64_t(getDim())},
                            /*keepdim=*/true, /*linear=*/true);
}

//===----------------------------------------------------------------------===//
// Views.
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::propagateSharding(ShardingContext &context) {
  Value input = getInput();
  // The biases of a partial sum broadcast along its trailing dims, which
  // must stay.
  for (Value bias : context.getPendingBiases(input))
    if (shapeOf(getResult()).take_back(rankOf(bias)) != shapeOf(bias))
      return context.error(*this) << "a reshape of a partial sum changes the "
                                     "dims its bias is added along";
  Sharding split = context.getSharding(input);
  if (!split.isSplit()) {
    context.setViewResult(*this, split);
    return success();
  }
  // In the elements' row-major order, a split of dim d in c chunks is
  // `blocks` = (elements of the dims before d) * c contiguous runs, one per
  // chunk, each cut into equal parts, one per rank. The result holds the
  // same parts when one of its dims e is preceded by a number of elements
  // that divides `blocks` and holds the remaining blocks as chunks, each a
  // whole number of rows per rank: e splits in blocks / (elements before e)
  // chunks. Merging batch and heads split by heads, [B, H, T, d] ->
  // [B*H, T, d], is a split of dim 0 in B chunks; splitting it back again a
  // split of dim 1.
  // With one rank every such dim holds whole parts, even one whose chunks
  // are one row each (T in [B, T, C] -> [B, T, H, d]); the first whose
  // chunks hold several rows is the one more ranks would split, so that a
  // schedule checks alike on one rank.
  ArrayRef<int64_t> in = shapeOf(input), out = shapeOf(getResult());
  int64_t blocks = split.chunks;
  for (int64_t d = 0; d < split.dim; ++d)
    blocks *= in[d];
  int64_t tp = context.getTensorParallelSize();
  std::optional<int64_t> found, firstWhole;
  for (int64_t before = 1, dim = 0;
       dim < int64_t(out.size()) && blocks % before == 0;
       before *= out[dim++]) {
    int64_t chunks = blocks / before;
    if (out[dim] % (chunks * tp) != 0)
      continue;
    if (!firstWhole)
      firstWhole = dim;
    if (out[dim] / chunks > 1) {
      found = dim;
      break;
    }
  }
  if (!found)
    found = firstWhole;
  if (!found)
    return context.error(*this)
           << "reshapes a tensor of shape " << shapeString(in) << " "
           << split.str() << " to " << shapeString(out)
           << ", which does not keep the split whole";
  int64_t before = 1;
  for (int64_t d = 0; d < *found; ++d)
    before *= out[d];
  split.chunks = blocks / before;
  split.dim = *found;
  context.setViewResult(*this, split);
  return success();
}

bool ReshapeOp::takesPendingBiases() { return true; }

LogicalResult PermuteOp::propagateSharding(ShardingContext &context) {
  Sharding sharding = context.getSharding(getInput());
  if (sharding.isSplit())
    sharding.dim =
        llvm::find(getPermutation(), sharding.dim) - getPermutation().begin();
  context.setViewResult(*this, sharding);
  return success();
}

LogicalResult BroadcastOp::propagateSharding(ShardingContext &context) {
  Sharding sharding = context.getSharding(getInput());
  if (sharding.isSplit()) {
    int64_t offset = rankOf(getResult()) - rankOf(getInput());
    if (shapeOf(getInput())[sharding.dim] !=
        shapeOf(getResult())[sharding.dim + offset])
      return context.error(*this) << "cannot broadcast along the split dim";
    sharding.dim += offset;
  }
  context.setViewResult(*this, sharding);
  return success();
}

//===----------------------------------------------------------------------===//
// Slices and concatenation.
//===----------------------------------------------------------------------===//

/// A slice of whole chunks of the split dim is each rank's part of those
/// chunks. Any other slice of it makes the parameters the value comes from
/// split per chunk, each chunk a multiple of the slice's bounds, so that
/// each rank holds its part of every slice taken (a fused q/k/v projection
/// split into q, k and v); the analysis starts over with those chunks.
LogicalResult SliceOp::propagateSharding(ShardingContext &context) {
  Sharding input = context.getSharding(getInput());
  if (!input.isSplit() || input.dim != int64_t(getDim())) {
    context.setResult(*this, input);
    return success();
  }
  int64_t tp = context.getTensorParallelSize();
  int64_t size = shapeOf(getInput())[input.dim];
  int64_t start = getStart(), end = getEnd();
  int64_t chunk = size / input.chunks;
  if (getStep() == 1 && start % chunk == 0 && end % chunk == 0) {
    int64_t local = chunk / tp;
    context.onRewrite([slice = *this, localStart = start / chunk * local,
                       localEnd = end / chunk * local]() mutable {
      slice.setStart(localStart);
      slice.setEnd(localEnd);
    });
    context.setResult(*this, Sharding::split(input.dim, (end - start) / chunk));
    return success();
  }
  int64_t chunks = size / std::gcd(size, std::gcd(start, end));
  if (getStep() != 1 || chunks % input.chunks != 0 ||
      size % (chunks * tp) != 0 ||
      failed(context.splitSourcesPerChunk(getInput(), chunks)))
    return context.error(*this)
           << "slices [" << start << ", " << end << ") of dim " << input.dim
           << " (" << size << ") of a tensor " << input.str()
           << ": the slice cannot be aligned with " << tp << " ranks";
  return success();
}

LogicalResult ConcatOp::propagateSharding(ShardingContext &context) {
  Sharding first = context.getSharding(getInputs().front());
  for (Value input : getInputs())
    if (context.getSharding(input) != first)
      return context.error(*this)
             << "joins tensors sharded differently (" << first.str() << " and "
             << context.getSharding(input).str() << ")";
  if (first.isSplit() && first.dim == int64_t(getDim()))
    return context.error(*this) << "joins tensors along their split dim";
  context.setResult(*this, first);
  return success();
}

} // namespace slapo
