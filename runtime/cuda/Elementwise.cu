//===- Elementwise.cu - generators and elementwise kernels ----------------===//
//
// Each op is a functor on stored elements, run by the contiguous kernel
// (equal shapes, 16-byte packets) or the strided one (broadcasting). The
// math is the CPU backend's, term by term, with CUDA's libdevice functions
// (within 2 ulp of the CPU's where they are not exact).
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.cuh"

#include "slapo/runtime/DropoutCounter.h"
#include "slapo/runtime/Random.h"
#include "slapo/runtime/cuda/Kernels.h"

#include <cmath>

namespace slapo::rt::cuda {

using namespace detail;

namespace {

//===----------------------------------------------------------------------===//
// Generators.
//===----------------------------------------------------------------------===//

template <typename T> struct Constant {
  T value;
  __device__ T operator()() const { return value; }
};

template <typename T> struct ArangeElement {
  double start, step;
  /// start + i * step in f64, unfused as on the CPU, so that integer and
  /// rounded results agree exactly.
  __device__ T operator()(int64_t i) const {
    return store<T>(__dadd_rn(start, __dmul_rn(static_cast<double>(i), step)));
  }
};

template <typename T>
__global__ void arangeKernel(int64_t count, ArangeElement<T> element, T *out) {
  for (int64_t i = getGlobalThread(); i < count; i += getGlobalThreads())
    out[i] = element(i);
}

} // namespace

void fill(Context &ctx, const Tensor &out, double value) {
  dispatch(AllTypes(), out.dtype, "fill", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T element = store<T>(value);
    if (load(element) == Compute<T>(0) &&
        !std::signbit(double(load(element)))) {
      // All-zero bits: the copy engine's memset.
      checkCuda(cudaMemsetAsync(out.data, 0, out.getBytes(), ctx.getStream()),
                "fill: cudaMemsetAsync");
      return;
    }
    launchContiguous(ctx, "fill", out.getNumElements(), Constant<T>{element},
                     out.as<T>());
  });
}

void copyFrom(Context &ctx, const Tensor &out, const void *data) {
  // Pageable host memory is staged before the call returns, so the caller
  // may reuse `data` at once; pinned memory must stay until the stream has
  // run the copy.
  checkCuda(cudaMemcpyAsync(out.data, data, out.getBytes(),
                            cudaMemcpyHostToDevice, ctx.getStream()),
            "copyFrom: cudaMemcpyAsync");
}

void arange(Context &ctx, const Tensor &out, double start, double step) {
  dispatch(NumericTypes(), out.dtype, "arange", [&](auto tag) {
    using T = typename decltype(tag)::type;
    int64_t count = out.getNumElements();
    if (count == 0)
      return;
    arangeKernel<<<getGridSize(ctx, count, kBlockSize), kBlockSize, 0,
                   ctx.getStream()>>>(count, ArangeElement<T>{start, step},
                                      out.as<T>());
    checkLaunch("arange");
  });
}

//===----------------------------------------------------------------------===//
// Unary and cast.
//===----------------------------------------------------------------------===//

namespace {

constexpr int kUnaryKindCount = static_cast<int>(UnaryKind::GeluTanh) + 1;
constexpr int kBinaryKindCount = static_cast<int>(BinaryKind::GeluTanhGrad) + 1;
constexpr int kCompareKindCount = static_cast<int>(CompareKind::Ge) + 1;


template <UnaryKind Kind, typename T> struct UnaryOp {
  __device__ T operator()(T x) const {
    return store<T>(applyUnary<Kind>(load(x)));
  }
};

template <typename From, typename To> struct CastOp {
  __device__ To operator()(From x) const { return store<To>(load(x)); }
};

} // namespace

void unary(Context &ctx, UnaryKind kind, const Tensor &input,
           const Tensor &out) {
  dispatch(NumericTypes(), input.dtype, "unary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (!kIsFloat<T> && !isIntegerUnary(kind))
      throwUnsupported("unary", input.dtype);
    dispatchEnum<UnaryKind, kUnaryKindCount>(kind, [&](auto kindTag) {
      constexpr UnaryKind Kind = decltype(kindTag)::value;
      if constexpr (kIsFloat<T> || isIntegerUnary(Kind))
        launchContiguous(ctx, "unary", input.getNumElements(),
                         UnaryOp<Kind, T>(), out.as<T>(), input.as<T>());
    });
  });
}

void cast(Context &ctx, const Tensor &input, const Tensor &out) {
  dispatch(AllTypes(), input.dtype, "cast", [&](auto fromTag) {
    using From = typename decltype(fromTag)::type;
    dispatch(AllTypes(), out.dtype, "cast", [&](auto toTag) {
      using To = typename decltype(toTag)::type;
      launchContiguous(ctx, "cast", input.getNumElements(), CastOp<From, To>(),
                       out.as<To>(), input.as<From>());
    });
  });
}

//===----------------------------------------------------------------------===//
// Binary, compare and where.
//===----------------------------------------------------------------------===//

namespace {

template <BinaryKind Kind, typename T> struct BinaryOp {
  __device__ T operator()(T a, T b) const {
    return store<T>(applyBinary<Kind>(load(a), load(b)));
  }
};

template <CompareKind Kind, typename T> struct CompareOp {
  __device__ bool operator()(T a, T b) const {
    return applyCompare<Kind>(load(a), load(b));
  }
};

template <typename W> struct SelectOp {
  __device__ W operator()(bool condition, W onTrue, W onFalse) const {
    return condition ? onTrue : onFalse;
  }
};

} // namespace

void binary(Context &ctx, BinaryKind kind, const Tensor &lhs, const Tensor &rhs,
            const Tensor &out) {
  // gelu's gradients are defined on float tensors only: others throw.
  bool geluGrad =
      kind == BinaryKind::GeluErfGrad || kind == BinaryKind::GeluTanhGrad;
  if (geluGrad)
    dispatch(FloatTypes(), lhs.dtype, "binary", [](auto) {});
  dispatch(AllTypes(), lhs.dtype, "binary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatchEnum<BinaryKind, kBinaryKindCount>(kind, [&](auto kindTag) {
      constexpr BinaryKind Kind = decltype(kindTag)::value;
      constexpr bool kIsGeluGrad =
          Kind == BinaryKind::GeluErfGrad || Kind == BinaryKind::GeluTanhGrad;
      if constexpr (kIsFloat<T> || !kIsGeluGrad)
        launchElementwise(ctx, "binary", BinaryOp<Kind, T>(), out.as<T>(),
                          out.shape, getOperand<T>(lhs), getOperand<T>(rhs));
    });
  });
}

void compare(Context &ctx, CompareKind kind, const Tensor &lhs,
             const Tensor &rhs, const Tensor &out) {
  dispatch(AllTypes(), lhs.dtype, "compare", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatchEnum<CompareKind, kCompareKindCount>(kind, [&](auto kindTag) {
      launchElementwise(
          ctx, "compare", CompareOp<decltype(kindTag)::value, T>(),
          out.as<bool>(), out.shape, getOperand<T>(lhs), getOperand<T>(rhs));
    });
  });
}

void where(Context &ctx, const Tensor &condition, const Tensor &onTrue,
           const Tensor &onFalse, const Tensor &out) {
  dispatchWidth(out.dtype, [&](auto tag) {
    using W = typename decltype(tag)::type;
    launchElementwise(ctx, "where", SelectOp<W>(), out.as<W>(), out.shape,
                      getOperand<bool>(condition), getOperand<W>(onTrue),
                      getOperand<W>(onFalse));
  });
}

//===----------------------------------------------------------------------===//
// Triangular.
//===----------------------------------------------------------------------===//

namespace {

template <typename Index, typename W>
__global__ void triangularKernel(Index count, Index rows, Index columns,
                                 bool lower, int64_t diagonal, const W *in,
                                 W *out) {
  Index stride = static_cast<Index>(getGlobalThreads());
  for (Index e = static_cast<Index>(getGlobalThread()); e < count;
       e += stride) {
    Index row = e / columns;
    int64_t j = e - row * columns;
    int64_t i = row % rows;
    bool keep = lower ? j - i <= diagonal : j - i >= diagonal;
    out[e] = keep ? in[e] : W(0);
  }
}

} // namespace

void triangular(Context &ctx, const Tensor &input, const Tensor &out,
                bool lower, int64_t diagonal) {
  int rank = input.getRank();
  int64_t rows = rank >= 2 ? input.shape.dims[rank - 2] : 1;
  int64_t columns = rank >= 1 ? input.shape.dims[rank - 1] : 1;
  int64_t count = input.getNumElements();
  if (count == 0)
    return;
  dispatchWidth(input.dtype, [&](auto tag) {
    using W = typename decltype(tag)::type;
    unsigned grid = getGridSize(ctx, count, kBlockSize);
    cudaStream_t stream = ctx.getStream();
    if (count <= std::numeric_limits<int32_t>::max())
      triangularKernel<uint32_t><<<grid, kBlockSize, 0, stream>>>(
          uint32_t(count), uint32_t(rows), uint32_t(columns), lower, diagonal,
          input.as<W>(), out.as<W>());
    else
      triangularKernel<int64_t><<<grid, kBlockSize, 0, stream>>>(
          count, rows, columns, lower, diagonal, input.as<W>(), out.as<W>());
    checkLaunch("triangular");
  });
}

//===----------------------------------------------------------------------===//
// Dropout.
//===----------------------------------------------------------------------===//

namespace {

/// Applies dropout to `Vec` consecutive elements per thread and step; the
/// key and threshold of keepsElement (Random.h) are computed once on the host.
template <int Vec, typename T>
__global__ void dropoutKernel(int64_t count, DropoutCounter counter,
                              uint64_t streamKey, uint64_t threshold,
                              Compute<T> scale, const T *in, T *out) {
  int64_t stride = getGlobalThreads() * Vec;
  for (int64_t base = getGlobalThread() * Vec; base < count; base += stride) {
    if (base + Vec <= count) {
      Packet<T, Vec> x = *reinterpret_cast<const Packet<T, Vec> *>(in + base);
      Packet<T, Vec> y;
#pragma unroll
      for (int j = 0; j < Vec; ++j) {
        bool keep = keepsElement(streamKey, counter(base + j), threshold);
        // Dropped elements are multiplied by 0, as PyTorch's mask is: NaN
        // stays.
        y.values[j] =
            store<T>(load(x.values[j]) * (keep ? scale : Compute<T>(0)));
      }
      *reinterpret_cast<Packet<T, Vec> *>(out + base) = y;
    } else {
      for (int64_t e = base; e < count; ++e) {
        bool keep = keepsElement(streamKey, counter(e), threshold);
        out[e] = store<T>(load(in[e]) * (keep ? scale : Compute<T>(0)));
      }
    }
  }
}

} // namespace

void dropout(Context &ctx, const Tensor &input, const Tensor &out, double p,
             const DropoutKey &key, const DropoutPlacement &placement) {
  DropoutCounter counter(input.shape, placement);
  uint64_t streamKey =
      dropoutKey(key.seed, key.step, key.stream, key.rankStream);
  uint64_t threshold = dropoutThreshold(p);
  int64_t count = input.getNumElements();
  if (count == 0)
    return;
  dispatch(FloatTypes(), input.dtype, "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto scale = static_cast<Compute<T>>(1.0 / (1.0 - p));
    constexpr int kVec = sizeof(T) >= 16 ? 1 : int(16 / sizeof(T));
    cudaStream_t stream = ctx.getStream();
    if (isAligned(input.data, 16) && isAligned(out.data, 16))
      dropoutKernel<kVec, T>
          <<<getGridSize(ctx, count, kBlockSize * kVec), kBlockSize, 0,
             stream>>>(count, counter, streamKey, threshold, scale,
                       input.as<T>(), out.as<T>());
    else
      dropoutKernel<1, T>
          <<<getGridSize(ctx, count, kBlockSize), kBlockSize, 0, stream>>>(
              count, counter, streamKey, threshold, scale, input.as<T>(),
              out.as<T>());
    checkLaunch("dropout");
  });
}

} // namespace slapo::rt::cuda
