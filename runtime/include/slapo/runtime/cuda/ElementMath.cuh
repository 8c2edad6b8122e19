//===- ElementMath.cuh - the elementwise math on the GPU -------*- CUDA -*-===//
//
// slapo/runtime/ElementMath.h with CUDA's libdevice functions (within 2 ulp
// of the CPU's where they are not exact). The runtime's elementwise kernels
// (runtime/cuda/Elementwise.cu) and the generated fused kernels
// (FusedLoop.cuh) call these, both compiled with --fmad=false.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CUDA_ELEMENTMATH_CUH
#define SLAPO_RUNTIME_CUDA_ELEMENTMATH_CUH

#include "slapo/runtime/ElementMath.h"

#include <cmath>

namespace slapo::rt::cuda {

struct CudaMath {
  template <typename C> static __host__ __device__ C exp(C x) {
    return ::exp(x);
  }
  template <typename C> static __host__ __device__ C tanh(C x) {
    return ::tanh(x);
  }
  template <typename C> static __host__ __device__ C log(C x) {
    return ::log(x);
  }
  template <typename C> static __host__ __device__ C sqrt(C x) {
    return ::sqrt(x);
  }
  template <typename C> static __host__ __device__ C sin(C x) {
    return ::sin(x);
  }
  template <typename C> static __host__ __device__ C cos(C x) {
    return ::cos(x);
  }
  template <typename C> static __host__ __device__ C erf(C x) {
    return ::erf(x);
  }
  template <typename C> static __host__ __device__ C pow(C x, C y) {
    return ::pow(x, y);
  }
};

using element::isIntegerUnary;
using element::maxPropagatingNaN;
using element::minPropagatingNaN;

template <UnaryKind Kind, typename C> __device__ inline C applyUnary(C x) {
  return element::applyUnary<CudaMath, Kind>(x);
}
template <BinaryKind Kind, typename C>
__device__ inline auto applyBinary(C a, C b) {
  return element::applyBinary<CudaMath, Kind>(a, b);
}
using element::applyCompare;

} // namespace slapo::rt::cuda

#endif // SLAPO_RUNTIME_CUDA_ELEMENTMATH_CUH
