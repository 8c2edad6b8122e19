//===- Elementwise.cpp - generators and elementwise kernels ---------------===//
#include "KernelSupport.h"
#include "KernelVariant.h"

#include "slapo/runtime/DropoutCounter.h"
#include "slapo/runtime/Random.h"
#include "slapo/runtime/cpu/ElementMath.h"

SLAPO_CPU_VARIANT_ISA_BEGIN
namespace slapo::rt::cpu::SLAPO_CPU_VARIANT {

using namespace detail;

//===----------------------------------------------------------------------===//
// Generators.
//===----------------------------------------------------------------------===//

void fill(Context &ctx, const Tensor &out, double value) {
  dispatch(AllTypes(), out.dtype, "fill", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T element = store<T>(value);
    T *data = out.as<T>();
    parallelFor(ctx, out.getNumElements(), kGrain,
                [&](int64_t begin, int64_t end) {
                  std::fill(data + begin, data + end, element);
                });
  });
}

void arange(Context &ctx, const Tensor &out, double start, double step) {
  dispatch(NumericTypes(), out.dtype, "arange", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *data = out.as<T>();
    parallelFor(ctx, out.getNumElements(), kGrain,
                [&](int64_t begin, int64_t end) {
                  for (int64_t i = begin; i < end; ++i)
                    data[i] = store<T>(start + static_cast<double>(i) * step);
                });
  });
}

//===----------------------------------------------------------------------===//
// Unary.
//===----------------------------------------------------------------------===//

namespace {

constexpr int kUnaryKindCount = static_cast<int>(UnaryKind::GeluTanh) + 1;
constexpr int kBinaryKindCount = static_cast<int>(BinaryKind::GeluTanhGrad) + 1;
constexpr int kCompareKindCount = static_cast<int>(CompareKind::Ge) + 1;

} // namespace

void unary(Context &ctx, UnaryKind kind, const Tensor &input,
           const Tensor &out) {
  dispatch(NumericTypes(), input.dtype, "unary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (!kIsFloat<T> && !isIntegerUnary(kind))
      throwUnsupported("unary", input.dtype);
    const T *in = input.as<T>();
    T *result = out.as<T>();
    dispatchEnum<UnaryKind, kUnaryKindCount>(kind, [&](auto kindTag) {
      constexpr UnaryKind Kind = decltype(kindTag)::value;
      if constexpr (kIsFloat<T> || isIntegerUnary(Kind)) {
        parallelFor(ctx, input.getNumElements(), kGrain,
                    [&](int64_t begin, int64_t end) {
                      for (int64_t i = begin; i < end; ++i)
                        result[i] = store<T>(applyUnary<Kind>(load(in[i])));
                    });
      }
    });
  });
}

void cast(Context &ctx, const Tensor &input, const Tensor &out) {
  dispatch(AllTypes(), input.dtype, "cast", [&](auto fromTag) {
    using From = typename decltype(fromTag)::type;
    dispatch(AllTypes(), out.dtype, "cast", [&](auto toTag) {
      using To = typename decltype(toTag)::type;
      const From *in = input.as<From>();
      To *result = out.as<To>();
      parallelFor(ctx, input.getNumElements(), kGrain,
                  [&](int64_t begin, int64_t end) {
                    for (int64_t i = begin; i < end; ++i)
                      result[i] = store<To>(load(in[i]));
                  });
    });
  });
}

//===----------------------------------------------------------------------===//
// Binary, compare and where.
//===----------------------------------------------------------------------===//

namespace {

/// out = op(lhs, rhs) broadcast, with the three stride patterns of a
/// segment written as separate loops so that each vectorizes.
template <typename In, typename Out, typename Op>
void runBinary(Context &ctx, const Tensor &lhs, const Tensor &rhs,
               const Tensor &out, Op op) {
  const In *a = lhs.as<In>();
  const In *b = rhs.as<In>();
  Out *result = out.as<Out>();
  BroadcastWalker<2>(out.shape, {lhs.shape, rhs.shape})
      .run(ctx, [&](int64_t offset, const int64_t *inputOffsets,
                    const int64_t *steps, int64_t length) {
        const In *x = a + inputOffsets[0];
        const In *y = b + inputOffsets[1];
        Out *z = result + offset;
        if (steps[0] && steps[1]) {
          for (int64_t i = 0; i < length; ++i)
            z[i] = store<Out>(op(load(x[i]), load(y[i])));
        } else if (steps[0]) {
          auto right = load(*y);
          for (int64_t i = 0; i < length; ++i)
            z[i] = store<Out>(op(load(x[i]), right));
        } else if (steps[1]) {
          auto left = load(*x);
          for (int64_t i = 0; i < length; ++i)
            z[i] = store<Out>(op(left, load(y[i])));
        } else {
          std::fill(z, z + length, store<Out>(op(load(*x), load(*y))));
        }
      });
}

} // namespace

namespace {

/// Runs the kind `kind` of a binary-shaped op over lhs and rhs of one dtype:
/// `apply(kindTag, a, b)` computes an element, written as Out (the dtype, or
/// bool for comparisons).
template <typename Kind, int KindCount, bool ToBool, typename Apply>
void runKinded(Context &ctx, const char *kernel, Kind kind, const Tensor &lhs,
               const Tensor &rhs, const Tensor &out, Apply apply) {
  dispatch(AllTypes(), lhs.dtype, kernel, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Out = std::conditional_t<ToBool, bool, T>;
    dispatchEnum<Kind, KindCount>(kind, [&](auto kindTag) {
      runBinary<T, Out>(ctx, lhs, rhs, out,
                        [&](Compute<T> a, Compute<T> b) SLAPO_VECTOR_LAMBDA {
                          return apply(kindTag, a, b);
                        });
    });
  });
}

} // namespace

void binary(Context &ctx, BinaryKind kind, const Tensor &lhs, const Tensor &rhs,
            const Tensor &out) {
  // gelu's gradients are defined on float tensors only: others throw.
  if (kind == BinaryKind::GeluErfGrad || kind == BinaryKind::GeluTanhGrad)
    dispatch(FloatTypes(), lhs.dtype, "binary", [](auto) {});
  runKinded<BinaryKind, kBinaryKindCount, false>(
      ctx, "binary", kind, lhs, rhs, out,
      [](auto kindTag, auto a, auto b) SLAPO_VECTOR_LAMBDA {
        return applyBinary<decltype(kindTag)::value>(a, b);
      });
}

void compare(Context &ctx, CompareKind kind, const Tensor &lhs,
             const Tensor &rhs, const Tensor &out) {
  runKinded<CompareKind, kCompareKindCount, true>(
      ctx, "compare", kind, lhs, rhs, out, [](auto kindTag, auto a, auto b) {
        return applyCompare<decltype(kindTag)::value>(a, b);
      });
}

void where(Context &ctx, const Tensor &condition, const Tensor &onTrue,
           const Tensor &onFalse, const Tensor &out) {
  dispatchWidth(out.dtype, [&](auto tag) {
    using W = typename decltype(tag)::type;
    const bool *c = condition.as<bool>();
    const W *a = onTrue.as<W>();
    const W *b = onFalse.as<W>();
    W *result = out.as<W>();
    BroadcastWalker<3>(out.shape,
                       {condition.shape, onTrue.shape, onFalse.shape})
        .run(ctx, [&](int64_t offset, const int64_t *offsets,
                      const int64_t *steps, int64_t length) {
          const bool *x = c + offsets[0];
          const W *y = a + offsets[1];
          const W *z = b + offsets[2];
          W *r = result + offset;
          for (int64_t i = 0; i < length; ++i)
            r[i] = x[i * steps[0]] ? y[i * steps[1]] : z[i * steps[2]];
        });
  });
}

void triangular(Context &ctx, const Tensor &input, const Tensor &out,
                bool lower, int64_t diagonal) {
  int rank = input.getRank();
  int64_t rows = rank >= 2 ? input.shape.dims[rank - 2] : 1;
  int64_t columns = rank >= 1 ? input.shape.dims[rank - 1] : 1;
  int64_t matrixRows = input.getNumElements() / std::max<int64_t>(columns, 1);
  dispatchWidth(input.dtype, [&](auto tag) {
    using W = typename decltype(tag)::type;
    const W *in = input.as<W>();
    W *result = out.as<W>();
    parallelFor(ctx, matrixRows, grainFor(columns),
                [&](int64_t begin, int64_t end) {
                  for (int64_t row = begin; row < end; ++row) {
                    int64_t i = row % rows;
                    // Columns [keepBegin, keepEnd) of row i are kept.
                    int64_t keepBegin = lower ? 0 : i + diagonal;
                    int64_t keepEnd = lower ? i + diagonal + 1 : columns;
                    keepBegin = std::clamp<int64_t>(keepBegin, 0, columns);
                    keepEnd = std::clamp<int64_t>(keepEnd, keepBegin, columns);
                    const W *x = in + row * columns;
                    W *y = result + row * columns;
                    std::fill(y, y + keepBegin, W(0));
                    std::copy(x + keepBegin, x + keepEnd, y + keepBegin);
                    std::fill(y + keepEnd, y + columns, W(0));
                  }
                });
  });
}

//===----------------------------------------------------------------------===//
// Dropout.
//===----------------------------------------------------------------------===//

void dropout(Context &ctx, const Tensor &input, const Tensor &out, double p,
             const DropoutKey &key, const DropoutPlacement &placement) {
  DropoutCounter counter(input.shape, placement);
  uint64_t streamKey =
      dropoutKey(key.seed, key.step, key.stream, key.rankStream);
  uint64_t threshold = dropoutThreshold(p);
  dispatch(FloatTypes(), input.dtype, "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const T *in = input.as<T>();
    T *result = out.as<T>();
    // Dropped elements are multiplied by 0, as PyTorch's mask is: NaN stays.
    C scale = static_cast<C>(1.0 / (1.0 - p));
    int64_t inner = counter.inner;
    parallelFor(ctx, counter.outer * counter.local, grainFor(inner),
                [&](int64_t begin, int64_t end) {
                  for (int64_t row = begin; row < end; ++row) {
                    uint64_t rowStart = counter.rowStart(row);
                    for (int64_t i = 0; i < inner; ++i) {
                      bool keep =
                          keepsElement(streamKey, rowStart + i, threshold);
                      result[row * inner + i] = store<T>(
                          load(in[row * inner + i]) * (keep ? scale : C(0)));
                    }
                  }
                });
  });
}

} // namespace slapo::rt::cpu::SLAPO_CPU_VARIANT
SLAPO_CPU_VARIANT_ISA_END
