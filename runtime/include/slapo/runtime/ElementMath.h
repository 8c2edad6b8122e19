//===- ElementMath.h - the scalar math of the elementwise ops ---*- C++ -*-===//
//
// One definition, for every backend, of what each elementwise op computes on
// one element: the runtime's unary, binary and compare kernels apply it over
// tensors, and the fused loops and kernels that slapoc generates
// (slapo.fused) apply it to values in registers, so that a fused chain gives
// the bits of the kernels it replaces. A backend instantiates it with its
// transcendental functions (`Math`: exp, tanh, log, sqrt, sin, cos, erf, pow;
// cpu/ElementMath.h, cuda/ElementMath.cuh); everything else is the same term
// by term. Header-only and inline: each is compiled where it is used, for the
// instruction set of that build, and none may contract into fused
// multiply-adds (the CPU's users are built with -ffp-contract=off, the
// GPU's with --fmad=false).
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_ELEMENTMATH_H
#define SLAPO_RUNTIME_ELEMENTMATH_H

#include "slapo/runtime/KernelTypes.h"

#include <cstdint>
#include <type_traits>

/// Inlined into every loop that uses it (the vectorizer sees the math), on
/// the host and, under nvcc, on the device.
#ifdef __CUDACC__
#define SLAPO_ELEMENT_INLINE __host__ __device__ inline
#else
#define SLAPO_ELEMENT_INLINE inline __attribute__((always_inline))
#endif

namespace slapo::rt::element {

/// max and min that propagate NaN, as torch.maximum and torch.max do.
template <typename C> SLAPO_ELEMENT_INLINE C maxPropagatingNaN(C a, C b) {
  return (a != a || a > b) ? a : b;
}
template <typename C> SLAPO_ELEMENT_INLINE C minPropagatingNaN(C a, C b) {
  return (a != a || a < b) ? a : b;
}

/// The kinds defined on integer tensors too.
constexpr bool isIntegerUnary(UnaryKind kind) {
  return kind == UnaryKind::Neg || kind == UnaryKind::Abs ||
         kind == UnaryKind::Relu;
}

// The constants of gelu and its tanh approximation, as PyTorch spells them.
constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kSqrtTwoOverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;
/// 1 / sqrt(2 pi), the normal density's scale.
constexpr double kNormalDensityScale = 0.39894228040143267794;

template <typename Math, UnaryKind Kind, typename C>
SLAPO_ELEMENT_INLINE C applyUnary(C x) {
  if constexpr (Kind == UnaryKind::Neg)
    return static_cast<C>(-x);
  else if constexpr (Kind == UnaryKind::Abs)
    return static_cast<C>(x < C(0) ? -x : x);
  else if constexpr (Kind == UnaryKind::Relu)
    return x < C(0) ? C(0) : x; // NaN stays NaN
  else if constexpr (Kind == UnaryKind::Exp)
    return Math::exp(x);
  else if constexpr (Kind == UnaryKind::Log)
    return Math::log(x);
  else if constexpr (Kind == UnaryKind::Sqrt)
    return Math::sqrt(x);
  else if constexpr (Kind == UnaryKind::Rsqrt)
    return C(1) / Math::sqrt(x);
  else if constexpr (Kind == UnaryKind::Tanh)
    return Math::tanh(x);
  else if constexpr (Kind == UnaryKind::Sigmoid)
    return C(1) / (C(1) + Math::exp(-x));
  else if constexpr (Kind == UnaryKind::Silu)
    return x / (C(1) + Math::exp(-x));
  else if constexpr (Kind == UnaryKind::Sin)
    return Math::sin(x);
  else if constexpr (Kind == UnaryKind::Cos)
    return Math::cos(x);
  else if constexpr (Kind == UnaryKind::GeluErf)
    return x * C(0.5) * (C(1) + Math::erf(x * C(kSqrtHalf)));
  else
    return C(0.5) * x *
           (C(1) +
            Math::tanh(C(kSqrtTwoOverPi) * (x + C(kGeluCubic) * x * x * x)));
}

/// gelu'(x), term by term as PyTorch's GeluBackward computes it.
template <typename Math, bool Tanh, typename C>
SLAPO_ELEMENT_INLINE C geluDerivative(C x) {
  if constexpr (Tanh) {
    const C beta = C(kSqrtTwoOverPi), kappa = C(kGeluCubic);
    C square = x * x;
    C tanhInner = Math::tanh(beta * (x + kappa * square * x));
    C leftDerivative = C(0.5) * (C(1) + tanhInner);
    C innerDerivative = beta * (C(1) + C(3) * kappa * square);
    C rightDerivative =
        C(0.5) * x * (C(1) - tanhInner * tanhInner) * innerDerivative;
    return leftDerivative + rightDerivative;
  } else {
    C cdf = C(0.5) * (C(1) + Math::erf(x * C(kSqrtHalf)));
    C pdf = C(kNormalDensityScale) * Math::exp(C(-0.5) * x * x);
    return cdf + x * pdf;
  }
}

/// base^exponent by squaring, as PyTorch computes integer powers; a negative
/// exponent gives 0 unless the base is 1 or -1.
SLAPO_ELEMENT_INLINE int64_t integerPow(int64_t base, int64_t exponent) {
  if (exponent < 0)
    return base == 1 ? 1 : base == -1 ? (exponent % 2 ? -1 : 1) : 0;
  int64_t result = 1;
  for (; exponent; exponent >>= 1, base *= base)
    if (exponent & 1)
      result *= base;
  return result;
}

template <typename Math, BinaryKind Kind, typename C>
SLAPO_ELEMENT_INLINE auto applyBinary(C a, C b) {
  if constexpr (Kind == BinaryKind::Add)
    return a + b;
  else if constexpr (Kind == BinaryKind::Sub)
    return a - b;
  else if constexpr (Kind == BinaryKind::Mul)
    return a * b;
  else if constexpr (Kind == BinaryKind::Div) {
    if constexpr (std::is_integral_v<C>)
      return b == 0 ? int64_t(0) : int64_t(a) / int64_t(b); // no trap on /0
    else
      return a / b;
  } else if constexpr (Kind == BinaryKind::Pow) {
    if constexpr (std::is_integral_v<C>) {
      return integerPow(a, b);
    } else {
      // As ATen's pow with a scalar exponent: squares and cubes (gelu's
      // tanh approximation) are products, several times faster than pow.
      if (b == C(2))
        return a * a;
      if (b == C(3))
        return a * a * a;
      return Math::pow(a, b);
    }
  } else if constexpr (Kind == BinaryKind::Maximum) {
    return maxPropagatingNaN(a, b);
  } else if constexpr (Kind == BinaryKind::Minimum) {
    return minPropagatingNaN(a, b);
  } else if constexpr (std::is_integral_v<C>) {
    return C(0); // binary() refuses integer gelu gradients
  } else {
    return a * geluDerivative<Math, Kind == BinaryKind::GeluTanhGrad>(b);
  }
}

template <CompareKind Kind, typename C>
SLAPO_ELEMENT_INLINE bool applyCompare(C a, C b) {
  if constexpr (Kind == CompareKind::Eq)
    return a == b;
  else if constexpr (Kind == CompareKind::Ne)
    return a != b;
  else if constexpr (Kind == CompareKind::Lt)
    return a < b;
  else if constexpr (Kind == CompareKind::Le)
    return a <= b;
  else if constexpr (Kind == CompareKind::Gt)
    return a > b;
  else
    return a >= b;
}

} // namespace slapo::rt::element

#endif // SLAPO_RUNTIME_ELEMENTMATH_H
