//===- PipelineRank.cpp - one pipeline stage's part of the step -----------===//
//
// Every rank of a pipeline sees the same program order of boundaries, so a
// boundary's send on one stage and its receive on the other are the n-th
// message between the two ranks on both sides: the messages pair without
// tags or sizes exchanged.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"

#include "mlir/IR/Builders.h"

namespace slapo {
#define GEN_PASS_DEF_PIPELINERANK
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

std::optional<int64_t> getStageOf(Operation *op) {
  if (auto stage = op->getAttrOfType<IntegerAttr>(kStageAttrName))
    return stage.getInt();
  return std::nullopt;
}

struct PipelineRankPass : impl::PipelineRankBase<PipelineRankPass> {
  using PipelineRankBase::PipelineRankBase;

  void runOnOperation() override;
  /// Replaces this stage's side of each boundary by a send or a receive.
  void splitBoundaries(Block &block);
  /// Returns only what this stage computes.
  void keepOwnResults(func::FuncOp function);
  /// Erases the other stages' ops and the boundaries; fails where an op
  /// kept uses one (a boundary missing).
  LogicalResult eraseOtherStages(Block &block);
};

void PipelineRankPass::splitBoundaries(Block &block) {
  for (auto boundary : block.getOps<StageBoundaryOp>()) {
    auto from = static_cast<int64_t>(boundary.getFrom());
    auto to = static_cast<int64_t>(boundary.getTo());
    if (from != stage && to != stage)
      continue;
    OpBuilder builder(boundary);
    Operation *half;
    if (to == stage) {
      auto recv = builder.create<StageRecvOp>(boundary.getLoc(),
                                              boundary.getType(), from);
      boundary.replaceAllUsesWith(recv.getResult());
      half = recv;
    } else {
      half = builder.create<StageSendOp>(boundary.getLoc(), boundary.getInput(),
                                         to);
    }
    // The module path and phase stay; the stage is this one.
    for (StringRef name : {kModulePathAttrName, kPhaseAttrName})
      if (Attribute value = boundary->getAttr(name))
        half->setAttr(name, value);
    half->setAttr(kStageAttrName, builder.getI64IntegerAttr(stage));
  }
}

void PipelineRankPass::keepOwnResults(func::FuncOp function) {
  auto ret = cast<func::ReturnOp>(function.getBody().front().getTerminator());
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
    Operation *def = value.getDefiningOp();
    std::optional<int64_t> owner = def ? getStageOf(def) : std::nullopt;
    if (owner && *owner != stage)
      continue;
    results.push_back(value);
    resultAttrs.push_back(function.getResultAttrDict(index));
  }
  OpBuilder builder(ret);
  builder.create<func::ReturnOp>(ret.getLoc(), results);
  ret.erase();
  function.setType(builder.getFunctionType(function.getArgumentTypes(),
                                           ValueRange(results).getTypes()));
  function.setAllResultAttrs(resultAttrs);
}

LogicalResult PipelineRankPass::eraseOtherStages(Block &block) {
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) {
    std::optional<int64_t> owner = getStageOf(op);
    bool other = isa<StageBoundaryOp>(op) || (owner && *owner != stage);
    // Constants belong to no stage: they go with their last user.
    bool unused = !owner && op->use_empty() && isa<ConstantOp>(op);
    if (!other && !unused)
      continue;
    if (!op->use_empty()) {
      Operation *user = *op->getUsers().begin();
      return user->emitError("slapo-pipeline-rank: this op of stage ")
             << getStageOf(user).value_or(-1) << " uses a value of stage "
             << owner.value_or(-1)
             << " that no slapo.stage_boundary passes to it";
    }
    op->erase();
  }
  return success();
}

void PipelineRankPass::runOnOperation() {
  auto function = lookupForwardBackward(getOperation(), "slapo-pipeline-rank");
  if (!function)
    return signalPassFailure();
  Block &block = function.getBody().front();
  int64_t numStages = 0;
  for (Operation &op : block)
    numStages = std::max(numStages, getStageOf(&op).value_or(-1) + 1);
  if (numStages == 0) {
    function.emitError("slapo-pipeline-rank: no op has a pipeline stage (run "
                       "slapo-cut-pipeline-stage before slapo-autodiff)");
    return signalPassFailure();
  }
  if (stage < 0 || stage >= numStages) {
    function.emitError("slapo-pipeline-rank: stage ")
        << int64_t(stage) << " is not one of the " << numStages << " stages";
    return signalPassFailure();
  }
  splitBoundaries(block);
  keepOwnResults(function);
  if (failed(eraseOtherStages(block)))
    signalPassFailure();
}

} // namespace
} // namespace slapo
