//===- SlapoOps.h - slapo dialect operations --------------------*- C++ -*-===//
#ifndef SLAPO_DIALECT_SLAPOOPS_H
#define SLAPO_DIALECT_SLAPOOPS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/FunctionInterfaces.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <optional>
#include <string>

#include "slapo/Dialect/SlapoDialect.h"
#include "slapo/Dialect/SlapoEnums.h.inc"
#include "slapo/Dialect/SlapoInterfaces.h"

#define GET_ATTRDEF_CLASSES
#include "slapo/Dialect/SlapoAttrs.h.inc"

namespace slapo::OpTrait {
/// Collectives (SlapoOps.td): they run on every rank of their group at once,
/// so they are never evaluated or checked one process alone.
template <typename ConcreteType>
class Collective : public mlir::OpTrait::TraitBase<ConcreteType, Collective> {};
/// Elementwise ops a fusion group may hold (SlapoOps.td).
template <typename ConcreteType>
class FusibleElementwise
    : public mlir::OpTrait::TraitBase<ConcreteType, FusibleElementwise> {};
} // namespace slapo::OpTrait

#define GET_OP_CLASSES
#include "slapo/Dialect/SlapoOps.h.inc"

namespace slapo {
/// Name of the module attribute that names the file the parameters' data is
/// read from.
constexpr llvm::StringLiteral kWeightsAttrName = "slapo.weights";

/// A shape as `[4, 16]` (a dynamic size as `?`), for diagnostics.
std::string shapeString(llvm::ArrayRef<int64_t> shape);

/// Whether float type `wide` has more bits than `narrow` and holds every
/// value of it: bf16 and f16 in f32, any of them in f64 (bf16 and f16 each
/// hold values the other lacks).
bool holdsExactly(mlir::Type wide, mlir::Type narrow);

/// `shape` with dims 1 and 2 swapped where `bshd` is set: a flash attention
/// operand's [B, H, rows, size] from the [B, rows, H, size] it is stored as
/// under the ops' `bshd`, and back.
llvm::SmallVector<int64_t> swapHeadsAndRows(llvm::ArrayRef<int64_t> shape,
                                            bool bshd);

/// The [B, H, rows, size] of flash attention operand `operand` (query, key
/// or value): its type's shape, swapped back from the [B, rows, H, size] of
/// `bshd`, with a third of its heads under `packedQkv` (the three share one
/// operand).
llvm::SmallVector<int64_t> getHeadsMajorShape(mlir::Value operand, bool bshd,
                                              bool packedQkv);

/// The operands of a slapo.flash_attention or slapo.flash_attention_grad
/// that its `bshd` stores token-major (query, key and value; the gradient's
/// result and grad too), and its results that it does (the result; the
/// three gradients).
struct TokenMajorValues {
  llvm::SmallVector<mlir::OpOperand *> operands;
  llvm::SmallVector<mlir::Value> results;
};
TokenMajorValues getTokenMajorValues(mlir::Operation *attention);

/// Whether a fusion group's loop may compute `op`, by what it computes: an
/// elementwise op (FusibleElementwise), or a row op along the last dim
/// (FusibleRowOpInterface's isAlongLastDim). slapo-fuse-elementwise then
/// checks the types and the step's structure.
bool isLoopFusible(mlir::Operation *op);

/// Whether `op` is a column sum: a slapo.sum over every dim of its input but
/// the last (a bias gradient's sum over the tokens), not keeping them, of a
/// last dim longer than 1. A fusion group may hold it (slapo.fused).
bool isColumnSum(mlir::Operation *op);

/// Whether `value` is computed from a trained parameter (a slapo.param that
/// is no buffer): what a kernel that gives an operand no gradient (a mask,
/// a rotary embedding's angles) must not take.
bool dependsOnParameter(mlir::Value value);

/// The shape PyTorch broadcasting gives two shapes, or failure if they do not
/// broadcast.
mlir::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs);

/// How element i of a loop over the shape `loop` reads an operand of shape
/// `shape` that broadcasts to it: the operand's element (i / inner) % count.
/// An operand of the loop's shape has inner 1 and count the loop's size, a
/// scalar count 1, a bias row [N] of a [M, N] loop inner 1 and count N, a
/// column [M, 1] inner N and count M.
struct BroadcastIndexing {
  int64_t inner;
  int64_t count;
};

/// The indexing of `shape` in a loop over `loop`, or none where it does not
/// broadcast to it or the dims it keeps are not one contiguous block of the
/// loop's (a [M, 1, K] operand of a [M, N, K] loop).
std::optional<BroadcastIndexing>
getBroadcastIndexing(llvm::ArrayRef<int64_t> shape,
                     llvm::ArrayRef<int64_t> loop);

/// The values an integer that indexes tables may hold: [0, rows) of its
/// smallest table (embedding rows, cross-entropy classes), and `ignored` too
/// where every table it indexes skips that value (cross-entropy's
/// ignore_index: -100 in Hugging Face's labels).
struct IndexRange {
  int64_t rows;
  std::optional<int64_t> ignored;
};

/// The range of the integer `value`, followed through ops that only move or
/// reshape data; none if it indexes no table. A function argument's
/// `slapo.index_bound` (and `slapo.index_ignored`) attributes say it when a
/// rewrite has hidden the tables (tensor parallelism splits them and offsets
/// the indices); setIndexRange writes them.
std::optional<IndexRange> getIndexRange(mlir::Value value);
void setIndexRange(mlir::FunctionOpInterface function, unsigned argument,
                   const IndexRange &range);
constexpr llvm::StringLiteral kIndexBoundAttrName = "slapo.index_bound";
constexpr llvm::StringLiteral kIndexIgnoredAttrName = "slapo.index_ignored";

/// The operand whose bytes `op`'s result is, unchanged (a reshape's input,
/// a grad_all_reduce's input), or null: such a result needs no buffer and
/// no kernel of its own.
mlir::Value getSameBytesSource(mlir::Operation *op);
} // namespace slapo

#endif // SLAPO_DIALECT_SLAPOOPS_H
