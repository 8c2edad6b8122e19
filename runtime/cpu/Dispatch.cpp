//===- Dispatch.cpp - the kernels of the loops' builds, by context --------===//
//
// The kernels that KernelVariant.h's builds define, under the names of the
// kernel set: each calls the build of the instruction set its context chose
// at start-up (Context::getPaths), one switch per kernel call.
//
//===----------------------------------------------------------------------===//
#include "KernelVariant.h"

#include "slapo/runtime/cpu/Kernels.h"

namespace slapo::rt::cpu {

/// Returns KERNEL(ctx, ...) of the build that ctx's kernels use.
#define SLAPO_CPU_DISPATCH(KERNEL, ...)                                        \
  switch (ctx.getPaths().kernels) {                                            \
  case KernelIsa::X86_64:                                                      \
    return x86_64::KERNEL(ctx, __VA_ARGS__);                                   \
  case KernelIsa::Avx2:                                                        \
    return avx2::KERNEL(ctx, __VA_ARGS__);                                     \
  case KernelIsa::Avx512:                                                      \
    return avx512::KERNEL(ctx, __VA_ARGS__);                                   \
  }

void fill(Context &ctx, const Tensor &out, double value) {
  SLAPO_CPU_DISPATCH(fill, out, value);
}

void arange(Context &ctx, const Tensor &out, double start, double step) {
  SLAPO_CPU_DISPATCH(arange, out, start, step);
}

void unary(Context &ctx, UnaryKind kind, const Tensor &input,
           const Tensor &out) {
  SLAPO_CPU_DISPATCH(unary, kind, input, out);
}

void cast(Context &ctx, const Tensor &input, const Tensor &out) {
  SLAPO_CPU_DISPATCH(cast, input, out);
}

void binary(Context &ctx, BinaryKind kind, const Tensor &lhs, const Tensor &rhs,
            const Tensor &out) {
  SLAPO_CPU_DISPATCH(binary, kind, lhs, rhs, out);
}

void compare(Context &ctx, CompareKind kind, const Tensor &lhs,
             const Tensor &rhs, const Tensor &out) {
  SLAPO_CPU_DISPATCH(compare, kind, lhs, rhs, out);
}

void where(Context &ctx, const Tensor &condition, const Tensor &onTrue,
           const Tensor &onFalse, const Tensor &out) {
  SLAPO_CPU_DISPATCH(where, condition, onTrue, onFalse, out);
}

void triangular(Context &ctx, const Tensor &input, const Tensor &out,
                bool lower, int64_t diagonal) {
  SLAPO_CPU_DISPATCH(triangular, input, out, lower, diagonal);
}

void dropout(Context &ctx, const Tensor &input, const Tensor &out, double p,
             const DropoutKey &key, const DropoutPlacement &placement) {
  SLAPO_CPU_DISPATCH(dropout, input, out, p, key, placement);
}

void embedding(Context &ctx, const Tensor &weight, const Tensor &indices,
               const Tensor &out) {
  SLAPO_CPU_DISPATCH(embedding, weight, indices, out);
}

void embeddingGrad(Context &ctx, const Tensor &grad, const Tensor &indices,
                   const Tensor &out, int64_t paddingIdx) {
  SLAPO_CPU_DISPATCH(embeddingGrad, grad, indices, out, paddingIdx);
}

void layerNorm(Context &ctx, const Tensor &input, const Tensor &weight,
               const Tensor &bias, const Tensor &out, int64_t normalizedRank,
               double eps) {
  SLAPO_CPU_DISPATCH(layerNorm, input, weight, bias, out, normalizedRank, eps);
}

void layerNormGrad(Context &ctx, const Tensor &grad, const Tensor &input,
                   const Tensor &weight, const Tensor &addend,
                   const Tensor &gradInput, const Tensor &gradWeight,
                   const Tensor &gradBias, int64_t normalizedRank, double eps) {
  SLAPO_CPU_DISPATCH(layerNormGrad, grad, input, weight, addend, gradInput,
                     gradWeight, gradBias, normalizedRank, eps);
}

void rmsNorm(Context &ctx, const Tensor &input, const Tensor &weight,
             const Tensor &out, double eps) {
  SLAPO_CPU_DISPATCH(rmsNorm, input, weight, out, eps);
}

void rmsNormGrad(Context &ctx, const Tensor &grad, const Tensor &input,
                 const Tensor &weight, const Tensor &addend,
                 const Tensor &gradInput, const Tensor &gradWeight,
                 double eps) {
  SLAPO_CPU_DISPATCH(rmsNormGrad, grad, input, weight, addend, gradInput,
                     gradWeight, eps);
}

void rotaryEmbedding(Context &ctx, const Tensor &input, const Tensor &cos,
                     const Tensor &sin, const Tensor &out, bool transposed) {
  SLAPO_CPU_DISPATCH(rotaryEmbedding, input, cos, sin, out, transposed);
}

void softmax(Context &ctx, const Tensor &input, const Tensor &out,
             int64_t dim) {
  SLAPO_CPU_DISPATCH(softmax, input, out, dim);
}

void logSoftmax(Context &ctx, const Tensor &input, const Tensor &out,
                int64_t dim) {
  SLAPO_CPU_DISPATCH(logSoftmax, input, out, dim);
}

void crossEntropy(Context &ctx, const Tensor &logits, const Tensor &target,
                  const Tensor &out, int64_t ignoreIndex, Reduction reduction) {
  SLAPO_CPU_DISPATCH(crossEntropy, logits, target, out, ignoreIndex, reduction);
}

void crossEntropyGrad(Context &ctx, const Tensor &logits, const Tensor &target,
                      const Tensor &rowWeight, const Tensor &out) {
  SLAPO_CPU_DISPATCH(crossEntropyGrad, logits, target, rowWeight, out);
}

void linearCrossEntropy(Context &ctx, const Tensor &hidden,
                        const Tensor &weight, const Tensor &target,
                        const Tensor &bias, const Tensor &loss,
                        const Tensor &gradHidden, const Tensor &gradWeight,
                        const Tensor &gradBias, const Tensor &workspace,
                        int64_t ignoreIndex, Reduction reduction) {
  SLAPO_CPU_DISPATCH(linearCrossEntropy, hidden, weight, target, bias, loss,
                     gradHidden, gradWeight, gradBias, workspace, ignoreIndex,
                     reduction);
}

void linearLogSumExp(Context &ctx, const Tensor &hidden, const Tensor &weight,
                     const Tensor &bias, const Tensor &logsumexp,
                     const Tensor &workspace) {
  SLAPO_CPU_DISPATCH(linearLogSumExp, hidden, weight, bias, logsumexp,
                     workspace);
}

void linearLogSumExpGrad(Context &ctx, const Tensor &hidden,
                         const Tensor &weight, const Tensor &bias,
                         const Tensor &logsumexp, const Tensor &grad,
                         const Tensor &gradHidden, const Tensor &gradWeight,
                         const Tensor &gradBias, const Tensor &workspace) {
  SLAPO_CPU_DISPATCH(linearLogSumExpGrad, hidden, weight, bias, logsumexp, grad,
                     gradHidden, gradWeight, gradBias, workspace);
}

void flashAttention(Context &ctx, const Tensor &query, const Tensor &key,
                    const Tensor &value, const Tensor &keep, const Tensor &bias,
                    const Tensor &out, const Tensor &logsumexp, double scale,
                    double maskedScore, AttentionLayout layout,
                    const AttentionDropout &dropout) {
  SLAPO_CPU_DISPATCH(flashAttention, query, key, value, keep, bias, out,
                     logsumexp, scale, maskedScore, layout, dropout);
}

void flashAttentionGrad(Context &ctx, const Tensor &query, const Tensor &key,
                        const Tensor &value, const Tensor &keep,
                        const Tensor &bias, const Tensor &out,
                        const Tensor &logsumexp, const Tensor &grad,
                        const Tensor &gradQuery, const Tensor &gradKey,
                        const Tensor &gradValue, double scale,
                        double maskedScore, AttentionLayout layout,
                        const AttentionDropout &dropout) {
  SLAPO_CPU_DISPATCH(flashAttentionGrad, query, key, value, keep, bias, out,
                     logsumexp, grad, gradQuery, gradKey, gradValue, scale,
                     maskedScore, layout, dropout);
}

void reduce(Context &ctx, ReduceKind kind, const Tensor &input,
            const Tensor &out, uint32_t dimMask) {
  SLAPO_CPU_DISPATCH(reduce, kind, input, out, dimMask);
}

void cumsum(Context &ctx, const Tensor &input, const Tensor &out, int64_t dim,
            bool reverse) {
  SLAPO_CPU_DISPATCH(cumsum, input, out, dim, reverse);
}

void sgdUpdate(Context &ctx, const Tensor &param, const Tensor &grad,
               const Tensor &gradScale, const Tensor &momentumBuffer,
               const Tensor &lr, double momentum, double weightDecay) {
  SLAPO_CPU_DISPATCH(sgdUpdate, param, grad, gradScale, momentumBuffer, lr,
                     momentum, weightDecay);
}

void adamwUpdate(Context &ctx, const Tensor &param, const Tensor &grad,
                 const Tensor &gradScale, const Tensor &expAvg,
                 const Tensor &expAvgSq, const Tensor &lr, int64_t step,
                 double beta1, double beta2, double eps, double weightDecay) {
  SLAPO_CPU_DISPATCH(adamwUpdate, param, grad, gradScale, expAvg, expAvgSq, lr,
                     step, beta1, beta2, eps, weightDecay);
}

} // namespace slapo::rt::cpu
