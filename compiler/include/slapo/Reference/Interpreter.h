//===- Interpreter.h - LibTorch-backed reference interpreter ----*- C++ -*-===//
//
// Runs a func.func of slapo ops with LibTorch. It is the semantic reference of
// the compiler: the TorchScript import is checked against the model's own
// forward with it, and every pass is checked to preserve what it computes.
//
// The library is built with exceptions (LibTorch needs them); no c10::Error or
// std::exception escapes these functions.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_REFERENCE_INTERPRETER_H
#define SLAPO_REFERENCE_INTERPRETER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace slapo::reference {

/// Tensors by full dotted state_dict name.
using TensorMap = std::map<std::string, at::Tensor>;

/// Reads every parameter and buffer of a TorchScript file by full dotted name
/// (recursive; tensors are detached, as in state_dict()). A missing or corrupt
/// file gives an llvm::Error with a one-line message naming the file.
::llvm::Expected<TensorMap> loadTorchScriptState(const std::string &path);

/// Called after each op with the op and the tensors it produced.
using OpObserver =
    std::function<void(::mlir::Operation *, ::llvm::ArrayRef<at::Tensor>)>;

/// Evaluates `func` (func.func of slapo ops ending in func.return) on `inputs`.
/// slapo.get_param @name reads params[name]; when that is absent, a name in
/// the slapo.param's `aliases` attribute resolves too. func.call to another
/// func in the same module is evaluated recursively. Inputs, every op's
/// results and the returned values are checked against their IR types (shape
/// and dtype). On any failure an error is emitted at the offending op (or at
/// `func` for bad inputs) and failure is returned. Autograd is not disabled:
/// inputs that require grad give results that can be back-propagated.
/// `observer`, when set, sees every op's results (e.g. to find the first op
/// where two evaluations diverge).
::mlir::FailureOr<std::vector<at::Tensor>>
evaluate(::mlir::func::FuncOp func, ::llvm::ArrayRef<at::Tensor> inputs,
         const TensorMap &params, const OpObserver &observer = nullptr);

/// Whether evaluate() knows the op named `opName` ("slapo.add", "func.call").
bool hasEvaluator(::llvm::StringRef opName);

/// Random inputs for `func`'s arguments, drawn from the global generator:
/// floats from N(0, 1); integers below the smallest table they index
/// (embedding rows, cross-entropy classes, followed through ops that only move
/// data), or from {0, 1} (masks) when they index none.
std::vector<at::Tensor> randomInputs(::mlir::func::FuncOp func);

/// ||actual - expected||_inf / max(||expected||_inf, 1e-30), computed in
/// double; +inf if shapes or dtypes differ. Bool and integer tensors compare
/// exactly (0 or +inf). NaNs match NaNs at the same positions; any other NaN
/// gives +inf. Empty tensors of equal shape compare as 0.
double relativeError(const at::Tensor &actual, const at::Tensor &expected);

//===----------------------------------------------------------------------===//
// Type mapping, shared with anyone who moves tensors in and out of slapo IR.
//===----------------------------------------------------------------------===//

/// f32/f64/bf16/f16/i1/i8/i32/i64 -> Float/Double/BFloat16/Half/Bool/Char
/// (signed int8)/Int/Long; std::nullopt for anything else.
std::optional<at::ScalarType> toScalarType(::mlir::Type elementType);

/// The inverse of toScalarType; a null Type for unsupported scalar types.
::mlir::Type toElementType(at::ScalarType scalarType,
                           ::mlir::MLIRContext *context);

/// A CPU tensor holding the elements of `attr` (splat or not) in the mapped
/// dtype, or failure for an unsupported element type or attribute kind.
::mlir::FailureOr<at::Tensor> toTensor(::mlir::ElementsAttr attr);

/// "tensor<2x3xf32>": a tensor's shape and dtype spelled as an MLIR type.
std::string describe(const at::Tensor &tensor);

} // namespace slapo::reference

#endif // SLAPO_REFERENCE_INTERPRETER_H
