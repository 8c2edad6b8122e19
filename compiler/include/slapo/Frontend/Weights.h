//===- Weights.h - a model's parameters as the rank program reads them -*- C++ -*-===//
#ifndef SLAPO_FRONTEND_WEIGHTS_H
#define SLAPO_FRONTEND_WEIGHTS_H

#include "slapo/Frontend/TorchScriptImporter.h"

namespace slapo {

/// Writes the value of every slapo.param of `module` (parameters and
/// buffers, by state_dict name) from `model` to the safetensors file `path`,
/// as the rank program loads them at start. A parameter missing from the
/// model or of another shape or dtype than the IR says is an error.
llvm::Error writeWeights(TorchScriptModel &model, mlir::ModuleOp module,
                         llvm::StringRef path);

} // namespace slapo

#endif // SLAPO_FRONTEND_WEIGHTS_H
