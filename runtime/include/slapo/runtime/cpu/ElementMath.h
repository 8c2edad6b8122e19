//===- ElementMath.h - the elementwise math on the CPU ----------*- C++ -*-===//
//
// slapo/runtime/ElementMath.h with the CPU's transcendental functions: exp
// and tanh from VectorMath.h (branch-free f32 polynomials that vectorize),
// the others from <cmath>. The runtime's elementwise kernels
// (runtime/cpu/Elementwise.cpp) and the generated fused loops (FusedLoop.h)
// call these.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CPU_ELEMENTMATH_H
#define SLAPO_RUNTIME_CPU_ELEMENTMATH_H

#include "slapo/runtime/ElementMath.h"
#include "slapo/runtime/cpu/VectorMath.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace slapo::rt::cpu {

struct CpuMath {
  template <typename C> static SLAPO_VECTOR_INLINE C exp(C x) {
    return detail::vexp(x);
  }
  template <typename C> static SLAPO_VECTOR_INLINE C tanh(C x) {
    return detail::vtanh(x);
  }
  template <typename C> static SLAPO_VECTOR_INLINE C log(C x) {
    return std::log(x);
  }
  template <typename C> static SLAPO_VECTOR_INLINE C sqrt(C x) {
    return std::sqrt(x);
  }
  template <typename C> static SLAPO_VECTOR_INLINE C sin(C x) {
    return std::sin(x);
  }
  template <typename C> static SLAPO_VECTOR_INLINE C cos(C x) {
    return std::cos(x);
  }
  template <typename C> static SLAPO_VECTOR_INLINE C erf(C x) {
    return std::erf(x);
  }
  template <typename C> static SLAPO_VECTOR_INLINE C pow(C x, C y) {
    return std::pow(x, y);
  }
};

using element::isIntegerUnary;
using element::maxPropagatingNaN;
using element::minPropagatingNaN;

template <UnaryKind Kind, typename C> SLAPO_VECTOR_INLINE C applyUnary(C x) {
  return element::applyUnary<CpuMath, Kind>(x);
}
template <BinaryKind Kind, typename C>
SLAPO_VECTOR_INLINE auto applyBinary(C a, C b) {
  return element::applyBinary<CpuMath, Kind>(a, b);
}
using element::applyCompare;

//===----------------------------------------------------------------------===//
// Row reductions: the one order in which every CPU kernel and generated
// fused loop folds a contiguous row, so that fusing a reduction keeps its
// bits. kRowLanes running values, lane k folding elements k, k + kRowLanes,
// ..., are combined pairwise (lane k with lane k + kRowLanes / 2, halving
// until one is left), and the tail is then folded in order. The lanes are
// independent, so the loop vectorizes (an in-order f64 sum waits on each
// add), and the order depends on neither the ISA nor the thread count.
//===----------------------------------------------------------------------===//

constexpr int kRowLanes = 8;

/// Folds x[0, n) with `fold(acc, value)` from `init`, `value` being
/// load(x[i]), in the row order above.
template <typename Acc, typename T, typename Load, typename Fold>
SLAPO_VECTOR_INLINE Acc foldRow(const T *x, int64_t n, Acc init, Load load,
                                Fold fold) {
  Acc lanes[kRowLanes];
  for (int k = 0; k < kRowLanes; ++k)
    lanes[k] = init;
  int64_t i = 0;
  for (; i + kRowLanes <= n; i += kRowLanes)
    for (int k = 0; k < kRowLanes; ++k)
      lanes[k] = fold(lanes[k], load(x[i + k]));
  for (int half = kRowLanes / 2; half > 0; half /= 2)
    for (int k = 0; k < half; ++k)
      lanes[k] = fold(lanes[k], lanes[k + half]);
  Acc acc = lanes[0];
  for (; i < n; ++i)
    acc = fold(acc, load(x[i]));
  return acc;
}

/// The f64 sum of load(x[i]) over [0, n) in the row order.
template <typename T, typename Load>
SLAPO_VECTOR_INLINE double sumRow(const T *x, int64_t n, Load load) {
  return foldRow(
      x, n, 0.0, [&](T value) { return double(load(value)); },
      [](double acc, double value) { return acc + value; });
}
template <typename C> SLAPO_VECTOR_INLINE double sumRow(const C *x, int64_t n) {
  return sumRow(x, n, [](C value) { return value; });
}

/// The largest load(x[i]) (of type C) over [0, n) in the row order, NaN if
/// any is.
template <typename C, typename T, typename Load>
SLAPO_VECTOR_INLINE C maxRow(const T *x, int64_t n, Load load) {
  return foldRow(
      x, n, -std::numeric_limits<C>::infinity(),
      [&](T value) { return C(load(value)); },
      [](C acc, C value) { return maxPropagatingNaN(value, acc); });
}
template <typename C> SLAPO_VECTOR_INLINE C maxRow(const C *x, int64_t n) {
  return maxRow<C>(x, n, [](C value) { return value; });
}

//===----------------------------------------------------------------------===//
// Column reductions (a [rows, C] value reduced over its rows, as a bias
// gradient's sum over the tokens): the one order of the reduce kernel and of
// the generated fused loops' column sums. Each column folds the rows in
// order from the reduction's start (a sum: 0 in f64), independently of the
// others; a task takes one block of kColumnBlock adjacent columns, which
// it folds side by side (the loop over a row's columns vectorizes). The
// order depends on neither the ISA nor the thread count.
//===----------------------------------------------------------------------===//

constexpr int64_t kColumnBlock = 256;

/// The columns [first, first + width) of block `block` of a row of
/// `length` columns.
struct ColumnBlock {
  int64_t first, width;
};
inline ColumnBlock getColumnBlock(int64_t block, int64_t length) {
  int64_t first = block * kColumnBlock;
  return {first, std::min(kColumnBlock, length - first)};
}
inline int64_t getColumnBlocks(int64_t length) {
  return (length + kColumnBlock - 1) / kColumnBlock;
}

} // namespace slapo::rt::cpu

#endif // SLAPO_RUNTIME_CPU_ELEMENTMATH_H
