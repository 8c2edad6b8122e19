//===- ImportCheck.h - proof that an import is right ------------*- C++ -*-===//
#ifndef SLAPO_FRONTEND_IMPORTCHECK_H
#define SLAPO_FRONTEND_IMPORTCHECK_H

#include "slapo/Frontend/TorchScriptImporter.h"

#include "llvm/Support/raw_ostream.h"

namespace slapo {

/// Runs the TorchScript model's forward and the reference interpreter on the
/// imported IR with the same random inputs and the same RNG seed, and prints
/// each output's relative error to `report`. Integer inputs are drawn below
/// the smallest table they index (embedding rows, cross-entropy classes), or
/// from {0, 1} when they index none. Fails if any error exceeds `tolerance`
/// or the evaluation itself fails (reported as a diagnostic).
mlir::LogicalResult checkImport(mlir::ModuleOp module, TorchScriptModel &model,
                                double tolerance, uint64_t seed,
                                llvm::raw_ostream &report);

/// The LibTorch version slapoc was built with.
std::string getLibTorchVersion();

} // namespace slapo

#endif // SLAPO_FRONTEND_IMPORTCHECK_H
