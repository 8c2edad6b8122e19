//===- LinearCrossEntropyRows.h - the fused LM head loss's rows -*- C++ -*-===//
//
// Shared by the CPU and CUDA backends' linearCrossEntropy and
// linearLogSumExp (KernelSet.inc): their type check, their workspace
// (LinearCrossEntropyWorkspace.h), and each row's loss and logit gradients from
// its logits' log-sum-exp, so that both backends compute the same values
// from the same chunks of logits.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_LINEARCROSSENTROPYROWS_H
#define SLAPO_RUNTIME_LINEARCROSSENTROPYROWS_H

#include "slapo/runtime/Error.h"
#include "slapo/runtime/HostDevice.h"
#include "slapo/runtime/LinearCrossEntropyWorkspace.h"
#include "slapo/runtime/Tensor.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>

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

/// The layout of the workspace of an LM head kernel (`which`, named
/// `kernel` in errors) of hidden [rows, features], weight [classes,
/// features] and `bias` (may be null), after checking that `workspace`, its
/// bytes, holds it. The compiler sizes it with the same layout, so a smaller
/// one is a caller's mistake, refused before anything is written.
inline LinearCrossEntropyWorkspace checkLinearCrossEntropyWorkspace(
    const char *kernel, LinearCrossEntropyKernel which, const Tensor &hidden,
    const Tensor &weight, const Tensor &bias, const Tensor &workspace) {
  LinearCrossEntropyWorkspace layout = getLinearCrossEntropyWorkspace(
      which, hidden.shape[0], hidden.shape[1], weight.shape[0], bool(bias));
  int64_t given = workspace ? int64_t(workspace.getBytes()) : 0;
  if (given < layout.bytes)
    throw Error(std::string("the kernel '") + kernel +
                "' needs a workspace of " + std::to_string(layout.bytes) +
                " bytes, given " + std::to_string(given));
  return layout;
}

/// The part of `workspace` at byte `offset`, as T, or null for an absent
/// part (-1).
template <typename T>
T *getWorkspacePart(const Tensor &workspace, int64_t offset) {
  return offset < 0 ? nullptr
                    : reinterpret_cast<T *>(workspace.as<char>() + offset);
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
