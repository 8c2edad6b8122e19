//===- BlockReduce.cuh - reductions across a warp or a block ----*- CUDA
//-*-===//
//
// Shared by the runtime's kernels (KernelSupport.cuh) and the kernels slapoc
// generates for fusion groups with row reductions or column sums
// (FusedLoop.cuh).
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

//===----------------------------------------------------------------------===//
// Column reductions (a [rows, C] value reduced over its rows, as a bias
// gradient's sum over the tokens): the order of the reduce kernel and of the
// generated kernels' column sums. A block of kColumnTile * kColumnSlices
// threads takes a tile of kColumnTile adjacent columns (one per lane, rows
// read coalesced); slice s of the block folds rows s, s + kColumnSlices, ...
// of its range in order, then the slices' values are combined in slice
// order. Where the columns alone would not fill the GPU the rows are split
// (getSplitRange of blockIdx.y; the host's getColumnSplits): each split's
// sums are partial results, added in split order by a second kernel.
//===----------------------------------------------------------------------===//

constexpr int kColumnTile = 32, kColumnSlices = 8;

/// The range of [0, length) that split `split` of `splits` reduces.
__device__ inline void getSplitRange(int64_t length, int splits, int split,
                                     int64_t &begin, int64_t &end) {
  int64_t chunk = (length + splits - 1) / splits;
  begin = min(length, split * chunk);
  end = min(length, begin + chunk);
}

/// The thread's column in its block's tile, and its slice of the rows.
__device__ inline int getColumnLane() { return threadIdx.x % kColumnTile; }
__device__ inline int getColumnSlice() { return threadIdx.x / kColumnTile; }

/// Combines the block's slices' values of each column in slice order; slice
/// 0 gets its column's. Every thread of the block calls it (barriers).
template <typename T, typename Combine>
__device__ inline T combineColumnSlices(T value, Combine combine) {
  __shared__ T shared[kColumnSlices][kColumnTile + 1];
  shared[getColumnSlice()][getColumnLane()] = value;
  __syncthreads();
  if (getColumnSlice() == 0)
    for (int slice = 1; slice < kColumnSlices; ++slice)
      value = combine(value, shared[slice][getColumnLane()]);
  __syncthreads(); // before a next call overwrites `shared`
  return value;
}

} // namespace slapo::rt::cuda::detail

#endif // SLAPO_RUNTIME_CUDA_BLOCKREDUCE_CUH
