//===- Rotary.cpp - the rotary position embedding -------------------------===//
//
// rotaryEmbedding (KernelSet.inc) over the segments of BroadcastWalker, as
// the binary kernels broadcast. Each element pairs with the one at its
// position in the other half of its row: the forward map adds the partner
// times sin, negated in the lower half; the transposed map adds the partner
// times the partner's sin, negated in the upper half. A segment is cut into
// runs within one half of a row, each a branch-free loop.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.h"
#include "KernelVariant.h"

SLAPO_CPU_VARIANT_ISA_BEGIN
namespace slapo::rt::cpu::SLAPO_CPU_VARIANT {

using namespace detail;

namespace {

/// y[i] = x[i] * cos[i] + (-)x[i + toPartner] * rotatedSin[i] for i in
/// [0, count): each product rounded to the compute type, then their sum,
/// then the result once to T (the spelled-out ops' bits in f32; negating a
/// product is exact).
template <bool Negate, typename T>
void rotateRun(const T *x, const T *cos, const T *rotatedSin, T *y,
               int64_t count, int64_t toPartner) {
  for (int64_t i = 0; i < count; ++i) {
    Compute<T> direct = load(x[i]) * load(cos[i]);
    Compute<T> rotated = load(x[i + toPartner]) * load(rotatedSin[i]);
    y[i] = store<T>(direct + (Negate ? -rotated : rotated));
  }
}

} // namespace

void rotaryEmbedding(Context &ctx, const Tensor &input, const Tensor &cos,
                     const Tensor &sin, const Tensor &out, bool transposed) {
  int64_t size = input.shape.dims[input.getRank() - 1], half = size / 2;
  dispatch(FloatTypes(), input.dtype, "rotaryEmbedding", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *in = input.as<T>(), *cosines = cos.as<T>(), *sines = sin.as<T>();
    T *result = out.as<T>();
    // cos and sin never stretch the last dim, so every operand advances one
    // element at a time along a segment, and an element's partner lies
    // `half` before or after it in all four.
    BroadcastWalker<2>(input.shape, {cos.shape, sin.shape})
        .run(ctx, [&](int64_t offset, const int64_t *offsets, const int64_t *,
                      int64_t length) {
          const T *x = in + offset, *c = cosines + offsets[0];
          const T *s = sines + offsets[1];
          T *y = result + offset;
          for (int64_t done = 0; done < length;) {
            int64_t column = (offset + done) % size;
            bool lower = column < half;
            int64_t count =
                std::min(length - done, (lower ? half : size) - column);
            int64_t toPartner = lower ? half : -half;
            const T *rotatedSin = s + done + (transposed ? toPartner : 0);
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
