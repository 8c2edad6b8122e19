//===- Rotary.cpp - the rotary position embedding -------------------------===//
//
// rotaryEmbedding (KernelSet.inc) over the segments of BroadcastWalker, as
// the binary kernels broadcast. Each element pairs with the one at its
// position in the other half of its row: the forward map adds the partner
// times sin, negated in the lower half; the transposed map adds the partner
// times the partner's sin, negated in the upper half. A segment is cut into
// runs within one half of a row, each a branch-free loop. The input and the
// out may be narrower than cos and sin (mixed precision's casts folded in):
// the input is widened exactly as it is read, the sum rounded once into
// the out.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.h"
#include "KernelVariant.h"

SLAPO_CPU_VARIANT_ISA_BEGIN
namespace slapo::rt::cpu::SLAPO_CPU_VARIANT {

using namespace detail;

namespace {

/// Dispatch.h's, over the CPU's element types.
constexpr RotaryDispatcher<ElementTraits, FloatTypes, AllTypes> dispatchRotary{
    dispatchHeldExactly};

/// y[i] = x[i] * cos[i] + (-)x[i + toPartner] * rotatedSin[i] for i in
/// [0, count): x widened exactly to the compute type of C, each product
/// rounded to it, then their sum, then the result once to Out (the
/// spelled-out ops' bits in f32; negating a product is exact).
template <bool Negate, typename C, typename In, typename Out>
void rotateRun(const In *x, const C *cos, const C *rotatedSin, Out *y,
               int64_t count, int64_t toPartner) {
  using V = Compute<C>;
  for (int64_t i = 0; i < count; ++i) {
    V direct = V(load(x[i])) * load(cos[i]);
    V rotated = V(load(x[i + toPartner])) * load(rotatedSin[i]);
    y[i] = store<Out>(direct + (Negate ? -rotated : rotated));
  }
}

} // namespace

void rotaryEmbedding(Context &ctx, const Tensor &input, const Tensor &cos,
                     const Tensor &sin, const Tensor &out, bool transposed) {
  int64_t size = input.shape.dims[input.getRank() - 1], half = size / 2;
  dispatchRotary(input, cos, sin, out, [&](auto tag, auto inTag, auto outTag) {
    using C = typename decltype(tag)::type;
    using In = typename decltype(inTag)::type;
    using Out = typename decltype(outTag)::type;
    const In *in = input.as<In>();
    const C *cosines = cos.as<C>(), *sines = sin.as<C>();
    Out *result = out.as<Out>();
    // cos and sin never stretch the last dim, so every operand advances one
    // element at a time along a segment, and an element's partner lies
    // `half` before or after it in all four.
    BroadcastWalker<2>(input.shape, {cos.shape, sin.shape})
        .run(ctx, [&](int64_t offset, const int64_t *offsets, const int64_t *,
                      int64_t length) {
          const In *x = in + offset;
          const C *c = cosines + offsets[0], *s = sines + offsets[1];
          Out *y = result + offset;
          for (int64_t done = 0; done < length;) {
            int64_t column = (offset + done) % size;
            bool lower = column < half;
            int64_t count =
                std::min(length - done, (lower ? half : size) - column);
            int64_t toPartner = lower ? half : -half;
            const C *rotatedSin = s + done + (transposed ? toPartner : 0);
            if (lower != transposed)
              rotateRun<true>(x + done, c + done, rotatedSin, y + done, count,
                              toPartner);
            else
              rotateRun<false>(x + done, c + done, rotatedSin, y + done, count,
                               toPartner);
            done += count;
          }
        });
  });
}

} // namespace slapo::rt::cpu::SLAPO_CPU_VARIANT
SLAPO_CPU_VARIANT_ISA_END
