//===- KernelSupport.cuh - what the CUDA kernels share ---------*- CUDA -*-===//
//
// Private to runtime/cuda: element types with their compute and
// accumulation types (as the CPU backend's, so that both round alike),
// dispatch from a runtime DType or kind to one templated kernel, launch
// sizes, the two elementwise kernels (contiguous operands in 16-byte
// packets; broadcast or strided operands through a collapsed index
// layout), warp and block reductions, and the report of a bad index.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CUDA_KERNELSUPPORT_CUH
#define SLAPO_RUNTIME_CUDA_KERNELSUPPORT_CUH

#include "ContextImpl.h"

#include "slapo/runtime/Dispatch.h"
#include "slapo/runtime/Error.h"
#include "slapo/runtime/Tensor.h"
#include "slapo/runtime/cuda/BlockReduce.cuh"
#include "slapo/runtime/cuda/Context.h"
#include "slapo/runtime/cuda/ElementMath.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

namespace slapo::rt::cuda::detail {

//===----------------------------------------------------------------------===//
// Element types.
//===----------------------------------------------------------------------===//

template <typename T> struct ElementTraits;
#define SLAPO_ELEMENT(TYPE, DTYPE, COMPUTE, ACCUMULATE)                        \
  template <> struct ElementTraits<TYPE> {                                     \
    static constexpr DType dtype = DType::DTYPE;                               \
    using Compute = COMPUTE;                                                   \
    using Accumulate = ACCUMULATE;                                             \
  };
// 16-bit floats compute in f32. Float sums accumulate in f32 (f64 for f64)
// as PyTorch's CUDA kernels do; the CPU backend's f64 sums differ from them
// within the conformance test's tolerances.
SLAPO_ELEMENT(float, F32, float, float)
SLAPO_ELEMENT(double, F64, double, double)
SLAPO_ELEMENT(__nv_bfloat16, BF16, float, float)
SLAPO_ELEMENT(__half, F16, float, float)
SLAPO_ELEMENT(int8_t, I8, int8_t, int64_t)
SLAPO_ELEMENT(int32_t, I32, int32_t, int64_t)
SLAPO_ELEMENT(int64_t, I64, int64_t, int64_t)
SLAPO_ELEMENT(bool, Bool, bool, int64_t)
#undef SLAPO_ELEMENT

template <typename T> using Compute = typename ElementTraits<T>::Compute;
template <typename T> using Accumulate = typename ElementTraits<T>::Accumulate;

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<Compute<T>>;

template <typename T>
constexpr bool kIsHalfWidth =
    std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>;

/// An element in its compute type.
template <typename T> __host__ __device__ inline Compute<T> load(T value) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(value);
  else if constexpr (std::is_same_v<T, __half>)
    return __half2float(value);
  else
    return value;
}

/// A compute or accumulation value rounded to the element type T; 16-bit
/// floats round through f32 (round to nearest even), as on the CPU.
template <typename T, typename V> __host__ __device__ inline T store(V value) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(static_cast<float>(value));
  else if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(static_cast<float>(value));
  else
    return static_cast<T>(value);
}

//===----------------------------------------------------------------------===//
// Dispatch (slapo/runtime/Dispatch.h) over the GPU's element types.
//===----------------------------------------------------------------------===//

using FloatTypes = TypeList<float, double, __nv_bfloat16, __half>;
using NumericTypes =
    TypeList<float, double, __nv_bfloat16, __half, int8_t, int32_t, int64_t>;
using AllTypes = TypeList<float, double, __nv_bfloat16, __half, int8_t, int32_t,
                          int64_t, bool>;

inline constexpr UnsupportedThrower throwUnsupported{"CUDA"};
inline constexpr Dispatcher<ElementTraits> dispatch{"CUDA"};
inline constexpr HeldExactlyDispatcher<ElementTraits, FloatTypes, AllTypes>
    dispatchHeldExactly{"CUDA"};

//===----------------------------------------------------------------------===//
// Launches.
//===----------------------------------------------------------------------===//

constexpr int kBlockSize = 256;

/// Blocks for `work` units, `perBlock` per block, capped at a few waves of
/// resident blocks: the kernels loop over the rest (grid-stride loops).
inline unsigned getGridSize(Context &ctx, int64_t work, int64_t perBlock) {
  int64_t blocks = (work + perBlock - 1) / perBlock;
  int64_t cap = int64_t(ctx.getImpl().multiprocessors) * 16;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, cap));
}

/// The number of splits of a reduction of `length` elements per output
/// over `blocks` blocks, each split getting at least `minimum` elements:
/// enough for a few waves of blocks.
inline int getSplits(Context &ctx, int64_t blocks, int64_t length,
                     int64_t minimum) {
  int64_t wanted = int64_t(ctx.getImpl().multiprocessors) * 4;
  int64_t byWork = (length + minimum - 1) / minimum;
  int64_t byGrid = (wanted + blocks - 1) / blocks;
  return static_cast<int>(
      std::clamp<int64_t>(std::min(byWork, byGrid), 1, 65535));
}

/// getSplits of column sums over `rows` rows in `tiles` tiles of columns:
/// the reduce kernel's and the generated kernels' (runFusedColumns) alike,
/// so that both add a column's rows in the same order.
inline int getColumnSplits(Context &ctx, int64_t tiles, int64_t rows) {
  return getSplits(ctx, tiles, rows, kColumnSlices * 16);
}

/// Throws Error naming `kernel` when its launch failed.
inline void checkLaunch(const char *kernel) {
  checkCuda(
      cudaGetLastError(),
      (std::string("launching the CUDA kernel '") + kernel + "'").c_str());
}

inline bool isAligned(const void *pointer, size_t alignment) {
  return reinterpret_cast<uintptr_t>(pointer) % alignment == 0;
}

/// The thread's index in the grid and the grid's size, both in threads.
__device__ inline int64_t getGlobalThread() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t getGlobalThreads() {
  return int64_t(gridDim.x) * blockDim.x;
}

//===----------------------------------------------------------------------===//
// Contiguous elementwise kernels.
//===----------------------------------------------------------------------===//

/// `Vec` elements loaded or stored with one instruction.
template <typename T, int Vec> struct alignas(sizeof(T) * Vec) Packet {
  T values[Vec];
};

template <int Vec, typename F, typename Out, typename... In>
__device__ inline void applyToPackets(const F &f, Packet<Out, Vec> &result,
                                      const Packet<In, Vec> &...inputs) {
#pragma unroll
  for (int j = 0; j < Vec; ++j)
    result.values[j] = f(inputs.values[j]...);
}

/// out[i] = f(in[i]...) for i < count, `Vec` elements per thread and step.
template <int Vec, typename F, typename Out, typename... In>
__global__ void contiguousKernel(int64_t count, F f, Out *out,
                                 const In *...in) {
  int64_t stride = getGlobalThreads() * Vec;
  for (int64_t base = getGlobalThread() * Vec; base < count; base += stride) {
    if (base + Vec <= count) {
      Packet<Out, Vec> result;
      applyToPackets<Vec>(
          f, result, *reinterpret_cast<const Packet<In, Vec> *>(in + base)...);
      *reinterpret_cast<Packet<Out, Vec> *>(out + base) = result;
    } else {
      for (int64_t i = base; i < count; ++i)
        out[i] = f(in[i]...);
    }
  }
}

/// out[i] = f(in[i]...) over `count` contiguous elements, in 16-byte
/// packets of the widest operand where every pointer is aligned for them.
/// `out` may be one of the inputs: each element is read before it is
/// written, by the same thread.
template <typename F, typename Out, typename... In>
void launchContiguous(Context &ctx, const char *kernel, int64_t count, F f,
                      Out *out, const In *...in) {
  if (count <= 0)
    return;
  constexpr size_t kWidest = std::max({sizeof(Out), sizeof(In)...});
  constexpr int kVec = kWidest >= 16 ? 1 : int(16 / kWidest);
  bool aligned = isAligned(out, kVec * sizeof(Out)) &&
                 (isAligned(in, kVec * sizeof(In)) && ...);
  cudaStream_t stream = ctx.getStream();
  if (kVec > 1 && aligned)
    contiguousKernel<kVec>
        <<<getGridSize(ctx, count, kBlockSize * kVec), kBlockSize, 0, stream>>>(
            count, f, out, in...);
  else
    contiguousKernel<1>
        <<<getGridSize(ctx, count, kBlockSize), kBlockSize, 0, stream>>>(
            count, f, out, in...);
  checkLaunch(kernel);
}

//===----------------------------------------------------------------------===//
// Strided elementwise kernels.
//===----------------------------------------------------------------------===//

/// Per-dim strides of one operand, in elements.
using Strides = std::array<int64_t, kMaxRank>;

/// The strides of a row-major contiguous tensor of `shape`.
inline Strides getRowMajorStrides(const Shape &shape) {
  Strides strides{};
  int64_t stride = 1;
  for (int d = shape.rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= shape.dims[d];
  }
  return strides;
}

/// The strides with which a contiguous `input` is read for each dim of the
/// broadcast result `out`: 0 along stretched and missing dims.
inline Strides getBroadcastStrides(const Shape &input, const Shape &out) {
  Strides own = getRowMajorStrides(input), strides{};
  for (int d = 0; d < out.rank; ++d) {
    int inputDim = d - (out.rank - input.rank);
    bool present = inputDim >= 0 && input.dims[inputDim] != 1;
    strides[d] = present ? own[inputDim] : 0;
  }
  return strides;
}

/// N operands addressed over one iteration space: element (i0, i1, ...) of
/// the space is element sum_d i_d * strides[n][d] of operand n. Built with
/// size-1 dims dropped and adjacent dims merged where every operand steps
/// over them as over one, so that equal shapes are one flat dim.
template <int N> struct StridedLayout {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[N][kMaxRank] = {};

  StridedLayout(const Shape &shape, const std::array<Strides, N> &operands) {
    for (int d = 0; d < shape.rank; ++d) {
      if (shape.dims[d] == 1)
        continue;
      bool merge = rank > 0;
      for (int n = 0; n < N && merge; ++n)
        merge = strides[n][rank - 1] == operands[n][d] * shape.dims[d];
      if (merge) {
        dims[rank - 1] *= shape.dims[d];
        for (int n = 0; n < N; ++n)
          strides[n][rank - 1] = operands[n][d];
        continue;
      }
      dims[rank] = shape.dims[d];
      for (int n = 0; n < N; ++n)
        strides[n][rank] = operands[n][d];
      ++rank;
    }
  }

  int64_t getCount() const {
    int64_t count = 1;
    for (int d = 0; d < rank; ++d)
      count *= dims[d];
    return count;
  }
  /// Whether every index and offset fits in 31 bits, so that kernels can
  /// use 32-bit division.
  bool fitsInt32() const {
    if (getCount() > std::numeric_limits<int32_t>::max())
      return false;
    for (int n = 0; n < N; ++n) {
      int64_t last = 0;
      for (int d = 0; d < rank; ++d)
        last += (dims[d] - 1) * strides[n][d];
      if (last > std::numeric_limits<int32_t>::max())
        return false;
    }
    return true;
  }
};

/// A StridedLayout as kernels take it, with indices of type Index.
template <typename Index, int N> struct DeviceLayout {
  int rank;
  Index dims[kMaxRank];
  Index strides[N][kMaxRank];

  explicit DeviceLayout(const StridedLayout<N> &layout) : rank(layout.rank) {
    for (int d = 0; d < kMaxRank; ++d) {
      dims[d] = static_cast<Index>(layout.dims[d]);
      for (int n = 0; n < N; ++n)
        strides[n][d] = static_cast<Index>(layout.strides[n][d]);
    }
  }

  /// The operands' offsets of element `linear` of the iteration space.
  __device__ void getOffsets(Index linear, Index (&offsets)[N]) const {
    // Unrolled with constant indices, so that nothing is indexed at run
    // time; the outermost dim needs no division.
#pragma unroll
    for (int n = 0; n < N; ++n)
      offsets[n] = 0;
#pragma unroll
    for (int d = kMaxRank - 1; d >= 0; --d) {
      if (d >= rank)
        continue;
      Index coordinate = linear;
      if (d > 0) {
        coordinate = linear % dims[d];
        linear /= dims[d];
      }
#pragma unroll
      for (int n = 0; n < N; ++n)
        offsets[n] += coordinate * strides[n][d];
    }
  }
};

template <typename F, typename Index, int N, size_t... Is, typename... In>
__device__ inline auto applyAt(const F &f, const Index (&offsets)[N],
                               std::index_sequence<Is...>, const In *...in) {
  return f(in[offsets[Is + 1]]...);
}

/// out[offset 0] = f(in[offset n]...) over the layout's iteration space;
/// operand 0 is `out`, operand n the input n - 1.
template <typename Index, typename F, typename Out, typename... In>
__global__ void stridedKernel(Index count,
                              DeviceLayout<Index, 1 + sizeof...(In)> layout,
                              F f, Out *out, const In *...in) {
  Index stride = static_cast<Index>(getGlobalThreads());
  for (Index i = static_cast<Index>(getGlobalThread()); i < count;
       i += stride) {
    Index offsets[1 + sizeof...(In)];
    layout.getOffsets(i, offsets);
    out[offsets[0]] =
        applyAt(f, offsets, std::index_sequence_for<In...>(), in...);
  }
}

/// Runs stridedKernel with 32-bit indices where they suffice.
template <typename F, typename Out, typename... In>
void launchStrided(Context &ctx, const char *kernel,
                   const StridedLayout<1 + sizeof...(In)> &layout, F f,
                   Out *out, const In *...in) {
  int64_t count = layout.getCount();
  if (count <= 0)
    return;
  unsigned grid = getGridSize(ctx, count, kBlockSize);
  cudaStream_t stream = ctx.getStream();
  if (layout.fitsInt32())
    stridedKernel<uint32_t><<<grid, kBlockSize, 0, stream>>>(
        uint32_t(count), DeviceLayout<uint32_t, 1 + sizeof...(In)>(layout), f,
        out, in...);
  else
    stridedKernel<int64_t><<<grid, kBlockSize, 0, stream>>>(
        count, DeviceLayout<int64_t, 1 + sizeof...(In)>(layout), f, out, in...);
  checkLaunch(kernel);
}

/// An input of an elementwise kernel: its data and its shape, which
/// broadcasts to the result's.
template <typename T> struct Operand {
  const T *data;
  const Shape &shape;
};
template <typename T> Operand<T> getOperand(const Tensor &tensor) {
  return {tensor.as<const T>(), tensor.shape};
}

/// out = f(inputs...) elementwise, the inputs broadcast to `shape` (out's,
/// contiguous). Inputs of out's element count are out's shape up to size-1
/// dims, so they take the contiguous kernel.
template <typename F, typename Out, typename... In>
void launchElementwise(Context &ctx, const char *kernel, F f, Out *out,
                       const Shape &shape, Operand<In>... inputs) {
  int64_t count = shape.getNumElements();
  if (((inputs.shape.getNumElements() == count) && ...)) {
    launchContiguous(ctx, kernel, count, f, out, inputs.data...);
    return;
  }
  StridedLayout<1 + sizeof...(In)> layout(
      shape,
      {getRowMajorStrides(shape), getBroadcastStrides(inputs.shape, shape)...});
  launchStrided(ctx, kernel, layout, f, out, inputs.data...);
}

//===----------------------------------------------------------------------===//
// Reductions across threads (warpReduce and blockReduce: BlockReduce.cuh).
//===----------------------------------------------------------------------===//

/// The threads per block of a kernel that gives each row of `size`
/// elements one block: a power of two from 32 to 1024, about `perThread`
/// elements each.
inline int getRowBlockSize(int64_t size, int64_t perThread) {
  int threads = 32;
  while (threads < 1024 && threads * perThread < size)
    threads *= 2;
  return threads;
}

//===----------------------------------------------------------------------===//
// Bad indices.
//===----------------------------------------------------------------------===//

/// Records the bad index `value` at `position` (bound `bound`) unless a
/// thread recorded one before; synchronize() throws it.
__device__ inline void reportBadIndex(KernelErrorSink sink,
                                      KernelErrorRecord::Kind kind,
                                      int64_t value, int64_t position,
                                      int64_t bound) {
  if (atomicCAS(sink.claimed, 0, 1) != 0)
    return;
  sink.record->value = value;
  sink.record->position = position;
  sink.record->bound = bound;
  // The kind last, so that the host never sees it before the rest.
  __threadfence_system();
  sink.record->kind = kind;
  __threadfence_system();
}

//===----------------------------------------------------------------------===//
// Shapes.
//===----------------------------------------------------------------------===//

/// `dim` in [0, rank), counting from the end when negative.
inline int normalizeDim(int64_t dim, int rank) {
  return static_cast<int>(dim < 0 ? dim + rank : dim);
}

/// Product of dims [begin, end) of `shape`.
inline int64_t product(const Shape &shape, int begin, int end) {
  int64_t count = 1;
  for (int d = begin; d < end; ++d)
    count *= shape.dims[d];
  return count;
}

} // namespace slapo::rt::cuda::detail

#endif // SLAPO_RUNTIME_CUDA_KERNELSUPPORT_CUH
