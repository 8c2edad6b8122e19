//===- Rotary.cu - the rotary position embedding --------------------------===//
//
// rotaryEmbedding (KernelSet.inc): a thread per pair of elements, an
// element of a row's lower half and the one at its position in the upper
// half, which read each other. The math is the CPU backend's, product by
// product (no contraction into fused multiply-adds: CMakeLists.txt), so
// that both give the same bits.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.cuh"

#include "slapo/runtime/cuda/Kernels.h"

namespace slapo::rt::cuda {

using namespace detail;

namespace {

/// Pair p of the layout's space is elements lower = offsets[n] and lower +
/// half of operand n (out and input share offsets[0]; cos offsets[1], sin
/// offsets[2]).
template <typename T, typename Index>
__global__ void rotaryKernel(Index pairs, Index half, bool transposed,
                             DeviceLayout<Index, 3> layout, const T *input,
                             const T *cos, const T *sin, T *out) {
  Index stride = static_cast<Index>(getGlobalThreads());
  for (Index p = static_cast<Index>(getGlobalThread()); p < pairs;
       p += stride) {
    Index offsets[3];
    layout.getOffsets(p, offsets);
    const T *x = input + offsets[0], *c = cos + offsets[1],
            *s = sin + offsets[2];
    Compute<T> xLower = load(x[0]), xUpper = load(x[half]);
    Compute<T> sinLower = load(s[0]), sinUpper = load(s[half]);
    // Forward: lower - upper * sinLower, upper + lower * sinUpper; the
    // transposed map: lower + upper * sinUpper, upper - lower * sinLower.
    Compute<T> lowerRotated = xUpper * (transposed ? sinUpper : sinLower);
    Compute<T> upperRotated = xLower * (transposed ? sinLower : sinUpper);
    out[offsets[0]] = store<T>(xLower * load(c[0]) +
                               (transposed ? lowerRotated : -lowerRotated));
    out[offsets[0] + half] = store<T>(
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
  dispatch(FloatTypes(), input.dtype, "rotaryEmbedding", [&](auto tag) {
    using T = typename decltype(tag)::type;
    unsigned grid = getGridSize(ctx, pairs, kBlockSize);
    cudaStream_t stream = ctx.getStream();
    // 32-bit offsets where the lower elements' fit in 31 bits: the upper
    // ones, `half` (< 2^31) further, then still fit in 32.
    if (layout.fitsInt32())
      rotaryKernel<T, uint32_t><<<grid, kBlockSize, 0, stream>>>(
          uint32_t(pairs), uint32_t(half), transposed,
          DeviceLayout<uint32_t, 3>(layout), input.as<T>(), cos.as<T>(),
          sin.as<T>(), out.as<T>());
    else
      rotaryKernel<T, int64_t><<<grid, kBlockSize, 0, stream>>>(
          pairs, half, transposed, DeviceLayout<int64_t, 3>(layout),
          input.as<T>(), cos.as<T>(), sin.as<T>(), out.as<T>());
    checkLaunch("rotaryEmbedding");
  });
}

} // namespace slapo::rt::cuda
