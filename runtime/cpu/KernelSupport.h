//===- KernelSupport.h - what the CPU kernels share --------------*- C++
//-*-===//
//
// Private to runtime/cpu: element types and their compute and accumulation
// types, dispatch from a runtime DType (or kind enum) to one templated
// implementation, the OpenMP loop helper, and the walker that visits a
// broadcast result as contiguous segments, and the rows of a softmax.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CPU_KERNELSUPPORT_H
#define SLAPO_RUNTIME_CPU_KERNELSUPPORT_H

#include "slapo/runtime/Dispatch.h"
#include "slapo/runtime/Error.h"
#include "slapo/runtime/Tensor.h"
#include "slapo/runtime/cpu/Context.h"
#include "slapo/runtime/cpu/ElementMath.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

namespace slapo::rt::cpu::detail {

//===----------------------------------------------------------------------===//
// Element types.
//===----------------------------------------------------------------------===//

/// IEEE binary16, converted with round-to-nearest-even.
struct Half {
  uint16_t bits;

  static Half fromFloat(float value) {
    uint32_t f;
    std::memcpy(&f, &value, sizeof f);
    uint32_t sign = f & 0x80000000u;
    f ^= sign;
    uint32_t out;
    if (f >= (127u + 16) << 23) { // too large, infinity or NaN
      out = f > 255u << 23 ? 0x7e00u : 0x7c00u;
    } else if (f < 113u << 23) { // a subnormal half or zero
      // Adding 0.5 lets the FPU round the mantissa into place.
      uint32_t magicBits = ((127u - 15) + (23 - 10) + 1) << 23;
      float magic, sum;
      std::memcpy(&magic, &magicBits, sizeof magic);
      std::memcpy(&sum, &f, sizeof sum);
      sum += magic;
      std::memcpy(&out, &sum, sizeof out);
      out -= magicBits;
    } else {
      uint32_t mantissaOdd = (f >> 13) & 1u;
      f += ((15u - 127u) << 23) + 0xfffu + mantissaOdd;
      out = f >> 13;
    }
    return {static_cast<uint16_t>(out | sign >> 16)};
  }

  float toFloat() const {
    uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
    uint32_t exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
    if (exponent == 0) { // zero or subnormal: mantissa * 2^-24
      float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
      return sign ? -magnitude : magnitude;
    }
    uint32_t wide = exponent == 0x1f
                        ? sign | 0x7f800000u | mantissa << 13
                        : sign | (exponent + 112) << 23 | mantissa << 13;
    float value;
    std::memcpy(&value, &wide, sizeof value);
    return value;
  }
};

static_assert(sizeof(bool) == 1, "Bool tensors hold one byte per element");

template <typename T> struct ElementTraits;
#define SLAPO_ELEMENT(TYPE, DTYPE, COMPUTE, ACCUMULATE)                        \
  template <> struct ElementTraits<TYPE> {                                     \
    static constexpr DType dtype = DType::DTYPE;                               \
    using Compute = COMPUTE;                                                   \
    using Accumulate = ACCUMULATE;                                             \
  };
// bf16 and f16 compute in f32; float sums accumulate in f64, which is at
// least as accurate as PyTorch's cascaded f32 sums.
SLAPO_ELEMENT(float, F32, float, double)
SLAPO_ELEMENT(double, F64, double, double)
SLAPO_ELEMENT(BFloat16, BF16, float, double)
SLAPO_ELEMENT(Half, F16, float, double)
SLAPO_ELEMENT(int8_t, I8, int8_t, int64_t)
SLAPO_ELEMENT(int32_t, I32, int32_t, int64_t)
SLAPO_ELEMENT(int64_t, I64, int64_t, int64_t)
SLAPO_ELEMENT(bool, Bool, bool, int64_t)
#undef SLAPO_ELEMENT

template <typename T> using Compute = typename ElementTraits<T>::Compute;
template <typename T> using Accumulate = typename ElementTraits<T>::Accumulate;

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<Compute<T>>;

/// An element in its compute type.
template <typename T> inline Compute<T> load(T value) {
  if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>)
    return value.toFloat();
  else
    return value;
}

/// A compute or accumulation value rounded to the element type T.
template <typename T, typename V> inline T store(V value) {
  if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>)
    return T::fromFloat(static_cast<float>(value));
  else
    return static_cast<T>(value);
}

//===----------------------------------------------------------------------===//
// Dispatch (slapo/runtime/Dispatch.h) over the CPU's element types.
//===----------------------------------------------------------------------===//

using FloatTypes = TypeList<float, double, BFloat16, Half>;
using NumericTypes =
    TypeList<float, double, BFloat16, Half, int8_t, int32_t, int64_t>;
using AllTypes =
    TypeList<float, double, BFloat16, Half, int8_t, int32_t, int64_t, bool>;

inline constexpr UnsupportedThrower throwUnsupported{"CPU"};
inline constexpr Dispatcher<ElementTraits> dispatch{"CPU"};
inline constexpr HeldExactlyDispatcher<ElementTraits, FloatTypes, AllTypes>
    dispatchHeldExactly{"CPU"};

//===----------------------------------------------------------------------===//
// Parallel loops.
//===----------------------------------------------------------------------===//

/// Elements a task should have before another thread is worth starting.
constexpr int64_t kGrain = 32768;

/// The grain in units of `unit` elements (rows of a row-wise kernel).
inline int64_t grainFor(int64_t unit) {
  return std::max<int64_t>(1, kGrain / std::max<int64_t>(unit, 1));
}

/// Runs `body(begin, end)` over [0, count) split into contiguous ranges, one
/// per thread, with no range shorter than `grain` (so a small tensor runs
/// on the calling thread alone). `body` must not throw.
template <typename F>
void parallelFor(Context &ctx, int64_t count, int64_t grain, F &&body) {
  if (count <= 0)
    return;
  int64_t tasks = std::min<int64_t>(
      ctx.getThreads(), (count + grain - 1) / std::max<int64_t>(grain, 1));
  if (tasks <= 1) {
    body(int64_t(0), count);
    return;
  }
#pragma omp parallel for num_threads(static_cast <int>(tasks))                 \
    schedule(static, 1)
  for (int64_t task = 0; task < tasks; ++task)
    body(count * task / tasks, count * (task + 1) / tasks);
}

/// Throws unless every index in `indices` lies in [0, bound); an index
/// equal to `ignored` (when `hasIgnored`) is allowed too.
template <typename I>
inline void checkIndices(const char *what, const I *indices, int64_t count,
                         int64_t bound, bool hasIgnored = false,
                         int64_t ignored = 0) {
  for (int64_t i = 0; i < count; ++i) {
    int64_t index = indices[i];
    if ((index < 0 || index >= bound) && !(hasIgnored && index == ignored))
      throw Error(std::string(what) + " " + std::to_string(index) +
                  " at position " + std::to_string(i) +
                  " is out of range [0, " + std::to_string(bound) + ")");
  }
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

/// Visits a result of shape `out` and N inputs broadcast to it as segments
/// of consecutive output elements along which every input either advances
/// one element at a time (step 1) or stays on one element (step 0). Dims are
/// collapsed first, so equal shapes are one flat segment per thread.
template <int N> class BroadcastWalker {
public:
  BroadcastWalker(const Shape &out, const std::array<Shape, N> &inputs) {
    for (int d = 0; d < out.rank; ++d) {
      if (out.dims[d] == 1)
        continue;
      int64_t strides[N];
      for (int n = 0; n < N; ++n) {
        const Shape &input = inputs[n];
        int inputDim = d - (out.rank - input.rank);
        bool present = inputDim >= 0 && input.dims[inputDim] != 1;
        strides[n] = present ? product(input, inputDim + 1, input.rank) : 0;
      }
      // A dim continues the previous one when each input steps over it as
      // one run with the previous dim (equal shapes always do).
      bool merge = rank > 0;
      for (int n = 0; n < N && merge; ++n)
        merge = this->strides[n][rank - 1] == strides[n] * out.dims[d];
      if (merge) {
        dims[rank - 1] *= out.dims[d];
        for (int n = 0; n < N; ++n)
          this->strides[n][rank - 1] = strides[n];
        continue;
      }
      dims[rank] = out.dims[d];
      for (int n = 0; n < N; ++n)
        this->strides[n][rank] = strides[n];
      ++rank;
    }
    if (rank == 0) // a single element
      dims[rank++] = 1;
  }

  /// Calls `body(outOffset, inputOffsets, inputSteps, length)` for every
  /// segment, in parallel. `body` must not throw.
  template <typename F> void run(Context &ctx, F &&body) const {
    int64_t inner = dims[rank - 1];
    int64_t total = inner * getLeadingCount(rank - 1);
    int64_t steps[N];
    for (int n = 0; n < N; ++n)
      steps[n] = strides[n][rank - 1];
    parallelFor(ctx, total, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t index = begin; index < end;) {
        int64_t row = index / inner, column = index % inner;
        int64_t length = std::min(inner - column, end - index);
        int64_t offsets[N];
        for (int n = 0; n < N; ++n)
          offsets[n] = column * steps[n];
        for (int d = rank - 2; d >= 0; --d) {
          int64_t position = row % dims[d];
          row /= dims[d];
          for (int n = 0; n < N; ++n)
            offsets[n] += position * strides[n][d];
        }
        body(index, static_cast<const int64_t *>(offsets),
             static_cast<const int64_t *>(steps), length);
        index += length;
      }
    });
  }

private:
  int64_t getLeadingCount(int end) const {
    int64_t count = 1;
    for (int d = 0; d < end; ++d)
      count *= dims[d];
    return count;
  }

  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[N][kMaxRank] = {};
};

//===----------------------------------------------------------------------===//
// Rows of a softmax: always inlined, so that the loops take the instruction
// set of the kernel build that calls them (KernelVariant.h).
//===----------------------------------------------------------------------===//

/// The largest of x[0, n), NaN if any is, in the row order
/// (cpu/ElementMath.h) that the fused loops' maxima take.
template <typename T>
SLAPO_VECTOR_INLINE Compute<T> rowMax(const T *x, int64_t n) {
  return maxRow<Compute<T>>(x, n, [](T value) { return load(value); });
}

/// e^(x[i] - max) into exps[0, n) (which may be x itself), and their sum in
/// f64 in the row order. The exponentials come first, in a loop of their
/// own, which vectorizes.
template <typename T>
SLAPO_VECTOR_INLINE double exponentiate(const T *x, int64_t n, Compute<T> max,
                                        Compute<T> *exps) {
  for (int64_t i = 0; i < n; ++i)
    exps[i] = vexp(load(x[i]) - max);
  return sumRow(exps, n);
}

} // namespace slapo::rt::cpu::detail

#endif // SLAPO_RUNTIME_CPU_KERNELSUPPORT_H
