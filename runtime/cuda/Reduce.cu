//===- Reduce.cu - sum, mean and max over a set of dims; running sums -----===//
//
// The input's size-1 dims are dropped and adjacent dims that are both
// reduced or both kept are merged, leaving alternating groups. Two kernels
// cover them:
// - columns: one reduced group followed by a kept one ([outer, R, inner],
//   a bias gradient's [tokens, features] summed over tokens): a block tile
//   of 32 adjacent outputs by 8 slices of R, reading rows coalesced;
// - rows: anything else (R innermost, a full reduction, several reduced
//   groups): a warp per output (a block when R is long), its elements
//   addressed through the reduced groups' layout.
// When the outputs alone would not fill the GPU, R is split over a grid
// dimension into partial results, combined in order by a third kernel.
// Nothing depends on timing, so results are reproducible on one GPU model.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.cuh"

#include "slapo/runtime/cuda/Kernels.h"

namespace slapo::rt::cuda {

using namespace detail;

namespace {

/// How one kind starts, folds in an element and finishes, into T (the
/// kernels read the input's type, T or one T holds exactly).
template <ReduceKind Kind, typename T> struct Reducer {
  using Acc =
      std::conditional_t<Kind == ReduceKind::Max, Compute<T>, Accumulate<T>>;
  __device__ static Acc init() {
    if constexpr (Kind != ReduceKind::Max)
      return Acc(0);
    else if constexpr (std::numeric_limits<Acc>::has_infinity)
      return -std::numeric_limits<Acc>::infinity();
    else
      return std::numeric_limits<Acc>::lowest();
  }
  __device__ static Acc combine(Acc acc, Acc value) {
    if constexpr (Kind == ReduceKind::Max)
      return maxPropagatingNaN(value, acc);
    else
      return acc + value;
  }
  __device__ static T finish(Acc acc, int64_t count) {
    if constexpr (Kind == ReduceKind::Mean)
      return store<T>(acc / static_cast<Acc>(count));
    else
      return store<T>(acc);
  }
};

/// Output o (kept layout: its first element in the input) reduces the
/// elements at the reduced layout's offsets, `Threads` threads (a warp or
/// the block) per output. With several splits (blockIdx.y), each writes
/// its partial result to partials[split][o] instead of the output.
template <int Threads, ReduceKind Kind, typename In, typename T, typename Index>
__global__ void
reduceRowsKernel(int64_t outputs, int64_t length, int splits,
                 DeviceLayout<Index, 1> kept, DeviceLayout<Index, 1> reduced,
                 const In *in, T *out, typename Reducer<Kind, T>::Acc *partials,
                 int64_t count) {
  using R = Reducer<Kind, T>;
  using Acc = typename R::Acc;
  __shared__ Acc shared[32];
  auto combine = [](Acc a, Acc b) { return R::combine(a, b); };
  int outputsPerBlock = blockDim.x / Threads;
  int lane = threadIdx.x % Threads;
  int64_t begin, end;
  getSplitRange(length, splits, blockIdx.y, begin, end);
  // Every thread of a block runs every iteration, so that blockReduce's
  // barriers are reached by all.
  for (int64_t first = int64_t(blockIdx.x) * outputsPerBlock; first < outputs;
       first += int64_t(gridDim.x) * outputsPerBlock) {
    int64_t o = first + threadIdx.x / Threads;
    Acc acc = R::init();
    if (o < outputs) {
      Index base[1];
      kept.getOffsets(static_cast<Index>(o), base);
      for (int64_t r = begin + lane; r < end; r += Threads) {
        Index offset[1];
        reduced.getOffsets(static_cast<Index>(r), offset);
        acc = R::combine(acc, Acc(load(in[base[0] + offset[0]])));
      }
    }
    if constexpr (Threads == 32)
      acc = warpReduce(acc, combine);
    else
      acc = blockReduce(acc, combine, R::init(), shared);
    if (lane == 0 && o < outputs) {
      if (splits == 1)
        out[o] = R::finish(acc, count);
      else
        partials[int64_t(blockIdx.y) * outputs + o] = acc;
    }
  }
}

/// out[o, k] reduces in[o, r, k] over r in the column order of
/// BlockReduce.cuh (that of the fused kernels' column sums): a lane per k
/// (coalesced), slices of r combined in shared memory. With several splits
/// (blockIdx.y) each writes partials[split][o * inner + k].
template <ReduceKind Kind, typename In, typename T>
__global__ void
reduceColumnsKernel(int64_t outer, int64_t length, int64_t inner, int splits,
                    const In *in, T *out,
                    typename Reducer<Kind, T>::Acc *partials, int64_t count) {
  using R = Reducer<Kind, T>;
  using Acc = typename R::Acc;
  int64_t tiles = (inner + kColumnTile - 1) / kColumnTile;
  int64_t begin, end;
  getSplitRange(length, splits, blockIdx.y, begin, end);
  for (int64_t tile = blockIdx.x; tile < outer * tiles; tile += gridDim.x) {
    int64_t o = tile / tiles;
    int64_t k = tile % tiles * kColumnTile + getColumnLane();
    Acc acc = R::init();
    if (k < inner)
      for (int64_t r = begin + getColumnSlice(); r < end; r += kColumnSlices)
        acc = R::combine(acc, Acc(load(in[(o * length + r) * inner + k])));
    acc =
        combineColumnSlices(acc, [](Acc a, Acc b) { return R::combine(a, b); });
    if (getColumnSlice() == 0 && k < inner) {
      if (splits == 1)
        out[o * inner + k] = R::finish(acc, count);
      else
        partials[int64_t(blockIdx.y) * outer * inner + o * inner + k] = acc;
    }
  }
}

/// out[o] = the partial results of every split combined in split order.
template <ReduceKind Kind, typename T>
__global__ void
finishPartialsKernel(int64_t outputs, int splits,
                     const typename Reducer<Kind, T>::Acc *partials, T *out,
                     int64_t count) {
  using R = Reducer<Kind, T>;
  for (int64_t o = getGlobalThread(); o < outputs; o += getGlobalThreads()) {
    auto acc = partials[o];
    for (int split = 1; split < splits; ++split)
      acc = R::combine(acc, partials[int64_t(split) * outputs + o]);
    out[o] = R::finish(acc, count);
  }
}

/// The input's dims as alternating groups of reduced and kept dims, each
/// with its size and its stride in the input.
struct Groups {
  int rank = 0;
  int64_t dims[kMaxRank];
  int64_t strides[kMaxRank];
  bool reduced[kMaxRank];

  Groups(const Shape &shape, uint32_t dimMask) {
    for (int d = 0; d < shape.rank; ++d) {
      if (shape.dims[d] == 1)
        continue;
      bool isReduced = dimMask >> d & 1u;
      if (rank > 0 && reduced[rank - 1] == isReduced) {
        dims[rank - 1] *= shape.dims[d];
        continue;
      }
      dims[rank] = shape.dims[d];
      reduced[rank++] = isReduced;
    }
    int64_t stride = 1;
    for (int g = rank - 1; g >= 0; --g) {
      strides[g] = stride;
      stride *= dims[g];
    }
  }

  /// The groups that are (or are not) reduced, as an iteration space over
  /// the input's offsets.
  StridedLayout<1> getLayout(bool ofReduced) const {
    Shape shape;
    Strides operandStrides{};
    for (int g = 0; g < rank; ++g) {
      if (reduced[g] != ofReduced)
        continue;
      operandStrides[shape.rank] = strides[g];
      shape.dims[shape.rank++] = dims[g];
    }
    return StridedLayout<1>(shape, {operandStrides});
  }
};

template <ReduceKind Kind, typename In, typename T>
void reduceGroups(Context &ctx, const Groups &groups, const In *in, T *out,
                  int64_t outputs, int64_t count) {
  using Acc = typename Reducer<Kind, T>::Acc;
  cudaStream_t stream = ctx.getStream();
  int reducedGroups = 0;
  for (int g = 0; g < groups.rank; ++g)
    reducedGroups += groups.reduced[g];
  bool lastKept = groups.rank > 0 && !groups.reduced[groups.rank - 1];
  auto getPartials = [&](int splits) {
    return static_cast<Acc *>(ctx.getImpl().getScratch(
        Scratch::Partials, sizeof(Acc) * splits * outputs, stream));
  };
  auto finish = [&](int splits, Acc *partials) {
    if (splits == 1)
      return;
    finishPartialsKernel<Kind, T>
        <<<getGridSize(ctx, outputs, kBlockSize), kBlockSize, 0, stream>>>(
            outputs, splits, partials, out, count);
    checkLaunch("reduce");
  };

  if (reducedGroups == 1 && lastKept) {
    int last = groups.rank - 1;
    int64_t inner = groups.dims[last], length = groups.dims[last - 1];
    int64_t outer = outputs / inner;
    int64_t blocks = outer * ((inner + kColumnTile - 1) / kColumnTile);
    int splits = getColumnSplits(ctx, blocks, length);
    Acc *partials = splits > 1 ? getPartials(splits) : nullptr;
    dim3 grid(getGridSize(ctx, blocks, 1), splits);
    reduceColumnsKernel<Kind, In, T>
        <<<grid, kColumnTile * kColumnSlices, 0, stream>>>(
            outer, length, inner, splits, in, out, partials, count);
    checkLaunch("reduce");
    finish(splits, partials);
    return;
  }

  StridedLayout<1> kept = groups.getLayout(false);
  StridedLayout<1> reduced = groups.getLayout(true);
  int64_t length = reduced.getCount();
  bool perBlock = length >= 4096;
  int threads = perBlock ? kBlockSize : 32;
  int64_t blocks = (outputs * threads + kBlockSize - 1) / kBlockSize;
  int splits = getSplits(ctx, blocks, length, int64_t(threads) * 16);
  Acc *partials = splits > 1 ? getPartials(splits) : nullptr;
  dim3 grid(getGridSize(ctx, blocks, 1), splits);
  auto run = [&](auto indexTag) {
    using Index = typename decltype(indexTag)::type;
    DeviceLayout<Index, 1> keptLayout(kept), reducedLayout(reduced);
    if (perBlock)
      reduceRowsKernel<kBlockSize, Kind, In, T>
          <<<grid, kBlockSize, 0, stream>>>(outputs, length, splits, keptLayout,
                                            reducedLayout, in, out, partials,
                                            count);
    else
      reduceRowsKernel<32, Kind, In, T><<<grid, kBlockSize, 0, stream>>>(
          outputs, length, splits, keptLayout, reducedLayout, in, out, partials,
          count);
    checkLaunch("reduce");
  };
  if (kept.fitsInt32() && reduced.fitsInt32() &&
      outputs * length <= std::numeric_limits<int32_t>::max())
    run(TypeTag<uint32_t>());
  else
    run(TypeTag<int64_t>());
  finish(splits, partials);
}

/// Running sums of the [outer, length, inner] input along its middle dim: a
/// thread per line, in order (lines are as many as the outputs of a
/// reduction over the dim, and the dim is short where models take them).
template <typename T>
__global__ void cumsumKernel(int64_t lines, int64_t length, int64_t inner,
                             bool reverse, const T *in, T *out) {
  for (int64_t line = getGlobalThread(); line < lines;
       line += getGlobalThreads()) {
    int64_t first = line / inner * length * inner + line % inner;
    Accumulate<T> sum(0);
    for (int64_t k = 0; k < length; ++k) {
      int64_t at = first + (reverse ? length - 1 - k : k) * inner;
      sum += load(in[at]);
      out[at] = store<T>(sum);
    }
  }
}

} // namespace

void reduce(Context &ctx, ReduceKind kind, const Tensor &input,
            const Tensor &out, uint32_t dimMask) {
  Groups groups(input.shape, dimMask);
  int64_t count = 1;
  for (int d = 0; d < input.getRank(); ++d)
    if (dimMask >> d & 1u)
      count *= input.shape.dims[d];
  int64_t outputs = out.getNumElements();
  if (outputs == 0)
    return;
  if (out.dtype != input.dtype) {
    // slapo.sum into a float type that holds the input's exactly (a bf16
    // bias gradient summed into f32): the result type's sums.
    if (kind != ReduceKind::Sum)
      throwUnsupported("reduce", out.dtype);
    return dispatchHeldExactly(
        "reduce", "out", out, "input", input, [&](auto outTag, auto inTag) {
          using T = typename decltype(outTag)::type;
          using In = typename decltype(inTag)::type;
          reduceGroups<ReduceKind::Sum>(ctx, groups, input.as<In>(),
                                        out.as<T>(), outputs, count);
        });
  }
  dispatch(AllTypes(), input.dtype, "reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *in = input.as<T>();
    T *result = out.as<T>();
    switch (kind) {
    case ReduceKind::Sum:
      return reduceGroups<ReduceKind::Sum>(ctx, groups, in, result, outputs,
                                           count);
    case ReduceKind::Mean:
      return reduceGroups<ReduceKind::Mean>(ctx, groups, in, result, outputs,
                                            count);
    case ReduceKind::Max:
      return reduceGroups<ReduceKind::Max>(ctx, groups, in, result, outputs,
                                           count);
    }
  });
}

void cumsum(Context &ctx, const Tensor &input, const Tensor &out, int64_t dim,
            bool reverse) {
  int rank = input.getRank();
  int d = normalizeDim(dim, rank);
  int64_t length = rank ? input.shape.dims[d] : 1;
  int64_t inner = product(input.shape, d + 1, rank);
  int64_t lines = product(input.shape, 0, d) * inner;
  if (lines == 0)
    return;
  dispatch(NumericTypes(), input.dtype, "cumsum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cumsumKernel<<<getGridSize(ctx, lines, kBlockSize), kBlockSize, 0,
                   ctx.getStream()>>>(lines, length, inner, reverse,
                                      input.as<T>(), out.as<T>());
    checkLaunch("cumsum");
  });
}

} // namespace slapo::rt::cuda
