//===- CheckedPatterns.h - primitives that match patterns ------*- C++ -*-===//
//
// replace(kernel) and fuse(kind) each keep a registry of named patterns,
// match a module's ops to one, op by op, and report the first op that
// differs rather than transform ops that compute something else.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_TRANSFORMS_CHECKEDPATTERNS_H
#define SLAPO_TRANSFORMS_CHECKEDPATTERNS_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace slapo {

/// Why a module's ops are not a pattern's: the message and the op that
/// differs (null when the module lacks an op the pattern needs).
struct Mismatch {
  std::string message;
  mlir::Operation *op = nullptr;
};

/// `'slapo.div'` for messages.
inline std::string describeOp(mlir::Operation *op) {
  return "'" + op->getName().getStringRef().str() + "'";
}

/// The names of a registry's entries (each has a `name`), in its order.
template <typename Entry, size_t N>
llvm::SmallVector<llvm::StringRef> getRegistryNames(const Entry (&entries)[N]) {
  llvm::SmallVector<llvm::StringRef> names;
  for (const Entry &entry : entries)
    names.push_back(entry.name);
  return names;
}

} // namespace slapo

#endif // SLAPO_TRANSFORMS_CHECKEDPATTERNS_H
