//===- CSE.cpp - common subexpression elimination blind to module paths ---===//
//
// MLIR's CSE compares ops with their attributes, so slapo.module would keep
// apart the constants and parameter reads that import and autodiff repeat in
// every module. It runs here on ops without their paths, which are put back
// on the ops it keeps.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "slapo/Dialect/ModulePath.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/DenseMap.h"

namespace slapo {
#define GEN_PASS_DEF_CSE
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

struct CSEPass : impl::CSEBase<CSEPass> {
  void runOnOperation() override {
    // CSE only erases ops: every op left is one of those recorded here.
    llvm::DenseMap<Operation *, Attribute> paths;
    getOperation().walk([&](Operation *op) {
      if (Attribute path = op->removeAttr(kModulePathAttrName))
        paths[op] = path;
    });
    OpPassManager cse(ModuleOp::getOperationName());
    cse.addPass(createCSEPass());
    LogicalResult result = runPipeline(cse, getOperation());
    getOperation().walk([&](Operation *op) {
      if (Attribute path = paths.lookup(op))
        op->setAttr(kModulePathAttrName, path);
    });
    if (failed(result))
      signalPassFailure();
  }
};

} // namespace
} // namespace slapo
