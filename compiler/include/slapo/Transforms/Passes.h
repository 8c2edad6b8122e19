//===- Passes.h - slapo transformation passes -------------------*- C++ -*-===//
#ifndef SLAPO_TRANSFORMS_PASSES_H
#define SLAPO_TRANSFORMS_PASSES_H

#include "slapo/Dialect/SlapoDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace slapo {

/// Name of the result attribute of @forward_backward that names the
/// parameter a gradient belongs to.
constexpr llvm::StringLiteral kGradOfAttrName = "slapo.grad_of";

/// The function the autodiff pass adds next to @forward.
constexpr llvm::StringLiteral kForwardBackwardName = "forward_backward";

/// See Passes.td.
std::unique_ptr<mlir::Pass> createAutodiffPass();

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "slapo/Transforms/Passes.h.inc"

} // namespace slapo

#endif // SLAPO_TRANSFORMS_PASSES_H
