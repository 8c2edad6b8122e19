//===- Pooling.cu - 2-d max pooling and its gradient ----------------------===//
//
// One thread per output element finds its window's maximum as the CPU
// backend does (MaxPoolWindow.h: the same element among equal maxima). The
// gradient gives each input element one thread that gathers the gradients
// of the windows that took their maximum from it, in the order the CPU
// backend adds them (windows by rows then columns), rounding after each add
// as it does: no atomics, and the same sums.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.cuh"

#include "slapo/runtime/MaxPoolWindow.h"
#include "slapo/runtime/cuda/Kernels.h"

namespace slapo::rt::cuda {

using namespace detail;

namespace {

/// The [N * C] planes of a pooling's input [.., H, W] and output
/// [.., OH, OW].
struct Planes {
  int64_t count;
  PoolPlane in;
  int64_t outHeight, outWidth;
};

Planes planesOf(const Tensor &input, const Tensor &pooled) {
  return {input.shape.dims[0] * input.shape.dims[1],
          {input.shape.dims[2], input.shape.dims[3]},
          pooled.shape.dims[2],
          pooled.shape.dims[3]};
}

template <typename T>
__device__ inline int64_t windowMax(const T *plane, const Planes &p,
                                    const Window2d &w, int64_t oh, int64_t ow,
                                    Compute<T> &max) {
  return findWindowMax([plane](int64_t at) { return load(plane[at]); }, p.in,
                       w, oh, ow, max);
}

template <typename T>
__global__ void maxPoolKernel(Planes p, Window2d w, const T *in, T *out) {
  int64_t outSize = p.outHeight * p.outWidth;
  int64_t total = p.count * outSize;
  for (int64_t i = getGlobalThread(); i < total; i += getGlobalThreads()) {
    int64_t plane = i / outSize, oh = i % outSize / p.outWidth,
            ow = i % p.outWidth;
    Compute<T> max;
    windowMax(in + plane * p.in.height * p.in.width, p, w, oh, ow, max);
    out[i] = store<T>(max);
  }
}

/// The first and one past the last window index along a dim whose windows
/// (`kernel` elements `dilation` apart, `stride` apart, after `padding`)
/// can hold element `at`, among `count`.
__device__ inline void coveringWindows(int64_t at, int64_t kernel,
                                       int64_t stride, int64_t padding,
                                       int64_t dilation, int64_t count,
                                       int64_t &first, int64_t &end) {
  int64_t reach = (kernel - 1) * dilation;
  // Window o starts at o * stride - padding and holds `at` only if
  // start <= at <= start + reach.
  int64_t low = at + padding - reach;
  first = low <= 0 ? 0 : (low + stride - 1) / stride;
  end = (at + padding) / stride + 1;
  end = end < count ? end : count;
}

template <typename T>
__global__ void maxPoolGradKernel(Planes p, Window2d w, const T *grad,
                                  const T *in, T *out) {
  int64_t planeSize = p.in.height * p.in.width;
  int64_t outSize = p.outHeight * p.outWidth;
  int64_t total = p.count * planeSize;
  for (int64_t i = getGlobalThread(); i < total; i += getGlobalThreads()) {
    int64_t plane = i / planeSize, at = i % planeSize;
    int64_t h = at / p.in.width, x = at % p.in.width;
    int64_t ohFirst, ohEnd, owFirst, owEnd;
    coveringWindows(h, w.kernel[0], w.stride[0], w.padding[0], w.dilation[0],
                    p.outHeight, ohFirst, ohEnd);
    coveringWindows(x, w.kernel[1], w.stride[1], w.padding[1], w.dilation[1],
                    p.outWidth, owFirst, owEnd);
    const T *inPlane = in + plane * planeSize;
    T sum = store<T>(0.0f);
    for (int64_t oh = ohFirst; oh < ohEnd; ++oh)
      for (int64_t ow = owFirst; ow < owEnd; ++ow) {
        Compute<T> max;
        if (windowMax(inPlane, p, w, oh, ow, max) == at)
          sum = store<T>(load(sum) +
                         load(grad[plane * outSize + oh * p.outWidth + ow]));
      }
    out[i] = sum;
  }
}

} // namespace

void maxPool2d(Context &ctx, const Tensor &input, const Tensor &out,
               const Window2d &window) {
  Planes p = planesOf(input, out);
  int64_t total = out.getNumElements();
  if (total == 0)
    return;
  dispatch(FloatTypes(), input.dtype, "maxPool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    maxPoolKernel<<<getGridSize(ctx, total, kBlockSize), kBlockSize, 0,
                    ctx.getStream()>>>(p, window, input.as<T>(), out.as<T>());
    checkLaunch("maxPool2d");
  });
}

void maxPool2dGrad(Context &ctx, const Tensor &grad, const Tensor &input,
                   const Tensor &out, const Window2d &window) {
  Planes p = planesOf(input, grad);
  int64_t total = out.getNumElements();
  if (total == 0)
    return;
  dispatch(FloatTypes(), input.dtype, "maxPool2dGrad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    maxPoolGradKernel<<<getGridSize(ctx, total, kBlockSize), kBlockSize, 0,
                        ctx.getStream()>>>(p, window, grad.as<T>(),
                                           input.as<T>(), out.as<T>());
    checkLaunch("maxPool2dGrad");
  });
}

} // namespace slapo::rt::cuda
