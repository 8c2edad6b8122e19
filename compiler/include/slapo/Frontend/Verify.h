//===- Verify.h - a compiled step against LibTorch autograd -----*- C++ -*-===//
#ifndef SLAPO_FRONTEND_VERIFY_H
#define SLAPO_FRONTEND_VERIFY_H

#include "slapo/Frontend/TorchScriptImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/raw_ostream.h"

namespace slapo {

/// Runs one step of the compiled program: its inputs from the batch file,
/// its loss to the --log-json file, its gradients to the --save-grads file.
using RunStep = llvm::function_ref<llvm::Error(
    llvm::StringRef batchPath, llvm::StringRef logPath,
    llvm::StringRef gradsPath)>;

/// `slapoc --verify`: draws inputs for `forward` from `seed` (as
/// --check-import does), has `runStep` run the compiled program on them in
/// `workDir`, and compares its loss and every parameter's gradient with the
/// TorchScript model's forward and autograd. A gradient's error is
/// max|program - torch| over max|torch| (at least 1e-4 of the largest
/// gradient's, for gradients that are zero but for rounding). Reports each
/// result and the worst offender to `report`; fails with a diagnostic at
/// the first mismatch beyond `tolerance`.
mlir::LogicalResult verifyTraining(TorchScriptModel &model,
                                   mlir::func::FuncOp forward, uint64_t seed,
                                   double tolerance, llvm::StringRef workDir,
                                   RunStep runStep, llvm::raw_ostream &report);

} // namespace slapo

#endif // SLAPO_FRONTEND_VERIFY_H
