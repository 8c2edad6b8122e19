//===- CudnnAttention.h - flash attention through cuDNN's SDPA --*- C++ -*-===//
//
// Private to runtime/cuda (and its tests). flashAttention and
// flashAttentionGrad (Attention.cu) run 16-bit attentions without dropout
// through cuDNN's fused scaled dot-product attention (CudnnAttention.cpp)
// and fall back to the runtime's own kernels for what cuDNN refuses.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CUDA_CUDNNATTENTION_H
#define SLAPO_RUNTIME_CUDA_CUDNNATTENTION_H

#include "slapo/runtime/AttentionGeometry.h"
#include "slapo/runtime/KernelTypes.h"
#include "slapo/runtime/Tensor.h"
#include "slapo/runtime/cuda/Context.h"

#include <array>
#include <cstdint>
#include <string>

namespace slapo::rt::cuda {

/// Runs flashAttention's forward as cuDNN's SDPA, writing `out` and
/// `logsumexp` as the runtime's kernel does, and returns true; returns
/// false, having queued nothing that writes them, where cuDNN does not run
/// it: f32 and f64 (cuDNN's SDPA has none), an attention dropout (cuDNN
/// draws Philox masks, the runtime counter-based ones that slapo.dropout
/// draws), an operand that is not 16-byte aligned (as cuDNN needs; a head
/// window's first head included), and a configuration cuDNN refused when
/// its graph was built (said once per configuration on stderr).
bool runCudnnAttention(Context &ctx, const Tensor &query, const Tensor &key,
                       const Tensor &value, const Tensor &keep,
                       const Tensor &bias, const Tensor &out,
                       const Tensor &logsumexp, double scale,
                       double maskedScore, AttentionLayout layout,
                       const AttentionDropout &dropout);

/// flashAttentionGrad's counterpart of runCudnnAttention.
bool runCudnnAttentionGrad(Context &ctx, const Tensor &query, const Tensor &key,
                           const Tensor &value, const Tensor &keep,
                           const Tensor &bias, const Tensor &out,
                           const Tensor &logsumexp, const Tensor &grad,
                           const Tensor &gradQuery, const Tensor &gradKey,
                           const Tensor &gradValue, double scale,
                           double maskedScore, AttentionLayout layout,
                           const AttentionDropout &dropout);

/// What cuDNN's frontend says of the graph of the forward or the backward
/// of a `dtype` attention of `sizes` (batch, heads, rows, keys, head size,
/// value size) with cuDNN's causal mask or not and a bias of [biasBatch,
/// biasHeads, rows, keys] (biasBatch 0: none), its operands in `layout`
/// (query, key, value and their gradients stored with `storedHeads` heads:
/// the heads of `sizes`, or under Bshd more, as head windows), key and
/// value `keyHeads` heads (the heads of `sizes`, or fewer for grouped-query
/// attention, and then they and their gradients store that many), validated
/// without a GPU for one of compute capability `smVersion` (90: Hopper):
/// the empty string where it is valid, else the frontend's reason. What the
/// tests check of the graphs where no GPU builds and runs them.
std::string validateCudnnAttention(DType dtype,
                                   const std::array<int64_t, 6> &sizes,
                                   bool causal, int64_t biasBatch,
                                   int64_t biasHeads, bool backward,
                                   int smVersion, AttentionLayout layout,
                                   int64_t storedHeads, int64_t keyHeads);

/// How many forwards and backwards ran through cuDNN in `ctx` so far: what
/// the conformance test checks to know that a case tested cuDNN's path.
int64_t getCudnnAttentionRuns(Context &ctx);

// Kernels of Attention.cu that the cuDNN path runs.

/// Writes the keep mask and the bias of an attention of geometry `g` as the
/// one additive bias cuDNN adds to the scaled scores: `out` [B or 1, H or
/// 1, T, S] (1 where neither mask varies along that dim) of the operands'
/// dtype, keep ? bias : maskedScore + bias, the masked score clamped to the
/// dtype's lowest finite value (as the scaled score it replaces is absorbed
/// by it, the same softmax).
void writeAttentionBias(Context &ctx, const AttentionGeometry &g,
                        const Tensor &keep, const Tensor &bias,
                        double maskedScore, const Tensor &out);

/// Queues a check that the keep mask [.., T, S] of one [T, S] plane still
/// is the causal one (key s kept for row t iff s <= t), as it was when the
/// attention chose cuDNN's causal mask for it; a difference is a kernel
/// error that the context's synchronize() throws.
void checkCausalKeep(Context &ctx, const Tensor &keep);

} // namespace slapo::rt::cuda

#endif // SLAPO_RUNTIME_CUDA_CUDNNATTENTION_H
