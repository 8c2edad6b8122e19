//===- NN.cu - embedding, normalization, softmax and losses ---------------===//
//
// Row-wise kernels give each row one block (a power of two of threads sized
// to the row) and combine the threads' partial results with warp shuffles;
// softmax, its logarithm and cross entropy fold each element into a running
// (max, sum of exponentials) pair, so that a row is read once for its
// statistics and once for the result. Bad indices are recorded for
// synchronize() to throw (ContextImpl.h) instead of stopping the host.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.cuh"

#include "slapo/runtime/LinearCrossEntropyRows.h"
#include "slapo/runtime/RowMoments.h"
#include "slapo/runtime/cuda/Kernels.h"

namespace slapo::rt::cuda {

using namespace detail;

//===----------------------------------------------------------------------===//
// Embedding and its gradient.
//===----------------------------------------------------------------------===//

namespace {

/// out[row] = table[indices[row]], rows of `rowWords` words W, one warp per
/// row; a bad index is reported and its row zeroed.
template <typename W, typename I>
__global__ void embeddingKernel(int64_t count, int64_t vocabulary,
                                int64_t rowWords, const I *indices,
                                const W *table, W *out, KernelErrorSink sink) {
  int lane = threadIdx.x % 32;
  int64_t warps = getGlobalThreads() / 32;
  for (int64_t row = getGlobalThread() / 32; row < count; row += warps) {
    int64_t index = indices[row];
    W *to = out + row * rowWords;
    if (index < 0 || index >= vocabulary) {
      if (lane == 0)
        reportBadIndex(sink, KernelErrorRecord::EmbeddingIndex, index, row,
                       vocabulary);
      for (int64_t w = lane; w < rowWords; w += 32)
        to[w] = W{};
      continue;
    }
    const W *from = table + index * rowWords;
    for (int64_t w = lane; w < rowWords; w += 32)
      to[w] = from[w];
  }
}

/// sums[indices[row]] += grad[row] with atomic adds, one block per row,
/// skipping `paddingIdx`; a bad index is reported and its row skipped.
template <typename T, typename A, typename I>
__global__ void embeddingGradKernel(int64_t count, int64_t vocabulary,
                                    int64_t width, int64_t paddingIdx,
                                    const I *indices, const T *grad, A *sums,
                                    KernelErrorSink sink) {
  for (int64_t row = blockIdx.x; row < count; row += gridDim.x) {
    int64_t index = indices[row];
    if (index < 0 || index >= vocabulary) {
      if (threadIdx.x == 0)
        reportBadIndex(sink, KernelErrorRecord::EmbeddingIndex, index, row,
                       vocabulary);
      continue;
    }
    if (index == paddingIdx)
      continue;
    for (int64_t c = threadIdx.x; c < width; c += blockDim.x)
      atomicAdd(sums + index * width + c, A(load(grad[row * width + c])));
  }
}

} // namespace

void embedding(Context &ctx, const Tensor &weight, const Tensor &indices,
               const Tensor &out) {
  int64_t vocabulary = weight.shape.dims[0];
  int64_t count = indices.getNumElements();
  size_t rowBytes = weight.getBytes() / std::max<int64_t>(vocabulary, 1);
  if (count == 0)
    return;
  dispatch(IndexTypes(), indices.dtype, "embedding", [&](auto indexTag) {
    using I = typename decltype(indexTag)::type;
    // Rows move in the widest words that their size and both tables'
    // alignment allow.
    auto run = [&](auto wordTag) {
      using W = typename decltype(wordTag)::type;
      int64_t rowWords = rowBytes / sizeof(W);
      embeddingKernel<<<getGridSize(ctx, count * 32, kBlockSize), kBlockSize, 0,
                        ctx.getStream()>>>(
          count, vocabulary, rowWords, indices.as<I>(), weight.as<W>(),
          out.as<W>(), ctx.getImpl().getErrorSink());
      checkLaunch("embedding");
    };
    auto fits = [&](size_t bytes) {
      return rowBytes % bytes == 0 && isAligned(weight.data, bytes) &&
             isAligned(out.data, bytes);
    };
    if (fits(16))
      run(TypeTag<uint4>());
    else if (fits(8))
      run(TypeTag<uint64_t>());
    else if (fits(4))
      run(TypeTag<uint32_t>());
    else if (fits(2))
      run(TypeTag<uint16_t>());
    else
      run(TypeTag<uint8_t>());
  });
}

void embeddingGrad(Context &ctx, const Tensor &grad, const Tensor &indices,
                   const Tensor &out, int64_t paddingIdx) {
  int64_t vocabulary = out.shape.dims[0], width = out.shape.dims[1];
  int64_t count = indices.getNumElements();
  cudaStream_t stream = ctx.getStream();
  dispatch(IndexTypes(), indices.dtype, "embeddingGrad", [&](auto indexTag) {
    using I = typename decltype(indexTag)::type;
    dispatch(FloatTypes(), out.dtype, "embeddingGrad", [&](auto tag) {
      using T = typename decltype(tag)::type;
      // Sums of 16-bit gradients accumulate in f32 scratch and are rounded
      // once; f32 and f64 accumulate in place.
      using A = std::conditional_t<kIsHalfWidth<T>, float, T>;
      A *sums = kIsHalfWidth<T> ? static_cast<A *>(ctx.getImpl().getScratch(
                                      Scratch::Accumulator,
                                      sizeof(A) * out.getNumElements(), stream))
                                : reinterpret_cast<A *>(out.data);
      checkCuda(
          cudaMemsetAsync(sums, 0, sizeof(A) * out.getNumElements(), stream),
          "embeddingGrad: cudaMemsetAsync");
      if (count > 0 && width > 0) {
        int threads = std::min(kBlockSize, getRowBlockSize(width, 4));
        embeddingGradKernel<<<getGridSize(ctx, count, 1), threads, 0, stream>>>(
            count, vocabulary, width, paddingIdx, indices.as<I>(), grad.as<T>(),
            sums, ctx.getImpl().getErrorSink());
        checkLaunch("embeddingGrad");
      }
      if constexpr (kIsHalfWidth<T>)
        cast(ctx, Tensor(sums, DType::F32, out.shape), out);
    });
  });
}

//===----------------------------------------------------------------------===//
// Layer norm and RMS norm.
//===----------------------------------------------------------------------===//

namespace {

struct Add {
  template <typename A> __device__ A operator()(A a, A b) const {
    return a + b;
  }
};

/// The RowMoments of a row, computed by the whole block.
template <bool Rms, typename T, typename A>
__device__ RowMoments<Compute<T>> getRowMoments(const T *x, int64_t size,
                                                double eps, A *shared) {
  using C = Compute<T>;
  A mean = 0;
  if constexpr (!Rms) {
    A sum = 0;
    for (int64_t i = threadIdx.x; i < size; i += blockDim.x)
      sum += load(x[i]);
    mean = blockReduce(sum, Add(), A(0), shared) / A(size);
  }
  A squares = 0;
  for (int64_t i = threadIdx.x; i < size; i += blockDim.x) {
    A centered = A(load(x[i])) - mean;
    squares += centered * centered;
  }
  squares = blockReduce(squares, Add(), A(0), shared);
  return finishRowMoments<CudaMath, Rms, C>(mean, squares, size, eps);
}

/// One block per row. Layer norm: the mean, then the biased variance about
/// it (two passes, as on the CPU), then the normalized row. RMS norm
/// (`Rms`): the mean of the squares, then the scaled row (a mean of 0
/// subtracts nothing, exactly). Into an `out` narrower than the input (f32
/// or f64, its own compute type), store<> rounds each element straight from
/// the value the input's dtype would have held, as the cast kernel rounds
/// it: the same bits.
template <bool Rms, typename T, typename Out>
__global__ void normKernel(int64_t rows, int64_t size, double eps, const T *in,
                           const T *gamma, const T *beta, Out *out) {
  using C = Compute<T>;
  using A = Accumulate<T>;
  __shared__ A shared[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *x = in + row * size;
    Out *y = out + row * size;
    auto [center, rstd] = getRowMoments<Rms>(x, size, eps, shared);
    for (int64_t i = threadIdx.x; i < size; i += blockDim.x) {
      C value = (load(x[i]) - center) * rstd;
      if (gamma)
        value *= load(gamma[i]);
      if (beta)
        value += load(beta[i]);
      y[i] = store<Out>(value);
    }
  }
}

/// The input's gradient of a layer norm (RMS norm: `Rms`), one block per row
/// (the formulas: slapo.layer_norm_grad's and slapo.rms_norm_grad's
/// descriptions, the RMS norm's without the mean of the scaled gradient);
/// each row's moments are kept in `moments` for the column sums. A grad
/// `dy` narrower than the input is widened exactly to the compute type as
/// it is read: the bits of the grad cast to the input's dtype first. A
/// non-null `addend` is added to the gradient rounded to T, and the sum
/// rounded again: the bits of the binary kernel's Add after it. It may be
/// `dx` itself: each thread reads its elements before it writes them.
template <bool Rms, typename T, typename G>
__global__ void normGradKernel(int64_t rows, int64_t size, double eps,
                               const T *in, const G *dy, const T *gamma,
                               const T *addend, T *dx,
                               RowMoments<Compute<T>> *moments) {
  using C = Compute<T>;
  using A = Accumulate<T>;
  __shared__ A shared[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *x = in + row * size;
    const G *g = dy + row * size;
    T *d = dx + row * size;
    RowMoments<C> m = getRowMoments<Rms>(x, size, eps, shared);
    auto scaledAt = [&](int64_t i) {
      return gamma ? C(C(load(g[i])) * load(gamma[i])) : C(load(g[i]));
    };
    A sum = 0, projection = 0;
    for (int64_t i = threadIdx.x; i < size; i += blockDim.x) {
      C scaled = scaledAt(i);
      if constexpr (!Rms)
        sum += scaled;
      projection += scaled * ((load(x[i]) - m.center) * m.rstd);
    }
    C meanScaled =
        Rms ? C(0) : C(blockReduce(sum, Add(), A(0), shared) / A(size));
    C meanProjection =
        C(blockReduce(projection, Add(), A(0), shared) / A(size));
    const T *a = addend ? addend + row * size : nullptr;
    for (int64_t i = threadIdx.x; i < size; i += blockDim.x) {
      C normalized = (load(x[i]) - m.center) * m.rstd;
      T gradient = store<T>(
          m.rstd * (scaledAt(i) - meanScaled - normalized * meanProjection));
      d[i] = a ? store<T>(load(gradient) + load(a[i])) : gradient;
    }
    if (threadIdx.x == 0)
      moments[row] = m;
  }
}

/// The weight's and the bias's gradients of a norm: one thread per column,
/// summing its rows in order (of `dy` widened as normGradKernel widens it).
template <typename T, typename G>
__global__ void normAffineGradKernel(int64_t rows, int64_t size, const T *in,
                                     const G *dy,
                                     const RowMoments<Compute<T>> *moments,
                                     T *dgamma, T *dbeta) {
  using A = Accumulate<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < size;
       i += int64_t(gridDim.x) * blockDim.x) {
    A weightSum = 0, biasSum = 0;
    for (int64_t row = 0; row < rows; ++row) {
      A g = load(dy[row * size + i]);
      weightSum +=
          g * A((load(in[row * size + i]) - moments[row].center) *
                moments[row].rstd);
      biasSum += g;
    }
    if (dgamma)
      dgamma[i] = store<T>(Compute<T>(weightSum));
    if (dbeta)
      dbeta[i] = store<T>(Compute<T>(biasSum));
  }
}

/// Normalizes the rows of `size` elements of `input` into `out`.
template <bool Rms>
void launchNorm(Context &ctx, const char *kernel, const Tensor &input,
                const Tensor &weight, const Tensor &bias, const Tensor &out,
                int64_t size, double eps) {
  int64_t rows = size ? input.getNumElements() / size : 0;
  if (rows == 0)
    return;
  dispatchHeldExactly(
      kernel, "input", input, "out", out, [&](auto tag, auto outTag) {
        using T = typename decltype(tag)::type;
        using Out = typename decltype(outTag)::type;
        normKernel<Rms><<<getGridSize(ctx, rows, 1), getRowBlockSize(size, 4),
                          0, ctx.getStream()>>>(rows, size, eps, input.as<T>(),
                                                weight.as<T>(), bias.as<T>(),
                                                out.as<Out>());
        checkLaunch(kernel);
      });
}

/// The gradients of launchNorm<Rms>'s rows of `size` elements, plus the
/// addend (if not null) for the input's; null gradients of the weight and
/// the bias are not computed.
template <bool Rms>
void launchNormGrad(Context &ctx, const char *kernel, const Tensor &grad,
                    const Tensor &input, const Tensor &weight,
                    const Tensor &addend, const Tensor &gradInput,
                    const Tensor &gradWeight, const Tensor &gradBias,
                    int64_t size, double eps) {
  if (addend.data && addend.dtype != input.dtype)
    throwUnsupported(kernel, addend.dtype);
  int64_t rows = size ? input.getNumElements() / size : 0;
  if (rows == 0)
    return;
  cudaStream_t stream = ctx.getStream();
  dispatchHeldExactly(
      kernel, "input", input, "grad", grad, [&](auto tag, auto gradTag) {
        using T = typename decltype(tag)::type;
        using G = typename decltype(gradTag)::type;
        using Moments = RowMoments<Compute<T>>;
        auto *moments = static_cast<Moments *>(ctx.getImpl().getScratch(
            Scratch::Partials, sizeof(Moments) * rows, stream));
        normGradKernel<Rms><<<getGridSize(ctx, rows, 1),
                              getRowBlockSize(size, 4), 0, stream>>>(
            rows, size, eps, input.as<T>(), grad.as<G>(), weight.as<T>(),
            addend.as<T>(), gradInput.as<T>(), moments);
        checkLaunch(kernel);
        if (!gradWeight.data && !gradBias.data)
          return;
        normAffineGradKernel<<<getGridSize(ctx, size, kBlockSize), kBlockSize,
                               0, stream>>>(
            rows, size, input.as<T>(), grad.as<G>(), moments,
            gradWeight.as<T>(), gradBias.as<T>());
        checkLaunch(kernel);
      });
}

} // namespace

void layerNorm(Context &ctx, const Tensor &input, const Tensor &weight,
               const Tensor &bias, const Tensor &out, int64_t normalizedRank,
               double eps) {
  int rank = input.getRank();
  launchNorm<false>(ctx, "layerNorm", input, weight, bias, out,
                    product(input.shape, rank - int(normalizedRank), rank),
                    eps);
}

void layerNormGrad(Context &ctx, const Tensor &grad, const Tensor &input,
                   const Tensor &weight, const Tensor &addend,
                   const Tensor &gradInput, const Tensor &gradWeight,
                   const Tensor &gradBias, int64_t normalizedRank, double eps) {
  int rank = input.getRank();
  launchNormGrad<false>(
      ctx, "layerNormGrad", grad, input, weight, addend, gradInput, gradWeight,
      gradBias, product(input.shape, rank - int(normalizedRank), rank), eps);
}

void rmsNorm(Context &ctx, const Tensor &input, const Tensor &weight,
             const Tensor &out, double eps) {
  launchNorm<true>(ctx, "rmsNorm", input, weight, Tensor(), out,
                   input.shape.dims[input.getRank() - 1], eps);
}

void rmsNormGrad(Context &ctx, const Tensor &grad, const Tensor &input,
                 const Tensor &weight, const Tensor &addend,
                 const Tensor &gradInput, const Tensor &gradWeight,
                 double eps) {
  launchNormGrad<true>(ctx, "rmsNormGrad", grad, input, weight, addend,
                       gradInput, gradWeight, Tensor(),
                       input.shape.dims[input.getRank() - 1], eps);
}

//===----------------------------------------------------------------------===//
// Softmax, log-softmax and cross entropy.
//===----------------------------------------------------------------------===//

namespace {

/// The running maximum of a row's elements and the sum of their
/// exponentials relative to it. The results match the CPU's two passes
/// (maximum, then sum) in every case: a NaN, or a +inf (whose exponential
/// relative to itself is e^(inf - inf)), makes the sum NaN; -inf elements
/// add nothing; a row of -inf alone has the sum NaN (finish()).
template <typename C> struct MaxSum {
  // No initializers: __shared__ arrays of it must be trivially constructible.
  C max;
  C sum;

  __device__ static MaxSum empty() {
    return {-std::numeric_limits<C>::infinity(), C(0)};
  }

  __device__ void fold(C x) {
    if (x > max) {
      // 1 + (x - x) is e^(x - x): NaN for x = +inf.
      sum = sum * exp(max - x) + (C(1) + (x - x));
      max = x;
    } else if (!(x == -std::numeric_limits<C>::infinity())) {
      sum += exp(x - max); // NaN for a NaN x
    }
  }

  /// The sum as the CPU's two passes give it.
  __device__ C finish() const {
    return max == -std::numeric_limits<C>::infinity()
               ? std::numeric_limits<C>::quiet_NaN()
               : sum;
  }
};

template <typename C>
__device__ inline MaxSum<C> shuffleXor(MaxSum<C> value, int mask) {
  return {detail::shuffleXor(value.max, mask),
          detail::shuffleXor(value.sum, mask)};
}

struct CombineMaxSum {
  template <typename C>
  __device__ MaxSum<C> operator()(MaxSum<C> a, MaxSum<C> b) const {
    C max = a.max > b.max ? a.max : b.max;
    if (max == -std::numeric_limits<C>::infinity())
      return a; // both empty so far
    return {max, a.sum * exp(a.max - max) + b.sum * exp(b.max - max)};
  }
};

/// The (max, sum) of row x[0, size) over the block; every thread gets it.
template <typename T>
__device__ inline MaxSum<Compute<T>> getRowMaxSum(const T *x, int64_t size) {
  using C = Compute<T>;
  __shared__ MaxSum<C> shared[32];
  MaxSum<C> state = MaxSum<C>::empty();
  for (int64_t i = threadIdx.x; i < size; i += blockDim.x)
    state.fold(load(x[i]));
  return blockReduce(state, CombineMaxSum(), MaxSum<C>::empty(), shared);
}

/// Softmax or log-softmax of contiguous rows, one block per row.
template <bool Log, typename T>
__global__ void softmaxRowsKernel(int64_t rows, int64_t size, const T *in,
                                  T *out) {
  using C = Compute<T>;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *x = in + row * size;
    T *y = out + row * size;
    MaxSum<C> state = getRowMaxSum(x, size);
    C max = state.max, sum = state.finish();
    if constexpr (Log) {
      C logSum = log(sum);
      for (int64_t i = threadIdx.x; i < size; i += blockDim.x)
        y[i] = store<T>(load(x[i]) - max - logSum);
    } else {
      C scale = C(1) / sum;
      for (int64_t i = threadIdx.x; i < size; i += blockDim.x)
        y[i] = store<T>(exp(load(x[i]) - max) * scale);
    }
  }
}

/// Softmax or log-softmax along the middle dim of [outer, length, inner]
/// with inner > 1: a thread per line, adjacent threads on adjacent
/// (coalesced) columns, in the CPU's passes: maximum, sum, result.
template <bool Log, typename T>
__global__ void softmaxColumnsKernel(int64_t outer, int64_t length,
                                     int64_t inner, const T *in, T *out) {
  using C = Compute<T>;
  for (int64_t line = getGlobalThread(); line < outer * inner;
       line += getGlobalThreads()) {
    int64_t first = line / inner * length * inner + line % inner;
    const T *x = in + first;
    T *y = out + first;
    C max = -std::numeric_limits<C>::infinity();
    for (int64_t i = 0; i < length; ++i)
      max = maxPropagatingNaN(load(x[i * inner]), max);
    C sum = 0;
    for (int64_t i = 0; i < length; ++i)
      sum += exp(load(x[i * inner]) - max);
    C scale = Log ? log(sum) : C(1) / sum;
    for (int64_t i = 0; i < length; ++i) {
      C shifted = load(x[i * inner]) - max;
      y[i * inner] = store<T>(Log ? shifted - scale : exp(shifted) * scale);
    }
  }
}

template <bool Log>
void softmaxAlong(Context &ctx, const Tensor &input, const Tensor &out,
                  int64_t dim) {
  int rank = input.getRank();
  int d = normalizeDim(dim, rank);
  int64_t outer = product(input.shape, 0, d);
  int64_t length = rank ? input.shape.dims[d] : 1;
  int64_t inner = product(input.shape, d + 1, rank);
  const char *kernel = Log ? "logSoftmax" : "softmax";
  if (input.getNumElements() == 0)
    return;
  dispatch(FloatTypes(), input.dtype, kernel, [&](auto tag) {
    using T = typename decltype(tag)::type;
    cudaStream_t stream = ctx.getStream();
    if (inner == 1)
      softmaxRowsKernel<Log>
          <<<getGridSize(ctx, outer, 1), getRowBlockSize(length, 8), 0,
             stream>>>(outer, length, input.as<T>(), out.as<T>());
    else
      softmaxColumnsKernel<Log>
          <<<getGridSize(ctx, outer * inner, kBlockSize), kBlockSize, 0,
             stream>>>(outer, length, inner, input.as<T>(), out.as<T>());
    checkLaunch(kernel);
  });
}

/// The loss of each row, -log_softmax(row)[label] (0 for an ignored row or
/// a bad label, which is reported), one block per row: into `out` as T
/// (Reduction::None) or into `losses` for the total.
template <typename T, typename I>
__global__ void
crossEntropyKernel(int64_t rows, int64_t classes, int64_t ignoreIndex,
                   const T *logits, const I *labels, T *out,
                   Accumulate<T> *losses, KernelErrorSink sink) {
  using C = Compute<T>;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    int64_t label = labels[row];
    C loss = 0;
    if (label != ignoreIndex) {
      if (label < 0 || label >= classes) {
        if (threadIdx.x == 0)
          reportBadIndex(sink, KernelErrorRecord::CrossEntropyTarget, label,
                         row, classes);
      } else {
        const T *x = logits + row * classes;
        MaxSum<C> state = getRowMaxSum(x, classes);
        loss = log(state.finish()) - (load(x[label]) - state.max);
      }
    }
    if (threadIdx.x == 0) {
      if (out)
        out[row] = store<T>(loss);
      else
        losses[row] = loss;
    }
  }
}

/// out = the sum of the rows' losses, divided by the rows whose label is not
/// `ignoreIndex` for the mean (0 / 0 gives NaN, as PyTorch): one block, in a
/// fixed order.
template <typename T, typename I>
__global__ void crossEntropyTotalKernel(int64_t rows, int64_t ignoreIndex,
                                        bool mean, const Accumulate<T> *losses,
                                        const I *labels, T *out) {
  __shared__ double sharedTotal[32];
  __shared__ int64_t sharedCount[32];
  double total = 0;
  int64_t counted = 0;
  for (int64_t row = threadIdx.x; row < rows; row += blockDim.x) {
    total += losses[row];
    counted += labels[row] != ignoreIndex;
  }
  total = blockReduce(total, Add(), 0.0, sharedTotal);
  counted = blockReduce(counted, Add(), int64_t(0), sharedCount);
  if (threadIdx.x == 0)
    *out = store<T>(mean ? total / static_cast<double>(counted) : total);
}

/// out[row] = (softmax(row) - onehot(label)) * rowWeight[row], one block
/// per row; zeros for a label outside [0, classes), an ignored one.
template <typename T, typename I>
__global__ void crossEntropyGradKernel(int64_t rows, int64_t classes,
                                       const T *logits, const I *labels,
                                       const T *rowWeight, T *out) {
  using C = Compute<T>;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T *x = logits + row * classes;
    T *y = out + row * classes;
    int64_t label = labels[row];
    if (label < 0 || label >= classes) {
      for (int64_t i = threadIdx.x; i < classes; i += blockDim.x)
        y[i] = store<T>(C(0));
      continue;
    }
    MaxSum<C> state = getRowMaxSum(x, classes);
    C inverse = C(1) / state.finish();
    C weight = load(rowWeight[row]);
    for (int64_t i = threadIdx.x; i < classes; i += blockDim.x) {
      // The softmax as softmax() rounds it, then the difference.
      C probability = exp(load(x[i]) - state.max) * inverse;
      y[i] = store<T>((i == label ? probability - C(1) : probability) * weight);
    }
  }
}

} // namespace

void softmax(Context &ctx, const Tensor &input, const Tensor &out,
             int64_t dim) {
  softmaxAlong<false>(ctx, input, out, dim);
}

void logSoftmax(Context &ctx, const Tensor &input, const Tensor &out,
                int64_t dim) {
  softmaxAlong<true>(ctx, input, out, dim);
}

void crossEntropy(Context &ctx, const Tensor &logits, const Tensor &target,
                  const Tensor &out, int64_t ignoreIndex, Reduction reduction) {
  int64_t rows = logits.shape.dims[0];
  int64_t classes = logits.getRank() > 1 ? logits.shape.dims[1] : 1;
  cudaStream_t stream = ctx.getStream();
  dispatch(FloatTypes(), logits.dtype, "crossEntropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Accumulate<T>;
    dispatch(IndexTypes(), target.dtype, "crossEntropy", [&](auto indexTag) {
      using I = typename decltype(indexTag)::type;
      bool perRow = reduction == Reduction::None;
      A *losses = perRow ? nullptr
                         : static_cast<A *>(ctx.getImpl().getScratch(
                               Scratch::Partials,
                               sizeof(A) * std::max<int64_t>(rows, 1), stream));
      if (rows > 0) {
        crossEntropyKernel<<<getGridSize(ctx, rows, 1),
                             getRowBlockSize(classes, 8), 0, stream>>>(
            rows, classes, ignoreIndex, logits.as<T>(), target.as<I>(),
            perRow ? out.as<T>() : nullptr, losses,
            ctx.getImpl().getErrorSink());
        checkLaunch("crossEntropy");
      }
      if (perRow)
        return;
      crossEntropyTotalKernel<<<1, 1024, 0, stream>>>(
          rows, ignoreIndex, reduction == Reduction::Mean, losses,
          target.as<I>(), out.as<T>());
      checkLaunch("crossEntropy");
    });
  });
}

void crossEntropyGrad(Context &ctx, const Tensor &logits, const Tensor &target,
                      const Tensor &rowWeight, const Tensor &out) {
  int64_t rows = logits.shape.dims[0], classes = logits.shape.dims[1];
  if (rows == 0 || classes == 0)
    return;
  dispatch(FloatTypes(), logits.dtype, "crossEntropyGrad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch(IndexTypes(), target.dtype, "crossEntropyGrad", [&](auto index) {
      using I = typename decltype(index)::type;
      crossEntropyGradKernel<<<getGridSize(ctx, rows, 1),
                               getRowBlockSize(classes, 8), 0,
                               ctx.getStream()>>>(
          rows, classes, logits.as<T>(), target.as<I>(), rowWeight.as<T>(),
          out.as<T>());
      checkLaunch("crossEntropyGrad");
    });
  });
}

//===----------------------------------------------------------------------===//
// The LM head and its loss in chunks of rows (replace("cross_entropy")).
//===----------------------------------------------------------------------===//

namespace {

/// *scale = 1 / the targets not ignored (mean) or 1 (sum): one block.
template <typename I>
__global__ void lossScaleKernel(int64_t rows, int64_t ignoreIndex, bool mean,
                                const I *labels, float *scale) {
  __shared__ int64_t sharedCount[32];
  int64_t counted = 0;
  for (int64_t row = threadIdx.x; row < rows; row += blockDim.x)
    counted += labels[row] != ignoreIndex;
  counted = blockReduce(counted, Add(), int64_t(0), sharedCount);
  if (threadIdx.x == 0)
    *scale = mean ? 1.0f / float(counted) : 1.0f;
}

/// Each row of a chunk of logits [rows, classes] becomes its gradient, in
/// place, and its loss goes to `losses`: one block per row.
template <typename I>
__global__ void linearCrossEntropyRowsKernel(int64_t rows, int64_t classes,
                                             int64_t ignoreIndex,
                                             const I *labels,
                                             const float *scale, float *logits,
                                             float *losses,
                                             KernelErrorSink sink) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    float *x = logits + row * classes;
    int64_t label = labels[row];
    bool ignored = label == ignoreIndex;
    bool valid = label >= 0 && label < classes;
    if (!ignored && !valid && threadIdx.x == 0)
      reportBadIndex(sink, KernelErrorRecord::CrossEntropyTarget, label, row,
                     classes);
    MaxSum<float> state = getRowMaxSum(x, classes);
    float logsumexp = state.max + log(state.finish());
    float labelLogit = valid ? x[label] : 0.0f;
    __syncthreads(); // every thread has read x[label] before it changes
    if (threadIdx.x == 0)
      losses[row] = getCrossEntropyRowLoss(logsumexp, labelLogit,
                                           ignored || !valid);
    float weight = getCrossEntropyRowWeight(label, ignoreIndex, *scale);
    for (int64_t i = threadIdx.x; i < classes; i += blockDim.x)
      x[i] = getCrossEntropyLogitGrad(x[i], logsumexp, i == label, weight);
  }
}

/// gradBias[c] (+)= the column sums of a chunk's logit gradients
/// [rows, classes], in row order: a thread per class.
__global__ void biasGradKernel(int64_t rows, int64_t classes, bool first,
                               const float *grads, float *gradBias) {
  for (int64_t c = getGlobalThread(); c < classes; c += getGlobalThreads()) {
    float sum = first ? 0.0f : gradBias[c];
    for (int64_t row = 0; row < rows; ++row)
      sum += grads[row * classes + c];
    gradBias[c] = sum;
  }
}

/// Each row's log-sum-exp of a chunk of logits [rows, classes]: one block
/// per row.
__global__ void rowLogSumExpKernel(int64_t rows, int64_t classes,
                                   const float *logits, float *logsumexp) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    MaxSum<float> state = getRowMaxSum(logits + row * classes, classes);
    if (threadIdx.x == 0)
      logsumexp[row] = state.max + log(state.finish());
  }
}

/// logits[n, c] = exp(logits[n, c] - logsumexp[n]) * grad[n], in place.
__global__ void scaledSoftmaxKernel(int64_t rows, int64_t classes,
                                    const float *logsumexp, const float *grad,
                                    float *logits) {
  for (int64_t i = getGlobalThread(); i < rows * classes;
       i += getGlobalThreads()) {
    int64_t row = i / classes;
    logits[i] = expf(logits[i] - logsumexp[row]) * grad[row];
  }
}

/// forEachLogitChunk (LinearCrossEntropyRows.h) with the bias gradient of
/// `grads` (if any) added to it chunk by chunk (biasGradKernel).
template <typename OnRows>
void forEachLogitChunkSummingBias(Context &ctx, const Tensor &hidden,
                                  const Tensor &weight, const Tensor &bias,
                                  const LinearRowsGrads &grads,
                                  const LinearCrossEntropyWorkspace &layout,
                                  const Tensor &workspace, OnRows onRows) {
  int64_t classes = weight.shape[0];
  auto addBiasGrads = [&](const float *logitGrads, int64_t first,
                          int64_t count) {
    if (!grads.bias || !*grads.bias)
      return;
    biasGradKernel<<<getGridSize(ctx, classes, 256), 256, 0, ctx.getStream()>>>(
        count, classes, first == 0, logitGrads, grads.bias->as<float>());
    checkLaunch("linearCrossEntropy");
  };
  forEachLogitChunk(ctx, hidden, weight, bias, grads, layout, workspace, onRows,
                    addBiasGrads);
}

} // namespace

void linearCrossEntropy(Context &ctx, const Tensor &hidden,
                        const Tensor &weight, const Tensor &target,
                        const Tensor &bias, const Tensor &loss,
                        const Tensor &gradHidden, const Tensor &gradWeight,
                        const Tensor &gradBias, const Tensor &workspace,
                        int64_t ignoreIndex, Reduction reduction) {
  checkLinearRowsTypes("linearCrossEntropy", hidden, weight,
                       {&bias, &loss, &gradHidden, &gradWeight, &gradBias},
                       throwUnsupported);
  LinearCrossEntropyWorkspace layout = checkLinearCrossEntropyWorkspace(
      "linearCrossEntropy", LinearCrossEntropyKernel::CrossEntropy, hidden,
      weight, bias, workspace);
  int64_t rows = hidden.shape[0], classes = weight.shape[0];
  cudaStream_t stream = ctx.getStream();
  Context::Impl &impl = ctx.getImpl();
  // The rows' losses, then the loss scale (8 bytes a row and one more).
  float *losses = getWorkspacePart<float>(workspace, layout.rowLosses);
  float *scale = losses + rows;
  dispatch(IndexTypes(), target.dtype, "linearCrossEntropy", [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I *labels = target.as<I>();
    lossScaleKernel<<<1, 1024, 0, stream>>>(
        rows, ignoreIndex, reduction == Reduction::Mean, labels, scale);
    checkLaunch("linearCrossEntropy");
    forEachLogitChunkSummingBias(
        ctx, hidden, weight, bias, {&gradHidden, &gradWeight, &gradBias},
        layout, workspace, [&](float *logits, int64_t first, int64_t count) {
          linearCrossEntropyRowsKernel<<<getGridSize(ctx, count, 1),
                                         getRowBlockSize(classes, 8), 0,
                                         stream>>>(
              count, classes, ignoreIndex, labels + first, scale, logits,
              losses + first, impl.getErrorSink());
          checkLaunch("linearCrossEntropy");
        });
    crossEntropyTotalKernel<<<1, 1024, 0, stream>>>(
        rows, ignoreIndex, reduction == Reduction::Mean, losses, labels,
        loss.as<float>());
    checkLaunch("linearCrossEntropy");
  });
}

void linearLogSumExp(Context &ctx, const Tensor &hidden, const Tensor &weight,
                     const Tensor &bias, const Tensor &logsumexp,
                     const Tensor &workspace) {
  checkLinearRowsTypes("linearLogSumExp", hidden, weight, {&bias, &logsumexp},
                       throwUnsupported);
  LinearCrossEntropyWorkspace layout = checkLinearCrossEntropyWorkspace(
      "linearLogSumExp", LinearCrossEntropyKernel::LogSumExp, hidden, weight,
      bias, workspace);
  int64_t classes = weight.shape[0];
  forEachLogitChunkSummingBias(
      ctx, hidden, weight, bias, {}, layout, workspace,
      [&](float *logits, int64_t first, int64_t count) {
        rowLogSumExpKernel<<<getGridSize(ctx, count, 1),
                             getRowBlockSize(classes, 8), 0, ctx.getStream()>>>(
            count, classes, logits, logsumexp.as<float>() + first);
        checkLaunch("linearLogSumExp");
      });
}

void linearLogSumExpGrad(Context &ctx, const Tensor &hidden,
                         const Tensor &weight, const Tensor &bias,
                         const Tensor &logsumexp, const Tensor &grad,
                         const Tensor &gradHidden, const Tensor &gradWeight,
                         const Tensor &gradBias, const Tensor &workspace) {
  checkLinearRowsTypes(
      "linearLogSumExpGrad", hidden, weight,
      {&bias, &logsumexp, &grad, &gradHidden, &gradWeight, &gradBias},
      throwUnsupported);
  LinearCrossEntropyWorkspace layout = checkLinearCrossEntropyWorkspace(
      "linearLogSumExpGrad", LinearCrossEntropyKernel::LogSumExpGrad, hidden,
      weight, bias, workspace);
  int64_t classes = weight.shape[0];
  forEachLogitChunkSummingBias(
      ctx, hidden, weight, bias, {&gradHidden, &gradWeight, &gradBias}, layout,
      workspace, [&](float *logits, int64_t first, int64_t count) {
        scaledSoftmaxKernel<<<getGridSize(ctx, count * classes, 256), 256, 0,
                              ctx.getStream()>>>(
            count, classes, logsumexp.as<float>() + first,
            grad.as<float>() + first, logits);
        checkLaunch("linearLogSumExpGrad");
      });
}

} // namespace slapo::rt::cuda

