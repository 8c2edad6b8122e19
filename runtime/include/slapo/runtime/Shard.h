//===- Shard.h - a tensor-parallel parameter's part per rank ----*- C++ -*-===//
//
// A parameter sharded over the tp ranks of the mesh is split along one dim,
// its axis, of size N: the dim is `chunks` equal chunks of c = N / chunks
// slices, each chunk split evenly over the tp ranks, and tp rank r holds, in
// chunk order, the slices [j*c + r*c/tp, j*c + (r+1)*c/tp) of every chunk
// j = 0..chunks-1. One chunk is a plain contiguous split; three are a fused
// q/k/v projection, so that every rank holds its heads of q, of k and of v.
//
// The compiler slices each rank's weights from the model this way and
// slapo-merge assembles the ranks' files back: both use the functions below.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_SHARD_H
#define SLAPO_RUNTIME_SHARD_H

#include "slapo/runtime/Tensor.h"

#include <cstdint>

namespace slapo::rt {

/// How a parameter is split over the tp ranks.
struct ShardLayout {
  int axis = 0;
  int64_t chunks = 1;
  int64_t tp = 1;
};

/// The shape of each tp rank's shard of a tensor of shape `global`: dim
/// `axis` divided by tp. Throws Error unless `axis` is a dim of `global`,
/// chunks and tp are positive and the dim's size is a multiple of
/// chunks * tp.
Shape getShardShape(const Shape &global, const ShardLayout &layout);

/// Copies tp rank `tpRank`'s shard of `global` into `shard`, which has
/// `global`'s dtype and the shape getShardShape(global.shape, layout).
void sliceShard(const Tensor &global, const Tensor &shard,
                const ShardLayout &layout, int64_t tpRank);

/// The inverse: copies `shard`, tp rank `tpRank`'s, into its place in
/// `global`. The shards of tp ranks 0..tp-1 together fill `global`.
void assembleShard(const Tensor &shard, const Tensor &global,
                   const ShardLayout &layout, int64_t tpRank);

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_SHARD_H
