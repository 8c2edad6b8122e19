//===- Pooling.cpp - 2-d max pooling and its gradient ---------------------===//
//
// A task pools whole [H, W] planes, so that the gradient, which adds into
// the input plane each window took its maximum from, needs no atomics. The
// windows are scanned as PyTorch's CPU kernel scans them (MaxPoolWindow.h),
// so that the element picked among equal maxima is PyTorch's too.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.h"

#include "slapo/runtime/MaxPoolWindow.h"
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
  Compute<T> max;
  int64_t best = findWindowMax([plane](int64_t at) { return load(plane[at]); },
                               PoolPlane{p.height, p.width}, w, oh, ow, max);
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
