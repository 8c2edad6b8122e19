//===- Sync.cpp - schedule primitive sync(mode, op[, axis]) ---------------===//
//
// A module boundary in the IR is where values cross between the ops at the
// module's path and the others. The collectives are inserted with the
// model's (global) types; slapo-propagate-sharding gives them their shapes
// on one rank and checks each against the sharding it meets.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"
#include "slapo/Transforms/Pipeline.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/MapVector.h"

namespace slapo {
#define GEN_PASS_DEF_SYNC
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

/// The float values of `forward` that depend on a trained parameter: the
/// ones with a gradient.
llvm::DenseSet<Value> getValuesWithGradient(func::FuncOp forward) {
  llvm::DenseSet<Value> withGradient;
  for (Operation &op : forward.getBody().front()) {
    bool fromParam = false;
    if (auto getParam = dyn_cast<GetParamOp>(op)) {
      auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
          getParam, getParam.getNameAttr());
      fromParam = param && !param.getBuffer();
    }
    bool depends = fromParam || llvm::any_of(op.getOperands(), [&](Value v) {
                     return withGradient.contains(v);
                   });
    for (Value result : op.getResults())
      if (depends &&
          mlir::getElementTypeOrSelf(result.getType()).isa<FloatType>())
        withGradient.insert(result);
  }
  return withGradient;
}

/// "%3 (layer_norm in transformer.h.0)", for errors listing boundary values.
std::string describe(Value value) {
  Operation *def = value.getDefiningOp();
  if (!def)
    return "argument #" +
           std::to_string(value.cast<BlockArgument>().getArgNumber());
  return "'" + def->getName().stripDialect().str() + "' in " +
         describeModuleOf(def);
}

struct SyncPass : impl::SyncBase<SyncPass> {
  using SyncBase::SyncBase;

  void runOnOperation() override {
    auto forward = lookupForward(getOperation(), "slapo-sync");
    if (!forward)
      return signalPassFailure();
    StringRef modes[] = {"fwd_pre", "fwd_post", "bwd_post"};
    StringRef ops[] = {"all_reduce", "all_gather", "scatter", "reduce_scatter"};
    if (!llvm::is_contained(modes, StringRef(mode)) ||
        !llvm::is_contained(ops, StringRef(op))) {
      getOperation().emitError("slapo-sync: unknown mode '")
          << mode << "' or op '" << op << "'";
      return signalPassFailure();
    }
    withGradient = getValuesWithGradient(forward);
    for (const std::string &path : modules)
      if (failed(syncModule(forward, path)))
        signalPassFailure();
  }

  /// Values with a gradient; bwd_post concerns only those inputs.
  llvm::DenseSet<Value> withGradient;

  LogicalResult syncModule(func::FuncOp forward, StringRef path) {
    SmallVector<Operation *> ops;
    for (Operation &candidate : forward.getBody().front().without_terminator())
      if (isInModule(&candidate, path))
        ops.push_back(&candidate);
    if (ops.empty())
      return forward.emitError("slapo-sync: module '")
             << path << "' has no ops in @forward";
    llvm::SmallPtrSet<Operation *, 16> inside(ops.begin(), ops.end());
    // A module called several times (ALBERT's shared layer) has its ops
    // once per call: the calls are the groups of its ops linked by the
    // values they pass each other or take together from outside (for
    // fwd_post and bwd_post, values with a gradient; parameters and
    // constants never link calls). Each call is synced on its own.
    llvm::EquivalenceClasses<Operation *> calls;
    // Each value of the module's boundary, with an op of its call.
    llvm::MapVector<Value, Operation *> boundary;
    for (Operation *inner : ops) {
      calls.insert(inner);
      for (Value operand : inner->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (def && isa<GetParamOp, ConstantOp>(def))
          continue;
        if (def && inside.contains(def)) {
          calls.unionSets(def, inner);
          continue;
        }
        if (mode != "fwd_pre" && !withGradient.contains(operand))
          continue;
        auto [it, inserted] = boundary.insert({operand, inner});
        if (!inserted)
          calls.unionSets(it->second, inner);
      }
    }
    if (mode == "fwd_post") {
      boundary.clear(); // what links the calls is not the output
      // A parameter the module owns is not its output, even where other
      // modules share it (a tied lm_head).
      for (Operation *inner : ops)
        for (Value result : inner->getResults())
          if (!isa<GetParamOp>(inner))
            if (llvm::any_of(result.getUsers(), [&](Operation *user) {
                  return !inside.contains(user);
                }))
              boundary.insert({result, inner});
    }
    // The module's input has no gradient (it is the model's data): there
    // is nothing for the backward to all-reduce.
    if (mode == "bwd_post" && boundary.empty())
      return success();
    // Each call's boundary values, in the order of the module's ops.
    llvm::MapVector<Operation *, SmallVector<Value>> callBoundaries;
    for (auto [value, inner] : boundary)
      callBoundaries[calls.getLeaderValue(inner)].push_back(value);
    StringRef side = mode == "fwd_post" ? "output" : "input";
    auto wrong = llvm::find_if(
        callBoundaries, [](auto &call) { return call.second.size() != 1; });
    if (boundary.empty() || wrong != callBoundaries.end()) {
      ArrayRef<Value> values;
      if (wrong != callBoundaries.end())
        values = wrong->second;
      auto diag = emitError(getPrimitiveLocation(ops.front(), *this), "sync(\"")
                  << mode << "\", \"" << op << "\") needs one " << side
                  << " of module '" << path << "'";
      if (callBoundaries.size() > 1)
        diag << " in each of its " << callBoundaries.size() << " calls";
      diag << ", which has " << values.size();
      for (Value value : values)
        diag.attachNote(value.getLoc()) << side << ": " << describe(value);
      return diag;
    }
    for (auto &[leader, values] : callBoundaries)
      if (failed(syncCall(ops, calls, leader, values.front(), path)))
        return failure();
    return success();
  }

  /// Inserts the collective on `value`, the boundary of the call of the
  /// module at `path` whose ops are those of `ops` in `leader`'s class.
  LogicalResult syncCall(ArrayRef<Operation *> ops,
                         const llvm::EquivalenceClasses<Operation *> &calls,
                         Operation *leader, Value value, StringRef path) {
    Location loc = getPrimitiveLocation(ops.front(), *this);
    StringRef side = mode == "fwd_post" ? "output" : "input";
    auto type = value.getType().cast<RankedTensorType>();
    int64_t dim = axis < 0 ? axis + type.getRank() : axis;
    if (op != "all_reduce" && (dim < 0 || dim >= type.getRank()))
      return emitError(loc, "sync axis ")
             << axis << " is not a dim of the " << side << " of '" << path
             << "' (" << type << ")";
    if (mode == "bwd_post" && op != "all_reduce")
      return emitError(loc, "sync(\"bwd_post\", \"")
             << op << "\") is not supported: the backward of a module's "
             << "input is all-reduced (\"all_reduce\") or left alone";

    auto inModule = [&](Operation *user) {
      return calls.findValue(user) != calls.end();
    };
    auto inCall = [&](Operation *user) {
      return inModule(user) && calls.getLeaderValue(user) == leader;
    };
    OpBuilder builder(&getContext());
    // Like its location, the collective's module is that of the module's
    // first op.
    ModulePathScope scope(builder, ops.front());
    if (mode == "fwd_post")
      builder.setInsertionPointAfterValue(value);
    else
      builder.setInsertionPoint(*llvm::find_if(ops, [&](Operation *inner) {
        return inCall(inner) && llvm::is_contained(inner->getOperands(), value);
      }));
    Value synced = buildCollective(builder, loc, value, type, dim);
    value.replaceUsesWithIf(synced, [&](OpOperand &use) {
      Operation *user = use.getOwner();
      if (user == synced.getDefiningOp())
        return false;
      return mode == "fwd_post" ? !inModule(user) : inCall(user);
    });
    return success();
  }

  Value buildCollective(OpBuilder &builder, Location loc, Value value,
                        RankedTensorType type, int64_t dim) {
    if (mode == "bwd_post")
      return builder.create<GradAllReduceOp>(loc, value, ProcessGroup::tp);
    if (op == "all_reduce")
      return builder
          .create<AllReduceOp>(loc, value, ProcessGroup::tp, /*mean=*/false)
          .getResult(0);
    if (op == "all_gather")
      return builder.create<AllGatherOp>(loc, type, value, ProcessGroup::tp,
                                         dim);
    if (op == "scatter")
      return builder.create<ScatterOp>(loc, type, value, ProcessGroup::tp, dim);
    return builder.create<ReduceScatterOp>(loc, type, value, ProcessGroup::tp,
                                           dim);
  }
};

} // namespace
} // namespace slapo
