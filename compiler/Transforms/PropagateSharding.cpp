//===- PropagateSharding.cpp - shardings and per-rank shapes --------------===//
//
// Sharding is a property of values, derived, never declared: the schedule
// splits parameters and places collectives, and this pass works out what
// every value is on one rank. It runs in two steps. The analysis walks
// @forward with the model's shapes and gives each value a sharding by its
// op's rule (ShardingRuleOpInterface, in dialects/lib/Sharding*.cpp by op
// family); it may find that a slice needs the parameters it comes from
// split per chunk, set that, and start over. Only when every op has a rule
// that holds does the rewrite give values their shapes on one rank and make
// the changes the rules registered, so a schedule that would compute a
// wrong value changes nothing and fails at the op that shows it.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "VocabParallel.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Dialect/TensorBuilder.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace slapo {
#define GEN_PASS_DEF_PROPAGATESHARDING
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

/// The type of one rank's block of a value of `type` with `sharding`.
RankedTensorType localType(Type type, Sharding sharding, int64_t tp) {
  auto tensor = type.cast<RankedTensorType>();
  if (!sharding.isSplit())
    return tensor;
  SmallVector<int64_t> shape(tensor.getShape());
  shape[sharding.dim] /= tp;
  return RankedTensorType::get(shape, tensor.getElementType());
}

struct ValueState {
  Sharding sharding;
  /// The split parameters a split value comes from: slicing whole chunks of
  /// it re-splits them per chunk.
  SmallVector<ParamOp, 2> sources;
  /// Depends on a trained parameter, so its gradient matters.
  bool needsGradient = false;
  /// Replicated, and its gradient is all-reduced (it is a grad_all_reduce,
  /// or a view of one).
  bool gradientSynced = false;
  /// Partial: the op that made the partial sum, named in errors.
  Operation *partialOrigin = nullptr;
  /// Partial: replicated biases to add once the sum is complete.
  SmallVector<Value, 1> pendingBiases;
};

/// `sch["PATH"]` for the module of `op`.
std::string selectorOf(Operation *op) {
  return "sch[\"" + getModulePath(op).str() + "\"]";
}

bool isFloat(Value value) { return elementTypeOf(value).isa<FloatType>(); }

/// `sum + biases[0] + biases[1] ...` after `op`, for every use of `op`'s
/// result `sum`.
void addBiasesAfter(Operation *op, ArrayRef<Value> biases) {
  Value sum = op->getResult(0);
  OpBuilder builder(op->getContext());
  builder.setInsertionPointAfter(op);
  Value biased = sum;
  Operation *first = nullptr;
  for (Value bias : biases) {
    ModulePathScope inModule(builder, bias.getDefiningOp());
    biased = builder.create<AddOp>(bias.getDefiningOp()->getLoc(),
                                   sum.getType(), biased, bias);
    first = first ? first : biased.getDefiningOp();
  }
  sum.replaceAllUsesExcept(biased, first);
}

/// The analysis of one walk over @forward: the context the ops' sharding
/// rules run in.
class Analysis : public ShardingContext {
public:
  Analysis(func::FuncOp forward, int64_t tp) : forward(forward), tp(tp) {}

  enum class Outcome { Done, Restart, Failed };
  Outcome run();

  DenseMap<Value, ValueState> states;
  /// What the rules registered for the rewrite, in program order.
  SmallVector<std::function<void()>> rewrites;

  int64_t getTensorParallelSize() const override { return tp; }
  Sharding getSharding(Value value) override { return states[value].sharding; }
  ArrayRef<Value> getPendingBiases(Value value) override {
    return states[value].pendingBiases;
  }
  void setResult(Operation *op, Sharding sharding) override;
  void setViewResult(Operation *op, Sharding sharding) override;
  void setPartialDeferringBiases(Operation *op,
                                 ArrayRef<Value> biases) override;
  void setCompletedSum(Operation *op, Value partial) override;
  void setGradientSyncedResult(Operation *op) override;
  LogicalResult splitSourcesPerChunk(Value value, int64_t chunks) override;
  void markVocabParallel(Operation *op) override;
  void takeBlockOfReplicated(OpOperand &operand, int64_t dim,
                             int64_t chunks) override;
  void onRewrite(std::function<void()> change) override {
    rewrites.push_back(std::move(change));
  }
  LogicalResult partialReaches(Operation *op, Value partial) override;

private:
  LogicalResult visit(Operation *op);
  LogicalResult visitParameter(GetParamOp getParam);
  LogicalResult visitReturn(func::ReturnOp ret);
  ValueState &stateOf(Value value) { return states[value]; }
  LogicalResult checkGradientsSynced(Operation *op);
  LogicalResult checkSyncedStaysSynced(Operation *op);

  func::FuncOp forward;
  int64_t tp;
  bool restart = false;
  /// Adds (and linears) whose replicated bias moves after the all_reduce
  /// that completes their partial sum.
  SmallPtrSet<Operation *, 4> deferringBiases;
  /// Uses of replicated values that read this rank's block of them: their
  /// gradients are whole.
  SmallPtrSet<OpOperand *, 4> blockReads;
  /// Ops that compute with the blocks of a split table whatever their
  /// results are (a vocabulary-parallel linear_cross_entropy's replicated
  /// loss and gradients).
  SmallPtrSet<Operation *, 4> vocabParallel;
};

void Analysis::setResult(Operation *op, Sharding sharding) {
  ValueState state;
  state.sharding = sharding;
  for (Value operand : op->getOperands()) {
    ValueState &from = stateOf(operand);
    state.needsGradient |= from.needsGradient;
    if (sharding.isSplit() && from.sharding.isSplit())
      for (ParamOp source : from.sources)
        if (!llvm::is_contained(state.sources, source))
          state.sources.push_back(source);
    if (sharding.isPartial() && from.sharding.isPartial()) {
      if (!state.partialOrigin)
        state.partialOrigin = from.partialOrigin;
      llvm::append_range(state.pendingBiases, from.pendingBiases);
    }
  }
  if (sharding.isPartial() && !state.partialOrigin)
    state.partialOrigin = op;
  // Every result of the op has its sharding (flash_attention's result and
  // its rows' log-sum-exp).
  for (Value result : op->getResults()) {
    ValueState resultState = state;
    resultState.needsGradient &= isFloat(result);
    states[result] = std::move(resultState);
  }
}

void Analysis::setViewResult(Operation *op, Sharding sharding) {
  setResult(op, sharding);
  stateOf(op->getResult(0)).gradientSynced =
      stateOf(op->getOperand(0)).gradientSynced;
}

void Analysis::setPartialDeferringBiases(Operation *op,
                                         ArrayRef<Value> biases) {
  setResult(op, Sharding::partial());
  llvm::append_range(stateOf(op->getResult(0)).pendingBiases, biases);
  deferringBiases.insert(op);
}

void Analysis::setCompletedSum(Operation *op, Value partial) {
  SmallVector<Value, 1> biases = stateOf(partial).pendingBiases;
  setResult(op, Sharding::replicated());
  if (!biases.empty())
    onRewrite([op, biases] { addBiasesAfter(op, biases); });
}

void Analysis::setGradientSyncedResult(Operation *op) {
  setResult(op, Sharding::replicated());
  stateOf(op->getResult(0)).gradientSynced = true;
}

LogicalResult Analysis::splitSourcesPerChunk(Value value, int64_t chunks) {
  ArrayRef<ParamOp> sources = stateOf(value).sources;
  if (sources.empty())
    return failure();
  for (ParamOp source : sources)
    source.setShardChunks(chunks);
  restart = true;
  return success();
}

void Analysis::markVocabParallel(Operation *op) {
  vocabParallel.insert(op);
  onRewrite([op, tp = tp] { lowerVocabParallel(op, tp); });
}

LogicalResult Analysis::partialReaches(Operation *op, Value partial) {
  Operation *origin = stateOf(partial).partialOrigin;
  return error(op) << "a partial sum (from " << describeModuleOf(origin)
                   << ", where a split contraction leaves each rank one term "
                      "of it) reaches '"
                   << op->getName().stripDialect() << "' in "
                   << describeModuleOf(op)
                   << ", which needs the whole value; complete the sum "
                      "first: "
                   << selectorOf(origin)
                   << ".sync(\"fwd_post\", \"all_reduce\")";
}

void Analysis::takeBlockOfReplicated(OpOperand &use, int64_t dim,
                                     int64_t chunks) {
  blockReads.insert(&use);
  rewrites.push_back([&use, dim, chunks, tp = tp]() {
    Operation *op = use.getOwner();
    OpBuilder builder(op);
    ModulePathScope inModule(builder, op);
    TensorBuilder tensors(builder, op->getLoc());
    Value whole = use.get();
    // Each chunk of the dim holds one block per rank: with the chunks as a
    // dim of their own, this rank's blocks are one block of the next dim.
    SmallVector<int64_t> chunked(shapeOf(whole));
    chunked[dim] /= chunks;
    chunked.insert(chunked.begin() + dim, chunks);
    Value inChunks = chunks == 1 ? whole : tensors.reshape(whole, chunked);
    int64_t blockDim = chunks == 1 ? dim : dim + 1;
    Value block = builder.create<ScatterOp>(
        op->getLoc(),
        localType(inChunks.getType(), Sharding::split(blockDim, 1), tp),
        inChunks, ProcessGroup::tp, blockDim);
    use.set(chunks == 1 ? block
                        : tensors.reshape(
                              block, localType(whole.getType(),
                                               Sharding::split(dim, chunks), tp)
                                         .getShape()));
  });
}

/// A replicated value whose gradient matters, used to compute a split or
/// partial value, gets one term of its gradient on each rank: unless the
/// backward all-reduces it, the ranks' copies drift apart.
LogicalResult Analysis::checkGradientsSynced(Operation *op) {
  if (!vocabParallel.contains(op)) {
    if (op->getNumResults() != 1)
      return success();
    if (getSharding(op->getResult(0)).isReplicated())
      return checkSyncedStaysSynced(op);
  }
  for (OpOperand &use : op->getOpOperands()) {
    Value operand = use.get();
    ValueState &state = stateOf(operand);
    if (!state.sharding.isReplicated() || !state.needsGradient ||
        state.gradientSynced || blockReads.contains(&use))
      continue;
    Operation *def = operand.getDefiningOp();
    if (auto getParam = dyn_cast_or_null<GetParamOp>(def))
      return error(op) << "the replicated parameter '" << getParam.getName()
                       << "' is used by '" << op->getName().stripDialect()
                       << "' in " << describeModuleOf(op)
                       << " with split operands: each rank would get one "
                          "term of its gradient; shard it as well";
    return error(op) << "the replicated input of '"
                     << op->getName().stripDialect() << "' in "
                     << describeModuleOf(op)
                     << " meets split computation: each rank would get one "
                        "term of its gradient; all-reduce it in the "
                        "backward: "
                     << selectorOf(op) << ".sync(\"bwd_post\", \"all_reduce\")";
  }
  return success();
}

/// A replicated op on a value whose gradient is all-reduced (the input of
/// split computation, past its bwd_post sync) passes that sync on: the
/// backward of every op is linear in its result's gradient, so the terms
/// the ranks hold stay terms. No other value with a gradient may join
/// them: a replicated one's gradient, whole on each rank, would be counted
/// once per rank by the all-reduce (a residual inside the synced module),
/// and a parameter's would stay one rank's term.
LogicalResult Analysis::checkSyncedStaysSynced(Operation *op) {
  auto isSynced = [&](Value operand) {
    return stateOf(operand).gradientSynced;
  };
  if (!llvm::any_of(op->getOperands(), isSynced))
    return success();
  for (Value operand : op->getOperands()) {
    ValueState &state = stateOf(operand);
    if (state.needsGradient && !state.gradientSynced)
      return error(op) << "'" << op->getName().stripDialect() << "' in "
                       << describeModuleOf(op)
                       << " joins a value whose gradient a "
                          "sync(\"bwd_post\", \"all_reduce\") all-reduces "
                          "with another value that has a gradient, which that "
                          "all-reduce would get wrong; sync the inputs of the "
                          "split layers instead";
  }
  stateOf(op->getResult(0)).gradientSynced = true;
  return success();
}

Analysis::Outcome Analysis::run() {
  Block &body = forward.getBody().front();
  for (BlockArgument arg : body.getArguments())
    states[arg] = ValueState();
  for (Operation &op : body) {
    if (failed(visit(&op)))
      return Outcome::Failed;
    if (restart)
      return Outcome::Restart;
  }
  return Outcome::Done;
}

/// Parameters are where shardings enter @forward: slapo-shard set them.
LogicalResult Analysis::visitParameter(GetParamOp getParam) {
  auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
      getParam, getParam.getNameAttr());
  ValueState state;
  state.needsGradient = !param.getBuffer() && isFloat(getParam.getResult());
  if (std::optional<uint64_t> axis = param.getShardAxis()) {
    state.sharding = Sharding::split(*axis, param.getShardChunks().value_or(1));
    state.sources.push_back(param);
  }
  states[getParam.getResult()] = std::move(state);
  return success();
}

/// @forward's results are whole on every rank.
LogicalResult Analysis::visitReturn(func::ReturnOp ret) {
  for (Value value : ret.getOperands()) {
    if (getSharding(value).isPartial())
      return partialReaches(ret, value);
    if (getSharding(value).isSplit())
      return error(ret) << "@forward returns a value that is "
                        << getSharding(value).str() << "; gather it first";
  }
  return success();
}

LogicalResult Analysis::visit(Operation *op) {
  auto rule = dyn_cast<ShardingRuleOpInterface>(op);
  // Values added to a partial sum wait for it to be complete; they ride
  // along only through ops that keep the sum a sum.
  if (!rule || !rule.takesPendingBiases())
    for (Value operand : op->getOperands())
      if (!stateOf(operand).pendingBiases.empty())
        return partialReaches(op, operand);
  if (auto getParam = dyn_cast<GetParamOp>(op))
    return visitParameter(getParam);
  if (auto ret = dyn_cast<func::ReturnOp>(op))
    return visitReturn(ret);
  if (!rule)
    return error(op) << "'" << op->getName() << "' has no sharding rule yet";
  if (failed(rule.propagateSharding(*this)))
    return failure();
  // Collectives are the syncs; every other op that makes split values from
  // replicated ones is checked, but for the bias of a partial sum, which
  // is added after the sum is complete.
  if (restart || op->hasTrait<OpTrait::Collective>() ||
      deferringBiases.contains(op))
    return success();
  return checkGradientsSynced(op);
}

/// Gives every value its shape on one rank, then makes the changes the
/// rules registered (slices' local bounds, biases moved after the
/// all_reduces that complete their sums, vocabulary-parallel lookups and
/// losses).
void rewrite(ModuleOp module, func::FuncOp forward, Analysis &analysis,
             int64_t tp) {
  for (ParamOp param : module.getOps<ParamOp>())
    if (std::optional<uint64_t> axis = param.getShardAxis())
      param.setTypeAttr(TypeAttr::get(
          localType(param.getType(), Sharding::split(*axis, 1), tp)));
  for (Operation &op : forward.getBody().front())
    for (Value result : op.getResults())
      result.setType(
          localType(result.getType(), analysis.states[result].sharding, tp));
  for (std::function<void()> &change : analysis.rewrites)
    change();
}

struct PropagateShardingPass
    : impl::PropagateShardingBase<PropagateShardingPass> {
  using PropagateShardingBase::PropagateShardingBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = lookupForward(module, "slapo-propagate-sharding");
    if (!forward)
      return signalPassFailure();
    for (ParamOp param : module.getOps<ParamOp>())
      if (std::optional<uint64_t> axis = param.getShardAxis();
          axis && param.getTensorType().getDimSize(*axis) % tp != 0) {
        param.emitError("tensor parallelism: dim ")
            << *axis << " of '" << param.getSymName() << "' ("
            << param.getTensorType().getDimSize(*axis)
            << ") does not divide by tp=" << int64_t(tp);
        return signalPassFailure();
      }
    // Each restart splits some parameters in more chunks: a few suffice.
    for (int attempt = 0; attempt < 8; ++attempt) {
      Analysis analysis(forward, tp);
      switch (analysis.run()) {
      case Analysis::Outcome::Failed:
        return signalPassFailure();
      case Analysis::Outcome::Restart:
        continue;
      case Analysis::Outcome::Done:
        // The inputs' tables are whole before the rewrite splits them.
        for (BlockArgument arg : forward.getArguments())
          if (std::optional<IndexRange> range = getIndexRange(arg))
            setIndexRange(forward, arg.getArgNumber(), *range);
        rewrite(module, forward, analysis, tp);
        return;
      }
    }
    module.emitError("tensor parallelism: the chunks of split parameters "
                     "do not settle");
    signalPassFailure();
  }
};

} // namespace
} // namespace slapo
