//===- FoldAddends.cpp - gradient sums written by the ops of their terms --===//
//
// Autodiff sums the gradients of a value with several readers with
// slapo.add. In a transformer's backward each residual stream's gradient
// is such a sum: the norm's input gradient plus the gradient through the
// residual connection. The add alone is a pass over memory reading two
// tensors and writing a third; given to the norm's gradient kernel as an
// addend, it is one more tensor read where that kernel writes anyway.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "slapo/Dialect/SlapoOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace slapo {
#define GEN_PASS_DEF_FOLDADDENDS
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

/// Whether `value` is computed before `op`, in its block.
bool isBefore(Value value, Operation *op) {
  if (auto argument = dyn_cast<BlockArgument>(value))
    return argument.getOwner() == op->getBlock();
  Operation *producer = value.getDefiningOp();
  return producer->getBlock() == op->getBlock() &&
         producer->isBeforeInBlock(op);
}

/// Whether `add` may become `term`'s addend: `term` computes `add`'s
/// operand `target` for this add alone, in the same part of the step
/// (phase, microbatch), and the other operand, of the same type (no
/// broadcasting), is there before `term` runs.
bool canFold(AddOp add, Value target, Value other, AddendOpInterface term) {
  Operation *op = term.getOperation();
  return term.getAddendTarget() == target && !term.getAddend() &&
         target.hasOneUse() && other.getType() == target.getType() &&
         add.getType() == target.getType() &&
         op->getAttr(kPhaseAttrName) == add->getAttr(kPhaseAttrName) &&
         op->getAttr(kMicrobatchAttrName) ==
             add->getAttr(kMicrobatchAttrName) &&
         isBefore(other, op);
}

struct FoldAddendsPass : impl::FoldAddendsBase<FoldAddendsPass> {
  void runOnOperation() override {
    // The functions' own adds: a fused group's are its loop's.
    SmallVector<AddOp> adds;
    for (auto function : getOperation().getOps<func::FuncOp>())
      for (Block &block : function.getBody())
        llvm::append_range(adds, block.getOps<AddOp>());
    for (AddOp add : adds)
      for (auto [target, other] : {std::pair(add.getLhs(), add.getRhs()),
                                   std::pair(add.getRhs(), add.getLhs())}) {
        auto term = target.getDefiningOp<AddendOpInterface>();
        if (!term || !canFold(add, target, other, term))
          continue;
        term.setAddend(other);
        add.replaceAllUsesWith(target);
        add.erase();
        break;
      }
  }
};

} // namespace
} // namespace slapo
