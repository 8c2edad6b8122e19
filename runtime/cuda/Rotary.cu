//===- Rotary.cu - the rotary position embedding --------------------------===//
//
// rotaryEmbedding (KernelSet.inc): a thread per pair of elements, an
// element of a row's lower half and the one at its position in the upper
// half, which read each other. The math is the CPU backend's, product by
// product (no contraction into fused multiply-adds: CMakeLists.txt), so
// that both give the same bits, with the same narrower input (widened
// exactly as it is read) or out (the sum rounded once into it).
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.cuh"

#include "slapo/runtime/cuda/Kernels.h"

namespace slapo::rt::cuda {

using namespace detail;

namespace {

/// Dispatch.h's, over the GPU's element types.
constexpr RotaryDispatcher<ElementTraits, FloatTypes, AllTypes> dispatchRotary{
    dispatchHeldExactly};

/// Pair p of the layout's space is elements lower = offsets[n] and lower +
/// half of operand n (out and input share offsets[0]; cos offsets[1], sin
/// offsets[2]). The input is widened exactly to the compute type of C, the
/// sums rounded once to Out.
template <typename C, typename In, typename Out, typename Index>
__global__ void rotaryKernel(Index pairs, Index half, bool transposed,
                             DeviceLayout<Index, 3> layout, const In *input,
                             const C *cos, const C *sin, Out *out) {
  using V = Compute<C>;
  Index stride = static_cast<Index>(getGlobalThreads());
  for (Index p = static_cast<Index>(getGlobalThread()); p < pairs;
       p += stride) {
    Index offsets[3];
    layout.getOffsets(p, offsets);
    const In *x = input + offsets[0];
    const C *c = cos + offsets[1], *s = sin + offsets[2];
    V xLower = V(load(x[0])), xUpper = V(load(x[half]));
    V sinLower = load(s[0]), sinUpper = load(s[half]);
    // Forward: lower - upper * sinLower, upper + lower * sinUpper; the
    // transposed map: lower + upper * sinUpper, upper - lower * sinLower.
    V lowerRotated = xUpper * (transposed ? sinUpper : sinLower);
    V upperRotated = xLower * (transposed ? sinLower : sinUpper);
    out[offsets[0]] = store<Out>(xLower * load(c[0]) +
                                 (transposed ? lowerRotated : -lowerRotated));
    out[offsets[0] + half] = store<Out>(
        xUpper * load(c[half]) + (transposed ? -upperRotated : upperRotated));
  }
}

} // namespace

void rotaryEmbedding(Context &ctx, const Tensor &input, const Tensor &cos,
                     const Tensor &sin, const Tensor &out, bool transposed) {
  int rank = input.getRank();
  int64_t half = input.shape.dims[rank - 1] / 2;
  // The pairs: input's shape with half its last dim, each operand's strides
  // addressing a pair's lower element (cos and sin broadcast).
  Shape pairShape = input.shape;
  pairShape.dims[rank - 1] = half;
  StridedLayout<3> layout(pairShape,
                          {getRowMajorStrides(input.shape),
                           getBroadcastStrides(cos.shape, input.shape),
                           getBroadcastStrides(sin.shape, input.shape)});
  int64_t pairs = layout.getCount();
  if (pairs == 0)
    return;
  dispatchRotary(input, cos, sin, out, [&](auto tag, auto inTag, auto outTag) {
    using C = typename decltype(tag)::type;
    using In = typename decltype(inTag)::type;
    using Out = typename decltype(outTag)::type;
    unsigned grid = getGridSize(ctx, pairs, kBlockSize);
    cudaStream_t stream = ctx.getStream();
    // 32-bit offsets where the lower elements' fit in 31 bits: the upper
    // ones, `half` (< 2^31) further, then still fit in 32.
    if (layout.fitsInt32())
      rotaryKernel<C, In, Out, uint32_t><<<grid, kBlockSize, 0, stream>>>(
          uint32_t(pairs), uint32_t(half), transposed,
          DeviceLayout<uint32_t, 3>(layout), input.as<In>(), cos.as<C>(),
          sin.as<C>(), out.as<Out>());
    else
      rotaryKernel<C, In, Out, int64_t><<<grid, kBlockSize, 0, stream>>>(
          pairs, half, transposed, DeviceLayout<int64_t, 3>(layout),
          input.as<In>(), cos.as<C>(), sin.as<C>(), out.as<Out>());
    checkLaunch("rotaryEmbedding");
  });
}

} // namespace slapo::rt::cuda
