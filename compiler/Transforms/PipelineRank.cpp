//===- PipelineRank.cpp - one pipeline stage's part of the step -----------===//
//
// Every rank of a pipeline sees the same program order of boundaries, so a
// boundary's send on one stage and its receive on the other are the n-th
// message between the two ranks on both sides: the messages pair without
// tags or sizes exchanged. What the step adds after the microbatches (the
// loss sent to every stage, the sums of tied parameters' gradients) comes
// last on every stage, in the same order.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "LossWeighting.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Dialect/TensorBuilder.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

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
  /// Takes the stage off what only the step's inputs and constants compute
  /// (GPT-2's shifted labels, which slapo-microbatch's counts of the
  /// targets read): every stage that needs it computes it itself.
  void unstageInputComputations(Block &block);
  /// Gives the ops that passes after slapo-cut-pipeline-stage built without
  /// a stage (slapo-microbatch's sums) the stage of the values they read.
  void inheritStages(Block &block);
  /// Replaces this stage's side of each boundary by a send or a receive.
  void splitBoundaries(Block &block);
  /// Returns only what this stage computes, and the loss, which the last
  /// stage sends to every other; sums the gradients of a parameter tied
  /// across stages over the tied group.
  void keepOwnResults(func::FuncOp function);
  /// The loss on this stage: the last stage's `loss`, which it sends to
  /// every other stage, or the one received from it, with the targets it
  /// counts, counted here.
  Value passLoss(func::FuncOp function, Value loss);
  /// Erases the other stages' ops and the boundaries; fails where an op
  /// kept uses one (a boundary missing).
  LogicalResult eraseOtherStages(Block &block);
  /// Erases @forward and the parameters this stage does not read; marks
  /// the copy of a tied parameter that the gradient norm does not count.
  void eraseOtherParameters(ModuleOp module, func::FuncOp function);

  int64_t numStages = 0;
};

void PipelineRankPass::unstageInputComputations(Block &block) {
  DenseSet<Operation *> fromInputs;
  for (Operation &op : block.without_terminator()) {
    if (!isMemoryEffectFree(&op) || op.getNumRegions() != 0 ||
        isa<GetParamOp, StageBoundaryOp>(op))
      continue;
    bool onlyInputs = llvm::all_of(op.getOperands(), [&](Value operand) {
      Operation *def = operand.getDefiningOp();
      return !def || fromInputs.contains(def);
    });
    if (!onlyInputs)
      continue;
    fromInputs.insert(&op);
    op.removeAttr(kStageAttrName);
  }
}

void PipelineRankPass::inheritStages(Block &block) {
  for (Operation &op : block.without_terminator()) {
    if (getStageOf(&op))
      continue;
    for (Value operand : op.getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (auto defStage = def->getAttrOfType<IntegerAttr>(kStageAttrName)) {
          op.setAttr(kStageAttrName, defStage);
          break;
        }
  }
}

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
    // The module path, phase and microbatch stay; the stage is this one.
    for (StringRef name :
         {kModulePathAttrName, kPhaseAttrName, kMicrobatchAttrName})
      if (Attribute value = boundary->getAttr(name))
        half->setAttr(name, value);
    half->setAttr(kStageAttrName, builder.getI64IntegerAttr(stage));
  }
}

Value PipelineRankPass::passLoss(func::FuncOp function, Value loss) {
  Block &block = function.getBody().front();
  bool microbatched = llvm::any_of(block, [](Operation &op) {
    return op.hasAttr(kMicrobatchAttrName);
  });
  // With microbatches the loss is complete once the step is: it moves at
  // the end, after the backward. Without, the forward ends with it, and it
  // moves in the forward phase, so that --forward-only reports it too: the
  // last stage sends it before any gradient, the others receive it before
  // their backward.
  OpBuilder builder(block.getTerminator());
  MLIRContext *context = builder.getContext();
  auto place = [&](Operation *op) {
    op->setAttr(kStageAttrName, builder.getI64IntegerAttr(stage));
    if (microbatched)
      op->setAttr(kPhaseAttrName, StringAttr::get(context, "backward"));
  };
  int64_t last = numStages - 1;
  Location loc = block.getTerminator()->getLoc();
  if (stage == last) {
    if (!microbatched && loss.getDefiningOp())
      builder.setInsertionPointAfter(loss.getDefiningOp());
    for (int64_t other = 0; other < last; ++other)
      place(builder.create<StageSendOp>(loc, loss, other));
    return loss;
  }
  if (!microbatched)
    for (Operation &op : block) {
      auto phase = op.getAttrOfType<StringAttr>(kPhaseAttrName);
      if (phase && phase.getValue() == "backward") {
        builder.setInsertionPoint(&op);
        break;
      }
    }
  // The data-parallel ranks of a stage weigh their gradients by the targets
  // the loss counts (slapo-data-parallel): every stage counts them from the
  // labels it reads, as the last stage does, instead of waiting for a count
  // sent with the loss, which comes after the backward with microbatches.
  if (dp > 1 && getLossWeighting(loss) == LossWeighting::CountedTargets) {
    TensorBuilder g(builder, loc);
    Value count = buildCountedTargets(g, loss);
    markCountedTargetsOfReceivedLoss(count);
    place(count.getDefiningOp());
  }
  auto recv = builder.create<StageRecvOp>(loc, loss.getType(), last);
  place(recv);
  return recv.getResult();
}

void PipelineRankPass::keepOwnResults(func::FuncOp function) {
  auto ret = cast<func::ReturnOp>(function.getBody().front().getTerminator());
  OpBuilder builder(ret);
  MLIRContext *context = builder.getContext();
  // The sums of tied gradients follow the last microbatch's backward.
  auto mark = [&](Operation *op) {
    op->setAttr(kStageAttrName, builder.getI64IntegerAttr(stage));
    op->setAttr(kPhaseAttrName, StringAttr::get(context, "backward"));
  };
  llvm::StringMap<int> gradParts;
  for (unsigned index = 1; index < ret.getNumOperands(); ++index)
    if (auto param = function.getResultAttrOfType<FlatSymbolRefAttr>(
            index, kGradOfAttrName))
      ++gradParts[param.getValue()];

  Value loss = passLoss(function, ret.getOperand(0));
  SmallVector<Value> results{loss};
  SmallVector<DictionaryAttr> resultAttrs{function.getResultAttrDict(0)};
  for (auto [index, value] : llvm::enumerate(ret.getOperands())) {
    if (index == 0)
      continue;
    Operation *def = value.getDefiningOp();
    std::optional<int64_t> owner = def ? getStageOf(def) : std::nullopt;
    if (owner && *owner != stage)
      continue;
    Value result = value;
    auto param =
        function.getResultAttrOfType<FlatSymbolRefAttr>(index, kGradOfAttrName);
    if (param && gradParts.lookup(param.getValue()) > 1) {
      auto sum =
          builder.create<AllReduceOp>(ret.getLoc(), result, ProcessGroup::tied,
                                      /*mean=*/false);
      mark(sum);
      result = sum.getResult(0);
    }
    results.push_back(result);
    resultAttrs.push_back(function.getResultAttrDict(index));
  }
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
    // Constants and what the microbatches' inputs slice belong to no stage:
    // they go with their last user.
    bool unused = !owner && isOpTriviallyDead(op);
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

void PipelineRankPass::eraseOtherParameters(ModuleOp module,
                                            func::FuncOp function) {
  if (auto forward = module.lookupSymbol<func::FuncOp>("forward"))
    forward.erase();
  llvm::StringSet<> read;
  function.walk([&](GetParamOp getParam) { read.insert(getParam.getName()); });
  for (ParamOp param : llvm::make_early_inc_range(module.getOps<ParamOp>())) {
    if (!read.contains(param.getSymName()))
      param.erase();
  }
  // The last stage's copy of a parameter tied to the first stage's: global
  // gradient norms count the first stage's.
  if (stage != numStages - 1 || stage == 0)
    return;
  for (unsigned index = 1; index < function.getNumResults(); ++index) {
    auto name =
        function.getResultAttrOfType<FlatSymbolRefAttr>(index, kGradOfAttrName);
    Operation *def = function.getBody()
                         .front()
                         .getTerminator()
                         ->getOperand(index)
                         .getDefiningOp();
    auto sum = dyn_cast_or_null<AllReduceOp>(def);
    if (name && sum && sum.getGroup() == ProcessGroup::tied)
      if (auto param = module.lookupSymbol<ParamOp>(name.getAttr()))
        param->setAttr(kTiedCopyAttrName, UnitAttr::get(&getContext()));
  }
}

void PipelineRankPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto function = lookupForwardBackward(module, "slapo-pipeline-rank");
  if (!function)
    return signalPassFailure();
  Block &block = function.getBody().front();
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
  unstageInputComputations(block);
  inheritStages(block);
  splitBoundaries(block);
  keepOwnResults(function);
  if (failed(eraseOtherStages(block)))
    return signalPassFailure();
  eraseOtherParameters(module, function);
}

} // namespace
} // namespace slapo
