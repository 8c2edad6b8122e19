//===- LinearCrossEntropy.cpp - the LM head and its loss, in chunks -------===//
//
// replace("cross_entropy")'s kernel (Liger's FusedLinearCrossEntropy): per
// chunk of rows, the chunk's logits by oneDNN's linear, each row's
// log-sum-exp, loss and logit gradients in place, then the chunk's rows of
// the hidden gradient and its share of the weight and bias gradients by
// oneDNN's matmul. Only a chunk of logits exists at a time. Not built per
// instruction set: the contractions are oneDNN's, which picks its own.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.h"

#include "slapo/runtime/LinearCrossEntropyRows.h"
#include "slapo/runtime/cpu/Kernels.h"

#include <memory>
#include <vector>

namespace slapo::rt::cpu {

using namespace detail;

namespace {

/// The labels as int64, checked against the classes.
std::vector<int64_t> readLabels(const Tensor &target, int64_t classes,
                                int64_t ignoreIndex) {
  int64_t rows = target.getNumElements();
  std::vector<int64_t> labels(rows);
  dispatch(IndexTypes(), target.dtype, "linearCrossEntropy", [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I *indices = target.as<I>();
    checkIndices("cross entropy target", indices, rows, classes, true,
                 ignoreIndex);
    std::copy(indices, indices + rows, labels.begin());
  });
  return labels;
}

/// Turns each row of `logits` [rows, classes] into its gradient (in place)
/// and sets its loss in `losses`.
void rowLossesAndGrads(Context &ctx, float *logits, int64_t rows,
                       int64_t classes, const int64_t *labels,
                       int64_t ignoreIndex, float scale, double *losses) {
  parallelFor(ctx, rows, grainFor(classes), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      float *x = logits + row * classes;
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t i = 0; i < classes; ++i)
        max = std::max(max, x[i]);
      double sum = 0;
      for (int64_t i = 0; i < classes; ++i)
        sum += std::exp(double(x[i]) - max);
      float logsumexp = max + float(std::log(sum));
      int64_t label = labels[row];
      bool ignored = label == ignoreIndex;
      losses[row] =
          getCrossEntropyRowLoss(logsumexp, ignored ? 0 : x[label], ignored);
      float weight = getCrossEntropyRowWeight(label, ignoreIndex, scale);
      for (int64_t i = 0; i < classes; ++i)
        x[i] = getCrossEntropyLogitGrad(x[i], logsumexp, i == label, weight);
    }
  });
}

} // namespace

void linearCrossEntropy(Context &ctx, const Tensor &hidden,
                        const Tensor &weight, const Tensor &target,
                        const Tensor &bias, const Tensor &loss,
                        const Tensor &gradHidden, const Tensor &gradWeight,
                        const Tensor &gradBias, int64_t ignoreIndex,
                        Reduction reduction) {
  LinearCrossEntropySizes sizes(
      hidden, weight, {&bias, &loss, &gradHidden, &gradWeight, &gradBias});
  if (sizes.unsupported != DType::F32)
    throwUnsupported("linearCrossEntropy", sizes.unsupported);
  int64_t rows = sizes.rows, features = sizes.features, classes = sizes.classes;
  std::vector<int64_t> labels = readLabels(target, classes, ignoreIndex);
  int64_t counted = 0;
  for (int64_t label : labels)
    counted += label != ignoreIndex;
  float scale = reduction == Reduction::Mean ? 1.0f / float(counted) : 1.0f;

  int64_t chunkRows = getLinearCrossEntropyChunkRows(rows, features, classes);
  std::unique_ptr<float[]> logits(new float[chunkRows * classes]);
  // A later chunk's weight gradient, added to the first chunk's.
  std::unique_ptr<float[]> weightPart;
  if (chunkRows < rows)
    weightPart.reset(new float[classes * features]);
  std::vector<double> losses(rows), biasSums(bias ? classes : 0);
  const int64_t transpose[] = {1, 0};
  float *hiddenRows = hidden.as<float>();
  float *gradHiddenRows = gradHidden.as<float>();
  for (int64_t first = 0; first < rows; first += chunkRows) {
    int64_t count = std::min(chunkRows, rows - first);
    Tensor chunkHidden(hiddenRows + first * features, DType::F32,
                       {count, features});
    Tensor chunkLogits(logits.get(), DType::F32, {count, classes});
    linear(ctx, chunkHidden, weight, bias, chunkLogits);
    rowLossesAndGrads(ctx, logits.get(), count, classes, &labels[first],
                      ignoreIndex, scale, &losses[first]);
    matmul(ctx, chunkLogits, weight,
           Tensor(gradHiddenRows + first * features, DType::F32,
                  {count, features}));
    // gradWeight += chunk's gradient^T x chunk's hidden rows.
    Tensor part =
        first == 0 ? gradWeight
                   : Tensor(weightPart.get(), DType::F32, {classes, features});
    MatmulPermutations permutations;
    permutations.lhs = transpose;
    matmul(ctx, chunkLogits, chunkHidden, part, permutations);
    if (first != 0) {
      float *sum = gradWeight.as<float>();
      const float *add = weightPart.get();
      parallelFor(ctx, classes * features, kGrain,
                  [&](int64_t begin, int64_t end) {
                    for (int64_t i = begin; i < end; ++i)
                      sum[i] += add[i];
                  });
    }
    for (int64_t row = 0; row < count && bias; ++row)
      for (int64_t c = 0; c < classes; ++c)
        biasSums[c] += logits[row * classes + c];
  }
  for (int64_t c = 0; c < int64_t(biasSums.size()); ++c)
    gradBias.as<float>()[c] = float(biasSums[c]);
  double total = 0;
  for (double rowLoss : losses)
    total += rowLoss;
  // Mean over no counted target is 0 / 0, NaN, as in PyTorch.
  *loss.as<float>() =
      float(reduction == Reduction::Mean ? total / static_cast<double>(counted)
                                         : total);
}

} // namespace slapo::rt::cpu
