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

#include <cmath>

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

} // namespace slapo::rt::cpu

#endif // SLAPO_RUNTIME_CPU_ELEMENTMATH_H
