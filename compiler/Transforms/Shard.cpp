//===- Shard.cpp - schedule primitive shard(param, axis) ------------------===//
//
// Only marks parameters: what a split parameter does to every value after
// it is slapo-propagate-sharding's, which sees the whole graph.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "slapo/Dialect/SlapoOps.h"

#include "llvm/ADT/StringMap.h"

namespace slapo {
#define GEN_PASS_DEF_SHARD
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

struct ShardPass : impl::ShardBase<ShardPass> {
  using ShardBase::ShardBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Tied parameters are one symbol under several state_dict names.
    llvm::StringMap<ParamOp> byName;
    for (ParamOp param : module.getOps<ParamOp>()) {
      byName[param.getSymName()] = param;
      if (ArrayAttr aliases = param.getAliasesAttr())
        for (StringRef alias : aliases.getAsValueRange<StringAttr>())
          byName[alias] = param;
    }
    bool failed = false;
    for (const std::string &path : modules) {
      std::string name = path.empty() ? param : path + "." + param;
      ParamOp target = byName.lookup(name);
      if (!target) {
        module.emitError("slapo-shard: the model has no parameter '")
            << name << "'";
        failed = true;
        continue;
      }
      int64_t rank = target.getTensorType().getRank();
      if (axis < 0 || axis >= rank) {
        target.emitError("slapo-shard: axis ")
            << axis << " of '" << name << "' is not a dim of "
            << target.getTensorType();
        failed = true;
        continue;
      }
      if (std::optional<int64_t> earlier = target.getShardAxis();
          earlier && *earlier != axis) {
        target.emitError("slapo-shard: '")
            << name << "' is split along axis " << *earlier
            << " already; a parameter is split along one axis";
        failed = true;
        continue;
      }
      target.setShardAxis(axis);
    }
    if (failed)
      signalPassFailure();
  }
};

} // namespace
} // namespace slapo
