//===- ActiveValues.cpp - the values that have gradients ------------------===//
#include "ActiveValues.h"

#include "slapo/Dialect/SlapoOps.h"

using namespace mlir;

namespace slapo {

llvm::DenseSet<Value> findActiveValues(Block &block, SymbolTable &symbols) {
  llvm::DenseSet<Value> active;
  for (Operation &op : block) {
    bool fromParam = false;
    if (auto getParam = dyn_cast<GetParamOp>(op)) {
      auto param = symbols.lookup<ParamOp>(getParam.getName());
      fromParam = param && !param.getBuffer();
    }
    bool dependsOnActive = llvm::any_of(
        op.getOperands(), [&](Value operand) { return active.count(operand); });
    if (!fromParam && !dependsOnActive)
      continue;
    for (Value result : op.getResults()) {
      auto tensor = result.getType().dyn_cast<RankedTensorType>();
      if (tensor && tensor.getElementType().isa<FloatType>())
        active.insert(result);
    }
  }
  return active;
}

} // namespace slapo
