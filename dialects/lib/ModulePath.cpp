//===- ModulePath.cpp - the nn.Module an op belongs to --------------------===//
#include "slapo/Dialect/ModulePath.h"

#include "slapo/Dialect/SlapoOps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace slapo {

llvm::StringRef getModulePath(mlir::Operation *op) {
  if (auto path = op->getAttrOfType<mlir::StringAttr>(kModulePathAttrName))
    return path.getValue();
  // PyTorch forbids '.' inside attribute names: the owner is the prefix.
  if (auto param = llvm::dyn_cast<ParamOp>(op)) {
    auto [owner, leaf] = param.getSymName().rsplit('.');
    return leaf.empty() ? llvm::StringRef() : owner;
  }
  return "";
}

void setModulePath(mlir::Operation *op, llvm::StringRef path) {
  if (path.empty())
    op->removeAttr(kModulePathAttrName);
  else
    op->setAttr(kModulePathAttrName,
                mlir::StringAttr::get(op->getContext(), path));
}

std::string describeModuleOf(mlir::Operation *op) {
  llvm::StringRef path = getModulePath(op);
  return path.empty() ? std::string("the root module") : "'" + path.str() + "'";
}

bool isWithinModule(llvm::StringRef path, llvm::StringRef ancestor) {
  return path == ancestor ||
         (path.startswith(ancestor) && path.size() > ancestor.size() &&
          path[ancestor.size()] == '.');
}

ModulePathScope::ModulePathScope(mlir::OpBuilder &builder, llvm::StringRef path)
    : builder(builder), previous(builder.getListener()), path(path.str()) {
  builder.setListener(this);
}

ModulePathScope::~ModulePathScope() { builder.setListener(previous); }

void ModulePathScope::notifyOperationInserted(mlir::Operation *op) {
  // An enclosing scope stamps first, so that this one's path wins.
  if (previous)
    previous->notifyOperationInserted(op);
  setModulePath(op, path);
  if (stage)
    op->setAttr(kStageAttrName, stage);
}

void ModulePathScope::notifyBlockCreated(mlir::Block *block) {
  if (previous)
    previous->notifyBlockCreated(block);
}

llvm::StringRef getBlockPath(llvm::StringRef path) {
  for (size_t start = path.find('.'); start != llvm::StringRef::npos;
       start = path.find('.', start + 1)) {
    llvm::StringRef index = path.slice(start + 1, path.find('.', start + 1));
    if (!index.empty() && llvm::all_of(index, llvm::isDigit))
      return path.take_front(start + 1 + index.size());
  }
  return "";
}

} // namespace slapo
