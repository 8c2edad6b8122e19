//===- Decompose.cpp - schedule primitive decompose() ---------------------===//
//
// Slapo's decompose() splits nn.Linear into its product and its bias add,
// so that later primitives can treat the add on its own (fuse it with what
// follows, or sync between the two).
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"

#include "mlir/IR/Builders.h"

namespace slapo {
#define GEN_PASS_DEF_DECOMPOSE
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

struct DecomposePass : impl::DecomposeBase<DecomposePass> {
  using DecomposeBase::DecomposeBase;

  void runOnOperation() override {
    auto forward = lookupForward(getOperation(), "slapo-decompose");
    if (!forward)
      return signalPassFailure();
    for (const std::string &path : modules) {
      SmallVector<LinearOp> linears;
      forward.walk([&](LinearOp linear) {
        if (isInModule(linear, path) && linear.getBias())
          linears.push_back(linear);
      });
      if (linears.empty()) {
        forward.emitError("decompose(): module '")
            << path << "' computes no linear layer with a bias";
        return signalPassFailure();
      }
      for (LinearOp linear : linears) {
        OpBuilder builder(linear);
        ModulePathScope inModule(builder, linear);
        Value product = builder.create<LinearOp>(
            linear.getLoc(), linear.getType(), linear.getInput(),
            linear.getWeight(), Value());
        Value biased = builder.create<AddOp>(linear.getLoc(), linear.getType(),
                                             product, linear.getBias());
        linear.replaceAllUsesWith(biased);
        linear.erase();
      }
    }
  }
};

} // namespace
} // namespace slapo
