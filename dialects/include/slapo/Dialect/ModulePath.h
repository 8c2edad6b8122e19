//===- ModulePath.h - the nn.Module an op belongs to ------------*- C++ -*-===//
//
// Every op in a slapo function records the dotted path of the nn.Module it
// came from in the discardable attribute `slapo.module`:
//   slapo.linear %x, %w {slapo.module = "transformer.h.3.attn.c_attn"} : ...
// Ops of the root module carry none. The path is part of the op, not of its
// location, so stripping debug info or fusing locations changes nothing a
// schedule selects; locations stay for messages. A parameter declaration
// (slapo.param) needs no attribute: its name is its path.
//
// The importer sets the path; a pass that builds ops derived from an op opens
// a ModulePathScope on its builder, so that every op it inserts carries the
// path of the op it derives from, and its pipeline stage (`slapo.stage`, set
// by slapo-cut-pipeline-stage): an op's backward runs on the op's stage. A
// clone made outside a scope keeps its original's attributes.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_DIALECT_MODULEPATH_H
#define SLAPO_DIALECT_MODULEPATH_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace slapo {

constexpr llvm::StringLiteral kModulePathAttrName = "slapo.module";
constexpr llvm::StringLiteral kStageAttrName = "slapo.stage";

/// The module path of `op`, or "" for the root module. A parameter's is its
/// name's owner ("h.0.attn" for @h.0.attn.weight).
llvm::StringRef getModulePath(mlir::Operation *op);

/// Records `path` as `op`'s module path ("" removes it: the root module).
void setModulePath(mlir::Operation *op, llvm::StringRef path);

/// `'a.b'`, the module path of `op` quoted, or "the root module", for
/// diagnostics.
std::string describeModuleOf(mlir::Operation *op);

/// Whether module `path` is `ancestor` or one of its submodules: the one
/// matching rule of every pass that selects by path ("h.1" contains "h.1"
/// and "h.1.mlp", not "h.10").
bool isWithinModule(llvm::StringRef path, llvm::StringRef ancestor);

/// The element of a module list that `path` lies in, up to its first index
/// ("transformer.h.3" for "transformer.h.3.attn.c_attn"); "" outside lists.
/// The emitter writes the blocks alike as one function; fusion groups stay
/// within one, so that the blocks stay alike.
llvm::StringRef getBlockPath(llvm::StringRef path);

/// Whether `op` belongs to `module` or to one of its submodules.
inline bool isInModule(mlir::Operation *op, llvm::StringRef module) {
  return isWithinModule(getModulePath(op), module);
}

/// While alive, gives every op that `builder` inserts (created or cloned)
/// the module path `path`, or the module path and pipeline stage of
/// `origin`, the op they are derived from. Scopes nest: the innermost one
/// decides. The builder's own listener (a rewriter's) still hears of every
/// insertion.
class ModulePathScope : public mlir::OpBuilder::Listener {
public:
  ModulePathScope(mlir::OpBuilder &builder, llvm::StringRef path);
  ModulePathScope(mlir::OpBuilder &builder, mlir::Operation *origin)
      : ModulePathScope(builder, getModulePath(origin)) {
    stage = origin->getAttr(kStageAttrName);
  }
  ~ModulePathScope() override;
  ModulePathScope(const ModulePathScope &) = delete;
  ModulePathScope &operator=(const ModulePathScope &) = delete;

  void notifyOperationInserted(mlir::Operation *op) override;
  void notifyBlockCreated(mlir::Block *block) override;

private:
  mlir::OpBuilder &builder;
  mlir::OpBuilder::Listener *previous;
  std::string path;
  mlir::Attribute stage;
};

} // namespace slapo

#endif // SLAPO_DIALECT_MODULEPATH_H
