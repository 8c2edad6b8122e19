//===- LinearCrossEntropy.cpp - the LM head and its loss, in chunks -------===//
//
// replace("cross_entropy")'s kernel (Liger's FusedLinearCrossEntropy): per
// chunk of rows (forEachLogitChunk, LinearCrossEntropyRows.h, CUDA's walk
// too), the chunk's logits by oneDNN's linear, each row's log-sum-exp, loss
// and logit gradients in place, then the chunk's rows of the hidden
// gradient and its share of the weight and bias gradients by oneDNN's
// matmul, a later chunk's weight gradient added inside the GEMM
// (addMatmul). Only a chunk of logits exists at a time, in the caller's
// workspace (the memory plan's; LinearCrossEntropyWorkspace.h): the kernels
// allocate nothing. The
// vocabulary-parallel form's linearLogSumExp and its gradient walk the same
// chunks. Built per instruction set (KernelVariant.h) for the row loops'
// exponentials (VectorMath.h's vexp); the contractions are the dispatched
// oneDNN ones, which pick their own.
//
//===----------------------------------------------------------------------===//
#include "Contraction.h"
#include "KernelSupport.h"
#include "KernelVariant.h"

#include "slapo/runtime/LinearCrossEntropyRows.h"
#include "slapo/runtime/cpu/Kernels.h"
#include "slapo/runtime/cpu/VectorMath.h"

#include <algorithm>

SLAPO_CPU_VARIANT_ISA_BEGIN
namespace slapo::rt::cpu::SLAPO_CPU_VARIANT {

using namespace detail;

namespace {

/// forEachLogitChunk (LinearCrossEntropyRows.h) with the bias gradient of
/// `grads` (if any) summed over the chunks' rows in f64 (the workspace's
/// classSums), row after row.
template <typename OnRows>
void forEachLogitChunkSummingBias(Context &ctx, const Tensor &hidden,
                                  const Tensor &weight, const Tensor &bias,
                                  const LinearRowsGrads &grads,
                                  const LinearCrossEntropyWorkspace &layout,
                                  const Tensor &workspace, OnRows onRows) {
  int64_t classes = weight.shape[0];
  bool withBiasGrad = grads.bias && *grads.bias;
  double *biasSums = getWorkspacePart<double>(workspace, layout.classSums);
  if (withBiasGrad)
    std::fill(biasSums, biasSums + classes, 0.0);
  auto sumBiasGrads = [&](const float *logitGrads, int64_t, int64_t count) {
    for (int64_t row = 0; row < count && withBiasGrad; ++row)
      for (int64_t c = 0; c < classes; ++c)
        biasSums[c] += logitGrads[row * classes + c];
  };
  forEachLogitChunk(ctx, hidden, weight, bias, grads, layout, workspace, onRows,
                    sumBiasGrads);
  for (int64_t c = 0; c < classes && withBiasGrad; ++c)
    grads.bias->as<float>()[c] = float(biasSums[c]);
}

/// The log-sum-exp of a row of `classes` logits, which become their
/// exponentials less the row's maximum (in a loop of their own, which
/// vectorizes); `sum` gets their sum, in f64.
float exponentiateRow(float *x, int64_t classes, double &sum) {
  float max = rowMax(x, classes);
  sum = exponentiate(x, classes, max, x);
  return max + float(std::log(sum));
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
  double *losses = getWorkspacePart<double>(workspace, layout.rowLosses);
  dispatch(IndexTypes(), target.dtype, "linearCrossEntropy", [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I *labels = target.as<I>();
    checkIndices("cross entropy target", labels, rows, classes, true,
                 ignoreIndex);
    int64_t counted = 0;
    for (int64_t row = 0; row < rows; ++row)
      counted += labels[row] != ignoreIndex;
    float scale = reduction == Reduction::Mean ? 1.0f / float(counted) : 1.0f;
    // Each row of a chunk becomes its gradient and sets its loss.
    auto rowLossesAndGrads = [&](float *logits, int64_t first, int64_t count) {
      parallelFor(
          ctx, count, grainFor(classes), [&](int64_t begin, int64_t end) {
            for (int64_t row = begin; row < end; ++row) {
              float *x = logits + row * classes;
              int64_t label = labels[first + row];
              bool ignored = label == ignoreIndex;
              float labelLogit = ignored ? 0 : x[label];
              double sum;
              float logsumexp = exponentiateRow(x, classes, sum);
              losses[first + row] =
                  getCrossEntropyRowLoss(logsumexp, labelLogit, ignored);
              // (softmax - one_hot) * weight, the softmax from the
              // exponentials.
              float weight =
                  getCrossEntropyRowWeight(label, ignoreIndex, scale);
              float share = float(1 / sum) * weight;
              for (int64_t i = 0; i < classes; ++i)
                x[i] *= share;
              if (!ignored)
                x[label] -= weight;
            }
          });
    };
    forEachLogitChunkSummingBias(ctx, hidden, weight, bias,
                                 {&gradHidden, &gradWeight, &gradBias}, layout,
                                 workspace, rowLossesAndGrads);
    double total = 0;
    for (int64_t row = 0; row < rows; ++row)
      total += losses[row];
    // Mean over no counted target is 0 / 0, NaN, as in PyTorch.
    *loss.as<float>() = float(reduction == Reduction::Mean
                                  ? total / static_cast<double>(counted)
                                  : total);
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
  float *out = logsumexp.as<float>();
  auto rowLogSumExps = [&](float *logits, int64_t first, int64_t count) {
    parallelFor(ctx, count, grainFor(classes), [&](int64_t begin, int64_t end) {
      double sum;
      for (int64_t row = begin; row < end; ++row)
        out[first + row] =
            exponentiateRow(logits + row * classes, classes, sum);
    });
  };
  forEachLogitChunkSummingBias(ctx, hidden, weight, bias, {}, layout, workspace,
                               rowLogSumExps);
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
  const float *rowLogSumExp = logsumexp.as<float>();
  const float *rowGrad = grad.as<float>();
  // Each row's softmax times its gradient, in place.
  auto scaledSoftmaxRows = [&](float *logits, int64_t first, int64_t count) {
    parallelFor(ctx, count, grainFor(classes), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        float *x = logits + row * classes;
        float shift = rowLogSumExp[first + row];
        float scale = rowGrad[first + row];
        for (int64_t i = 0; i < classes; ++i)
          x[i] = vexp(x[i] - shift) * scale;
      }
    });
  };
  forEachLogitChunkSummingBias(ctx, hidden, weight, bias,
                               {&gradHidden, &gradWeight, &gradBias}, layout,
                               workspace, scaledSoftmaxRows);
}

} // namespace slapo::rt::cpu::SLAPO_CPU_VARIANT
SLAPO_CPU_VARIANT_ISA_END
