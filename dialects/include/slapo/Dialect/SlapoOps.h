//===- SlapoOps.h - slapo dialect operations --------------------*- C++ -*-===//
#ifndef SLAPO_DIALECT_SLAPOOPS_H
#define SLAPO_DIALECT_SLAPOOPS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <optional>

#include "slapo/Dialect/SlapoDialect.h"
#include "slapo/Dialect/SlapoInterfaces.h"
#include "slapo/Dialect/SlapoEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "slapo/Dialect/SlapoAttrs.h.inc"

#define GET_OP_CLASSES
#include "slapo/Dialect/SlapoOps.h.inc"

namespace slapo {
/// Name of the module attribute that names the file the parameters' data is
/// read from.
constexpr llvm::StringLiteral kWeightsAttrName = "slapo.weights";

/// The shape PyTorch broadcasting gives two shapes, or failure if they do not
/// broadcast.
mlir::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs);

/// The number of rows of the smallest table the integer `value` indexes
/// (embedding rows, cross-entropy classes), following it through ops that
/// only move or reshape data; none if it indexes no table. Valid values of
/// such an input lie in [0, rows).
std::optional<int64_t> getSmallestIndexedTable(mlir::Value value);
} // namespace slapo

#endif // SLAPO_DIALECT_SLAPOOPS_H
