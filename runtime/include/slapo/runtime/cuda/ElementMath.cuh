//===- ElementMath.cuh - the scalar math of the elementwise ops -*- CUDA -*-===//
//
// One definition of what each elementwise op computes on one element on the
// GPU: the runtime's elementwise kernels (runtime/cuda/Elementwise.cu) apply
// it to loaded elements, and the fused kernels that slapoc generates
// (slapo.fused) to values in registers, so that a fused chain gives the bits
// of the kernels it replaces. The math is the CPU backend's
// (slapo/runtime/cpu/ElementMath.h) term by term, with CUDA's libdevice
// functions; both this header's users are compiled with --fmad=false, so no
// product and sum contract into a fused multiply-add in one and not in the
// other.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CUDA_ELEMENTMATH_CUH
#define SLAPO_RUNTIME_CUDA_ELEMENTMATH_CUH

#include "slapo/runtime/KernelTypes.h"

#include <cstdint>
#include <type_traits>

namespace slapo::rt::cuda {

/// max and min that propagate NaN, as torch.maximum and torch.max do.
template <typename C> __host__ __device__ inline C maxPropagatingNaN(C a, C b) {
  return (a != a || a > b) ? a : b;
}
template <typename C> __host__ __device__ inline C minPropagatingNaN(C a, C b) {
  return (a != a || a < b) ? a : b;
}

// The constants of gelu and its tanh approximation, as PyTorch spells them.
constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kSqrtTwoOverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;
/// 1 / sqrt(2 pi), the normal density's scale.
constexpr double kNormalDensityScale = 0.39894228040143267794;

template <UnaryKind Kind, typename C> __device__ inline C applyUnary(C x) {
  if constexpr (Kind == UnaryKind::Neg)
    return static_cast<C>(-x);
  else if constexpr (Kind == UnaryKind::Abs)
    return static_cast<C>(x < C(0) ? -x : x);
  else if constexpr (Kind == UnaryKind::Relu)
    return x < C(0) ? C(0) : x; // NaN stays NaN
  else if constexpr (Kind == UnaryKind::Exp)
    return exp(x);
  else if constexpr (Kind == UnaryKind::Log)
    return log(x);
  else if constexpr (Kind == UnaryKind::Sqrt)
    return sqrt(x);
  else if constexpr (Kind == UnaryKind::Rsqrt)
    return C(1) / sqrt(x); // rounded twice, as the CPU's
  else if constexpr (Kind == UnaryKind::Tanh)
    return tanh(x);
  else if constexpr (Kind == UnaryKind::Sigmoid)
    return C(1) / (C(1) + exp(-x));
  else if constexpr (Kind == UnaryKind::Silu)
    return x / (C(1) + exp(-x));
  else if constexpr (Kind == UnaryKind::Sin)
    return sin(x);
  else if constexpr (Kind == UnaryKind::Cos)
    return cos(x);
  else if constexpr (Kind == UnaryKind::GeluErf)
    return x * C(0.5) * (C(1) + erf(x * C(kSqrtHalf)));
  else
    return C(0.5) * x *
           (C(1) + tanh(C(kSqrtTwoOverPi) * (x + C(kGeluCubic) * x * x * x)));
}

/// gelu'(x), term by term as PyTorch's GeluBackward computes it.
template <bool Tanh, typename C> __device__ inline C geluDerivative(C x) {
  if constexpr (Tanh) {
    const C beta = C(kSqrtTwoOverPi), kappa = C(kGeluCubic);
    C square = x * x;
    C tanhInner = tanh(beta * (x + kappa * square * x));
    C leftDerivative = C(0.5) * (C(1) + tanhInner);
    C innerDerivative = beta * (C(1) + C(3) * kappa * square);
    C rightDerivative =
        C(0.5) * x * (C(1) - tanhInner * tanhInner) * innerDerivative;
    return leftDerivative + rightDerivative;
  } else {
    C cdf = C(0.5) * (C(1) + erf(x * C(kSqrtHalf)));
    C pdf = C(kNormalDensityScale) * exp(C(-0.5) * x * x);
    return cdf + x * pdf;
  }
}

/// base^exponent by squaring, as PyTorch computes integer powers; a negative
/// exponent gives 0 unless the base is 1 or -1.
__device__ inline int64_t integerPow(int64_t base, int64_t exponent) {
  if (exponent < 0)
    return base == 1 ? 1 : base == -1 ? (exponent % 2 ? -1 : 1) : 0;
  int64_t result = 1;
  for (; exponent; exponent >>= 1, base *= base)
    if (exponent & 1)
      result *= base;
  return result;
}

template <BinaryKind Kind, typename C>
__device__ inline auto applyBinary(C a, C b) {
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
      // As ATen's pow with a scalar exponent: squares and cubes are
      // products.
      if (b == C(2))
        return a * a;
      if (b == C(3))
        return a * a * a;
      return pow(a, b);
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

template <CompareKind Kind, typename C>
__device__ inline bool applyCompare(C a, C b) {
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

} // namespace slapo::rt::cuda

#endif // SLAPO_RUNTIME_CUDA_ELEMENTMATH_CUH
