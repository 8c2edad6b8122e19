//===- Kernels.h - the CPU kernels generated code calls ----------*- C++
//-*-===//
//
// One kernel per slapo op family, with the op's meaning (dialects/include/
// slapo/Dialect/SlapoOps.td): shapes are static and already checked by the
// compiler, so kernels trust them. Every tensor is contiguous and row-major;
// outputs never alias inputs unless a kernel says so. Elementwise kernels
// broadcast like PyTorch (trailing dims aligned, size-1 dims stretched).
// Floating-point math is done in the element type, except that bf16 is
// computed in f32 and rounded once, and reductions accumulate in f32 (f64
// for f64), as PyTorch's CPU kernels do.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_KERNELS_H
#define SLAPO_RUNTIME_KERNELS_H

#include "slapo/runtime/Context.h"
#include "slapo/runtime/Shard.h"
#include "slapo/runtime/Tensor.h"

#include <cstdint>

namespace slapo::rt::cpu {

// Constants and generators.
/// Every element of `out` set to `value` (converted to out's dtype).
void fill(Context &ctx, const Tensor &out, double value);
/// `out` filled from `data`, `out.getBytes()` bytes of its dtype.
void copyFrom(Context &ctx, const Tensor &out, const void *data);
/// out[i] = start + i * step.
void arange(Context &ctx, const Tensor &out, double start, double step);

// Elementwise.
enum class UnaryKind {
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Tanh,
  Sigmoid,
  Relu,
  Silu,
  Sin,
  Cos,
  GeluErf,
  GeluTanh,
};
void unary(Context &ctx, UnaryKind kind, const Tensor &input,
           const Tensor &out);
/// Converts element types (same shape); float to integer truncates, to bool
/// is `!= 0`, as in PyTorch.
void cast(Context &ctx, const Tensor &input, const Tensor &out);

/// GeluErfGrad and GeluTanhGrad are lhs * gelu'(rhs), the gradient of gelu
/// (lhs the result's gradient, rhs gelu's input), float dtypes only.
enum class BinaryKind {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Maximum,
  Minimum,
  GeluErfGrad,
  GeluTanhGrad,
};
/// lhs, rhs and out have one dtype; integer Div truncates toward zero.
void binary(Context &ctx, BinaryKind kind, const Tensor &lhs, const Tensor &rhs,
            const Tensor &out);

enum class CompareKind { Eq, Ne, Lt, Le, Gt, Ge };
/// `out` is Bool; lhs and rhs have one dtype.
void compare(Context &ctx, CompareKind kind, const Tensor &lhs,
             const Tensor &rhs, const Tensor &out);
/// out = condition ? onTrue : onFalse, all three broadcast.
void where(Context &ctx, const Tensor &condition, const Tensor &onTrue,
           const Tensor &onFalse, const Tensor &out);
/// Keeps the lower (j - i <= diagonal) or upper (j - i >= diagonal) triangle
/// of the last two dims, zeroing the rest.
void triangular(Context &ctx, const Tensor &input, const Tensor &out,
                bool lower, int64_t diagonal);

/// What a dropout's mask is drawn from (slapo.dropout): train(seed=), the
/// 1-based step, the op's stream, and the rank stream (0 where the tp ranks
/// share masks, the tp rank inside fork_rng()).
struct DropoutKey {
  uint64_t seed;
  int64_t step;
  int64_t stream;
  int64_t rankStream;
};

/// Which elements of the whole tensor (the value one device computes for the
/// global batch) a rank's operand holds: block `dpRank` of its dim 0 and, for
/// a tensor-parallel split (shard.tp > 1), tp rank `tpRank`'s part of dim
/// shard.axis as Shard.h lays it out. The default is the whole tensor.
struct DropoutPlacement {
  int64_t dpRank = 0;
  ShardLayout shard;
  int64_t tpRank = 0;
};

/// Training-mode dropout: out = input * keep / (1 - p), where element e of
/// the whole tensor is kept iff uniform01(randomBits(key.seed,
/// dropoutStream(key.step, key.stream, key.rankStream), e)) >= p (Random.h).
/// Equal keys and placements give equal masks, so the backward applies the
/// forward's mask to the gradient without storing it. Float dtypes.
void dropout(Context &ctx, const Tensor &input, const Tensor &out, double p,
             const DropoutKey &key, const DropoutPlacement &placement);

// Contractions and neural-network ops (float dtypes: f32, bf16). The
// contractions' out may be f32 for bf16 operands: mixed precision, the sums
// accumulated and kept in f32.
/// out[..., N] = input[..., K] * weight[N, K]^T + bias[N]; `bias` may be
/// null. Runs as one oneDNN matmul primitive, created once per shape.
void linear(Context &ctx, const Tensor &input, const Tensor &weight,
            const Tensor &bias, const Tensor &out);
/// Permutations the product reads its operands and writes its result
/// through, as slapo.matmul's attributes of the same names: the product
/// reads permute(lhs, lhs) and permute(rhs, rhs) and writes permute(product,
/// result) to out, with no copy. Null is no permutation; each has the rank
/// of its tensor.
struct MatmulPermutations {
  const int64_t *lhs = nullptr;
  const int64_t *rhs = nullptr;
  const int64_t *result = nullptr;
};
/// out[..., M, N] = lhs[..., M, K] * rhs[..., K, N], with the shapes those of
/// the operands and product as `permutations` permute them; batch dims
/// broadcast; rank-1 operands as in torch.matmul are not used by the
/// compiler.
void matmul(Context &ctx, const Tensor &lhs, const Tensor &rhs,
            const Tensor &out, const MatmulPermutations &permutations = {});
/// out[..., D] = weight[indices[...], :]; indices are I64 or I32 and must be
/// in [0, V) (an index outside throws Error naming it).
void embedding(Context &ctx, const Tensor &weight, const Tensor &indices,
               const Tensor &out);
/// out[v] = the sum of the rows of grad[..., D] whose index is v, zero for
/// v == paddingIdx (pass -1 for none): an embedding's weight gradient.
void embeddingGrad(Context &ctx, const Tensor &grad, const Tensor &indices,
                   const Tensor &out, int64_t paddingIdx);
/// Normalizes over the trailing `normalizedRank` dims with biased variance;
/// `weight` and `bias` may be null.
void layerNorm(Context &ctx, const Tensor &input, const Tensor &weight,
               const Tensor &bias, const Tensor &out, int64_t normalizedRank,
               double eps);
void softmax(Context &ctx, const Tensor &input, const Tensor &out, int64_t dim);
void logSoftmax(Context &ctx, const Tensor &input, const Tensor &out,
                int64_t dim);
enum class Reduction { None, Sum, Mean };
/// Cross entropy of logits[N, C] against target[N] (I64); targets equal to
/// `ignoreIndex` count nothing, Mean divides by the targets not ignored
/// (0/0 gives NaN, as PyTorch). `out` is [N] for None, else 0-d.
void crossEntropy(Context &ctx, const Tensor &logits, const Tensor &target,
                  const Tensor &out, int64_t ignoreIndex, Reduction reduction);
/// out[n, c] = (softmax(logits[n])[c] - (c == target[n])) * rowWeight[n]:
/// cross entropy's gradient with respect to logits[N, C] (target I64 or I32;
/// one outside [0, C), an ignored one, matches no class).
void crossEntropyGrad(Context &ctx, const Tensor &logits, const Tensor &target,
                      const Tensor &rowWeight, const Tensor &out);

// Reductions.
enum class ReduceKind { Sum, Mean, Max };
/// Reduces `input` over the dims whose bit is set in `dimMask` (bit d for
/// dim d); `out` has the input's shape with those dims removed (or kept as
/// size 1: the layout is the same).
void reduce(Context &ctx, ReduceKind kind, const Tensor &input,
            const Tensor &out, uint32_t dimMask);

// Data movement.
/// out dim i is input dim permutation[i].
void permute(Context &ctx, const Tensor &input, const Tensor &out,
             const int64_t *permutation);
/// out = input[start : start + out.shape[dim] * step : step] along dim.
void slice(Context &ctx, const Tensor &input, const Tensor &out, int64_t dim,
           int64_t start, int64_t step);
/// Joins `count` tensors along dim.
void concat(Context &ctx, const Tensor *inputs, int count, const Tensor &out,
            int64_t dim);
/// Expands size-1 and missing leading dims of `input` to out's shape.
void broadcast(Context &ctx, const Tensor &input, const Tensor &out);
/// Copies `input` into `out`, which has as many elements of one dtype.
void copy(Context &ctx, const Tensor &input, const Tensor &out);

// Optimizer updates, in place on `param` and its state, with PyTorch's
// formulas (torch.optim.SGD without dampening or nesterov, torch.optim.AdamW).
// `lr` is a 0-d F64 tensor; `step` (AdamW) is the 1-based step number.
/// g = grad + weightDecay * param; buf = momentum * buf + g (if
/// `momentumBuffer` is not null); param -= lr * (buf or g).
void sgdUpdate(Context &ctx, const Tensor &param, const Tensor &grad,
               const Tensor &momentumBuffer, const Tensor &lr, double momentum,
               double weightDecay);
/// param *= 1 - lr * weightDecay; m = b1 m + (1 - b1) g;
/// v = b2 v + (1 - b2) g^2; param -= lr / (1 - b1^t) * m /
/// (sqrt(v) / sqrt(1 - b2^t) + eps).
void adamwUpdate(Context &ctx, const Tensor &param, const Tensor &grad,
                 const Tensor &expAvg, const Tensor &expAvgSq, const Tensor &lr,
                 int64_t step, double beta1, double beta2, double eps,
                 double weightDecay);

} // namespace slapo::rt::cpu

#endif // SLAPO_RUNTIME_KERNELS_H
