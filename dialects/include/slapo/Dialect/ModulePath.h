//===- ModulePath.h - module paths carried in locations ---------*- C++ -*-===//
//
// Every slapo op records the dotted path of the nn.Module it came from as a
// NameLoc around its Python source location:
//   loc("transformer.h.3.attn.c_attn"("model.py":45:0))
// Ops of the root module carry the source location alone. Keeping the path in
// the location means every rewrite that reuses an op's location keeps it too.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_DIALECT_MODULEPATH_H
#define SLAPO_DIALECT_MODULEPATH_H

#include "mlir/IR/Location.h"
#include <string>

namespace slapo {
/// The module path recorded in `loc`, or "" for the root module.
std::string getModulePath(mlir::Location loc);

/// Whether module `path` is `ancestor` or one of its submodules.
bool isWithinModule(llvm::StringRef path, llvm::StringRef ancestor);

/// Whether the op at `loc` belongs to the module `modulePath` or to one of
/// its submodules.
bool isInModule(mlir::Location loc, llvm::StringRef modulePath);

/// `sourceLoc` tagged with `modulePath` (unchanged when the path is empty).
mlir::Location withModulePath(llvm::StringRef modulePath,
                              mlir::Location sourceLoc);
} // namespace slapo

#endif // SLAPO_DIALECT_MODULEPATH_H
