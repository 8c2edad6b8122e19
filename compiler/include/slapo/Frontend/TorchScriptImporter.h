//===- TorchScriptImporter.h - TorchScript to slapo IR ----------*- C++ -*-===//
//
// Imports the forward method of a TorchScript file into slapo IR. LibTorch
// stays behind this header so that callers do not compile its headers.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_FRONTEND_TORCHSCRIPTIMPORTER_H
#define SLAPO_FRONTEND_TORCHSCRIPTIMPORTER_H

#include "slapo/Frontend/InputSpec.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"
#include <memory>

namespace slapo {

/// A loaded TorchScript module.
class TorchScriptModel {
public:
  /// Loads `path`; a missing, corrupt or non-TorchScript file is an error that
  /// names the file.
  static llvm::Expected<std::unique_ptr<TorchScriptModel>>
  load(llvm::StringRef path);
  ~TorchScriptModel();

  const std::string &getPath() const;
  /// The forward graph with every call inlined, as TorchScript prints it.
  std::string printInlinedForward() const;

  struct Impl;
  Impl &getImpl() { return *impl; }

private:
  explicit TorchScriptModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

/// Imports `model`'s forward for the given static inputs (in forward-argument
/// order). Every problem is reported through the context's diagnostic handler
/// (all unsupported ops in one run); returns null if there was any.
mlir::OwningOpRef<mlir::ModuleOp>
importTorchScript(mlir::MLIRContext &context, TorchScriptModel &model,
                  llvm::ArrayRef<InputSpec> inputs);

} // namespace slapo

#endif // SLAPO_FRONTEND_TORCHSCRIPTIMPORTER_H
