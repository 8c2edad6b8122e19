//===- Shard.cpp - a tensor-parallel parameter's part on each rank --------===//
#include "slapo/runtime/Shard.h"

#include "slapo/runtime/Error.h"

#include <cstring>
#include <string>

namespace slapo::rt {
namespace {

enum class Direction { GlobalToShard, ShardToGlobal };

/// The one loop both directions share: every run of contiguous bytes the
/// shard and the global tensor have in common, in the layout's order.
void copyShard(const Tensor &global, const Tensor &shard,
               const ShardLayout &layout, int64_t tpRank, Direction direction) {
  Shape shardShape = getShardShape(global.shape, layout);
  if (shard.shape != shardShape || shard.dtype != global.dtype)
    throw Error(std::string("a shard of ") + getName(global.dtype) +
                global.shape.str() + " on dim " + std::to_string(layout.axis) +
                " over " + std::to_string(layout.tp) + " tp ranks is " +
                getName(global.dtype) + shardShape.str() + ", not " +
                getName(shard.dtype) + shard.shape.str());
  if (tpRank < 0 || tpRank >= layout.tp)
    throw Error("tp rank " + std::to_string(tpRank) + " is not in [0, " +
                std::to_string(layout.tp) + ")");
  int64_t outer = 1;
  for (int d = 0; d < layout.axis; ++d)
    outer *= global.shape[d];
  size_t sliceBytes = getSize(global.dtype);
  for (int d = layout.axis + 1; d < global.getRank(); ++d)
    sliceBytes *= global.shape[d];
  int64_t globalSize = global.shape[layout.axis];
  int64_t shardSize = shardShape[layout.axis];
  int64_t chunkSize = globalSize / layout.chunks;
  int64_t partSize = chunkSize / layout.tp;
  auto *globalBytes = global.as<uint8_t>();
  auto *shardBytes = shard.as<uint8_t>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < layout.chunks; ++j) {
      uint8_t *inGlobal =
          globalBytes +
          (o * globalSize + j * chunkSize + tpRank * partSize) * sliceBytes;
      uint8_t *inShard =
          shardBytes + (o * shardSize + j * partSize) * sliceBytes;
      size_t bytes = partSize * sliceBytes;
      if (direction == Direction::GlobalToShard)
        std::memcpy(inShard, inGlobal, bytes);
      else
        std::memcpy(inGlobal, inShard, bytes);
    }
}

} // namespace

Shape getShardShape(const Shape &global, const ShardLayout &layout) {
  std::string what = "cannot shard " + global.str() + " on dim " +
                     std::to_string(layout.axis) + " in " +
                     std::to_string(layout.chunks) + " chunk(s) over " +
                     std::to_string(layout.tp) + " tp rank(s): ";
  if (layout.axis < 0 || layout.axis >= global.rank)
    throw Error(what + "there is no such dim");
  if (layout.chunks < 1 || layout.tp < 1)
    throw Error(what + "chunks and tp ranks must be positive");
  int64_t parts = layout.chunks * layout.tp;
  if (global[layout.axis] % parts != 0)
    throw Error(what + std::to_string(global[layout.axis]) +
                " is not a multiple of " + std::to_string(parts));
  Shape shard = global;
  shard.dims[layout.axis] /= layout.tp;
  return shard;
}

void sliceShard(const Tensor &global, const Tensor &shard,
                const ShardLayout &layout, int64_t tpRank) {
  copyShard(global, shard, layout, tpRank, Direction::GlobalToShard);
}

void assembleShard(const Tensor &shard, const Tensor &global,
                   const ShardLayout &layout, int64_t tpRank) {
  copyShard(global, shard, layout, tpRank, Direction::ShardToGlobal);
}

} // namespace slapo::rt
