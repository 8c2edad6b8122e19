//===- VjpCollectives.cpp - gradient rules of collectives -----------------===//
//
// The backward of tensor parallelism, and of pipeline stages' boundaries,
// comes from these rules, not from special cases in the autodiff pass: each
// collective's gradient is the collective that undoes its movement of blocks.
//
//===----------------------------------------------------------------------===//
#include "slapo/Dialect/TensorBuilder.h"

using namespace mlir;

namespace slapo {

LogicalResult AllReduceOp::buildVjp(OpBuilder &, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  // The data-parallel mean follows the backward; it is never differentiated.
  if (getMean())
    return emitOpError("the mean all-reduce has no gradient rule");
  // Every rank's operand is one term of the sum: its gradient is the sum's.
  llvm::append_range(operandGrads, resultGrads);
  return success();
}

LogicalResult GradAllReduceOp::buildVjp(OpBuilder &builder,
                                        ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder
                             .create<AllReduceOp>(getLoc(),
                                                  singleResultGrad(resultGrads),
                                                  getGroup(), /*mean=*/false)
                             .getResult(0));
  return success();
}

LogicalResult AllGatherOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<ScatterOp>(
      getLoc(), getInput().getType(), singleResultGrad(resultGrads), getGroup(),
      getDim()));
  return success();
}

/// The gradient of this rank's block of a value, for the value: the blocks'
/// gradients of every rank, gathered.
static void gatherBlockGradients(Operation *op, OpBuilder &builder,
                                 ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(builder.create<AllGatherOp>(
      op->getLoc(), op->getOperand(0).getType(), singleResultGrad(resultGrads),
      op->getAttrOfType<ProcessGroupAttr>("group").getValue(),
      op->getAttrOfType<IntegerAttr>("dim").getInt()));
}

LogicalResult ScatterOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  gatherBlockGradients(*this, builder, resultGrads, operandGrads);
  return success();
}

LogicalResult ReduceScatterOp::buildVjp(OpBuilder &builder,
                                        ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  // Every rank's operand is a term of the sum whose block this rank keeps.
  gatherBlockGradients(*this, builder, resultGrads, operandGrads);
  return success();
}

LogicalResult StageBoundaryOp::buildVjp(OpBuilder &builder,
                                        ValueRange resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  // The gradient goes back the way the value came.
  operandGrads.push_back(builder.create<StageBoundaryOp>(
      getLoc(), singleResultGrad(resultGrads), getTo(), getFrom()));
  return success();
}

} // namespace slapo
