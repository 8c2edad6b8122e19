//===- ForkRng.cpp - schedule primitive fork_rng() ------------------------===//
//
// Only marks dropouts (and flash attentions' dropouts): which mask a rank draws
// is the kernel's (see slapo.dropout), and whether forking suits the value a
// dropout meets is slapo-propagate-sharding's, which knows every value's
// sharding.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Transforms/Pipeline.h"

namespace slapo {
#define GEN_PASS_DEF_FORKRNG
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

struct ForkRngPass : impl::ForkRngBase<ForkRngPass> {
  using ForkRngBase::ForkRngBase;

  void runOnOperation() override {
    auto forward = lookupForward(getOperation(), "slapo-fork-rng");
    if (!forward)
      return signalPassFailure();
    for (const std::string &path : modules) {
      bool forked = false;
      for (auto dropout : forward.getBody().front().getOps<DropoutOp>()) {
        if (!isInModule(dropout, path))
          continue;
        dropout.setForkRng(true);
        forked = true;
      }
      // An attention dropout that replace("flash_attention") has moved into
      // the kernel, which is in the attention's module: a module inside it
      // (the dropout's own) no longer holds an op to mark.
      for (auto attention :
           forward.getBody().front().getOps<FlashAttentionOp>()) {
        if (!attention.getDropoutP())
          continue;
        StringRef attentionPath = getModulePath(attention);
        if (path != attentionPath && isWithinModule(path, attentionPath)) {
          emitError(getPrimitiveLocation(attention, *this),
                    "fork_rng(): module '")
              << path << "' is inside '" << attentionPath
              << "', whose attention replace(\"flash_attention\") made one "
                 "op, dropout and all; write fork_rng() before replace()";
          return signalPassFailure();
        }
        if (!isInModule(attention, path))
          continue;
        attention.setForkRng(true);
        forked = true;
      }
      if (!forked)
        forward.emitWarning("slapo-fork-rng: module '")
            << path
            << "' has no dropout (an eval-mode export has none): "
               "fork_rng() changes nothing there";
    }
  }
};

} // namespace
} // namespace slapo
