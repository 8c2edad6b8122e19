//===- LinearCrossEntropyRows.h - the fused LM head loss's rows -*- C++ -*-===//
//
// Shared by the CPU and CUDA backends' linearCrossEntropy and
// linearLogSumExp (KernelSet.inc): their type check, their workspace
// (LinearCrossEntropyWorkspace.h), their walk over chunks of rows, and each
// row's loss and logit gradients from its logits' log-sum-exp, so that both
// backends compute the same values from the same chunks of logits.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_LINEARCROSSENTROPYROWS_H
#define SLAPO_RUNTIME_LINEARCROSSENTROPYROWS_H

#include "slapo/runtime/Error.h"
#include "slapo/runtime/HostDevice.h"
#include "slapo/runtime/KernelTypes.h"
#include "slapo/runtime/LinearCrossEntropyWorkspace.h"
#include "slapo/runtime/Tensor.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace slapo::rt {

/// Calls `throwUnsupported(kernel, dtype)`, the backend's, with the dtype of
/// the first float tensor of an LM head kernel that is not what it takes:
/// hidden and weight of one type, f32 or bf16, and every
/// one of `others` (absent ones skipped: bias, loss, log-sum-exps,
/// gradients) f32, the compute type.
template <typename ThrowUnsupported>
void checkLinearRowsTypes(const char *kernel, const Tensor &hidden,
                          const Tensor &weight,
                          std::initializer_list<const Tensor *> others,
                          ThrowUnsupported throwUnsupported) {
  if (hidden.dtype != DType::F32 && hidden.dtype != DType::BF16)
    throwUnsupported(kernel, hidden.dtype);
  if (weight.dtype != hidden.dtype)
    throwUnsupported(kernel, weight.dtype);
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
      which, hidden.shape[0], hidden.shape[1], weight.shape[0], bool(bias),
      int64_t(getSize(hidden.dtype)));
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

/// The gradients an LM head kernel's chunk walk writes, f32 whatever the
/// operands' type; all null for the log-sum-exp alone, `bias` null or empty
/// without a bias.
struct LinearRowsGrads {
  const Tensor *hidden = nullptr;
  const Tensor *weight = nullptr;
  const Tensor *bias = nullptr;
};

/// The chunks of rows of an LM head hidden [rows, features] x weight
/// [classes, features]^T + bias, on either backend: the kernels are found
/// through `ctx`'s namespace (cpu:: or cuda::linear, matmul, addMatmul and
/// cast, argument-dependent lookup), so both walk the same chunks in the
/// same order. `onRows(logits, first, count)` gets each chunk's f32 logits
/// (in `workspace`, laid out as `layout`) and, with gradients to compute,
/// turns them into their gradient in place; `onGradRows(logits, first,
/// count)` then sees that gradient (the bias gradient's share), which goes
/// on to the chunk's rows of `grads.hidden` and its share of `grads.weight`,
/// a later chunk's added inside the GEMM. With bf16 operands the products
/// take the gradient rounded to bf16 (layout.lowGradient), as
/// torch.autocast's backward of a bf16 linear does, and accumulate in f32.
template <typename Context, typename OnRows, typename OnGradRows>
void forEachLogitChunk(Context &ctx, const Tensor &hidden, const Tensor &weight,
                       const Tensor &bias, const LinearRowsGrads &grads,
                       const LinearCrossEntropyWorkspace &layout,
                       const Tensor &workspace, OnRows onRows,
                       OnGradRows onGradRows) {
  int64_t rows = hidden.shape[0], features = hidden.shape[1],
          classes = weight.shape[0];
  int64_t rowBytes = features * int64_t(getSize(hidden.dtype));
  float *logits = getWorkspacePart<float>(workspace, layout.logits);
  const int64_t transpose[] = {1, 0};
  for (int64_t first = 0; first < rows; first += layout.chunkRows) {
    int64_t count = std::min(layout.chunkRows, rows - first);
    Tensor chunkHidden(hidden.as<char>() + first * rowBytes, hidden.dtype,
                       {count, features});
    Tensor chunkLogits(logits, DType::F32, {count, classes});
    linear(ctx, chunkHidden, weight, bias, chunkLogits);
    onRows(logits, first, count);
    if (!grads.weight)
      continue;
    onGradRows(logits, first, count);
    Tensor gradRows = chunkLogits;
    if (hidden.dtype != DType::F32) {
      gradRows = Tensor(getWorkspacePart<char>(workspace, layout.lowGradient),
                        hidden.dtype, {count, classes});
      cast(ctx, chunkLogits, gradRows);
    }
    matmul(ctx, gradRows, weight,
           Tensor(grads.hidden->as<float>() + first * features, DType::F32,
                  {count, features}));
    // grads.weight (+)= the chunk's gradient^T x its hidden rows.
    MatmulPermutations permutations;
    permutations.lhs = transpose;
    if (first == 0)
      matmul(ctx, gradRows, chunkHidden, *grads.weight, permutations);
    else
      addMatmul(ctx, gradRows, chunkHidden, *grads.weight, permutations);
  }
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
