//===- PropagateSharding.cpp - shardings and per-rank shapes --------------===//
//
// Sharding is a property of values, derived, never declared: the schedule
// splits parameters and places collectives, and this pass works out what
// every value is on one rank. It runs in two steps. The analysis walks
// @forward with the model's shapes and gives each value a sharding; it may
// find that a slice needs the parameters it comes from split per chunk, set
// that, and start over. Only when every op has a rule that holds does the
// rewrite give values their shapes on one rank, so a schedule that would
// compute a wrong value changes nothing and fails at the op that shows it.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Dialect/TensorBuilder.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

#include <numeric>

namespace slapo {
#define GEN_PASS_DEF_PROPAGATESHARDING
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

/// What one rank holds of a value.
struct Sharding {
  enum class Kind { Replicated, Split, Partial };
  Kind kind = Kind::Replicated;
  /// Split: the dim, made of `chunks` equal chunks each split over the ranks.
  int64_t dim = 0;
  int64_t chunks = 1;

  static Sharding replicated() { return {}; }
  static Sharding split(int64_t dim, int64_t chunks) {
    return {Kind::Split, dim, chunks};
  }
  static Sharding partial() { return {Kind::Partial, 0, 1}; }
  bool isReplicated() const { return kind == Kind::Replicated; }
  bool isSplit() const { return kind == Kind::Split; }
  bool isPartial() const { return kind == Kind::Partial; }
  bool operator==(const Sharding &other) const {
    return kind == other.kind && (kind != Kind::Split ||
                                  (dim == other.dim && chunks == other.chunks));
  }
  bool operator!=(const Sharding &other) const { return !(*this == other); }

  std::string str() const {
    if (isReplicated())
      return "replicated";
    if (isPartial())
      return "a partial sum";
    return "split along dim " + std::to_string(dim) +
           (chunks > 1 ? " in " + std::to_string(chunks) + " chunks" : "");
  }
};

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

std::string modulePathOf(Operation *op) {
  std::string path = getModulePath(op->getLoc());
  return path.empty() ? std::string("the root module") : "'" + path + "'";
}

/// `sch["PATH"]` for the module of `op`.
std::string selectorOf(Operation *op) {
  return "sch[\"" + getModulePath(op->getLoc()) + "\"]";
}

int64_t rankOf(Value value) { return shapeOf(value).size(); }

bool isFloat(Value value) { return elementTypeOf(value).isa<FloatType>(); }

/// The analysis of one walk over @forward.
class Analysis {
public:
  Analysis(func::FuncOp forward, int64_t tp) : forward(forward), tp(tp) {}

  enum class Outcome { Done, Restart, Failed };
  Outcome run();

  DenseMap<Value, ValueState> states;
  /// Slices of a split dim: their start and end on one rank.
  DenseMap<Operation *, std::pair<int64_t, int64_t>> localSlices;
  /// Adds (and linears) whose replicated bias moves after the all_reduce
  /// that completes their partial sum, and the biases each all_reduce adds.
  SmallVector<Operation *> deferredBiasOps;
  DenseMap<Operation *, SmallVector<Value, 1>> biasesAfter;
  /// Embeddings of a vocabulary split over the ranks, and cross-entropies
  /// of logits split along the classes: each rank computes with its block.
  SmallVector<EmbeddingOp> vocabParallelEmbeddings;
  SmallVector<CrossEntropyOp> vocabParallelLosses;

private:
  LogicalResult visit(Operation *op);
  ValueState &stateOf(Value value) { return states[value]; }
  Sharding shardingOf(Value value) { return states[value].sharding; }

  /// Sets `op`'s single result and collects what flows from its operands.
  void setResult(Operation *op, Sharding sharding);
  InFlightDiagnostic error(Operation *op) {
    return op->emitError("tensor parallelism: ");
  }
  LogicalResult partialReaches(Operation *op, Value partial);
  LogicalResult checkGradientsSynced(Operation *op);

  LogicalResult visitElementwise(Operation *op, ValueRange operands);
  LogicalResult visitDropout(DropoutOp op);
  LogicalResult visitMatmul(MatmulOp op);
  LogicalResult visitLinear(LinearOp op);
  LogicalResult visitReshape(ReshapeOp op);
  LogicalResult visitSlice(SliceOp op);
  LogicalResult visitReduction(Operation *op, Value input,
                               ArrayRef<int64_t> dims, bool keepdim,
                               bool linear);
  /// An op that computes along `dims` (softmax, norms): those dims must be
  /// whole on every rank; other splits pass through.
  LogicalResult visitAlongDims(Operation *op, Value input,
                               ArrayRef<int64_t> dims, ValueRange replicated);

  func::FuncOp forward;
  int64_t tp;
  bool restart = false;
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
  state.needsGradient &= isFloat(op->getResult(0));
  states[op->getResult(0)] = std::move(state);
}

LogicalResult Analysis::partialReaches(Operation *op, Value partial) {
  Operation *origin = stateOf(partial).partialOrigin;
  return error(op) << "a partial sum (from " << modulePathOf(origin)
                   << ", where a split contraction leaves each rank one term "
                      "of it) reaches '"
                   << op->getName().stripDialect() << "' in "
                   << modulePathOf(op)
                   << ", which needs the whole value; complete the sum "
                      "first: "
                   << selectorOf(origin)
                   << ".sync(\"fwd_post\", \"all_reduce\")";
}

/// A replicated value whose gradient matters, used to compute a split or
/// partial value, gets one term of its gradient on each rank: unless the
/// backward all-reduces it, the ranks' copies drift apart.
LogicalResult Analysis::checkGradientsSynced(Operation *op) {
  if (op->getNumResults() != 1 || shardingOf(op->getResult(0)).isReplicated())
    return success();
  for (Value operand : op->getOperands()) {
    ValueState &state = stateOf(operand);
    if (!state.sharding.isReplicated() || !state.needsGradient ||
        state.gradientSynced)
      continue;
    Operation *def = operand.getDefiningOp();
    if (auto getParam = dyn_cast_or_null<GetParamOp>(def))
      return error(op) << "the replicated parameter '" << getParam.getName()
                       << "' is used by '" << op->getName().stripDialect()
                       << "' in " << modulePathOf(op)
                       << " with split operands: each rank would get one "
                          "term of its gradient; shard it as well";
    return error(op) << "the replicated input of '"
                     << op->getName().stripDialect() << "' in "
                     << modulePathOf(op)
                     << " meets split computation: each rank would get one "
                        "term of its gradient; all-reduce it in the "
                        "backward: "
                     << selectorOf(op) << ".sync(\"bwd_post\", \"all_reduce\")";
  }
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

LogicalResult Analysis::visit(Operation *op) {
  // Values added to a partial sum wait for it to be complete; they ride
  // along only through more terms of the sum and reshapes that keep their
  // dims.
  if (!isa<AddOp, ReshapeOp, AllReduceOp>(op))
    for (Value operand : op->getOperands())
      if (!stateOf(operand).pendingBiases.empty())
        return partialReaches(op, operand);
  LogicalResult result =
      llvm::TypeSwitch<Operation *, LogicalResult>(op)
          .Case([&](GetParamOp getParam) {
            auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
                getParam, getParam.getNameAttr());
            ValueState state;
            state.needsGradient =
                !param.getBuffer() && isFloat(getParam.getResult());
            if (std::optional<uint64_t> axis = param.getShardAxis()) {
              state.sharding =
                  Sharding::split(*axis, param.getShardChunks().value_or(1));
              state.sources.push_back(param);
            }
            states[getParam.getResult()] = std::move(state);
            return success();
          })
          .Case<ConstantOp, ArangeOp>([&](Operation *op) {
            states[op->getResult(0)] = ValueState();
            return success();
          })
          .Case<AddOp, SubOp, MulOp, DivOp, PowOp, MaximumOp, MinimumOp,
                CompareOp, WhereOp>([&](Operation *op) {
            return visitElementwise(op, op->getOperands());
          })
          .Case<NegOp, AbsOp, ExpOp, LogOp, SqrtOp, RsqrtOp, TanhOp, SigmoidOp,
                ReluOp, SiluOp, SinOp, CosOp, GeluOp, CastOp>(
              [&](Operation *op) {
                return visitElementwise(op, op->getOperands());
              })
          .Case([&](DropoutOp dropout) { return visitDropout(dropout); })
          .Case([&](MatmulOp matmul) { return visitMatmul(matmul); })
          .Case([&](LinearOp linear) { return visitLinear(linear); })
          .Case([&](ReshapeOp reshape) { return visitReshape(reshape); })
          .Case([&](SliceOp slice) { return visitSlice(slice); })
          .Case([&](PermuteOp permute) -> LogicalResult {
            Sharding input = shardingOf(permute.getInput());
            Sharding sharding = input;
            if (input.isSplit())
              sharding.dim = llvm::find(permute.getPermutation(), input.dim) -
                             permute.getPermutation().begin();
            setResult(permute, sharding);
            return success();
          })
          .Case([&](BroadcastOp broadcast) -> LogicalResult {
            Sharding sharding = shardingOf(broadcast.getInput());
            if (sharding.isSplit()) {
              int64_t offset =
                  rankOf(broadcast.getResult()) - rankOf(broadcast.getInput());
              if (shapeOf(broadcast.getInput())[sharding.dim] !=
                  shapeOf(broadcast.getResult())[sharding.dim + offset])
                return error(broadcast)
                       << "cannot broadcast along the split dim";
              sharding.dim += offset;
            }
            setResult(broadcast, sharding);
            return success();
          })
          .Case([&](ConcatOp concat) -> LogicalResult {
            Sharding first = shardingOf(concat.getInputs().front());
            for (Value input : concat.getInputs())
              if (shardingOf(input) != first)
                return error(concat)
                       << "joins tensors sharded differently (" << first.str()
                       << " and " << shardingOf(input).str() << ")";
            if (first.isSplit() && first.dim == int64_t(concat.getDim()))
              return error(concat) << "joins tensors along their split dim";
            setResult(concat, first);
            return success();
          })
          .Case([&](TriangularOp tri) -> LogicalResult {
            Sharding sharding = shardingOf(tri.getInput());
            if (sharding.isSplit() &&
                sharding.dim >= rankOf(tri.getInput()) - 2)
              return error(tri) << "tril/triu of a tensor split along one of "
                                   "its last two dims";
            setResult(tri, sharding);
            return success();
          })
          .Case([&](SoftmaxOp softmax) {
            return visitAlongDims(softmax, softmax.getInput(),
                                  {int64_t(softmax.getDim())}, {});
          })
          .Case([&](LogSoftmaxOp softmax) {
            return visitAlongDims(softmax, softmax.getInput(),
                                  {int64_t(softmax.getDim())}, {});
          })
          .Case([&](LayerNormOp norm) {
            SmallVector<int64_t> dims;
            int64_t rank = rankOf(norm.getInput());
            for (int64_t d = rank - norm.getNormalizedRank(); d < rank; ++d)
              dims.push_back(d);
            SmallVector<Value> affine;
            for (Value value : {norm.getWeight(), norm.getBias()})
              if (value)
                affine.push_back(value);
            return visitAlongDims(norm, norm.getInput(), dims, affine);
          })
          .Case([&](EmbeddingOp embedding) -> LogicalResult {
            Sharding weight = shardingOf(embedding.getWeight());
            // Vocabulary-parallel: each rank looks up the rows it holds and
            // gives zeros for the others; the sum over the ranks is whole.
            if (weight.isSplit() && weight.dim == 0) {
              if (weight.chunks != 1 || embedding.getPaddingIdx())
                return error(embedding)
                       << "a vocabulary-parallel embedding needs its rows "
                          "split in one chunk and no padding_idx";
              vocabParallelEmbeddings.push_back(embedding);
              setResult(embedding, Sharding::partial());
              return success();
            }
            setResult(embedding,
                      weight.isSplit()
                          ? Sharding::split(rankOf(embedding.getResult()) - 1,
                                            weight.chunks)
                          : Sharding::replicated());
            return checkGradientsSynced(embedding);
          })
          .Case([&](CrossEntropyOp loss) -> LogicalResult {
            Sharding logits = shardingOf(loss.getLogits());
            if (logits.isPartial())
              return partialReaches(loss, loss.getLogits());
            // Vocabulary-parallel: the ranks combine their blocks' log-sum-
            // exps and the owner's target logit; no rank holds all logits.
            if (logits.isSplit()) {
              if (logits.dim != 1 || logits.chunks != 1)
                return error(loss) << "cross-entropy of logits " << logits.str()
                                   << ": only classes (dim 1) split in one "
                                      "chunk are vocabulary-parallel";
              vocabParallelLosses.push_back(loss);
            }
            setResult(loss, Sharding::replicated());
            return success();
          })
          .Case([&](SumOp sum) {
            return visitReduction(sum, sum.getInput(), sum.getDims(),
                                  sum.getKeepdim(), /*linear=*/true);
          })
          .Case([&](MeanOp mean) {
            return visitReduction(mean, mean.getInput(), mean.getDims(),
                                  mean.getKeepdim(), /*linear=*/true);
          })
          .Case([&](MaxOp max) {
            return visitReduction(max, max.getInput(), max.getDims(),
                                  max.getKeepdim(), /*linear=*/false);
          })
          .Case([&](AllReduceOp allReduce) -> LogicalResult {
            if (allReduce.getGroup() != ProcessGroup::tp ||
                allReduce.getNumOperands() != 1)
              return error(allReduce) << "only single tensor-parallel "
                                         "all_reduces belong in @forward";
            Value input = allReduce.getInputs().front();
            if (!shardingOf(input).isPartial())
              return error(allReduce)
                     << "all_reduce of a value that is "
                     << shardingOf(input).str()
                     << ", not a partial sum: it would multiply it by the "
                        "tensor-parallel size";
            biasesAfter[allReduce] = stateOf(input).pendingBiases;
            ValueState state;
            state.needsGradient = stateOf(input).needsGradient;
            states[allReduce.getResult(0)] = std::move(state);
            return success();
          })
          .Case([&](GradAllReduceOp sync) -> LogicalResult {
            if (!shardingOf(sync.getInput()).isReplicated())
              return error(sync) << "sync(\"bwd_post\", \"all_reduce\") of a "
                                    "value that is "
                                 << shardingOf(sync.getInput()).str()
                                 << ": only a replicated value's gradient "
                                    "is all-reduced";
            ValueState state = stateOf(sync.getInput());
            state.gradientSynced = true;
            states[sync.getResult()] = std::move(state);
            return success();
          })
          .Case([&](AllGatherOp gather) -> LogicalResult {
            Sharding input = shardingOf(gather.getInput());
            if (!input.isSplit() || input.dim != int64_t(gather.getDim()) ||
                input.chunks != 1)
              return error(gather) << "all_gather along dim " << gather.getDim()
                                   << " of a value that is " << input.str();
            setResult(gather, Sharding::replicated());
            return success();
          })
          .Case([&](ScatterOp scatter) -> LogicalResult {
            Sharding input = shardingOf(scatter.getInput());
            if (!input.isReplicated())
              return error(scatter) << "scatter of a value that is "
                                    << input.str() << ", not replicated";
            setResult(scatter, Sharding::split(scatter.getDim(), 1));
            return success();
          })
          .Case([&](ReduceScatterOp scatter) -> LogicalResult {
            Value input = scatter.getInput();
            if (!shardingOf(input).isPartial())
              return error(scatter)
                     << "reduce_scatter of a value that is "
                     << shardingOf(input).str() << ", not a partial sum";
            setResult(scatter, Sharding::split(scatter.getDim(), 1));
            return success();
          })
          .Case([&](func::ReturnOp ret) -> LogicalResult {
            for (Value value : ret.getOperands()) {
              if (shardingOf(value).isPartial())
                return partialReaches(ret, value);
              if (shardingOf(value).isSplit())
                return error(ret)
                       << "@forward returns a value that is "
                       << shardingOf(value).str() << "; gather it first";
            }
            return success();
          })
          .Default([&](Operation *op) {
            return error(op)
                   << "'" << op->getName() << "' has no sharding rule yet";
          });
  if (failed(result) || restart || isa<func::ReturnOp>(op))
    return result;
  // Collectives and views of synced values carry the sync; every other op
  // that makes split values from replicated ones is checked.
  if (isa<ReshapeOp, PermuteOp, BroadcastOp>(op)) {
    ValueState &input = stateOf(op->getOperand(0));
    stateOf(op->getResult(0)).gradientSynced = input.gradientSynced;
  }
  if (op->hasTrait<OpTrait::Collective>() ||
      llvm::is_contained(deferredBiasOps, op))
    return success();
  return checkGradientsSynced(op);
}

LogicalResult Analysis::visitElementwise(Operation *op, ValueRange operands) {
  int64_t rank = rankOf(op->getResult(0));
  std::optional<Sharding> split;
  SmallVector<Value> partials, replicated;
  for (Value operand : operands) {
    Sharding sharding = shardingOf(operand);
    if (sharding.isPartial()) {
      partials.push_back(operand);
      continue;
    }
    if (sharding.isReplicated()) {
      replicated.push_back(operand);
      continue;
    }
    sharding.dim += rank - rankOf(operand);
    if (split && *split != sharding)
      return error(op) << "combines operands " << split->str() << " and "
                       << sharding.str();
    split = sharding;
  }
  if (split) {
    if (!partials.empty())
      return partialReaches(op, partials.front());
    for (Value operand : replicated) {
      int64_t dim = split->dim - (rank - rankOf(operand));
      if (dim >= 0 && shapeOf(operand)[dim] != 1)
        return error(op) << "combines an operand " << split->str()
                         << " with a replicated one of shape "
                         << shapeString(shapeOf(operand))
                         << " that is not 1 along it";
    }
    setResult(op, *split);
    return success();
  }
  if (partials.empty()) {
    setResult(op, Sharding::replicated());
    return success();
  }
  // Partial sums stay partial through what is linear in them.
  bool linear =
      llvm::TypeSwitch<Operation *, bool>(op)
          .Case<AddOp, SubOp>([&](Operation *op) {
            return replicated.empty() &&
                   (isa<AddOp>(op) || llvm::none_of(partials, [&](Value p) {
                      return !stateOf(p).pendingBiases.empty();
                    }));
          })
          .Case<MulOp>([&](Operation *) { return partials.size() == 1; })
          .Case([&](DivOp div) {
            return partials.size() == 1 && partials.front() == div.getLhs();
          })
          .Case<NegOp>([](Operation *) { return true; })
          .Case([](CastOp cast) { return isFloat(cast.getResult()); })
          // Every rank draws the mask of the whole value (visitDropout).
          .Case<DropoutOp>([](Operation *) { return true; })
          .Default([](Operation *) { return false; });
  if (linear) {
    setResult(op, Sharding::partial());
    return success();
  }
  // partial + bias: the bias is added once, after the sum is complete.
  if (isa<AddOp>(op) && partials.size() == 1 &&
      llvm::all_of(replicated, [&](Value bias) {
        return stateOf(bias).pendingBiases.empty() &&
               rankOf(bias) <= rankOf(partials.front()) &&
               shapeOf(partials.front()).take_back(rankOf(bias)) ==
                   shapeOf(bias);
      })) {
    setResult(op, Sharding::partial());
    llvm::append_range(stateOf(op->getResult(0)).pendingBiases, replicated);
    deferredBiasOps.push_back(op);
    return success();
  }
  return partialReaches(op, partials.front());
}

/// Without fork_rng every rank draws its part of the whole value's mask,
/// which suits every sharding: a replicated value stays so, and the terms
/// of a partial sum are dropped alike. Forked masks differ per rank: only a
/// split value, whose elements differ per rank anyway, takes them.
LogicalResult Analysis::visitDropout(DropoutOp op) {
  Sharding input = shardingOf(op.getInput());
  if (op.getForkRng() && !input.isSplit())
    return error(op) << "fork_rng() gives each rank its own dropout mask, "
                        "but the input of 'dropout' in "
                     << modulePathOf(op) << " is " << input.str()
                     << (input.isPartial()
                             ? ": the ranks' terms would be dropped unalike"
                             : ": the ranks' copies would differ")
                     << "; fork only modules whose dropouts meet split "
                        "activations";
  return visitElementwise(op, op.getInput());
}

LogicalResult Analysis::visitMatmul(MatmulOp op) {
  Value lhs = op.getLhs(), rhs = op.getRhs();
  Sharding l = shardingOf(lhs), r = shardingOf(rhs);
  int64_t rank = rankOf(op.getResult());
  int64_t lhsRank = rankOf(lhs), rhsRank = rankOf(rhs);
  if (l.isPartial() || r.isPartial()) {
    if (l.isPartial() && r.isReplicated())
      return setResult(op, Sharding::partial()), success();
    if (r.isPartial() && l.isReplicated())
      return setResult(op, Sharding::partial()), success();
    return partialReaches(op, l.isPartial() ? lhs : rhs);
  }
  if (l.isReplicated() && r.isReplicated())
    return setResult(op, Sharding::replicated()), success();
  // The contraction dim split on both sides: each rank sums its terms.
  bool lhsContracted = l.isSplit() && l.dim == lhsRank - 1;
  bool rhsContracted = r.isSplit() && r.dim == rhsRank - 2;
  if (lhsContracted || rhsContracted) {
    if (!(lhsContracted && rhsContracted) || l.chunks != r.chunks)
      return error(op) << "multiplies lhs [..., M, K] " << l.str()
                       << " by rhs [..., K, N] " << r.str()
                       << ": splitting the contraction needs K split on "
                          "both (lhs's last dim, rhs's second to last), "
                          "in the same chunks";
    return setResult(op, Sharding::partial()), success();
  }
  // Otherwise each split is of an outer dim of the result: M, N or a batch
  // dim; at most one may be split, or both operands along the same batch
  // dim.
  auto toResult = [&](Sharding s, int64_t operandRank, bool isLhs) {
    if (isLhs && s.dim == operandRank - 2)
      s.dim = rank - 2;
    else if (!isLhs && s.dim == operandRank - 1)
      s.dim = rank - 1;
    else
      s.dim += rank - operandRank;
    return s;
  };
  std::optional<Sharding> fromLhs, fromRhs;
  if (l.isSplit())
    fromLhs = toResult(l, lhsRank, true);
  if (r.isSplit())
    fromRhs = toResult(r, rhsRank, false);
  if (fromLhs && fromRhs && *fromLhs != *fromRhs)
    return error(op) << "multiplies operands " << l.str() << " and " << r.str()
                     << ", which leaves no split on one rank";
  Sharding result = fromLhs ? *fromLhs : *fromRhs;
  // A batch dim split on one side only: the other side broadcasts along it.
  if (result.dim < rank - 2 && !(fromLhs && fromRhs)) {
    Value other = fromLhs ? rhs : lhs;
    int64_t dim = result.dim - (rank - rankOf(other));
    if (dim >= 0 && shapeOf(other)[dim] != 1)
      return error(op) << "multiplies an operand split along batch dim "
                       << result.dim << " with a replicated one";
  }
  setResult(op, result);
  return success();
}

LogicalResult Analysis::visitLinear(LinearOp op) {
  Sharding input = shardingOf(op.getInput()),
           weight = shardingOf(op.getWeight());
  Value bias = op.getBias();
  int64_t last = rankOf(op.getResult()) - 1;
  if (input.isPartial())
    return partialReaches(op, op.getInput());
  if (input.isReplicated() && weight.isReplicated()) {
    if (bias && !shardingOf(bias).isReplicated())
      return error(op) << "a split bias with a replicated weight";
    return setResult(op, Sharding::replicated()), success();
  }
  // Column-parallel: each rank computes its output features.
  if (input.isReplicated() && weight.isSplit() && weight.dim == 0) {
    if (bias && shardingOf(bias) != Sharding::split(0, weight.chunks))
      return error(op) << "the bias of a weight " << weight.str()
                       << " must be split alike, not "
                       << shardingOf(bias).str();
    return setResult(op, Sharding::split(last, weight.chunks)), success();
  }
  // Row-parallel: each rank sums its input features; the bias comes after.
  if (input.isSplit() && input.dim == last && weight.isSplit() &&
      weight.dim == 1 && input.chunks == weight.chunks) {
    if (bias && !shardingOf(bias).isReplicated())
      return error(op) << "the bias of a row-parallel weight must be "
                          "replicated, not "
                       << shardingOf(bias).str();
    setResult(op, Sharding::partial());
    if (bias) {
      stateOf(op.getResult()).pendingBiases.push_back(bias);
      deferredBiasOps.push_back(op);
    }
    return success();
  }
  return error(op) << "multiplies an input " << input.str() << " by a weight "
                   << weight.str() << " ([out, in])";
}

LogicalResult Analysis::visitReshape(ReshapeOp op) {
  Value input = op.getInput();
  ValueState &state = stateOf(input);
  if (state.sharding.isPartial() && !state.pendingBiases.empty()) {
    // The biases broadcast along the trailing dims, which must stay.
    for (Value bias : state.pendingBiases)
      if (shapeOf(op.getResult()).take_back(rankOf(bias)) != shapeOf(bias))
        return error(op) << "a reshape of a partial sum changes the dims its "
                            "bias is added along";
  }
  if (!state.sharding.isSplit())
    return setResult(op, state.sharding), success();
  // The split dim d must start a dim of the result: the same elements
  // precede it. Then it either splits into dims led by that one, or merges
  // with the dims after it into that one.
  ArrayRef<int64_t> in = shapeOf(input), out = shapeOf(op.getResult());
  Sharding split = state.sharding;
  int64_t before = 1;
  for (int64_t d = 0; d < split.dim; ++d)
    before *= in[d];
  int64_t prefix = 1, dim = 0;
  while (dim < int64_t(out.size()) && prefix < before)
    prefix *= out[dim++];
  while (dim + 1 < int64_t(out.size()) && out[dim] == 1)
    ++dim;
  int64_t size = in[split.dim];
  bool aligned = prefix == before && dim < int64_t(out.size());
  bool fits = aligned &&
              (out[dim] % size == 0 ||
               (size % out[dim] == 0 && out[dim] % (split.chunks * tp) == 0));
  if (!fits)
    return error(op) << "reshapes a tensor of shape " << shapeString(in) << " "
                     << split.str() << " to " << shapeString(out)
                     << ", which does not keep the split whole";
  split.dim = dim;
  setResult(op, split);
  return success();
}

LogicalResult Analysis::visitSlice(SliceOp op) {
  Sharding input = shardingOf(op.getInput());
  if (!input.isSplit() || input.dim != int64_t(op.getDim()))
    return setResult(op, input), success();
  int64_t size = shapeOf(op.getInput())[input.dim];
  int64_t start = op.getStart(), end = op.getEnd();
  int64_t chunk = size / input.chunks;
  if (op.getStep() == 1 && start % chunk == 0 && end % chunk == 0) {
    int64_t local = chunk / tp;
    localSlices[op] = {start / chunk * local, end / chunk * local};
    setResult(op, Sharding::split(input.dim, (end - start) / chunk));
    return success();
  }
  // Split the parameters per chunk so that each rank holds its part of
  // every slice taken.
  int64_t chunks = size / std::gcd(size, std::gcd(start, end));
  auto sources = stateOf(op.getInput()).sources;
  if (op.getStep() != 1 || chunks % input.chunks != 0 ||
      size % (chunks * tp) != 0 || sources.empty())
    return error(op) << "slices [" << start << ", " << end << ") of dim "
                     << input.dim << " (" << size << ") of a tensor "
                     << input.str() << ": the slice cannot be aligned with "
                     << tp << " ranks";
  for (ParamOp source : sources)
    source.setShardChunks(chunks);
  restart = true;
  return success();
}

LogicalResult Analysis::visitReduction(Operation *op, Value input,
                                       ArrayRef<int64_t> dims, bool keepdim,
                                       bool linear) {
  Sharding sharding = shardingOf(input);
  if (sharding.isPartial()) {
    if (!linear)
      return partialReaches(op, input);
    return setResult(op, sharding), success();
  }
  if (!sharding.isSplit())
    return setResult(op, sharding), success();
  if (llvm::is_contained(dims, sharding.dim)) {
    if (!isa<SumOp>(op))
      return error(op) << "'" << op->getName().stripDialect() << "' over dim "
                       << sharding.dim << ", which is split over the ranks";
    return setResult(op, Sharding::partial()), success();
  }
  if (!keepdim)
    sharding.dim -=
        llvm::count_if(dims, [&](int64_t d) { return d < sharding.dim; });
  setResult(op, sharding);
  return success();
}

LogicalResult Analysis::visitAlongDims(Operation *op, Value input,
                                       ArrayRef<int64_t> dims,
                                       ValueRange replicated) {
  Sharding sharding = shardingOf(input);
  if (sharding.isPartial())
    return partialReaches(op, input);
  if (sharding.isSplit() && llvm::is_contained(dims, sharding.dim))
    return error(op) << "'" << op->getName().stripDialect() << "' along dim "
                     << sharding.dim << ", which is split over the ranks";
  for (Value value : replicated)
    if (!shardingOf(value).isReplicated())
      return error(op) << "the affine parameters of a norm must be "
                          "replicated, not "
                       << shardingOf(value).str();
  setResult(op, sharding);
  return success();
}

RankedTensorType localType(Type type, Sharding sharding, int64_t tp) {
  auto tensor = type.cast<RankedTensorType>();
  if (!sharding.isSplit())
    return tensor;
  SmallVector<int64_t> shape(tensor.getShape());
  shape[sharding.dim] /= tp;
  return RankedTensorType::get(shape, tensor.getElementType());
}

/// The first index of this rank's block of `size` indices, of `type`.
Value blockStart(TensorBuilder &g, int64_t size, Type type) {
  OpBuilder &builder = g.getBuilder();
  Value rank = builder.create<GroupRankOp>(
      g.getLoc(), RankedTensorType::get({}, builder.getI64Type()),
      ProcessGroup::tp);
  return g.mul(g.cast(rank, type), g.integerScalar(size, type));
}

/// `indices - start` where that lies in [0, size), else 0; `inRange` says
/// where.
Value localIndices(TensorBuilder &g, Value indices, Value start, int64_t size,
                   Value &inRange) {
  Type type = elementTypeOf(indices);
  Value local = g.sub(indices, start);
  Value atLeastZero =
      g.compare(ComparePredicate::ge, local, g.integerScalar(0, type));
  Value belowSize =
      g.compare(ComparePredicate::lt, local, g.integerScalar(size, type));
  inRange = g.where(atLeastZero, belowSize, atLeastZero);
  return g.where(inRange, local, g.integerScalar(0, type));
}

/// A lookup in this rank's rows: zero rows for the other ranks' indices.
void lowerVocabParallelEmbedding(EmbeddingOp embedding) {
  OpBuilder builder(embedding);
  TensorBuilder g(builder, embedding.getLoc());
  Value weight = embedding.getWeight(), indices = embedding.getIndices();
  int64_t rows = shapeOf(weight)[0];
  Value inRange;
  Value local = localIndices(
      g, indices, blockStart(g, rows, elementTypeOf(indices)), rows, inRange);
  Value looked = builder.create<EmbeddingOp>(
      embedding.getLoc(), embedding.getType(), weight, local, IntegerAttr());
  SmallVector<int64_t> maskShape(shapeOf(indices));
  maskShape.push_back(1);
  Value kept =
      g.where(g.reshape(inRange, maskShape), looked, g.scalarLike(0, looked));
  embedding.replaceAllUsesWith(kept);
  embedding.erase();
}

/// Cross-entropy of logits [N, C/tp], this rank's classes: each row's
/// log-sum-exp from the ranks' own (N values per rank, gathered), minus the
/// target's logit, which only its owner adds to an all_reduce. As PyTorch's,
/// targets equal to ignore_index count neither in the sum nor in the mean.
void lowerVocabParallelCrossEntropy(CrossEntropyOp loss, int64_t tp) {
  OpBuilder builder(loss);
  Location loc = loss.getLoc();
  TensorBuilder g(builder, loc);
  Value logits = loss.getLogits(), target = loss.getTarget();
  Type type = elementTypeOf(logits), indexType = elementTypeOf(target);
  int64_t rows = shapeOf(logits)[0], classes = shapeOf(logits)[1];
  auto logSumExp = [&](Value value) {
    Value largest = g.max(value, {1}, /*keepdim=*/true);
    Value sum = g.sum(g.unary<ExpOp>(g.sub(value, largest)), {1}, true);
    return g.add(g.unary<LogOp>(sum), largest);
  };
  Value ranksLogSumExp =
      builder.create<AllGatherOp>(loc, RankedTensorType::get({rows, tp}, type),
                                  logSumExp(logits), ProcessGroup::tp, 1);
  Value rowLogSumExp = g.reshape(logSumExp(ranksLogSumExp), {rows});
  Value inRange;
  Value local = localIndices(g, target, blockStart(g, classes, indexType),
                             classes, inRange);
  Value ownTargetLogit = g.sum(
      g.mul(logits,
            g.oneHot(g.where(inRange, local, g.integerScalar(-1, indexType)),
                     classes, type)),
      {1}, /*keepdim=*/false);
  Value targetLogit =
      builder
          .create<AllReduceOp>(loc, ownTargetLogit, ProcessGroup::tp,
                               /*mean=*/false)
          .getResult(0);
  Value counted =
      g.cast(g.compare(ComparePredicate::ne, target,
                       g.integerScalar(loss.getIgnoreIndex(), indexType)),
             type);
  Value perRow = g.mul(g.sub(rowLogSumExp, targetLogit), counted);
  Value result = perRow;
  if (loss.getReduction() != Reduction::none) {
    result = g.sum(perRow, {0}, /*keepdim=*/false);
    if (loss.getReduction() == Reduction::mean)
      result = g.div(result, g.sum(counted, {0}, /*keepdim=*/false));
  }
  loss.replaceAllUsesWith(result);
  loss.erase();
}

/// Gives every value its shape on one rank, slices their local bounds, and
/// moves biases of partial sums after the all_reduce that completes them.
void rewrite(ModuleOp module, func::FuncOp forward, Analysis &analysis,
             int64_t tp) {
  for (ParamOp param : module.getOps<ParamOp>())
    if (std::optional<uint64_t> axis = param.getShardAxis())
      param.setTypeAttr(TypeAttr::get(
          localType(param.getType(), Sharding::split(*axis, 1), tp)));
  for (Operation &op : forward.getBody().front()) {
    for (Value result : op.getResults())
      result.setType(
          localType(result.getType(), analysis.states[result].sharding, tp));
    if (auto slice = dyn_cast<SliceOp>(op)) {
      auto it = analysis.localSlices.find(slice);
      if (it != analysis.localSlices.end()) {
        slice.setStart(it->second.first);
        slice.setEnd(it->second.second);
      }
    }
    // A split operand's mask is its part of the whole value's.
    if (auto dropout = dyn_cast<DropoutOp>(op)) {
      Sharding input = analysis.states[dropout.getInput()].sharding;
      if (input.isSplit()) {
        dropout.setShardAxis(input.dim);
        if (input.chunks > 1)
          dropout.setShardChunks(input.chunks);
      }
    }
  }
  for (EmbeddingOp embedding : analysis.vocabParallelEmbeddings)
    lowerVocabParallelEmbedding(embedding);
  for (CrossEntropyOp loss : analysis.vocabParallelLosses)
    lowerVocabParallelCrossEntropy(loss, tp);
  OpBuilder builder(module.getContext());
  for (Operation *op : analysis.deferredBiasOps) {
    if (auto linear = dyn_cast<LinearOp>(op)) {
      builder.setInsertionPoint(linear);
      Value unbiased = builder.create<LinearOp>(
          linear.getLoc(), linear.getType(), linear.getInput(),
          linear.getWeight(), Value());
      linear.replaceAllUsesWith(unbiased);
    } else {
      Value partial = *llvm::find_if(op->getOperands(), [&](Value operand) {
        return analysis.states[operand].sharding.isPartial();
      });
      op->getResult(0).replaceAllUsesWith(partial);
    }
    op->erase();
  }
  for (auto &[op, biases] : analysis.biasesAfter) {
    if (biases.empty())
      continue;
    Value sum = op->getResult(0);
    builder.setInsertionPointAfter(op);
    Value biased = sum;
    Operation *first = nullptr;
    for (Value bias : biases) {
      biased = builder.create<AddOp>(bias.getDefiningOp()->getLoc(),
                                     sum.getType(), biased, bias);
      first = first ? first : biased.getDefiningOp();
    }
    sum.replaceAllUsesExcept(biased, first);
  }
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
          if (std::optional<int64_t> bound = getSmallestIndexedTable(arg))
            forward.setArgAttr(
                arg.getArgNumber(), kIndexBoundAttrName,
                IntegerAttr::get(IntegerType::get(module.getContext(), 64),
                                 *bound));
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
