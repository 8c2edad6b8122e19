//===- ElementMath.h - the scalar math of the elementwise ops ---*- C++ -*-===//
//
// One definition of what each elementwise op computes on one element: the
// runtime's unary and binary kernels (runtime/cpu/Elementwise.cpp) apply it
// over tensors, and the fused loops that slapoc generates (slapo.fused)
// apply it to values in registers, so that a fused chain gives the bits of
// the kernels it replaces. Inline and header-only: each is compiled where it
// is used, for the instruction set of that build (KernelVariant.h, and the
// fused loops' builds in FusedLoop.h), and none may contract into fused
// multiply-adds (both are built with -ffp-contract=off).
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CPU_ELEMENTMATH_H
#define SLAPO_RUNTIME_CPU_ELEMENTMATH_H

#include "slapo/runtime/KernelTypes.h"
#include "slapo/runtime/cpu/VectorMath.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace slapo::rt::cpu {

/// max and min that propagate NaN, as torch.maximum and torch.max do.
template <typename C> inline C maxPropagatingNaN(C a, C b) {
  return (a != a || a > b) ? a : b;
}
template <typename C> inline C minPropagatingNaN(C a, C b) {
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

template <UnaryKind Kind, typename C> SLAPO_VECTOR_INLINE C applyUnary(C x) {
  if constexpr (Kind == UnaryKind::Neg)
    return static_cast<C>(-x);
  else if constexpr (Kind == UnaryKind::Abs)
    return static_cast<C>(x < C(0) ? -x : x);
  else if constexpr (Kind == UnaryKind::Relu)
    return x < C(0) ? C(0) : x; // NaN stays NaN
  else if constexpr (Kind == UnaryKind::Exp)
    return detail::vexp(x);
  else if constexpr (Kind == UnaryKind::Log)
    return std::log(x);
  else if constexpr (Kind == UnaryKind::Sqrt)
    return std::sqrt(x);
  else if constexpr (Kind == UnaryKind::Rsqrt)
    return C(1) / std::sqrt(x);
  else if constexpr (Kind == UnaryKind::Tanh)
    return detail::vtanh(x);
  else if constexpr (Kind == UnaryKind::Sigmoid)
    return C(1) / (C(1) + detail::vexp(-x));
  else if constexpr (Kind == UnaryKind::Silu)
    return x / (C(1) + detail::vexp(-x));
  else if constexpr (Kind == UnaryKind::Sin)
    return std::sin(x);
  else if constexpr (Kind == UnaryKind::Cos)
    return std::cos(x);
  else if constexpr (Kind == UnaryKind::GeluErf)
    return x * C(0.5) * (C(1) + std::erf(x * C(kSqrtHalf)));
  else
    return C(0.5) * x *
           (C(1) +
            detail::vtanh(C(kSqrtTwoOverPi) * (x + C(kGeluCubic) * x * x * x)));
}

/// gelu'(x), term by term as PyTorch's GeluBackward computes it.
template <bool Tanh, typename C> SLAPO_VECTOR_INLINE C geluDerivative(C x) {
  if constexpr (Tanh) {
    const C beta = C(kSqrtTwoOverPi), kappa = C(kGeluCubic);
    C square = x * x;
    C tanhInner = detail::vtanh(beta * (x + kappa * square * x));
    C leftDerivative = C(0.5) * (C(1) + tanhInner);
    C innerDerivative = beta * (C(1) + C(3) * kappa * square);
    C rightDerivative =
        C(0.5) * x * (C(1) - tanhInner * tanhInner) * innerDerivative;
    return leftDerivative + rightDerivative;
  } else {
    C cdf = C(0.5) * (C(1) + std::erf(x * C(kSqrtHalf)));
    C pdf = C(kNormalDensityScale) * detail::vexp(C(-0.5) * x * x);
    return cdf + x * pdf;
  }
}

/// base^exponent by squaring, as PyTorch computes integer powers; a negative
/// exponent gives 0 unless the base is 1 or -1.
inline int64_t integerPow(int64_t base, int64_t exponent) {
  if (exponent < 0)
    return base == 1 ? 1 : base == -1 ? (exponent % 2 ? -1 : 1) : 0;
  int64_t result = 1;
  for (; exponent; exponent >>= 1, base *= base)
    if (exponent & 1)
      result *= base;
  return result;
}

template <BinaryKind Kind, typename C>
SLAPO_VECTOR_INLINE auto applyBinary(C a, C b) {
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
      return std::pow(a, b);
    }
  } else if constexpr (Kind == BinaryKind::Maximum) {
    return maxPropagatingNaN(a, b);
  } else if constexpr (Kind == BinaryKind::Minimum) {
    return minPropagatingNaN(a, b);
  } else if constexpr (std::is_integral_v<C>) {
    return C(0); // binary() refuses integer gelu gradients
  } else {
    return a * geluDerivative<Kind == BinaryKind::GeluTanhGrad>(b);
  }
}

} // namespace slapo::rt::cpu

#endif // SLAPO_RUNTIME_CPU_ELEMENTMATH_H
