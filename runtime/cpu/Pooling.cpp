//===- Pooling.cpp - 2-d max pooling and its gradient ---------------------===//
//
// A task pools whole [H, W] planes, so that the gradient, which adds into
// the input plane each window took its maximum from, needs no atomics. The
// windows are scanned as PyTorch's CPU kernel scans them (cpu_max_pool):
// rows then columns, the maximum replaced by a greater value or a NaN, so
// that the element picked among equal maxima is PyTorch's too.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.h"

#include "slapo/runtime/cpu/Kernels.h"

namespace slapo::rt::cpu {

using namespace detail;

namespace {

/// The [N * C, H, W] planes of a pooling's input and the [OH, OW] of its
/// output.
struct Planes {
  int64_t count, height, width, outHeight, outWidth;
};

Planes planesOf(const Tensor &input, const Tensor &pooled) {
  return {input.shape.dims[0] * input.shape.dims[1], input.shape.dims[2],
          input.shape.dims[3], pooled.shape.dims[2], pooled.shape.dims[3]};
}

/// The offset in its plane of the element window (oh, ow) takes its maximum
/// from, and that maximum.
template <typename T>
std::pair<int64_t, Compute<T>> windowMax(const T *plane, const Planes &p,
                                         const Window2d &w, int64_t oh,
                                         int64_t ow) {
  int64_t h0 = oh * w.stride[0] - w.padding[0];
  int64_t w0 = ow * w.stride[1] - w.padding[1];
  int64_t h1 = std::min(h0 + (w.kernel[0] - 1) * w.dilation[0] + 1, p.height);
  int64_t w1 = std::min(w0 + (w.kernel[1] - 1) * w.dilation[1] + 1, p.width);
  while (h0 < 0)
    h0 += w.dilation[0];
  while (w0 < 0)
    w0 += w.dilation[1];
  int64_t best = h0 * p.width + w0;
  Compute<T> max = -std::numeric_limits<Compute<T>>::infinity();
  for (int64_t h = h0; h < h1; h += w.dilation[0])
    for (int64_t x = w0; x < w1; x += w.dilation[1]) {
      Compute<T> value = load(plane[h * p.width + x]);
      if (value > max || value != value) {
        max = value;
        best = h * p.width + x;
      }
    }
  return {best, max};
}

} // namespace

void maxPool2d(Context &ctx, const Tensor &input, const Tensor &out,
               const Window2d &window) {
  Planes p = planesOf(input, out);
  int64_t planeSize = p.height * p.width, outSize = p.outHeight * p.outWidth;
  dispatch(FloatTypes(), input.dtype, "maxPool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *in = input.as<T>();
    T *result = out.as<T>();
    parallelFor(
        ctx, p.count, grainFor(planeSize), [&](int64_t begin, int64_t end) {
          for (int64_t plane = begin; plane < end; ++plane)
            for (int64_t oh = 0; oh < p.outHeight; ++oh)
              for (int64_t ow = 0; ow < p.outWidth; ++ow)
                result[plane * outSize + oh * p.outWidth + ow] = store<T>(
                    windowMax(in + plane * planeSize, p, window, oh, ow)
                        .second);
        });
  });
}

void maxPool2dGrad(Context &ctx, const Tensor &grad, const Tensor &input,
                   const Tensor &out, const Window2d &window) {
  Planes p = planesOf(input, grad);
  int64_t planeSize = p.height * p.width, gradSize = p.outHeight * p.outWidth;
  dispatch(FloatTypes(), input.dtype, "maxPool2dGrad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *in = input.as<T>();
    const T *gradients = grad.as<T>();
    T *result = out.as<T>();
    parallelFor(
        ctx, p.count, grainFor(planeSize), [&](int64_t begin, int64_t end) {
          for (int64_t plane = begin; plane < end; ++plane) {
            T *target = result + plane * planeSize;
            std::fill(target, target + planeSize, store<T>(0.0f));
            for (int64_t oh = 0; oh < p.outHeight; ++oh)
              for (int64_t ow = 0; ow < p.outWidth; ++ow) {
                int64_t at =
                    windowMax(in + plane * planeSize, p, window, oh, ow).first;
                Compute<T> g =
                    load(gradients[plane * gradSize + oh * p.outWidth + ow]);
                target[at] = store<T>(load(target[at]) + g);
              }
          }
        });
  });
}

} // namespace slapo::rt::cpu
