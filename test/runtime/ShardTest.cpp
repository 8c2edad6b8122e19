#include "slapo/runtime/Shard.h"
#include "slapo/runtime/Error.h"

#include <catch2/catch.hpp>

#include <vector>

using namespace slapo::rt;
using Catch::Contains;

namespace {

/// The index along the sharded dim, of size `size`, of the global element
/// that element `local` of tp rank `tpRank`'s shard is, by the layout's
/// definition: the dim is `chunks` chunks of c = size / chunks, and the rank
/// holds [j*c + r*c/tp, j*c + (r+1)*c/tp) of every chunk j, in chunk order.
int64_t globalIndex(int64_t local, int64_t size, int64_t chunks, int64_t tp,
                    int64_t tpRank) {
  int64_t chunk = size / chunks, part = chunk / tp;
  return local / part * chunk + tpRank * part + local % part;
}

} // namespace

TEST_CASE("a 2-d tensor's shards are its elements the layout gives, and "
          "assemble back into it",
          "[shard]") {
  int axis = GENERATE(0, 1);
  int64_t chunks = GENERATE(1, 3);
  int64_t tp = GENERATE(2, 4);
  CAPTURE(axis, chunks, tp);
  // The sharded dim has 24 elements (a multiple of chunks * tp), the other
  // 5; element (i, j) is 100 * i + j.
  Shape shape = axis == 0 ? Shape{24, 5} : Shape{5, 24};
  std::vector<float> values(shape.getNumElements());
  for (int64_t i = 0; i < shape[0]; ++i)
    for (int64_t j = 0; j < shape[1]; ++j)
      values[i * shape[1] + j] = 100 * i + j;
  Tensor global(values.data(), DType::F32, shape);
  ShardLayout layout{axis, chunks, tp};
  Shape shardShape = getShardShape(shape, layout);
  CHECK(shardShape == (axis == 0 ? Shape{24 / tp, 5} : Shape{5, 24 / tp}));

  std::vector<float> assembled(values.size(), -1);
  Tensor target(assembled.data(), DType::F32, shape);
  for (int64_t rank = 0; rank < tp; ++rank) {
    CAPTURE(rank);
    std::vector<float> shardValues(shardShape.getNumElements());
    Tensor shard(shardValues.data(), DType::F32, shardShape);
    sliceShard(global, shard, layout, rank);
    for (int64_t i = 0; i < shardShape[0]; ++i)
      for (int64_t j = 0; j < shardShape[1]; ++j) {
        int64_t gi = axis == 0 ? globalIndex(i, 24, chunks, tp, rank) : i;
        int64_t gj = axis == 1 ? globalIndex(j, 24, chunks, tp, rank) : j;
        CAPTURE(i, j);
        REQUIRE(shardValues[i * shardShape[1] + j] == 100 * gi + gj);
      }
    assembleShard(shard, target, layout, rank);
  }
  // The ranks' shards fill every element, each with its own.
  CHECK(assembled == values);
}

TEST_CASE("a shard of a middle dim keeps the dims around it", "[shard]") {
  // [2, 6, 3] of I64 on dim 1 in 3 chunks over 2 ranks: rank 1 holds indices
  // 1, 3, 5 of dim 1.
  std::vector<int64_t> values(36);
  for (int64_t i = 0; i < 36; ++i)
    values[i] = i;
  Tensor global(values.data(), DType::I64, {2, 6, 3});
  ShardLayout layout{1, 3, 2};
  std::vector<int64_t> shardValues(18, -1);
  Tensor shard(shardValues.data(), DType::I64, {2, 3, 3});
  sliceShard(global, shard, layout, 1);
  std::vector<int64_t> expected;
  for (int64_t i : {0, 1})
    for (int64_t k : {1, 3, 5})
      for (int64_t j : {0, 1, 2})
        expected.push_back(i * 18 + k * 3 + j);
  CHECK(shardValues == expected);

  std::vector<int64_t> assembled(36, -1);
  assembleShard(shard, Tensor(assembled.data(), DType::I64, {2, 6, 3}), layout,
                1);
  for (int64_t i = 0; i < 36; ++i)
    CHECK(assembled[i] == (i / 3 % 2 == 1 ? i : -1));
}

TEST_CASE("a shard that does not fit its tensor is refused", "[shard]") {
  CHECK_THROWS_WITH(getShardShape({32, 16}, {0, 3, 2}),
                    "cannot shard [32, 16] on dim 0 in 3 chunk(s) over 2 tp "
                    "rank(s): 32 is not a multiple of 6");
  CHECK_THROWS_WITH(getShardShape({32, 16}, {2, 1, 2}),
                    Contains("on dim 2") && Contains("there is no such dim"));
  CHECK_THROWS_WITH(getShardShape({32, 16}, {0, 0, 2}),
                    Contains("chunks and tp ranks must be positive"));

  float values[8] = {};
  Tensor global(values, DType::F32, {4, 2});
  float shardValues[4] = {};
  CHECK_THROWS_WITH(
      sliceShard(global, Tensor(shardValues, DType::F32, {4, 1}), {0, 1, 2}, 0),
      "a shard of F32[4, 2] on dim 0 over 2 tp ranks is F32[2, 2], not "
      "F32[4, 1]");
  CHECK_THROWS_WITH(
      sliceShard(global, Tensor(shardValues, DType::F32, {2, 2}), {0, 1, 2}, 2),
      "tp rank 2 is not in [0, 2)");
}
