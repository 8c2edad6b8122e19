//===- CutPipelineStage.cpp - schedule primitive cut_pipeline_stage() -----===//
//
// Stages are contiguous ranges of @forward's ops: a cut after a module ends
// its stage at the module's last op. What crosses a cut is made explicit, so
// that a stage's program can later keep its own ops and turn the boundaries
// into sends and receives.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"
#include "slapo/Transforms/Pipeline.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"

#include <map>

namespace slapo {
#define GEN_PASS_DEF_CUTPIPELINESTAGE
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

/// Ops without operands that every stage using them computes itself
/// (parameter reads, constants), rather than receiving them.
bool isStageSource(Operation *op) {
  return op->getNumOperands() == 0 && isa<GetParamOp, ConstantOp>(op);
}

/// The first and last position of a module's ops (its submodules' included)
/// in @forward.
struct Span {
  size_t first, last;
};

/// A cut after `module`, at its schedule line where the pass runs from
/// slapoc.
struct Cut {
  std::string module;
  Location loc;
};

struct CutPipelineStagePass : impl::CutPipelineStageBase<CutPipelineStagePass> {
  using CutPipelineStageBase::CutPipelineStageBase;

  void runOnOperation() override;

private:
  /// Finds the position each cut ends its stage at; fails after an error.
  LogicalResult findCuts(ArrayRef<Operation *> ops,
                         std::map<size_t, Cut> &cuts);
  /// Gives each stage that uses a parameter read or constant of another
  /// its own, and refuses trainable parameters read on stages other than
  /// the first and the last.
  LogicalResult localizeSources(ArrayRef<Operation *> ops,
                                ArrayRef<Operation *> stageStarts);
  /// Passes every value used on a later stage through the boundaries of
  /// the stages it enters.
  void insertBoundaries(ArrayRef<Operation *> ops,
                        ArrayRef<Operation *> stageStarts);

  /// The stage of `user` (the return is the last stage's).
  int64_t getStage(Operation *user) const {
    if (auto stage = user->getAttrOfType<IntegerAttr>(kStageAttrName))
      return stage.getInt();
    return numStages - 1;
  }

  int64_t numStages = 1;
  /// Stage k > 0 -> the location of the cut that starts it.
  SmallVector<Location> stageCutLocs;
};

LogicalResult CutPipelineStagePass::findCuts(ArrayRef<Operation *> ops,
                                             std::map<size_t, Cut> &cuts) {
  llvm::StringMap<Span> spans;
  for (auto [position, op] : llvm::enumerate(ops)) {
    StringRef path = getModulePath(op);
    // The module and each of its ancestors, "a.b.c", "a.b", "a".
    for (StringRef prefix = path; !prefix.empty();
         prefix = prefix.rsplit('.').first) {
      auto [span, inserted] = spans.try_emplace(prefix, Span{position, 0});
      span->second.last = position;
      if (!prefix.contains('.'))
        break;
    }
  }
  func::FuncOp forward = ops.front()->getParentOfType<func::FuncOp>();
  for (const std::string &module : modules) {
    auto span = spans.find(module);
    if (span == spans.end())
      return forward.emitError("cut_pipeline_stage(): module '")
             << module << "' has no ops in @forward: there is nothing to "
             << "cut after";
    size_t position = span->second.last;
    Operation *last = ops[position];
    Location loc = getPrimitiveLocation(last, *this);
    auto error = [&]() {
      InFlightDiagnostic diagnostic = emitError(loc, "cut_pipeline_stage(): ");
      if (loc != last->getLoc())
        diagnostic.attachNote(last->getLoc())
            << "the last op of '" << module << "'";
      return diagnostic;
    };
    // The outermost such module, named first in path order.
    std::optional<StringRef> around;
    for (const auto &[name, other] : spans)
      if (other.first <= position && other.last > position &&
          !isWithinModule(module, name) && (!around || name < *around))
        around = name;
    if (around)
      return error() << "the cut after '" << module << "' is inside module '"
                     << *around
                     << "', whose ops run both before and after it; cut "
                        "after a module that contains it or that it "
                        "contains";
    bool computesAfter =
        llvm::any_of(ops.drop_front(position + 1),
                     [](Operation *op) { return !isStageSource(op); });
    if (!computesAfter)
      return error() << "the cut after '" << module
                     << "' leaves the last stage empty: no op computes "
                        "anything after it";
    auto [previous, inserted] = cuts.try_emplace(position, Cut{module, loc});
    if (!inserted && previous->second.module == module)
      return error() << "module '" << module << "' is cut twice";
    if (!inserted)
      return error() << "the cut after '" << module << "' is the cut after '"
                     << previous->second.module
                     << "': both end with the same op, which would leave "
                        "the stage between them empty";
  }
  // A stage between two cuts that only reads parameters and constants
  // computes nothing.
  size_t start = 0;
  for (const auto &[position, cut] : cuts) {
    bool computes =
        llvm::any_of(ops.slice(start, position + 1 - start),
                     [](Operation *op) { return !isStageSource(op); });
    if (!computes)
      return emitError(cut.loc,
                       "cut_pipeline_stage(): the stage that ends after '")
             << cut.module << "' computes nothing";
    start = position + 1;
  }
  return success();
}

LogicalResult
CutPipelineStagePass::localizeSources(ArrayRef<Operation *> ops,
                                      ArrayRef<Operation *> stageStarts) {
  ModuleOp module = getOperation();
  // Parameter -> the first read on each stage.
  llvm::MapVector<StringAttr, std::map<int64_t, Operation *>> reads;
  for (Operation *op : ops) {
    if (!isStageSource(op))
      continue;
    int64_t own = getStage(op);
    // Stage -> its copy of `op`.
    std::map<int64_t, Operation *> copies;
    for (OpOperand &use : llvm::make_early_inc_range(op->getUses())) {
      int64_t stage = getStage(use.getOwner());
      if (stage == own)
        continue;
      Operation *&copy = copies[stage];
      if (!copy) {
        OpBuilder builder(stageStarts[stage]);
        copy = builder.clone(*op);
        copy->setAttr(kStageAttrName, builder.getI64IntegerAttr(stage));
      }
      use.set(copy->getResult(0));
    }
    auto getParam = dyn_cast<GetParamOp>(op);
    if (!getParam)
      continue;
    auto &stages = reads[getParam.getNameAttr().getAttr()];
    if (!op->use_empty())
      stages.try_emplace(own, op);
    for (auto [stage, copy] : copies)
      stages.try_emplace(stage, copy);
  }
  // A parameter read on two stages has a copy on each, whose gradients
  // are summed over Megatron's embedding group: the first and the last
  // stage's ranks, which the runtime's mesh provides.
  for (auto &[name, stages] : reads) {
    auto param = module.lookupSymbol<ParamOp>(name);
    if (!param || param.getBuffer() || stages.size() < 2)
      continue;
    bool firstAndLast = stages.size() == 2 && stages.begin()->first == 0 &&
                        stages.rbegin()->first == numStages - 1;
    if (firstAndLast)
      continue;
    auto [firstStage, firstRead] = *stages.begin();
    auto [secondStage, secondRead] = *std::next(stages.begin());
    auto describeUser = [](Operation *read) {
      return describeModuleOf(*read->getUsers().begin());
    };
    InFlightDiagnostic error =
        emitError(stageCutLocs[secondStage - 1],
                  "cut_pipeline_stage(): parameter '")
        << name.getValue() << "' is used on stage " << firstStage << " (by "
        << describeUser(firstRead) << ") and on stage " << secondStage
        << " (by " << describeUser(secondRead)
        << "): a parameter tied across stages must be used on the first and "
           "the last stage only (their ranks sum its gradients, as "
           "Megatron's embedding group does); cut so that its other users "
           "share one of those stages";
    error.attachNote(firstRead->getUsers().begin()->getLoc())
        << "used on stage " << firstStage << " here";
    error.attachNote(secondRead->getUsers().begin()->getLoc())
        << "used on stage " << secondStage << " here";
    return failure();
  }
  return success();
}

void CutPipelineStagePass::insertBoundaries(ArrayRef<Operation *> ops,
                                            ArrayRef<Operation *> stageStarts) {
  for (Operation *op : ops) {
    if (isStageSource(op))
      continue;
    int64_t own = getStage(op);
    for (Value value : op->getResults()) {
      int64_t lastUse = own;
      for (Operation *user : value.getUsers())
        lastUse = std::max(lastUse, getStage(user));
      Value carried = value;
      for (int64_t stage = own + 1; stage <= lastUse; ++stage) {
        OpBuilder builder(stageStarts[stage]);
        ModulePathScope inModule(builder, op);
        auto boundary = builder.create<StageBoundaryOp>(op->getLoc(), carried,
                                                        stage - 1, stage);
        boundary->setAttr(kStageAttrName, builder.getI64IntegerAttr(stage));
        value.replaceUsesWithIf(boundary, [&](OpOperand &use) {
          return use.getOwner() != boundary &&
                 getStage(use.getOwner()) == stage;
        });
        carried = boundary;
      }
    }
  }
}

void CutPipelineStagePass::runOnOperation() {
  auto forward = lookupForward(getOperation(), "slapo-cut-pipeline-stage");
  if (!forward)
    return signalPassFailure();
  if (modules.empty())
    return;
  SmallVector<Operation *> ops;
  for (Operation &op : forward.getBody().front().without_terminator())
    ops.push_back(&op);
  if (ops.empty()) {
    forward.emitError("cut_pipeline_stage(): @forward computes nothing");
    return signalPassFailure();
  }
  std::map<size_t, Cut> cuts;
  if (failed(findCuts(ops, cuts)))
    return signalPassFailure();
  numStages = static_cast<int64_t>(cuts.size()) + 1;
  for (const auto &[position, cut] : cuts)
    stageCutLocs.push_back(cut.loc);

  Builder builder(&getContext());
  SmallVector<Operation *> stageStarts{ops.front()};
  int64_t stage = 0;
  for (auto [position, op] : llvm::enumerate(ops)) {
    op->setAttr(kStageAttrName, builder.getI64IntegerAttr(stage));
    if (cuts.count(position) && position + 1 < ops.size()) {
      ++stage;
      stageStarts.push_back(ops[position + 1]);
    }
  }
  if (failed(localizeSources(ops, stageStarts)))
    return signalPassFailure();
  insertBoundaries(ops, stageStarts);
}

} // namespace
} // namespace slapo
