//===- LinearCrossEntropyRows.h - the fused LM head loss's rows -*- C++ -*-===//
//
// Shared by the CPU and CUDA backends' linearCrossEntropy and
// linearLogSumExp (KernelSet.inc): their type check, how many rows a chunk
// holds, and each row's loss and logit gradients from
// its logits' log-sum-exp, so that both backends compute the same values
// from the same chunks of logits.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_LINEARCROSSENTROPYROWS_H
#define SLAPO_RUNTIME_LINEARCROSSENTROPYROWS_H

#include "slapo/runtime/HostDevice.h"
#include "slapo/runtime/Tensor.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>

namespace slapo::rt {

/// Calls `throwUnsupported(kernel, dtype)`, the backend's, with the dtype of
/// the first float tensor of an LM head kernel (hidden, weight, then
/// `others`, absent ones skipped) that is not f32, the kernels' only type.
template <typename ThrowUnsupported>
void checkLinearRowsF32(const char *kernel, const Tensor &hidden,
                        const Tensor &weight,
                        std::initializer_list<const Tensor *> others,
                        ThrowUnsupported throwUnsupported) {
  for (const Tensor *tensor : {&hidden, &weight})
    if (tensor->dtype != DType::F32)
      throwUnsupported(kernel, tensor->dtype);
  for (const Tensor *tensor : others)
    if (*tensor && tensor->dtype != DType::F32)
      throwUnsupported(kernel, tensor->dtype);
}

/// The rows of one chunk of an LM head of `rows` hidden rows of `features`
/// and `classes` logits each: the chunk's logits are about as large as the
/// hidden rows (Liger's FusedLinearCrossEntropy sizes them so), never more
/// rows than there are, at least one.
inline int64_t getLinearCrossEntropyChunkRows(int64_t rows, int64_t features,
                                              int64_t classes) {
  int64_t chunks = (classes + features - 1) / (features > 0 ? features : 1);
  if (chunks < 1)
    chunks = 1;
  int64_t chunkRows = (rows + chunks - 1) / chunks;
  return chunkRows < 1 ? 1 : chunkRows;
}

/// A row's share of the loss gradient: 1 (sum) or 1 / counted (mean) for a
/// counted target, 0 for an ignored one, as slapo.cross_entropy's gradient
/// rule weighs it (kept * scale: a mean over no counted target is 0 * inf,
/// NaN, there too).
SLAPO_HOST_DEVICE inline float
getCrossEntropyRowWeight(int64_t label, int64_t ignoreIndex, float scale) {
  return float(label != ignoreIndex) * scale;
}

/// The row's loss, logsumexp - logit[label], or 0 for an ignored target.
SLAPO_HOST_DEVICE inline float
getCrossEntropyRowLoss(float logsumexp, float labelLogit, bool ignored) {
  return ignored ? 0.0f : logsumexp - labelLogit;
}

/// The gradient of one logit: (softmax - one_hot) * rowWeight.
SLAPO_HOST_DEVICE inline float getCrossEntropyLogitGrad(float logit,
                                                        float logsumexp,
                                                        bool isLabel,
                                                        float rowWeight) {
  return (expf(logit - logsumexp) - (isLabel ? 1.0f : 0.0f)) * rowWeight;
}

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_LINEARCROSSENTROPYROWS_H
