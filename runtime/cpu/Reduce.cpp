//===- Reduce.cpp - sum, mean and max over a set of dims; running sums ----===//
//
// The input's size-1 dims are dropped and adjacent dims that are both
// reduced or both kept are merged, leaving alternating groups. When the last
// group is reduced each output element is a sum of contiguous runs; when it
// is kept, a task accumulates a block of adjacent outputs side by side, in
// the column order of cpu/ElementMath.h (that of the fused loops' column
// sums). The order in which each output accumulates does not depend on the
// thread count, so results are reproducible.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.h"
#include "KernelVariant.h"

#include <vector>

SLAPO_CPU_VARIANT_ISA_BEGIN
namespace slapo::rt::cpu::SLAPO_CPU_VARIANT {

using namespace detail;

namespace {

/// How one kind starts, folds in an element and finishes, into T.
template <ReduceKind Kind, typename T> struct Reducer {
  using Acc =
      std::conditional_t<Kind == ReduceKind::Max, Compute<T>, Accumulate<T>>;
  static Acc init() {
    if constexpr (Kind != ReduceKind::Max)
      return Acc(0);
    else if constexpr (std::numeric_limits<Acc>::has_infinity)
      return -std::numeric_limits<Acc>::infinity();
    else
      return std::numeric_limits<Acc>::lowest();
  }
  static Acc combine(Acc acc, Acc value) {
    if constexpr (Kind == ReduceKind::Max)
      return maxPropagatingNaN(value, acc);
    else
      return acc + value;
  }
  /// The fold of a contiguous run of T or of a type T holds exactly, in
  /// the row order of cpu/ElementMath.h (that of the fused loops' row
  /// reductions).
  template <typename In> static Acc foldRun(const In *run, int64_t length) {
    return foldRow(
        run, length, init(), [](In value) { return Acc(load(value)); },
        combine);
  }
  static T finish(Acc acc, int64_t count) {
    if constexpr (Kind == ReduceKind::Mean)
      return store<T>(acc / static_cast<Acc>(count));
    else
      return store<T>(acc);
  }
};

/// The input's dims as alternating groups of reduced and kept dims.
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
};

/// The (size, stride) pairs of some groups, visited as an odometer.
struct Odometer {
  int count = 0;
  int64_t sizes[kMaxRank], strides[kMaxRank];
  int64_t total = 1;

  void add(int64_t size, int64_t stride) {
    sizes[count] = size;
    strides[count++] = stride;
    total *= size;
  }
  /// The offset of flat position `index`, the last dim fastest.
  int64_t offsetOf(int64_t index) const {
    int64_t offset = 0;
    for (int i = count - 1; i >= 0; --i) {
      offset += index % sizes[i] * strides[i];
      index /= sizes[i];
    }
    return offset;
  }
  /// Calls `body(offset)` for every position in order.
  template <typename F> void forEach(F &&body) const {
    int64_t position[kMaxRank] = {};
    int64_t offset = 0;
    for (int64_t step = 0; step < total; ++step) {
      body(offset);
      for (int i = count - 1; i >= 0; --i) {
        offset += strides[i];
        if (++position[i] < sizes[i])
          break;
        offset -= position[i] * strides[i];
        position[i] = 0;
      }
    }
  }
};

/// Reduces `in` into `out`, of the input's type T or of a type T holds
/// exactly: the same folds in the same order either way.
template <ReduceKind Kind, typename In, typename T>
void reduceGroups(Context &ctx, const In *in, T *out, const Groups &groups,
                  int64_t count) {
  using R = Reducer<Kind, T>;
  using Acc = typename R::Acc;
  int last = groups.rank - 1;
  Odometer kept, reduced;
  for (int g = 0; g < last; ++g)
    (groups.reduced[g] ? reduced : kept).add(groups.dims[g], groups.strides[g]);
  int64_t length = groups.dims[last];

  if (groups.reduced[last] && kept.count == 0 && reduced.count == 0) {
    // Everything reduces over one contiguous run: fixed-size chunks summed
    // in parallel, then in order.
    int64_t chunks = (length + kGrain - 1) / kGrain;
    std::vector<Acc> partial(chunks);
    parallelFor(ctx, chunks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t chunk = begin; chunk < end; ++chunk) {
        int64_t first = chunk * kGrain;
        partial[chunk] =
            R::foldRun(in + first, std::min(length - first, kGrain));
      }
    });
    Acc acc = R::init();
    for (Acc value : partial)
      acc = R::combine(acc, value);
    *out = R::finish(acc, count);
    return;
  }

  if (groups.reduced[last]) {
    // Each output folds reduced.total contiguous runs of `length`.
    parallelFor(ctx, kept.total, grainFor(count),
                [&](int64_t begin, int64_t end) {
                  for (int64_t o = begin; o < end; ++o) {
                    const In *base = in + kept.offsetOf(o);
                    Acc acc = R::init();
                    reduced.forEach([&](int64_t offset) {
                      acc = R::combine(acc, R::foldRun(base + offset, length));
                    });
                    out[o] = R::finish(acc, count);
                  }
                });
    return;
  }

  // The last group is kept: blocks of adjacent outputs accumulate together.
  int64_t blocks = getColumnBlocks(length);
  parallelFor(ctx, kept.total * blocks, grainFor(count * kColumnBlock),
              [&](int64_t begin, int64_t end) {
                Acc acc[kColumnBlock];
                for (int64_t task = begin; task < end; ++task) {
                  int64_t o = task / blocks;
                  ColumnBlock columns = getColumnBlock(task % blocks, length);
                  int64_t first = columns.first, width = columns.width;
                  const In *base = in + kept.offsetOf(o) + first;
                  std::fill(acc, acc + width, R::init());
                  reduced.forEach([&](int64_t offset) {
                    const In *run = base + offset;
                    for (int64_t j = 0; j < width; ++j)
                      acc[j] = R::combine(acc[j], Acc(load(run[j])));
                  });
                  T *y = out + o * length + first;
                  for (int64_t j = 0; j < width; ++j)
                    y[j] = R::finish(acc[j], count);
                }
              });
}

} // namespace

void reduce(Context &ctx, ReduceKind kind, const Tensor &input,
            const Tensor &out, uint32_t dimMask) {
  Groups groups(input.shape, dimMask);
  if (groups.rank == 0) { // a single element: every group had size 1
    groups.dims[0] = 1;
    groups.strides[0] = 1;
    groups.reduced[0] = false;
    groups.rank = 1;
  }
  int64_t count = 1;
  for (int d = 0; d < input.getRank(); ++d)
    if (dimMask >> d & 1u)
      count *= input.shape.dims[d];
  if (out.getNumElements() == 0)
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
          reduceGroups<ReduceKind::Sum>(ctx, input.as<In>(), out.as<T>(),
                                        groups, count);
        });
  }
  dispatch(AllTypes(), input.dtype, "reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *in = input.as<T>();
    T *result = out.as<T>();
    switch (kind) {
    case ReduceKind::Sum:
      return reduceGroups<ReduceKind::Sum>(ctx, in, result, groups, count);
    case ReduceKind::Mean:
      return reduceGroups<ReduceKind::Mean>(ctx, in, result, groups, count);
    case ReduceKind::Max:
      return reduceGroups<ReduceKind::Max>(ctx, in, result, groups, count);
    }
  });
}

void cumsum(Context &ctx, const Tensor &input, const Tensor &out, int64_t dim,
            bool reverse) {
  // The input viewed as [outer, length, inner]: a task sums whole lines,
  // each in order (float sums in f64, as PyTorch's CPU kernel does).
  int rank = input.getRank();
  int d = normalizeDim(dim, rank);
  int64_t outer = product(input.shape, 0, d);
  int64_t length = rank ? input.shape.dims[d] : 1;
  int64_t inner = product(input.shape, d + 1, rank);
  dispatch(NumericTypes(), input.dtype, "cumsum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *in = input.as<T>();
    T *result = out.as<T>();
    parallelFor(
        ctx, outer * inner, grainFor(length), [&](int64_t begin, int64_t end) {
          for (int64_t line = begin; line < end; ++line) {
            int64_t first = line / inner * length * inner + line % inner;
            Accumulate<T> sum(0);
            for (int64_t k = 0; k < length; ++k) {
              int64_t at = first + (reverse ? length - 1 - k : k) * inner;
              sum += load(in[at]);
              result[at] = store<T>(sum);
            }
          }
        });
  });
}

} // namespace slapo::rt::cpu::SLAPO_CPU_VARIANT
SLAPO_CPU_VARIANT_ISA_END
