//===- FusedLoop.cuh - the kernels slapoc generates for fusion groups -*- CUDA
//-*-===//
//
// A fusion group (slapo.fused) becomes one kernel in the generated step.cu:
// a grid-stride loop that computes, element by element, the group's ops with
// ElementMath.cuh's math, their intermediate values in registers. The
// generated code calls runFusedLoop(ctx, loop, data, n) as the CPU backend's
// (slapo/runtime/cpu/FusedLoop.h): the same code for every device. A group
// with row reductions or softmaxes along the last dim gives each row one
// block (runFusedRows): each reduction is a pass of the block's threads over
// the row, combined across the block (sumFusedRow, maxFusedRow), then a
// pass writes the results. A group with column sums gives each block a tile
// of columns (runFusedColumns): its threads take the rows in the column
// order of BlockReduce.cuh, write the values and add them to the sums, which
// the block then combines (sumColumnSlices). Its rows are split over
// blockIdx.y as the reduce kernel splits the same sum's (getColumnSplits),
// each split's sums partial results that a second generated kernel adds in
// split order, so that a column's sum is the reduce kernel's bits.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CUDA_FUSEDLOOP_CUH
#define SLAPO_RUNTIME_CUDA_FUSEDLOOP_CUH

#include "slapo/runtime/Random.h"
#include "slapo/runtime/cuda/BlockReduce.cuh"
#include "slapo/runtime/cuda/Context.h"
#include "slapo/runtime/cuda/ElementMath.cuh"

// A group's bf16 tensors are read and written with its conversions.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace slapo::rt::cuda {

/// The addresses of a group's operands and results, operands first, then
/// two numbers for each dropout of the group (the key and the first counter
/// of its mask), passed to its kernel by value.
template <int N> struct FusedOperands {
  void *data[N];
};

/// Launches a fused kernel with `blocks` x `threads` on `stream` over
/// `numElements` elements of the tensors at `data`.
using FusedLaunch = void (*)(cudaStream_t stream, unsigned blocks,
                             unsigned threads, void *const *data,
                             int64_t numElements);

/// A generated fused kernel, named for the errors of its launch.
struct FusedLoop {
  const char *name;
  FusedLaunch launch;
};

/// Runs `loop` over `numElements` elements on ctx's stream, sized as the
/// runtime's elementwise kernels are.
void runFusedLoop(Context &ctx, const FusedLoop &loop, void *const *data,
                  int64_t numElements);

/// Runs `loop`, a kernel over rows (one block per row, numElements its
/// number of rows), over `numRows` rows of `rowLength` elements.
void runFusedRows(Context &ctx, const FusedLoop &loop, void *const *data,
                  int64_t numRows, int64_t rowLength);

/// Launches a fused kernel over column tiles on `stream`: `grid`.x tiles,
/// `grid`.y splits of the `numRows` rows, each split's partial sums at
/// `partials` (null with one split).
using FusedColumnsLaunch = void (*)(cudaStream_t stream, dim3 grid,
                                    unsigned threads, void *const *data,
                                    int64_t numRows, char *partials);
/// Launches the kernel that adds the `splits` splits' partial sums at
/// `partials` in split order into the sums, over `blocks` x `threads`.
using FusedColumnsFinish = void (*)(cudaStream_t stream, unsigned blocks,
                                    unsigned threads, void *const *data,
                                    int splits, const char *partials);

/// A generated kernel over column tiles and its finishing kernel; each split
/// keeps `partialBytes` of partial sums (each sum's accumulators of every
/// column).
struct FusedColumns {
  const char *name;
  FusedColumnsLaunch launch;
  FusedColumnsFinish finish;
  int64_t partialBytes;
};

/// Runs `loop` (a block per tile of kColumnTile columns) over `numRows`
/// rows of `rowLength` elements, split as the reduce kernel splits a column
/// sum of that shape, then its finishing kernel where there are splits.
void runFusedColumns(Context &ctx, const FusedColumns &loop, void *const *data,
                     int64_t numRows, int64_t rowLength);

/// The sum of the block's threads' `value`s (a row's partial sums); every
/// thread gets it.
template <typename A> __device__ inline A sumFusedRow(A value) {
  __shared__ A shared[32];
  return detail::blockReduce(
      value, [](A a, A b) { return a + b; }, A(0), shared);
}

/// The maximum of the block's threads' `value`s, NaN if any is; every thread
/// gets it.
template <typename C> __device__ inline C maxFusedRow(C value) {
  __shared__ C shared[32];
  return detail::blockReduce(
      value, [](C a, C b) { return maxPropagatingNaN(a, b); }, C(-INFINITY),
      shared);
}

/// The sums of a column's slices (BlockReduce.cuh's column order): the
/// slice-0 thread of each column gets its column's. Every thread calls it.
template <typename A> __device__ inline A sumColumnSlices(A value) {
  return detail::combineColumnSlices(value, [](A a, A b) { return a + b; });
}
using detail::getColumnLane;
using detail::getColumnSlice;
using detail::getSplitRange;
using detail::kColumnSlices;
using detail::kColumnTile;

/// The thread's first element and the grid's stride, in elements.
__device__ inline int64_t getFusedLoopStart() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t getFusedLoopStride() {
  return int64_t(gridDim.x) * blockDim.x;
}

} // namespace slapo::rt::cuda

/// Defines the FusedLoop `NAME` that launches `KERNEL`, a static __global__
/// function of (FusedOperands<N>, int64_t numElements). Static, as the
/// kernel: each translation unit that includes the generated step.h (step.cu
/// and blocks.cu) has its own, since nvcc does not link device code across
/// them.
#define SLAPO_CUDA_FUSED_LOOP(NAME, KERNEL, N)                                 \
  static void KERNEL##Launch(cudaStream_t stream, unsigned blocks,             \
                             unsigned threads, void *const *data,              \
                             int64_t numElements) {                            \
    ::slapo::rt::cuda::FusedOperands<N> operands;                              \
    for (int i = 0; i < N; ++i)                                                \
      operands.data[i] = data[i];                                              \
    KERNEL<<<blocks, threads, 0, stream>>>(operands, numElements);             \
  }                                                                            \
  static const ::slapo::rt::cuda::FusedLoop NAME = {#KERNEL, KERNEL##Launch};

/// Defines the FusedColumns `NAME` that launches `KERNEL`, a static
/// __global__ function of (FusedOperands<N>, int64_t numRows, char
/// *partials), and `FINISH`, one of (FusedOperands<N>, int splits, const
/// char *partials), each split keeping PARTIAL_BYTES of partial sums.
#define SLAPO_CUDA_FUSED_COLUMNS(NAME, KERNEL, FINISH, N, PARTIAL_BYTES)       \
  static void KERNEL##Launch(cudaStream_t stream, dim3 grid, unsigned threads, \
                             void *const *data, int64_t numRows,               \
                             char *partials) {                                 \
    ::slapo::rt::cuda::FusedOperands<N> operands;                              \
    for (int i = 0; i < N; ++i)                                                \
      operands.data[i] = data[i];                                              \
    KERNEL<<<grid, threads, 0, stream>>>(operands, numRows, partials);         \
  }                                                                            \
  static void FINISH##Launch(cudaStream_t stream, unsigned blocks,             \
                             unsigned threads, void *const *data, int splits,  \
                             const char *partials) {                           \
    ::slapo::rt::cuda::FusedOperands<N> operands;                              \
    for (int i = 0; i < N; ++i)                                                \
      operands.data[i] = data[i];                                              \
    FINISH<<<blocks, threads, 0, stream>>>(operands, splits, partials);        \
  }                                                                            \
  static const ::slapo::rt::cuda::FusedColumns NAME = {                        \
      #KERNEL, KERNEL##Launch, FINISH##Launch, PARTIAL_BYTES};

#endif // SLAPO_RUNTIME_CUDA_FUSEDLOOP_CUH
