//===- DeadOps.h - erasing what a rewrite left unread -----------*- C++ -*-===//
#ifndef SLAPO_TRANSFORMS_DEADOPS_H
#define SLAPO_TRANSFORMS_DEADOPS_H

#include "mlir/IR/Operation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SmallVector.h"

namespace slapo {

/// Erases `op` if nothing reads it and it has no side effects, then, the
/// same way, the ops that computed its operands: the spelled-out chain a
/// recognized op replaced, up to what something else still reads.
inline void eraseDeadChain(mlir::Operation *op) {
  llvm::SmallVector<mlir::Operation *> worklist = {op};
  while (!worklist.empty()) {
    mlir::Operation *dead = worklist.pop_back_val();
    if (!mlir::isOpTriviallyDead(dead))
      continue;
    llvm::SmallVector<mlir::Value> operands(dead->getOperands());
    dead->erase();
    for (mlir::Value operand : operands)
      if (mlir::Operation *source = operand.getDefiningOp())
        worklist.push_back(source);
  }
}

} // namespace slapo

#endif // SLAPO_TRANSFORMS_DEADOPS_H
