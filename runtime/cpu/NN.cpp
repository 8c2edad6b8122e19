//===- NN.cpp - embedding, normalization, softmax and losses --------------===//
#include "KernelSupport.h"
#include "KernelVariant.h"

#include "slapo/runtime/RowMoments.h"
#include "slapo/runtime/cpu/VectorMath.h"

#include <vector>

SLAPO_CPU_VARIANT_ISA_BEGIN
namespace slapo::rt::cpu::SLAPO_CPU_VARIANT {

using namespace detail;

void embedding(Context &ctx, const Tensor &weight, const Tensor &indices,
               const Tensor &out) {
  int64_t vocabulary = weight.shape.dims[0];
  size_t rowBytes = weight.getBytes() / std::max<int64_t>(vocabulary, 1);
  int64_t count = indices.getNumElements();
  dispatch(IndexTypes(), indices.dtype, "embedding", [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I *index = indices.as<I>();
    checkIndices("embedding index", index, count, vocabulary);
    const char *table = static_cast<const char *>(weight.data);
    char *result = static_cast<char *>(out.data);
    parallelFor(ctx, count, grainFor(rowBytes / getSize(weight.dtype)),
                [&](int64_t begin, int64_t end) {
                  for (int64_t i = begin; i < end; ++i)
                    std::memcpy(result + i * rowBytes,
                                table + index[i] * rowBytes, rowBytes);
                });
  });
}

void embeddingGrad(Context &ctx, const Tensor &grad, const Tensor &indices,
                   const Tensor &out, int64_t paddingIdx) {
  int64_t vocabulary = out.shape.dims[0], width = out.shape.dims[1];
  int64_t count = indices.getNumElements();
  dispatch(IndexTypes(), indices.dtype, "embeddingGrad", [&](auto indexTag) {
    using I = typename decltype(indexTag)::type;
    const I *index = indices.as<I>();
    checkIndices("embedding index", index, count, vocabulary);
    dispatch(FloatTypes(), out.dtype, "embeddingGrad", [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *in = grad.as<T>();
      T *result = out.as<T>();
      // Each thread owns a block of columns of every row: repeated indices
      // never race, and every sum runs in lookup order, so the result does
      // not depend on the thread count.
      parallelFor(ctx, width, grainFor(count), [&](int64_t begin, int64_t end) {
        for (int64_t v = 0; v < vocabulary; ++v)
          for (int64_t c = begin; c < end; ++c)
            result[v * width + c] = store<T>(0);
        for (int64_t i = 0; i < count; ++i) {
          if (int64_t(index[i]) == paddingIdx)
            continue;
          T *row = result + int64_t(index[i]) * width;
          const T *from = in + i * width;
          for (int64_t c = begin; c < end; ++c)
            row[c] = store<T>(load(row[c]) + load(from[c]));
        }
      });
    });
  });
}

namespace {

/// The RowMoments of a row, its sums in f64.
template <bool Rms, typename C, typename T>
RowMoments<C> getRowMoments(const T *x, int64_t size, double eps) {
  if constexpr (Rms) {
    double squares = 0;
    for (int64_t i = 0; i < size; ++i)
      squares += double(load(x[i])) * load(x[i]);
    return finishRowMoments<CpuMath, true, C>(0.0, squares, size, eps);
  }
  // Two passes in f64: the mean, then the biased variance about it.
  double sum = 0;
  for (int64_t i = 0; i < size; ++i)
    sum += load(x[i]);
  double mean = sum / size;
  double squares = 0;
  for (int64_t i = 0; i < size; ++i) {
    double centered = load(x[i]) - mean;
    squares += centered * centered;
  }
  return finishRowMoments<CpuMath, false, C>(mean, squares, size, eps);
}

/// Normalizes the rows of `size` elements of `input` into `out`: (x -
/// center) * rstd, then times the weight and plus the bias where given (a
/// center of 0 subtracts nothing, exactly). Into an `out` narrower than
/// the input (f32 or f64, its own compute type), store<> rounds each
/// element straight from the value the input's dtype would have held, as
/// the cast kernel rounds it: the same bits.
template <bool Rms>
void normalizeRows(Context &ctx, const char *kernel, const Tensor &input,
                   const Tensor &weight, const Tensor &bias, const Tensor &out,
                   int64_t size, double eps) {
  int64_t rows = size ? input.getNumElements() / size : 0;
  dispatchHeldExactly(
      kernel, "input", input, "out", out, [&](auto tag, auto outTag) {
        using T = typename decltype(tag)::type;
        using Out = typename decltype(outTag)::type;
        using C = Compute<T>;
        const T *in = input.as<T>();
        const T *gamma = weight.as<T>();
        const T *beta = bias.as<T>();
        Out *result = out.as<Out>();
        parallelFor(ctx, rows, grainFor(size), [&](int64_t begin, int64_t end) {
          for (int64_t row = begin; row < end; ++row) {
            const T *x = in + row * size;
            Out *y = result + row * size;
            auto [center, rstd] = getRowMoments<Rms, C>(x, size, eps);
            for (int64_t i = 0; i < size; ++i) {
              C value = (load(x[i]) - center) * rstd;
              if (gamma)
                value *= load(gamma[i]);
              if (beta)
                value += load(beta[i]);
              y[i] = store<Out>(value);
            }
          }
        });
      });
}

/// The gradients of normalizeRows<Rms> (the formulas: the descriptions of
/// slapo.layer_norm_grad and slapo.rms_norm_grad, the RMS norm's without
/// the mean of the scaled gradient). Null gradients are not computed. A
/// `grad` narrower than the input is widened exactly to the compute type
/// as it is read: the bits of the grad cast to the input's dtype first. A
/// non-null `addend` is added to the input's gradient rounded to its dtype,
/// and the sum rounded again: the bits of the binary kernel's Add after it.
template <bool Rms>
void normalizeRowsGrad(Context &ctx, const char *kernel, const Tensor &grad,
                       const Tensor &input, const Tensor &weight,
                       const Tensor &addend, const Tensor &gradInput,
                       const Tensor &gradWeight, const Tensor &gradBias,
                       int64_t size, double eps) {
  if (addend.data && addend.dtype != input.dtype)
    throwUnsupported(kernel, addend.dtype);
  int64_t rows = size ? input.getNumElements() / size : 0;
  dispatchHeldExactly(
      kernel, "input", input, "grad", grad, [&](auto tag, auto gradTag) {
        using T = typename decltype(tag)::type;
        using G = typename decltype(gradTag)::type;
        using C = Compute<T>;
        const T *in = input.as<T>();
        const G *dy = grad.as<G>();
        const T *gamma = weight.as<T>();
        const T *plus = addend.as<T>();
        std::vector<RowMoments<C>> moments(rows);
        // The input's gradient, row by row: the moments, the row means of the
        // scaled gradient, then the row.
        parallelFor(ctx, rows, grainFor(size), [&](int64_t begin, int64_t end) {
          for (int64_t row = begin; row < end; ++row) {
            const T *x = in + row * size;
            const G *g = dy + row * size;
            T *dx = gradInput.as<T>() + row * size;
            moments[row] = getRowMoments<Rms, C>(x, size, eps);
            auto [center, rstd] = moments[row];
            double sum = 0, projection = 0;
            for (int64_t i = 0; i < size; ++i) {
              C scaled =
                  gamma ? C(C(load(g[i])) * load(gamma[i])) : C(load(g[i]));
              if constexpr (!Rms)
                sum += scaled;
              projection += scaled * ((load(x[i]) - center) * rstd);
            }
            C meanScaled = C(sum / size), meanProjection = C(projection / size);
            // `finish(i, gradient)` gives dx[i]: a loop for each, so that
            // neither tests the addend per element.
            auto writeRow = [&](auto finish) {
              for (int64_t i = 0; i < size; ++i) {
                C scaled =
                    gamma ? C(C(load(g[i])) * load(gamma[i])) : C(load(g[i]));
                C normalized = (load(x[i]) - center) * rstd;
                dx[i] =
                    finish(i, store<T>(rstd * (scaled - meanScaled -
                                               normalized * meanProjection)));
              }
            };
            if (plus) {
              // a[i] is read before dx[i] is written: the addend may be
              // gradInput.
              const T *a = plus + row * size;
              writeRow([&](int64_t i, T gradient) {
                return store<T>(load(gradient) + load(a[i]));
              });
            } else {
              writeRow([](int64_t, T gradient) { return gradient; });
            }
          }
        });
        // The weight's and the bias's, column by column: every column sums its
        // rows in order, whatever the thread count.
        T *dgamma = gradWeight.as<T>(), *dbeta = gradBias.as<T>();
        if (!dgamma && !dbeta)
          return;
        parallelFor(ctx, size, grainFor(rows), [&](int64_t begin, int64_t end) {
          std::vector<double> weightSums(end - begin), biasSums(end - begin);
          for (int64_t row = 0; row < rows; ++row) {
            const T *x = in + row * size;
            const G *g = dy + row * size;
            auto [center, rstd] = moments[row];
            for (int64_t i = begin; i < end; ++i) {
              weightSums[i - begin] +=
                  C(load(g[i])) * ((load(x[i]) - center) * rstd);
              biasSums[i - begin] += C(load(g[i]));
            }
          }
          for (int64_t i = begin; i < end; ++i) {
            if (dgamma)
              dgamma[i] = store<T>(C(weightSums[i - begin]));
            if (dbeta)
              dbeta[i] = store<T>(C(biasSums[i - begin]));
          }
        });
      });
}

/// The number of elements in the trailing `normalizedRank` dims of `input`.
int64_t getNormalizedSize(const Tensor &input, int64_t normalizedRank) {
  int rank = input.getRank();
  return product(input.shape, rank - int(normalizedRank), rank);
}

} // namespace

void layerNorm(Context &ctx, const Tensor &input, const Tensor &weight,
               const Tensor &bias, const Tensor &out, int64_t normalizedRank,
               double eps) {
  normalizeRows<false>(ctx, "layerNorm", input, weight, bias, out,
                       getNormalizedSize(input, normalizedRank), eps);
}

void layerNormGrad(Context &ctx, const Tensor &grad, const Tensor &input,
                   const Tensor &weight, const Tensor &addend,
                   const Tensor &gradInput, const Tensor &gradWeight,
                   const Tensor &gradBias, int64_t normalizedRank, double eps) {
  normalizeRowsGrad<false>(ctx, "layerNormGrad", grad, input, weight, addend,
                           gradInput, gradWeight, gradBias,
                           getNormalizedSize(input, normalizedRank), eps);
}

void rmsNorm(Context &ctx, const Tensor &input, const Tensor &weight,
             const Tensor &out, double eps) {
  normalizeRows<true>(ctx, "rmsNorm", input, weight, Tensor(), out,
                      getNormalizedSize(input, 1), eps);
}

void rmsNormGrad(Context &ctx, const Tensor &grad, const Tensor &input,
                 const Tensor &weight, const Tensor &addend,
                 const Tensor &gradInput, const Tensor &gradWeight,
                 double eps) {
  normalizeRowsGrad<true>(ctx, "rmsNormGrad", grad, input, weight, addend,
                          gradInput, gradWeight, Tensor(),
                          getNormalizedSize(input, 1), eps);
}

namespace {

/// Columns of a strided softmax one task handles together.
constexpr int64_t kColumnBlock = 64;

/// softmax or log-softmax of `input` along `dim`: the input viewed as
/// [outer, length, inner], each of the outer * inner lines normalized with
/// its maximum subtracted first.
template <bool Log>
void softmaxAlong(Context &ctx, const Tensor &input, const Tensor &out,
                  int64_t dim) {
  int rank = input.getRank();
  int d = normalizeDim(dim, rank);
  int64_t outer = product(input.shape, 0, d);
  int64_t length = rank ? input.shape.dims[d] : 1;
  int64_t inner = product(input.shape, d + 1, rank);
  const char *kernel = Log ? "logSoftmax" : "softmax";
  dispatch(FloatTypes(), input.dtype, kernel, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const T *in = input.as<T>();
    T *result = out.as<T>();
    if (inner == 1) {
      // Contiguous rows: exponentials kept in a scratch row of C.
      parallelFor(ctx, outer, grainFor(length),
                  [&](int64_t begin, int64_t end) {
                    std::vector<C> exps(length);
                    for (int64_t row = begin; row < end; ++row) {
                      const T *x = in + row * length;
                      T *y = result + row * length;
                      C max = rowMax(x, length);
                      double sum = exponentiate(x, length, max, exps.data());
                      if constexpr (Log) {
                        C logSum = C(std::log(sum));
                        for (int64_t i = 0; i < length; ++i)
                          y[i] = store<T>(load(x[i]) - max - logSum);
                      } else {
                        C scale = C(1.0 / sum);
                        for (int64_t i = 0; i < length; ++i)
                          y[i] = store<T>(exps[i] * scale);
                      }
                    }
                  });
      return;
    }
    // Strided lines: a task takes up to kColumnBlock adjacent columns of one
    // outer index and walks the dim with them side by side.
    int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
    parallelFor(
        ctx, outer * blocks, grainFor(length * kColumnBlock),
        [&](int64_t begin, int64_t end) {
          for (int64_t task = begin; task < end; ++task) {
            int64_t o = task / blocks;
            int64_t first = task % blocks * kColumnBlock;
            int64_t width = std::min(kColumnBlock, inner - first);
            const T *x = in + o * length * inner + first;
            T *y = result + o * length * inner + first;
            C max[kColumnBlock];
            double sum[kColumnBlock];
            std::fill(max, max + width, -std::numeric_limits<C>::infinity());
            std::fill(sum, sum + width, 0.0);
            for (int64_t i = 0; i < length; ++i)
              for (int64_t j = 0; j < width; ++j)
                max[j] = maxPropagatingNaN(load(x[i * inner + j]), max[j]);
            for (int64_t i = 0; i < length; ++i)
              for (int64_t j = 0; j < width; ++j)
                sum[j] += vexp(load(x[i * inner + j]) - max[j]);
            C scale[kColumnBlock];
            for (int64_t j = 0; j < width; ++j)
              scale[j] = Log ? C(std::log(sum[j])) : C(1.0 / sum[j]);
            for (int64_t i = 0; i < length; ++i)
              for (int64_t j = 0; j < width; ++j) {
                C shifted = load(x[i * inner + j]) - max[j];
                y[i * inner + j] = store<T>(Log ? shifted - scale[j]
                                                : vexp(shifted) * scale[j]);
              }
          }
        });
  });
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
  dispatch(FloatTypes(), logits.dtype, "crossEntropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    dispatch(IndexTypes(), target.dtype, "crossEntropy", [&](auto indexTag) {
      using I = typename decltype(indexTag)::type;
      const I *labels = target.as<I>();
      checkIndices("cross entropy target", labels, rows, classes, true,
                   ignoreIndex);
      const T *in = logits.as<T>();
      // -log_softmax(row)[label], 0 for an ignored row.
      std::vector<double> losses(rows);
      parallelFor(
          ctx, rows, grainFor(classes), [&](int64_t begin, int64_t end) {
            std::vector<C> exps(classes);
            for (int64_t row = begin; row < end; ++row) {
              int64_t label = labels[row];
              if (label == ignoreIndex) {
                losses[row] = 0;
                continue;
              }
              const T *x = in + row * classes;
              C max = rowMax(x, classes);
              double sum = exponentiate(x, classes, max, exps.data());
              losses[row] = std::log(sum) - (double(load(x[label])) - max);
            }
          });
      if (reduction == Reduction::None) {
        T *result = out.as<T>();
        for (int64_t row = 0; row < rows; ++row)
          result[row] = store<T>(losses[row]);
        return;
      }
      double total = 0;
      int64_t counted = 0;
      for (int64_t row = 0; row < rows; ++row) {
        total += losses[row];
        counted += labels[row] != ignoreIndex;
      }
      // Mean over no counted target is 0 / 0, NaN, as in PyTorch.
      *out.as<T>() = store<T>(reduction == Reduction::Mean
                                  ? total / static_cast<double>(counted)
                                  : total);
    });
  });
}

void crossEntropyGrad(Context &ctx, const Tensor &logits, const Tensor &target,
                      const Tensor &rowWeight, const Tensor &out) {
  int64_t rows = logits.shape.dims[0], classes = logits.shape.dims[1];
  dispatch(FloatTypes(), logits.dtype, "crossEntropyGrad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    dispatch(IndexTypes(), target.dtype, "crossEntropyGrad", [&](auto index) {
      using I = typename decltype(index)::type;
      const T *in = logits.as<T>(), *weights = rowWeight.as<T>();
      const I *labels = target.as<I>();
      T *result = out.as<T>();
      parallelFor(
          ctx, rows, grainFor(classes), [&](int64_t begin, int64_t end) {
            std::vector<C> exps(classes);
            for (int64_t row = begin; row < end; ++row) {
              const T *x = in + row * classes;
              T *y = result + row * classes;
              int64_t label = labels[row];
              if (label < 0 || label >= classes) {
                std::fill(y, y + classes, store<T>(C(0)));
                continue;
              }
              C max = rowMax(x, classes);
              C inverse = C(1.0 / exponentiate(x, classes, max, exps.data()));
              C weight = load(weights[row]);
              // The softmax as cpu::softmax rounds it, then the difference.
              for (int64_t i = 0; i < classes; ++i)
                y[i] = store<T>(exps[i] * inverse * weight);
              y[label] = store<T>((exps[label] * inverse - C(1)) * weight);
            }
          });
    });
  });
}

} // namespace slapo::rt::cpu::SLAPO_CPU_VARIANT
SLAPO_CPU_VARIANT_ISA_END
