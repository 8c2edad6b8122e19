//===- OpTable.h - per-op evaluators of the reference interpreter -*- C++
//-*-===//
//
// The interpreter dispatches on the op name through one table. Each op family
// (ElementwiseOps.cpp, NNOps.cpp, ShapeOps.cpp) registers one small function
// per op; adding an op is one `add<OpClass>(table, ...)` line in its family.
//
// An evaluator reports failure by throwing: OpFailure (via fail()) for
// interpreter-detected problems, or whatever LibTorch throws (c10::Error).
// The interpreter catches both and emits the message at the op.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_REFERENCE_OPTABLE_H
#define SLAPO_REFERENCE_OPTABLE_H

#include "slapo/Reference/Interpreter.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"

#include <ATen/ATen.h>

#include <stdexcept>

namespace slapo::reference::detail {

/// A failure found by the interpreter itself (not by LibTorch).
struct OpFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const ::llvm::Twine &message) {
  throw OpFailure(message.str());
}

/// What an evaluator may need beyond its operands.
struct EvalContext {
  const TensorMap &params;
  ::mlir::SymbolTableCollection &symbols;
  const OpObserver &observer;
};

using Operands = ::llvm::ArrayRef<at::Tensor>;

/// Evaluates one op: appends one tensor per op result to `results`.
using OpEvaluator = std::function<void(
    ::mlir::Operation *op, Operands operands,
    ::llvm::SmallVectorImpl<at::Tensor> &results, EvalContext &context)>;

using OpTable = ::llvm::StringMap<OpEvaluator>;

/// Registers a single-result op: fn(OpT op, Operands operands, EvalContext &)
/// returns the result tensor.
template <typename OpT, typename Fn> void add(OpTable &table, Fn fn) {
  bool inserted =
      table
          .try_emplace(OpT::getOperationName(),
                       [fn](::mlir::Operation *op, Operands operands,
                            ::llvm::SmallVectorImpl<at::Tensor> &results,
                            EvalContext &context) {
                         results.push_back(
                             fn(::llvm::cast<OpT>(op), operands, context));
                       })
          .second;
  if (!inserted)
    throw std::logic_error("reference: op registered twice");
}

void registerElementwiseOps(OpTable &table);
void registerNNOps(OpTable &table);
void registerShapeOps(OpTable &table);

/// The LibTorch dtype of a ranked tensor type's element type; fails (throws
/// OpFailure) for unsupported element types.
at::ScalarType scalarTypeOf(::mlir::Type tensorType);

/// An attribute's dims or sizes, as LibTorch takes them.
inline std::vector<int64_t> toVector(::llvm::ArrayRef<int64_t> values) {
  return {values.begin(), values.end()};
}

/// The static shape of a ranked tensor type.
std::vector<int64_t> shapeOf(::mlir::Type tensorType);

/// "[2, 3]".
std::string shapeString(at::IntArrayRef shape);

} // namespace slapo::reference::detail

#endif // SLAPO_REFERENCE_OPTABLE_H
