//===- RowMoments.h - the statistics of a norm's row ------------*- C++ -*-===//
//
// A layer norm's or RMS norm's row as its forward and backward kernels see
// it: its center and 1 / sqrt(variance + eps). Each backend sums the row its
// own way (the CPU in f64, a thread a row; the GPU in the accumulation type,
// a block a row); from those sums on, one definition, which the CPU's loops
// and the GPU's kernels both call, says how they are rounded.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_ROWMOMENTS_H
#define SLAPO_RUNTIME_ROWMOMENTS_H

#include "slapo/runtime/HostDevice.h"

#include <cstdint>

namespace slapo::rt {

/// A row's center (its mean; 0 for the RMS norm) and 1 / sqrt(variance +
/// eps), each rounded once to the compute type `C`: forward and backward
/// see the same.
template <typename C> struct RowMoments { C center, rstd; };

/// The RowMoments of a row of `size` elements from its `mean` (0 for the RMS
/// norm, which does not center) and the sum of its `squares` about it, in
/// the accumulation type `A`; `Math` is the backend's (sqrt).
template <typename Math, bool Rms, typename C, typename A>
SLAPO_HOST_DEVICE inline RowMoments<C>
finishRowMoments(A mean, A squares, int64_t size, double eps) {
  if constexpr (Rms) {
    // The mean, eps and rsqrt rounded as the module's own ops round them, in
    // the element's compute type.
    return {C(mean), C(1) / Math::sqrt(C(squares / A(size)) + C(eps))};
  }
  return {C(mean), C(1.0 / Math::sqrt(double(squares) / double(size) + eps))};
}

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_ROWMOMENTS_H
