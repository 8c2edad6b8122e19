//===- VectorMath.h - exp and tanh that vectorize ---------------*- C++ -*-===//
//
// glibc's expf and tanhf are calls that no loop vectorizes: in a GPT-2
// training step tanhf (GELU's tanh approximation) and expf took a tenth of
// the time. vexp and vtanh compute f32 with branch-free polynomials (the
// Cephes library's expf and tanhf coefficients, errors within 2 ulp) so
// that the kernels' loops over them vectorize; f64 keeps the C library's.
//
// Public for ElementMath.h, whose scalar math the generated fused loops
// inline too.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CPU_VECTORMATH_H
#define SLAPO_RUNTIME_CPU_VECTORMATH_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace slapo::rt::cpu::detail {

/// For the functions a loop must inline to vectorize: GCC's heuristics
/// leave vexp out of line in the bigger kernels (gelu and its gradient).
#define SLAPO_VECTOR_INLINE inline __attribute__((always_inline))
/// The same for a lambda between the loop and such a function.
#define SLAPO_VECTOR_LAMBDA __attribute__((always_inline))

/// 2^n for an integer n in [-126, 127], as a float.
SLAPO_VECTOR_INLINE float powerOfTwo(int32_t n) {
  int32_t bits = (n + 127) << 23;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

/// e^x: x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts, so that r
/// is exact), e^r by a degree-6 polynomial, scaled by 2^n in two halves so
/// that subnormal results and overflow to infinity come out as for expf.
SLAPO_VECTOR_INLINE float vexp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2High = 0.693359375f, kLn2Low = -2.12194440e-4f;
  // Beyond these e^x is 0 or infinite in f32; the clamp bounds n.
  constexpr float kLowest = -104.0f, kHighest = 89.0f;
  // Adding and subtracting 1.5 * 2^23 rounds to the nearest integer.
  constexpr float kRounder = 12582912.0f;
  // Each select tests x itself: chained ones (std::min of std::max) keep
  // GCC from vectorizing. NaN takes the lowest, then is restored below.
  float low = x >= kLowest ? x : kLowest;
  float clamped = x > kHighest ? kHighest : low;
  float n = (clamped * kLog2e + kRounder) - kRounder;
  float r = (clamped - n * kLn2High) - n * kLn2Low;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float er = (p * r) * r + r + 1.0f;
  int32_t whole = static_cast<int32_t>(n), half = whole / 2;
  float result = er * powerOfTwo(half) * powerOfTwo(whole - half);
  result = x <= kLowest ? 0.0f : result;
  return x != x ? x : result; // NaN stays NaN
}

/// tanh x: an odd polynomial below |x| = 0.625, where 1 - 2 / (e^2|x| + 1)
/// would lose digits to cancellation, and that formula above it (exactly 1
/// once e^2|x| overflows).
SLAPO_VECTOR_INLINE float vtanh(float x) {
  float a = std::fabs(x);
  float large = 1.0f - 2.0f / (vexp(2.0f * a) + 1.0f);
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = x + x * z * p;
  // The sign of x, -0 for -0 too.
  float result = std::copysign(a < 0.625f ? small : large, x);
  return x != x ? x : result;
}

inline double vexp(double x) { return std::exp(x); }
inline double vtanh(double x) { return std::tanh(x); }

} // namespace slapo::rt::cpu::detail

#endif // SLAPO_RUNTIME_CPU_VECTORMATH_H
