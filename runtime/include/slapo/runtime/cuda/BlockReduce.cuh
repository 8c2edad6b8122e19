//===- BlockReduce.cuh - reductions across a warp or a block ----*- CUDA
//-*-===//
//
// Shared by the runtime's kernels (KernelSupport.cuh) and the kernels slapoc
// generates for fusion groups with row reductions (FusedLoop.cuh).
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CUDA_BLOCKREDUCE_CUH
#define SLAPO_RUNTIME_CUDA_BLOCKREDUCE_CUH

#include <cuda_runtime.h>

#include <type_traits>

namespace slapo::rt::cuda::detail {

constexpr unsigned kFullMask = 0xffffffffu;

/// `value` of the lane `mask` away in the warp (lane ^ mask).
template <typename T> __device__ inline T shuffleXor(T value, int mask) {
  if constexpr (std::is_same_v<T, bool>)
    return __shfl_xor_sync(kFullMask, int(value), mask) != 0;
  else if constexpr (std::is_integral_v<T> && sizeof(T) < sizeof(int))
    return static_cast<T>(__shfl_xor_sync(kFullMask, int(value), mask));
  else
    return __shfl_xor_sync(kFullMask, value, mask);
}

/// Combines the values of a warp's lanes; every lane gets the result.
template <typename T, typename Combine>
__device__ inline T warpReduce(T value, Combine combine) {
#pragma unroll
  for (int mask = 16; mask > 0; mask /= 2)
    value = combine(value, shuffleXor(value, mask));
  return value;
}

/// Combines the values of a block's threads (blockDim.x a multiple of 32);
/// every thread gets the result. `shared` holds 32 values; consecutive
/// calls may pass the same array.
template <typename T, typename Combine>
__device__ inline T blockReduce(T value, Combine combine, T identity,
                                T *shared) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int warps = blockDim.x / 32;
  value = warpReduce(value, combine);
  __syncthreads(); // a previous call's readers are done with `shared`
  if (lane == 0)
    shared[warp] = value;
  __syncthreads();
  return warpReduce(lane < warps ? shared[lane] : identity, combine);
}

} // namespace slapo::rt::cuda::detail

#endif // SLAPO_RUNTIME_CUDA_BLOCKREDUCE_CUH
