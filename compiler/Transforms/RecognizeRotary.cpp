//===- RecognizeRotary.cpp - a spelled-out RoPE as one slapo.rotary_embedding //
//
// Hugging Face's LLaMA (and Mistral, Qwen2, ...) applies its rotary position
// embedding to the query and the key as q * cos + rotate_half(q) * sin,
// rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2]): two slices, a negation
// and a concat (each a copy of the query or key), two products and a sum,
// and autodiff doubles them. As one slapo.rotary_embedding it is one pass
// forward and one backward (the transposed map), computing the same products
// and sum: the same bits.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "DeadOps.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Dialect/TensorBuilder.h"

#include <array>
#include <optional>

namespace slapo {
#define GEN_PASS_DEF_RECOGNIZEROTARY
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

/// Whether `slice` takes elements [start, start + size) of `x`'s last dim,
/// step 1.
bool slicesLastDim(SliceOp slice, Value x, int64_t start, int64_t size) {
  int64_t last = rankOf(x) - 1;
  return slice.getInput() == x && slice.getDim() == last &&
         slice.getStart() == start && slice.getEnd() == start + size &&
         slice.getStep() == 1;
}

/// x when `value` is rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2]) over
/// the last dim; else null.
Value matchRotateHalf(Value value) {
  auto concat = value.getDefiningOp<ConcatOp>();
  if (!concat || concat.getInputs().size() != 2 ||
      concat.getDim() != rankOf(value) - 1)
    return nullptr;
  auto neg = concat.getInputs()[0].getDefiningOp<NegOp>();
  auto high = neg ? neg.getInput().getDefiningOp<SliceOp>() : SliceOp();
  auto low = concat.getInputs()[1].getDefiningOp<SliceOp>();
  if (!high || !low)
    return nullptr;
  Value x = low.getInput();
  int64_t size = shapeOf(x).back(), half = size / 2;
  if (size % 2 || !slicesLastDim(low, x, 0, half) ||
      !slicesLastDim(high, x, half, half))
    return nullptr;
  return x;
}

/// The operands of rotary_embedding when `sum` is x * cos + rotate_half(x) *
/// sin (each product's and the sum's operands in either order): x, cos,
/// sin, all of the result's type but the angles, which broadcast to it
/// and which no parameter reaches (the op gives them no gradient).
std::optional<std::array<Value, 3>> matchRotary(AddOp sum) {
  for (auto [plain, rotated] : {std::pair(sum.getLhs(), sum.getRhs()),
                                std::pair(sum.getRhs(), sum.getLhs())}) {
    auto cosProduct = plain.getDefiningOp<MulOp>();
    auto sinProduct = rotated.getDefiningOp<MulOp>();
    if (!cosProduct || !sinProduct)
      continue;
    for (auto [rotation, sin] :
         {std::pair(sinProduct.getLhs(), sinProduct.getRhs()),
          std::pair(sinProduct.getRhs(), sinProduct.getLhs())}) {
      Value x = matchRotateHalf(rotation);
      if (!x)
        continue;
      Value cos = cosProduct.getLhs() == x   ? cosProduct.getRhs()
                  : cosProduct.getRhs() == x ? cosProduct.getLhs()
                                             : Value();
      if (!cos)
        continue;
      Type type = sum.getType();
      bool angles = llvm::all_of(std::array<Value, 2>{cos, sin}, [&](Value v) {
        return elementTypeOf(v) == elementTypeOf(x) && rankOf(v) >= 1 &&
               shapeOf(v).back() == shapeOf(x).back() && !dependsOnParameter(v);
      });
      Value chain[] = {x, plain, rotated, rotation};
      if (angles &&
          llvm::all_of(chain, [&](Value v) { return v.getType() == type; }))
        return std::array<Value, 3>{x, cos, sin};
    }
  }
  return std::nullopt;
}

struct RecognizeRotaryPass : impl::RecognizeRotaryBase<RecognizeRotaryPass> {
  void runOnOperation() override {
    SmallVector<std::pair<AddOp, std::array<Value, 3>>> matches;
    getOperation().walk([&](AddOp sum) {
      if (auto operands = matchRotary(sum))
        matches.push_back({sum, *operands});
    });
    for (auto [sum, operands] : matches) {
      OpBuilder builder(sum);
      ModulePathScope inModule(builder, sum);
      auto [x, cos, sin] = operands;
      Value rotary = builder.create<RotaryEmbeddingOp>(
          sum.getLoc(), sum.getType(), x, cos, sin, /*transposed=*/false);
      sum.getResult().replaceAllUsesWith(rotary);
      eraseDeadChain(sum);
    }
  }
};

} // namespace
} // namespace slapo
