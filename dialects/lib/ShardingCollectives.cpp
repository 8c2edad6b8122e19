//===- ShardingCollectives.cpp - sharding rules of collectives ------------===//
//
// The collectives that slapo-sync places change what a rank holds:
// all_reduce completes a partial sum, all_gather joins a split value,
// scatter and reduce_scatter split a replicated value or a partial sum. Each
// refuses an operand it would turn into a wrong value.
//
//===----------------------------------------------------------------------===//
#include "slapo/Dialect/TensorBuilder.h"

using namespace mlir;

namespace slapo {

LogicalResult AllReduceOp::propagateSharding(ShardingContext &context) {
  if (getGroup() != ProcessGroup::tp || getNumOperands() != 1)
    return context.error(*this)
           << "only single tensor-parallel all_reduces belong in @forward";
  Value input = getInputs().front();
  Sharding sharding = context.getSharding(input);
  if (!sharding.isPartial())
    return context.error(*this)
           << "all_reduce of a value that is " << sharding.str()
           << ", not a partial sum: it would multiply it by the "
              "tensor-parallel size";
  context.setCompletedSum(*this, input);
  return success();
}

bool AllReduceOp::takesPendingBiases() { return true; }

LogicalResult GradAllReduceOp::propagateSharding(ShardingContext &context) {
  Sharding sharding = context.getSharding(getInput());
  if (!sharding.isReplicated())
    return context.error(*this)
           << "sync(\"bwd_post\", \"all_reduce\") of a value that is "
           << sharding.str()
           << ": only a replicated value's gradient is all-reduced";
  context.setGradientSyncedResult(*this);
  return success();
}

LogicalResult AllGatherOp::propagateSharding(ShardingContext &context) {
  Sharding input = context.getSharding(getInput());
  if (!input.isSplit() || input.dim != int64_t(getDim()) || input.chunks != 1)
    return context.error(*this) << "all_gather along dim " << getDim()
                                << " of a value that is " << input.str();
  context.setResult(*this, Sharding::replicated());
  return success();
}

LogicalResult ScatterOp::propagateSharding(ShardingContext &context) {
  Sharding input = context.getSharding(getInput());
  if (!input.isReplicated())
    return context.error(*this) << "scatter of a value that is " << input.str()
                                << ", not replicated";
  context.setResult(*this, Sharding::split(getDim(), 1));
  return success();
}

LogicalResult ReduceScatterOp::propagateSharding(ShardingContext &context) {
  Sharding input = context.getSharding(getInput());
  if (!input.isPartial())
    return context.error(*this) << "reduce_scatter of a value that is "
                                << input.str() << ", not a partial sum";
  context.setResult(*this, Sharding::split(getDim(), 1));
  return success();
}

LogicalResult StageBoundaryOp::propagateSharding(ShardingContext &context) {
  // Each tp rank of one stage passes its part to the same tp rank of the
  // next: the value keeps its sharding, and its gradient is synced where
  // the input's is, as a view's.
  context.setViewResult(*this, context.getSharding(getInput()));
  return success();
}

} // namespace slapo
