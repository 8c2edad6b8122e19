//===- PipelineSchedule.cpp - one forward, one backward (1F1B) ------------===//
//
// slapo-microbatch runs each microbatch's forward and backward in turn, so a
// stage's part of it would wait for the later stages to finish a microbatch
// before starting the next: the pipeline would hold one microbatch at a
// time. Reordered as 1F1B, stage k first runs the forwards of the
// microbatches that fill the stages after it, then alternates, and every
// stage is busy once the pipeline is full. Only the order of independent
// ops changes: each microbatch's ops keep their order, and so do the
// forwards among themselves and the backwards among themselves (the sums
// of the microbatches' gradients follow their backward).
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

namespace slapo {
#define GEN_PASS_DEF_PIPELINESCHEDULE
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

struct PipelineSchedulePass : impl::PipelineScheduleBase<PipelineSchedulePass> {
  using PipelineScheduleBase::PipelineScheduleBase;
  void runOnOperation() override;
};

bool isBackward(Operation *op) {
  auto phase = op->getAttrOfType<StringAttr>(kPhaseAttrName);
  return phase && phase.getValue() == "backward";
}

void PipelineSchedulePass::runOnOperation() {
  auto function =
      lookupForwardBackward(getOperation(), "slapo-pipeline-schedule");
  if (!function)
    return signalPassFailure();
  if (stages < 1 || stage < 0 || stage >= stages) {
    function.emitError("slapo-pipeline-schedule: stage ")
        << int64_t(stage) << " is not one of " << int64_t(stages) << " stages";
    return signalPassFailure();
  }
  Block &block = function.getBody().front();
  // Each microbatch's forward and backward ops, in program order; the ops
  // of no microbatch before the first (kept first) and after it (kept
  // last, as the step's sums of the microbatches are).
  SmallVector<SmallVector<Operation *>> forwards, backwards;
  SmallVector<Operation *> before, after;
  for (Operation &op : block.without_terminator()) {
    auto microbatch = op.getAttrOfType<IntegerAttr>(kMicrobatchAttrName);
    if (!microbatch) {
      (forwards.empty() ? before : after).push_back(&op);
      continue;
    }
    if (!after.empty()) {
      op.emitError("slapo-pipeline-schedule: an op of microbatch ")
          << microbatch.getInt()
          << " follows the ops that combine the microbatches";
      return signalPassFailure();
    }
    auto index = static_cast<size_t>(microbatch.getInt());
    if (forwards.size() <= index) {
      forwards.resize(index + 1);
      backwards.resize(index + 1);
    }
    (isBackward(&op) ? backwards : forwards)[index].push_back(&op);
  }
  auto microbatches = static_cast<int64_t>(forwards.size());
  if (microbatches < 2)
    return;
  // 1F1B: stage k runs the forwards of the microbatches the stages after it
  // hold while it waits for the first gradient, then one forward and one
  // backward in turn, then the backwards left.
  int64_t warmup = std::min<int64_t>(stages - stage - 1, microbatches);
  SmallVector<Operation *> order(before);
  auto append = [&](ArrayRef<Operation *> ops) {
    order.append(ops.begin(), ops.end());
  };
  for (int64_t i = 0; i < warmup; ++i)
    append(forwards[i]);
  for (int64_t i = 0; i + warmup < microbatches; ++i) {
    append(forwards[i + warmup]);
    append(backwards[i]);
  }
  for (int64_t i = microbatches - warmup; i < microbatches; ++i)
    append(backwards[i]);
  append(after);
  Operation *terminator = block.getTerminator();
  for (Operation *op : order)
    op->moveBefore(terminator);
}

} // namespace
} // namespace slapo
