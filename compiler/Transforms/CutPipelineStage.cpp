//===- CutPipelineStage.cpp - schedule primitive cut_pipeline_stage() -----===//
//
// Stages are contiguous ranges of @forward's ops: a cut after a module ends
// its stage at the module's last op. What crosses a cut is made explicit, so
// that a stage's program can later keep its own ops and turn the boundaries
// into sends and receives.
//
// The pipeline runs at the pace of its most expensive stage, so the pass
// also estimates what each stage costs (the FLOPs of its contractions,
// forward and backward) and warns when the stages are far apart, naming
// the cuts that would balance them best.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"
#include "slapo/Transforms/Pipeline.h"

#include "ActiveValues.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

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

/// The span of every module that has ops in `ops`, and of its ancestors.
llvm::StringMap<Span> findSpans(ArrayRef<Operation *> ops) {
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
  return spans;
}

/// The outermost module, named first in path order, whose ops run both
/// before and after a cut after `module` at `position`, other than those
/// containing `module`; none if the cut is not inside another module.
std::optional<StringRef> findModuleAround(const llvm::StringMap<Span> &spans,
                                          StringRef module, size_t position) {
  std::optional<StringRef> around;
  for (const auto &[name, other] : spans)
    if (other.first <= position && other.last > position &&
        !isWithinModule(module, name) && (!around || name < *around))
      around = name;
  return around;
}

/// A cut after `module`, at its schedule line where the pass runs from
/// slapoc.
struct Cut {
  std::string module;
  Location loc;
};

/// The most expensive stage may cost this much more than the cheapest
/// before the pass warns: 1F1B's bubble, which assumes equal stages, then
/// grows by about as much.
constexpr double kMaxStageImbalance = 1.2;

/// What each op of @forward costs a stage, forward and backward, and the
/// cuts that balance the stages best.
class StageCosts {
public:
  StageCosts(ArrayRef<Operation *> ops, ModuleOp module);

  /// The FLOPs of each stage of the cuts after `cuts` (positions in
  /// @forward, in order).
  SmallVector<int64_t> getStageFlops(ArrayRef<size_t> cuts) const;
  /// Among the cuts after positions of `candidates` (in order), the
  /// `numStages - 1` that leave every stage something to compute and whose
  /// most expensive stage costs least.
  SmallVector<size_t> findBalancedCuts(ArrayRef<size_t> candidates,
                                       int64_t numStages) const;

private:
  /// The FLOPs of the stage from after `after` (-1: the first op) to
  /// `last`, and whether it computes anything.
  int64_t getFlops(int64_t after, int64_t last) const {
    return flopsBefore[last + 1] - flopsBefore[after + 1];
  }
  bool computes(int64_t after, int64_t last) const {
    return computingBefore[last + 1] > computingBefore[after + 1];
  }

  /// Of the ops before each position: their FLOPs, forward and backward,
  /// and how many compute (are not stage sources).
  SmallVector<int64_t> flopsBefore{0}, computingBefore{0};
};

StageCosts::StageCosts(ArrayRef<Operation *> ops, ModuleOp module) {
  SymbolTable symbols(module);
  llvm::DenseSet<Value> active =
      findActiveValues(*ops.front()->getBlock(), symbols);
  for (Operation *op : ops) {
    int64_t flops = 0;
    if (auto contraction = dyn_cast<FlopCountOpInterface>(op)) {
      flops = contraction.getForwardFlops();
      // The backward computes the gradients of the operands that have
      // one, where the op's result has one.
      if (llvm::any_of(op->getResults(),
                       [&](Value result) { return active.count(result); })) {
        SmallVector<bool> hasGradient;
        for (Value operand : op->getOperands())
          hasGradient.push_back(active.count(operand));
        flops += contraction.getBackwardFlops(hasGradient);
      }
    }
    flopsBefore.push_back(flopsBefore.back() + flops);
    computingBefore.push_back(computingBefore.back() + !isStageSource(op));
  }
}

SmallVector<int64_t> StageCosts::getStageFlops(ArrayRef<size_t> cuts) const {
  SmallVector<int64_t> flops;
  int64_t after = -1;
  for (size_t cut : cuts) {
    flops.push_back(getFlops(after, cut));
    after = cut;
  }
  flops.push_back(getFlops(after, flopsBefore.size() - 2));
  return flops;
}

SmallVector<size_t> StageCosts::findBalancedCuts(ArrayRef<size_t> candidates,
                                                 int64_t numStages) const {
  // best[k][j]: the least cost of the most expensive of k + 1 stages that
  // end after candidates[j], and the candidate that ends the k-th.
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  struct Choice {
    int64_t maxFlops = kNone;
    size_t previous = 0;
  };
  size_t count = candidates.size();
  std::vector<std::vector<Choice>> best(numStages - 1,
                                        std::vector<Choice>(count));
  for (size_t j = 0; j < count; ++j)
    if (computes(-1, candidates[j]))
      best[0][j].maxFlops = getFlops(-1, candidates[j]);
  for (int64_t k = 1; k + 1 < numStages; ++k)
    for (size_t j = 0; j < count; ++j)
      for (size_t i = 0; i < j; ++i) {
        if (best[k - 1][i].maxFlops == kNone ||
            !computes(candidates[i], candidates[j]))
          continue;
        int64_t maxFlops = std::max(best[k - 1][i].maxFlops,
                                    getFlops(candidates[i], candidates[j]));
        if (maxFlops < best[k][j].maxFlops)
          best[k][j] = {maxFlops, i};
      }
  int64_t last = computingBefore.size() - 2;
  std::optional<size_t> end;
  int64_t bestFlops = kNone;
  for (size_t j = 0; j < count; ++j) {
    if (best[numStages - 2][j].maxFlops == kNone ||
        !computes(candidates[j], last))
      continue;
    int64_t maxFlops = std::max(best[numStages - 2][j].maxFlops,
                                getFlops(candidates[j], last));
    if (maxFlops < bestFlops) {
      bestFlops = maxFlops;
      end = j;
    }
  }
  SmallVector<size_t> cuts;
  if (!end)
    return cuts;
  for (int64_t k = numStages - 2; k >= 0; --k) {
    cuts.push_back(candidates[*end]);
    end = best[k][*end].previous;
  }
  std::reverse(cuts.begin(), cuts.end());
  return cuts;
}

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
  /// Records each stage's cost and the best-balanced cuts on the module,
  /// and warns at a cut of the most expensive stage when the stages are
  /// far apart.
  void reportBalance(const StageCosts &costs, ArrayRef<Operation *> ops,
                     const std::map<size_t, Cut> &cuts);

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
  llvm::StringMap<Span> spans = findSpans(ops);
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
    if (std::optional<StringRef> around =
            findModuleAround(spans, module, position))
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

void CutPipelineStagePass::reportBalance(const StageCosts &costs,
                                         ArrayRef<Operation *> ops,
                                         const std::map<size_t, Cut> &cuts) {
  // Where a cut may go: after a module that no other module runs around,
  // named by the outermost such module ending there (or as the schedule
  // named the cut).
  llvm::StringMap<Span> spans = findSpans(ops);
  std::map<size_t, std::pair<Span, StringRef>> candidates;
  for (const auto &[name, span] : spans) {
    if (span.last + 1 >= ops.size() || findModuleAround(spans, name, span.last))
      continue;
    auto [candidate, inserted] =
        candidates.try_emplace(span.last, std::make_pair(span, name));
    auto &[outer, outerName] = candidate->second;
    if (span.first < outer.first ||
        (span.first == outer.first && name.size() < outerName.size()))
      candidate->second = {span, name};
  }
  auto nameCut = [&](size_t position) -> StringRef {
    auto cut = cuts.find(position);
    return cut != cuts.end() ? StringRef(cut->second.module)
                             : candidates.at(position).second;
  };
  SmallVector<size_t> cutPositions, candidatePositions;
  for (const auto &[position, cut] : cuts)
    cutPositions.push_back(position);
  for (const auto &[position, candidate] : candidates)
    candidatePositions.push_back(position);
  SmallVector<int64_t> flops = costs.getStageFlops(cutPositions);
  // The schedule's cuts are candidates, so some cuts always balance.
  SmallVector<size_t> balanced =
      costs.findBalancedCuts(candidatePositions, numStages);
  SmallVector<int64_t> balancedFlops = costs.getStageFlops(balanced);

  Builder builder(&getContext());
  auto names = [&](ArrayRef<size_t> positions) {
    return builder.getStrArrayAttr(llvm::to_vector(
        llvm::map_range(positions, [&](size_t p) { return nameCut(p); })));
  };
  getOperation()->setAttr(
      kPipelineBalanceAttrName,
      builder.getDictionaryAttr({
          builder.getNamedAttr(kCutsKey, names(cutPositions)),
          builder.getNamedAttr(kStageFlopsKey, builder.getI64ArrayAttr(flops)),
          builder.getNamedAttr(kBalancedCutsKey, names(balanced)),
          builder.getNamedAttr(kBalancedStageFlopsKey,
                               builder.getI64ArrayAttr(balancedFlops)),
      }));

  auto [cheapest, costliest] = std::minmax_element(flops.begin(), flops.end());
  if (*costliest <= kMaxStageImbalance * *cheapest)
    return;
  int64_t expensive = costliest - flops.begin(),
          cheap = cheapest - flops.begin();
  auto list = [](ArrayRef<int64_t> stageFlops) {
    return llvm::join(llvm::map_range(stageFlops, formatFlops), ", ");
  };
  auto quoted = [&](ArrayRef<size_t> positions) {
    return llvm::join(
        llvm::map_range(positions,
                        [&](size_t p) { return "'" + nameCut(p).str() + "'"; }),
        ", ");
  };
  auto ratio = [](ArrayRef<int64_t> stageFlops) -> std::string {
    auto [low, high] =
        std::minmax_element(stageFlops.begin(), stageFlops.end());
    if (*low == 0)
      return "one stage without contractions";
    return llvm::formatv("{0:f2}x", double(*high) / *low);
  };
  // The cut that ends the most expensive stage, or the last stage's.
  size_t warnedCut = std::min<int64_t>(expensive, numStages - 2);
  InFlightDiagnostic warning =
      emitWarning(std::next(cuts.begin(), warnedCut)->second.loc,
                  "cut_pipeline_stage(): the pipeline stages are unbalanced: "
                  "stage ")
      << expensive << " costs ";
  if (*cheapest == 0)
    warning << formatFlops(*costliest) << " while stage " << cheap
            << " has no contractions";
  else
    warning << llvm::formatv("{0:f2}x", double(*costliest) / *cheapest)
            << " stage " << cheap;
  warning << " (estimated FLOPs of the contractions of one microbatch's "
             "forward and backward, by stage: "
          << list(flops)
          << "), and every stage waits for the most expensive one in each "
             "step; ";
  if (*std::max_element(balancedFlops.begin(), balancedFlops.end()) <
      *costliest)
    warning << "cutting after " << quoted(balanced) << " instead of after "
            << quoted(cutPositions) << " gives " << list(balancedFlops) << " ("
            << ratio(balancedFlops) << ")";
  else
    warning << "no cuts after other modules balance them better";
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
  // Before the boundaries, which move the uses of values between stages.
  StageCosts costs(ops, getOperation());
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
  reportBalance(costs, ops, cuts);
}

} // namespace

std::string formatFlops(int64_t flops) {
  if (flops < 1000000)
    return std::to_string(flops) + " FLOP";
  if (flops < 1000000000)
    return llvm::formatv("{0:f2} MFLOP", flops / 1e6);
  return llvm::formatv("{0:f2} GFLOP", flops / 1e9);
}

} // namespace slapo
