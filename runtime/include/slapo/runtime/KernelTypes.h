//===- KernelTypes.h - the kernels' argument types --------------*- C++ -*-===//
//
// The kinds and keys the kernels of KernelSet.inc take, shared by every
// backend so that one conformance test list can drive them all.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_KERNELTYPES_H
#define SLAPO_RUNTIME_KERNELTYPES_H

#include "slapo/runtime/Error.h"
#include "slapo/runtime/Shard.h"
#include "slapo/runtime/Tensor.h"

#include <cstdint>
#include <string>

namespace slapo::rt {

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

enum class CompareKind { Eq, Ne, Lt, Le, Gt, Ge };

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

/// How flashAttention's query, key and value [B, H, T, D] (its result and
/// their gradients alike) lie in memory: heads-major as the attention reads
/// them (Bhsd, each head's rows dense), or token-major as the projections
/// write them (Bshd, stored [B, T, H, D]: the heads of a token side by side),
/// where the permutes that split and merge heads would copy them.
enum class AttentionLayout { Bhsd, Bshd };

/// Heads [firstHead, firstHead + H) of `tensor` [B, T, Hs, D] as a head
/// window of flashAttention or flashAttentionGrad (AttentionGeometry.h):
/// `tensor`'s dtype and shape, its data advanced to element [0, 0, firstHead,
/// 0]. How generated code passes the query, key and value of one packed [B, T,
/// 3H, D] tensor (headWindow(x, 0), headWindow(x, H), headWindow(x, 2 * H)),
/// and their gradients into one. Throws unless `tensor` has rank 4 and
/// firstHead is one of its heads.
inline Tensor headWindow(const Tensor &tensor, int64_t firstHead) {
  if (tensor.getRank() != 4 || firstHead < 0 || firstHead >= tensor.shape[2])
    throw Error("no head window at head " + std::to_string(firstHead) +
                " of a tensor of " + tensor.shape.str() +
                ": a head window starts at a head of a [B, T, H, D] tensor");
  return Tensor(static_cast<char *>(tensor.data) +
                    firstHead * tensor.shape[3] * getSize(tensor.dtype),
                tensor.dtype, tensor.shape);
}

/// The dropout flashAttention applies to its probabilities [B, H, T, S]
/// (slapo.flash_attention's dropout_p): drawn as dropout() would draw it for
/// that tensor, with this key and placement. p = 0: none.
struct AttentionDropout {
  double p = 0;
  DropoutKey key = {};
  DropoutPlacement placement = {};
};

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

/// The window of a 2-d convolution or pooling over [N, C, H, W] tensors, as
/// the slapo ops' attributes of the same names: [height, width] each; the
/// padding is on both sides, and a convolution's kernel is its weight's.
struct Window2d {
  int64_t kernel[2];
  int64_t stride[2];
  int64_t padding[2];
  int64_t dilation[2];
};

enum class Reduction { None, Sum, Mean };

enum class ReduceKind { Sum, Mean, Max };

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_KERNELTYPES_H
