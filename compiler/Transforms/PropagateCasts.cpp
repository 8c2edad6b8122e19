//===- PropagateCasts.cpp - casts where they move the fewest bytes -------===//
//
// Mixed precision casts each product's operands to bf16 and the bf16 results
// of products, flash attention and gradients back to f32, right at the
// product. The layout ops between products (reshapes, permutes, slices and
// concats of attention's heads) then copy f32 tensors; a narrowing cast sits
// behind a reshape that keeps it out of the loop of the elementwise chain
// that computes its input; and round trips convert tensors that come back
// unchanged (an attention's bf16 output widened, permuted and narrowed again
// for the next product). On a GPU each of these is a pass over an activation.
//
// Casting commutes with moving elements, so narrowing casts move up through
// the layout ops that produce their input and widening casts move down
// through the layout ops that read their result: the layout ops then copy the
// narrow type, a narrowing cast meets the chain that computes its input
// (slapo-fuse-elementwise makes it part of that chain's loop), and a widening
// cast meets the narrowing cast that undoes it, the two vanishing. Every
// rewrite is exact (only casts whose narrow type the wide one holds exactly
// move or cancel, bf16 and f32 among them): the program computes the same
// bits in fewer passes.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Dialect/TensorBuilder.h"

namespace slapo {
#define GEN_PASS_DEF_PROPAGATECASTS
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

/// `value`'s tensor type with `element` as its element type.
RankedTensorType withElement(Value value, Type element) {
  return RankedTensorType::get(shapeOf(value), element);
}

/// Whether `a` and `b` run in the same part of the step (phase, microbatch,
/// pipeline stage, recomputation): moving a cast next to the other op must
/// not move it into another part.
bool runTogether(Operation *a, Operation *b) {
  return isSameComputation(a, b) &&
         a->getAttr(kStageAttrName) == b->getAttr(kStageAttrName);
}

/// A cast of `input` to `element` before `before`, with `like`'s attributes
/// (module path, phase, ...).
CastOp createCast(Operation *before, Value input, Type element, CastOp like) {
  OpBuilder builder(before);
  auto cast =
      builder.create<CastOp>(like.getLoc(), withElement(input, element), input);
  cast->setAttrs(like->getAttrDictionary());
  return cast;
}

/// The layout ops that copy elements without looking at them, one tensor
/// in, one out.
bool isUnaryLayout(Operation *op) {
  return isa_and_nonnull<ReshapeOp, PermuteOp, SliceOp, BroadcastOp>(op);
}

/// cast(slice(x)) -> slice(cast(x)) where every reader of x is a slice that
/// only casts to this one's type read, and the slices take as many elements
/// as x has (attention's query, key and value): x is cast once and each
/// slice copies the narrow type. (Casting x for one slice of several would
/// convert the others' elements too; casting x for slices of part of it,
/// elements nobody reads.)
bool hoistAboveSlices(CastOp cast, SliceOp slice) {
  Type narrow = elementTypeOf(cast.getResult());
  Value source = slice.getInput();
  SmallVector<CastOp> casts;
  Operation *firstSlice = nullptr;
  int64_t sliced = 0;
  for (Operation *user : source.getUsers()) {
    if (!isa<SliceOp>(user) || !runTogether(user, cast))
      return false;
    for (Operation *sliceUser : user->getUsers()) {
      auto other = dyn_cast<CastOp>(sliceUser);
      if (!other || other.getType().getElementType() != narrow ||
          !runTogether(other, cast))
        return false;
      casts.push_back(other);
    }
    if (!firstSlice || user->isBeforeInBlock(firstSlice))
      firstSlice = user;
    sliced += tensorType(user->getResult(0)).getNumElements();
  }
  if (sliced < tensorType(source).getNumElements())
    return false;
  CastOp early = createCast(firstSlice, source, narrow, cast);
  for (Operation *user : llvm::make_early_inc_range(source.getUsers())) {
    if (user == early)
      continue;
    user->setOperand(0, early);
    user->getResult(0).setType(withElement(user->getResult(0), narrow));
  }
  for (CastOp other : casts) {
    other.getResult().replaceAllUsesWith(other.getInput());
    other.erase();
  }
  return true;
}

/// cast(layout(x)) -> layout(cast(x)) for a narrowing cast: the layout op
/// copies the narrow type. A reshape (a view, no copy) that others read too
/// is cloned; a permute or broadcast that others read stays as it is (a
/// second copy would cost more than the cast saves).
bool hoistNarrowing(CastOp cast) {
  Operation *layout = cast.getInput().getDefiningOp();
  if (!isUnaryLayout(layout) || !runTogether(layout, cast))
    return false;
  if (auto slice = dyn_cast<SliceOp>(layout))
    return hoistAboveSlices(cast, slice);
  Type narrow = elementTypeOf(cast.getResult());
  Value source = layout->getOperand(0);
  if (layout->hasOneUse()) {
    CastOp early = createCast(layout, source, narrow, cast);
    layout->setOperand(0, early);
    layout->getResult(0).setType(withElement(layout->getResult(0), narrow));
    cast.getResult().replaceAllUsesWith(layout->getResult(0));
    cast.erase();
    return true;
  }
  if (!isa<ReshapeOp>(layout))
    return false;
  // Before the reshape, as the in-place case: the cast then comes before
  // the reshape's other readers, which slapo-fuse-elementwise needs to
  // join it to the loop that computes x.
  CastOp early = createCast(layout, source, narrow, cast);
  OpBuilder builder(layout);
  Operation *view = builder.clone(*layout);
  view->setOperand(0, early);
  view->getResult(0).setType(cast.getType());
  cast.getResult().replaceAllUsesWith(view->getResult(0));
  cast.erase();
  return true;
}

/// layout(cast(x)) -> cast(layout(x)) for a widening cast that only the
/// layout op reads, and concat(cast(a), cast(b), ...) -> cast(concat(a,
/// b, ...)) for widening casts from one type that only the concat reads:
/// the layout op copies the narrow type.
bool sinkWidening(CastOp cast) {
  if (!cast->hasOneUse())
    return false;
  Operation *layout = *cast->getUsers().begin();
  if (!runTogether(layout, cast))
    return false;
  Type narrow = elementTypeOf(cast.getInput());
  SmallVector<CastOp> casts;
  if (isa<ReshapeOp, PermuteOp, SliceOp>(layout)) {
    casts.push_back(cast);
  } else if (isa<ConcatOp>(layout)) {
    for (Value operand : layout->getOperands()) {
      auto other = operand.getDefiningOp<CastOp>();
      if (!other || !other->hasOneUse() || !other.isWidening() ||
          elementTypeOf(other.getInput()) != narrow ||
          other.getType() != cast.getType() || !runTogether(other, cast))
        return false;
      casts.push_back(other);
    }
  } else {
    return false;
  }
  Value result = layout->getResult(0);
  Type wide = elementTypeOf(result);
  result.setType(withElement(result, narrow));
  CastOp late = createCast(layout->getNextNode(), result, wide, cast);
  result.replaceAllUsesExcept(late, late);
  for (CastOp early : casts) {
    early.getResult().replaceAllUsesWith(early.getInput());
    early.erase();
  }
  return true;
}

/// The operand of `user` that may read a narrower tensor than `widen`'s
/// result in its place, the same values widened inside the op, or null: a
/// sum's input (summed into the wide type: a bias gradient's bf16 rows),
/// unless a sum along the last dim (a row op of slapo-fuse-elementwise's
/// loops, which take a row op's input in its result's type); a norm
/// gradient's grad (the bf16 input gradient of the product after a norm);
/// a rotary embedding's input (the bf16 gradient of the attention after
/// it, which its transposed map reads); an optimizer's update and the
/// gradient's mark, of their gradient (a bf16 product's gradient of an f32
/// weight, which the update reads in the optimizer's phase, scaled or not
/// by clipping, and which the rank program writes widened; an all-reduce
/// between them reads the f32 gradient instead).
OpOperand *getWideningReader(Operation *user, CastOp widen) {
  if (isa<ParamGradOp, AdamwUpdateOp, SgdUpdateOp>(user))
    return user->getOperand(0) == widen.getResult() &&
                   elementTypeOf(widen.getInput()).isBF16() &&
                   elementTypeOf(widen.getResult()).isF32()
               ? &user->getOpOperand(0)
               : nullptr;
  if (!runTogether(user, widen))
    return nullptr;
  if (auto sum = dyn_cast<SumOp>(user); sum && !sum.isAlongLastDim())
    return &sum->getOpOperand(0);
  if (isa<LayerNormGradOp, RmsNormGradOp, RotaryEmbeddingOp>(user) &&
      user->getOperand(0) == widen.getResult())
    return &user->getOpOperand(0);
  return nullptr;
}

/// reader(widen(x)) -> reader(x) for getWideningReader's readers: they
/// read the narrow tensor and compute with the same values.
bool foldIntoReaders(CastOp widen) {
  bool folded = false;
  for (Operation *user : llvm::make_early_inc_range(widen->getUsers())) {
    if (OpOperand *operand = getWideningReader(user, widen)) {
      operand->set(widen.getInput());
      folded = true;
    }
  }
  if (folded && widen->use_empty())
    widen.erase();
  return folded;
}

/// narrow(op(x)) -> op(x) with a narrow result, where the narrowing casts
/// are all that read op's result and op computes it in the wide type and
/// rounds it once, as the cast rounds it: the norms (the layer norms' bf16
/// outputs for the next product) and the rotary embedding (the bf16 query
/// and key of the attention).
bool foldIntoProducer(CastOp narrow) {
  Operation *producer = narrow.getInput().getDefiningOp();
  if (!isa_and_nonnull<LayerNormOp, RmsNormOp, RotaryEmbeddingOp>(producer) ||
      !runTogether(producer, narrow))
    return false;
  Value rows = producer->getResult(0);
  for (Operation *user : rows.getUsers())
    if (!isa<CastOp>(user) ||
        user->getResultTypes() != narrow->getResultTypes() ||
        !runTogether(producer, user))
      return false;
  rows.setType(narrow.getType());
  for (Operation *user : llvm::make_early_inc_range(rows.getUsers())) {
    user->getResult(0).replaceAllUsesWith(rows);
    user->erase();
  }
  return true;
}

/// narrow(widen(x)) -> x where the wide type holds x's exactly.
bool cancelRoundTrip(CastOp cast) {
  auto widen = cast.getInput().getDefiningOp<CastOp>();
  if (!widen || !widen.isWidening() ||
      widen.getInput().getType() != cast.getType())
    return false;
  cast.getResult().replaceAllUsesWith(widen.getInput());
  cast.erase();
  if (widen->use_empty())
    widen.erase();
  return true;
}

struct PropagateCastsPass : impl::PropagateCastsBase<PropagateCastsPass> {
  void runOnOperation() override {
    // Each rewrite erases casts, possibly others than the one it looks at:
    // the casts are collected anew after each. Every rewrite moves a cast
    // past a layout op or removes casts, so this ends.
    while (rewriteOne()) {
    }
  }

  bool rewriteOne() {
    SmallVector<CastOp> casts;
    getOperation().walk([&](CastOp cast) { casts.push_back(cast); });
    for (CastOp cast : casts) {
      if (cancelRoundTrip(cast))
        return true;
      if (cast.isNarrowing() ? hoistNarrowing(cast) || foldIntoProducer(cast)
                             : cast.isWidening() && (sinkWidening(cast) ||
                                                     foldIntoReaders(cast)))
        return true;
    }
    return false;
  }
};

} // namespace
} // namespace slapo
