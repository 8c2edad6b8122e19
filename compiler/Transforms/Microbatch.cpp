//===- Microbatch.cpp - gradients accumulated over microbatches -----------===//
//
// The forward and backward of one microbatch, as slapo-autodiff built them
// for the microbatch's shapes, are copied once per microbatch onto its rows
// of the rank's batch. Copies follow each other, forward then backward, so
// that one microbatch's activations are live at a time (and a pipeline stage
// can later interleave them).
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"
#include "slapo/Transforms/Pipeline.h"

#include "LossWeighting.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Dialect/TensorBuilder.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace slapo {
#define GEN_PASS_DEF_MICROBATCH
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

/// Marks the ops a builder inserts as microbatch `index`'s (its slices of
/// the inputs, its copy of the forward and backward).
struct MarkMicrobatch : OpBuilder::Listener {
  void notifyOperationInserted(Operation *op) override {
    op->setAttr(kMicrobatchAttrName, index);
  }
  IntegerAttr index;
};

struct MicrobatchPass : impl::MicrobatchBase<MicrobatchPass> {
  using MicrobatchBase::MicrobatchBase;

  void runOnOperation() override;
  /// Errors at the train() argument that asked for microbatches (the
  /// module's location where it carries none), with a note at `op`.
  InFlightDiagnostic emitErrorAt(Operation *op);
  LogicalResult checkExact(func::FuncOp function);
};

InFlightDiagnostic MicrobatchPass::emitErrorAt(Operation *op) {
  InFlightDiagnostic error =
      emitError(getPrimitiveLocation(getOperation(), *this), "microbatches=")
      << int64_t(microbatches) << ": ";
  error.attachNote(op->getLoc()) << "here";
  return error;
}

LogicalResult MicrobatchPass::checkExact(func::FuncOp function) {
  WalkResult walk =
      function.walk([&](Operation *dropout) {
        auto attention = dyn_cast<FlashAttentionOp>(dropout);
        if (!isa<DropoutOp>(dropout) && !(attention && attention.getDropoutP()))
          return WalkResult::advance();
        std::string path = getModulePath(dropout).str();
        emitErrorAt(dropout)
            << "the dropout in "
            << (path.empty() ? "the root module" : "module '" + path + "'")
            << " draws its mask for the whole batch, and a microbatch would "
               "draw another block of it; train without dropout (p=0, or eval "
               "mode at export) or with microbatches=1";
        return WalkResult::interrupt();
      });
  if (walk.wasInterrupted())
    return failure();
  for (BlockArgument arg : function.getArguments()) {
    auto type = arg.getType().cast<RankedTensorType>();
    if (type.getRank() == 0)
      return emitErrorAt(function)
             << "input #" << arg.getArgNumber()
             << " is a scalar: microbatches split dim 0 (the batch) of "
                "every input";
  }
  return success();
}

void MicrobatchPass::runOnOperation() {
  if (microbatches < 1) {
    getOperation().emitError("slapo-microbatch: microbatches must be at "
                             "least 1, not ")
        << int64_t(microbatches);
    return signalPassFailure();
  }
  if (microbatches == 1)
    return;
  auto function = lookupForwardBackward(getOperation(), "slapo-microbatch");
  if (!function)
    return signalPassFailure();
  if (failed(checkExact(function)))
    return signalPassFailure();

  Block &microbatch = function.getBody().front();
  auto ret = cast<func::ReturnOp>(microbatch.getTerminator());
  auto *step = new Block();
  SmallVector<Type> batchTypes;
  for (BlockArgument arg : microbatch.getArguments()) {
    auto type = arg.getType().cast<RankedTensorType>();
    SmallVector<int64_t> shape(type.getShape());
    shape[0] *= microbatches;
    batchTypes.push_back(type.clone(shape));
    step->addArgument(batchTypes.back(), arg.getLoc());
  }

  OpBuilder builder(&getContext());
  builder.setInsertionPointToEnd(step);
  // The sums of the microbatches follow their backward, in its phase.
  Attribute backward = builder.getStringAttr("backward");
  TensorBuilder g(builder, ret.getLoc());
  LossWeighting weighting = getLossWeighting(ret.getOperand(0));
  // The microbatches' sums of their (weighted) losses and gradients, and of
  // their weights.
  SmallVector<Value> sums(ret.getNumOperands());
  Value weights;
  MarkMicrobatch inMicrobatch;
  for (int64_t i = 0; i < microbatches; ++i) {
    inMicrobatch.index = builder.getI64IntegerAttr(i);
    builder.setListener(&inMicrobatch);
    IRMapping rows;
    for (auto [arg, batch] :
         llvm::zip(microbatch.getArguments(), step->getArguments())) {
      int64_t size = arg.getType().cast<RankedTensorType>().getDimSize(0);
      rows.map(arg, g.slice(batch, 0, i * size, (i + 1) * size));
    }
    for (Operation &op : microbatch.without_terminator())
      builder.clone(op, rows);
    PhaseScope inBackward(builder, backward);
    Value weight;
    if (weighting == LossWeighting::CountedTargets) {
      weight = buildCountedTargets(g, rows.lookup(ret.getOperand(0)));
      weights = weights ? g.add(weights, weight) : weight;
    }
    for (auto [sum, result] : llvm::zip(sums, ret.getOperands())) {
      Value value = rows.lookupOrDefault(result);
      if (weight)
        value = weighPart(g, value, weight, weight);
      sum = sum ? g.add(sum, value) : value;
    }
  }
  builder.setListener(nullptr);
  {
    PhaseScope inBackward(builder, backward);
    for (Value &sum : sums) {
      if (weighting == LossWeighting::MeanOfEqualShares)
        sum = g.scale(sum, 1.0 / double(microbatches));
      else if (weighting == LossWeighting::CountedTargets)
        sum = buildCountedMean(g, sum, weights);
    }
  }
  builder.create<func::ReturnOp>(ret.getLoc(), sums);

  function.getBody().front().erase();
  function.getBody().push_back(step);
  function.setType(
      builder.getFunctionType(batchTypes, function.getResultTypes()));
}

} // namespace
} // namespace slapo
