//===- ModulePath.cpp - module paths carried in locations -----------------===//
#include "slapo/Dialect/ModulePath.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/MLIRContext.h"

namespace slapo {

std::string getModulePath(mlir::Location loc) {
  if (auto named = loc.dyn_cast<mlir::NameLoc>())
    return named.getName().str();
  // Later passes fuse schedule locations with the model's: the path is on the
  // model side of the fusion.
  if (auto fused = loc.dyn_cast<mlir::FusedLoc>())
    for (mlir::Location part : fused.getLocations()) {
      std::string path = getModulePath(part);
      if (!path.empty())
        return path;
    }
  return "";
}

bool isWithinModule(llvm::StringRef path, llvm::StringRef ancestor) {
  return path == ancestor ||
         (path.startswith(ancestor) && path.size() > ancestor.size() &&
          path[ancestor.size()] == '.');
}

bool isInModule(mlir::Location loc, llvm::StringRef modulePath) {
  return isWithinModule(getModulePath(loc), modulePath);
}

mlir::Location withModulePath(llvm::StringRef modulePath,
                              mlir::Location sourceLoc) {
  if (modulePath.empty())
    return sourceLoc;
  return mlir::NameLoc::get(
      mlir::StringAttr::get(sourceLoc.getContext(), modulePath), sourceLoc);
}

} // namespace slapo
