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
#include "mlir/IR/Dominance.h"

namespace slapo {
#define GEN_PASS_DEF_FOLDADDENDS
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

/// Whether `add` may become `term`'s addend: `term` computes `add`'s
/// operand `target` for this add alone, in the same computation of the
/// step, and the other operand, of the same type (no broadcasting), is
/// there before `term` runs.
bool canFold(AddOp add, Value target, Value other, AddendOpInterface term,
             DominanceInfo &dominance) {
  Operation *op = term.getOperation();
  return term.getAddendTarget() == target && !term.getAddend() &&
         target.hasOneUse() && other.getType() == target.getType() &&
         add.getType() == target.getType() && isSameComputation(op, add) &&
         dominance.properlyDominates(other, op);
}

struct FoldAddendsPass : impl::FoldAddendsBase<FoldAddendsPass> {
  void runOnOperation() override {
    // The functions' own adds: a fused group's are its loop's.
    DominanceInfo dominance(getOperation());
    SmallVector<AddOp> adds;
    for (auto function : getOperation().getOps<func::FuncOp>())
      for (Block &block : function.getBody())
        llvm::append_range(adds, block.getOps<AddOp>());
    for (AddOp add : adds)
      for (auto [target, other] : {std::pair(add.getLhs(), add.getRhs()),
                                   std::pair(add.getRhs(), add.getLhs())}) {
        auto term = target.getDefiningOp<AddendOpInterface>();
        if (!term || !canFold(add, target, other, term, dominance))
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
