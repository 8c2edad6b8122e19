//===- MaxPoolWindow.h - where a max-pooling window takes its maximum -*- C++
//-*-===//
//
// Shared by the CPU and CUDA backends' max pooling, so that both pick the
// same element among equal maxima: PyTorch's CPU kernel's (cpu_max_pool),
// which scans a window by rows then columns and replaces its maximum by a
// greater value or a NaN.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_MAXPOOLWINDOW_H
#define SLAPO_RUNTIME_MAXPOOLWINDOW_H

#include "slapo/runtime/HostDevice.h"
#include "slapo/runtime/KernelTypes.h"

#include <cstdint>
#include <limits>

namespace slapo::rt {

/// The [height, width] plane a pooling window slides over.
struct PoolPlane {
  int64_t height, width;
};

/// The offset in its plane of the element that window (oh, ow) takes its
/// maximum from, with that maximum in `max`; `load(offset)` reads the
/// plane's elements in the compute type C. Windows are cut at the plane's
/// edges (padding and ceil_mode add nothing).
template <typename C, typename Load>
SLAPO_HOST_DEVICE inline int64_t findWindowMax(Load load, PoolPlane plane,
                                               const Window2d &w, int64_t oh,
                                               int64_t ow, C &max) {
  int64_t h0 = oh * w.stride[0] - w.padding[0];
  int64_t w0 = ow * w.stride[1] - w.padding[1];
  int64_t h1 = h0 + (w.kernel[0] - 1) * w.dilation[0] + 1;
  int64_t w1 = w0 + (w.kernel[1] - 1) * w.dilation[1] + 1;
  h1 = h1 < plane.height ? h1 : plane.height;
  w1 = w1 < plane.width ? w1 : plane.width;
  while (h0 < 0)
    h0 += w.dilation[0];
  while (w0 < 0)
    w0 += w.dilation[1];
  int64_t best = h0 * plane.width + w0;
  max = -std::numeric_limits<C>::infinity();
  for (int64_t h = h0; h < h1; h += w.dilation[0])
    for (int64_t x = w0; x < w1; x += w.dilation[1]) {
      C value = load(h * plane.width + x);
      if (value > max || value != value) {
        max = value;
        best = h * plane.width + x;
      }
    }
  return best;
}

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_MAXPOOLWINDOW_H
