//===- DataMovement.cu - copies, permutes, slices, concats, broadcasts ----===//
//
// Every kernel here is one strided copy: the destination and the source
// addressed over one iteration space (KernelSupport.cuh's StridedLayout).
// Elements are moved as unsigned integers of their width, widened to up to
// 16 bytes where a run of them is contiguous on both sides and aligned.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.cuh"

#include "slapo/runtime/cuda/Kernels.h"

namespace slapo::rt::cuda {

using namespace detail;

namespace {

struct Identity {
  template <typename W> __device__ W operator()(W value) const { return value; }
};

/// Whether `layout`, in elements of `width` bytes, can move words of
/// `bytes` bytes: its innermost dim is contiguous on both sides and both
/// pointers and every stride are multiples of the word.
bool canWiden(const StridedLayout<2> &layout, size_t width, size_t bytes,
              const void *dst, const void *src) {
  if (bytes <= width || bytes % width || layout.rank == 0 ||
      !isAligned(dst, bytes) || !isAligned(src, bytes))
    return false;
  int64_t factor = bytes / width;
  int last = layout.rank - 1;
  if (layout.strides[0][last] != 1 || layout.strides[1][last] != 1 ||
      layout.dims[last] % factor)
    return false;
  for (int d = 0; d < last; ++d)
    if (layout.strides[0][d] % factor || layout.strides[1][d] % factor)
      return false;
  return true;
}

/// `layout` in words `factor` elements wide.
StridedLayout<2> widen(StridedLayout<2> layout, int64_t factor) {
  int last = layout.rank - 1;
  layout.dims[last] /= factor;
  for (int d = 0; d < last; ++d)
    for (int n = 0; n < 2; ++n)
      layout.strides[n][d] /= factor;
  return layout;
}

/// dst[offset 0] = src[offset 1] over `layout`, for elements of `width`
/// bytes.
void copyStrided(Context &ctx, const char *kernel, StridedLayout<2> layout,
                 size_t width, void *dst, const void *src) {
  auto run = [&](auto wordTag) {
    using W = typename decltype(wordTag)::type;
    launchStrided(ctx, kernel, layout, Identity(), static_cast<W *>(dst),
                  static_cast<const W *>(src));
  };
  // The widest word first.
  if (canWiden(layout, width, 16, dst, src)) {
    layout = widen(layout, 16 / width);
    run(TypeTag<uint4>());
  } else if (canWiden(layout, width, 8, dst, src)) {
    layout = widen(layout, 8 / width);
    run(TypeTag<uint64_t>());
  } else if (canWiden(layout, width, 4, dst, src)) {
    layout = widen(layout, 4 / width);
    run(TypeTag<uint32_t>());
  } else {
    dispatchWidth(width, run);
  }
}

/// `pointer` advanced by `elements` elements of `width` bytes.
template <typename P> P *advance(P *pointer, int64_t elements, size_t width) {
  using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
  return reinterpret_cast<P *>(reinterpret_cast<Byte *>(pointer) +
                               elements * int64_t(width));
}

} // namespace

void copy(Context &ctx, const Tensor &input, const Tensor &out) {
  if (out.getBytes() == 0 || input.data == out.data)
    return;
  checkCuda(cudaMemcpyAsync(out.data, input.data, out.getBytes(),
                            cudaMemcpyDeviceToDevice, ctx.getStream()),
            "copy: cudaMemcpyAsync");
}

void permute(Context &ctx, const Tensor &input, const Tensor &out,
             const int64_t *permutation) {
  int rank = out.getRank();
  Strides inputStrides = getRowMajorStrides(input.shape), sourceStrides{};
  for (int i = 0; i < rank; ++i)
    sourceStrides[i] = inputStrides[permutation[i]];
  StridedLayout<2> layout(out.shape,
                          {getRowMajorStrides(out.shape), sourceStrides});
  copyStrided(ctx, "permute", layout, getSize(out.dtype), out.data, input.data);
}

void slice(Context &ctx, const Tensor &input, const Tensor &out, int64_t dim,
           int64_t start, int64_t step) {
  int d = normalizeDim(dim, input.getRank());
  Strides sourceStrides = getRowMajorStrides(input.shape);
  const void *first =
      advance(input.data, start * sourceStrides[d], getSize(input.dtype));
  sourceStrides[d] *= step;
  StridedLayout<2> layout(out.shape,
                          {getRowMajorStrides(out.shape), sourceStrides});
  copyStrided(ctx, "slice", layout, getSize(out.dtype), out.data, first);
}

void concat(Context &ctx, const Tensor *inputs, int count, const Tensor &out,
            int64_t dim) {
  int d = normalizeDim(dim, out.getRank());
  Strides outStrides = getRowMajorStrides(out.shape);
  size_t width = getSize(out.dtype);
  // One copy per input, into its block of out along dim.
  int64_t offset = 0;
  for (int k = 0; k < count; ++k) {
    const Tensor &input = inputs[k];
    StridedLayout<2> layout(input.shape,
                            {outStrides, getRowMajorStrides(input.shape)});
    copyStrided(ctx, "concat", layout, width,
                advance(out.data, offset * outStrides[d], width), input.data);
    offset += input.shape.dims[d];
  }
}

void broadcast(Context &ctx, const Tensor &input, const Tensor &out) {
  StridedLayout<2> layout(out.shape,
                          {getRowMajorStrides(out.shape),
                           getBroadcastStrides(input.shape, out.shape)});
  copyStrided(ctx, "broadcast", layout, getSize(out.dtype), out.data,
              input.data);
}

} // namespace slapo::rt::cuda
