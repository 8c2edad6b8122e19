//===- ActiveValues.h - the values that have gradients ----------*- C++ -*-===//
#ifndef SLAPO_TRANSFORMS_ACTIVEVALUES_H
#define SLAPO_TRANSFORMS_ACTIVEVALUES_H

#include "mlir/IR/Block.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"

namespace slapo {

/// The float values of `block` that depend on a trainable parameter (a
/// slapo.param that is not a buffer, looked up in `symbols`): only they have
/// gradients worth building, and only their ops have a backward.
llvm::DenseSet<mlir::Value> findActiveValues(mlir::Block &block,
                                             mlir::SymbolTable &symbols);

} // namespace slapo

#endif // SLAPO_TRANSFORMS_ACTIVEVALUES_H
