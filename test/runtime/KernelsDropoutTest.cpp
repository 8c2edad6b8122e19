// The dropout kernel against its definition: element e of the whole tensor
// is kept, scaled by 1 / (1 - p), iff uniform01(randomBits(seed,
// dropoutStream(step, stream, rankStream), e)) >= p.
#include "slapo/runtime/cpu/Kernels.h"
#include "slapo/runtime/Random.h"
#include "slapo/runtime/Shard.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

using namespace slapo::rt;
using namespace slapo::rt::cpu;

namespace {

/// `input` after dropout(p, key, placement); `shape` is the operand's.
std::vector<float> drop(Context &ctx, const std::vector<float> &input,
                        Shape shape, double p, const DropoutKey &key,
                        const DropoutPlacement &placement = {}) {
  std::vector<float> in = input, out(input.size(), -1.0f);
  dropout(ctx, Tensor(in.data(), DType::F32, shape),
          Tensor(out.data(), DType::F32, shape), p, key, placement);
  return out;
}

std::vector<float> ramp(int64_t count) {
  std::vector<float> values(count);
  for (int64_t i = 0; i < count; ++i)
    values[i] = 1.0f + 0.001f * static_cast<float>(i % 1000);
  return values;
}

} // namespace

TEST_CASE("dropout keeps 1 - p of the elements, scaled by 1 / (1 - p)",
          "[dropout]") {
  Context ctx(2);
  const int64_t count = 100000;
  std::vector<float> input = ramp(count);
  for (double p : {0.1, 0.5, 0.9}) {
    DropoutKey key{/*seed=*/7, /*step=*/3, /*stream=*/2, /*rankStream=*/0};
    std::vector<float> out = drop(ctx, input, {count}, p, key);
    auto scale = static_cast<float>(1.0 / (1.0 - p));
    uint64_t stream = dropoutStream(3, 2, 0);
    int64_t kept = 0;
    for (int64_t i = 0; i < count; ++i) {
      bool keep = uniform01(randomBits(7, stream, i)) >= p;
      REQUIRE(out[i] == (keep ? input[i] * scale : 0.0f));
      kept += keep;
    }
    // The kept count is binomial: its standard deviation is at most
    // sqrt(count) / 2 ~ 158, and 0.01 * count is over six of them.
    INFO("p = " << p);
    CHECK(static_cast<double>(kept) / count == Approx(1.0 - p).margin(0.01));
  }
}

TEST_CASE("dropout masks depend on the key alone", "[dropout]") {
  Context ctx(2);
  const int64_t count = 4096;
  std::vector<float> input(count, 1.0f);
  DropoutKey key{1, 5, 3, 0};
  std::vector<float> first = drop(ctx, input, {count}, 0.5, key);
  CHECK(drop(ctx, input, {count}, 0.5, key) == first);
  // With one thread the mask is the same: it is a function of the element.
  Context serial(1);
  CHECK(drop(serial, input, {count}, 0.5, key) == first);
  for (DropoutKey other : {DropoutKey{2, 5, 3, 0}, DropoutKey{1, 6, 3, 0},
                           DropoutKey{1, 5, 4, 0}, DropoutKey{1, 5, 3, 1}}) {
    std::vector<float> out = drop(ctx, input, {count}, 0.5, other);
    int64_t differing = 0;
    for (int64_t i = 0; i < count; ++i)
      differing += (out[i] == 0) != (first[i] == 0);
    // Two independent masks of p = 0.5 differ in half the elements.
    CHECK(static_cast<double>(differing) / count == Approx(0.5).margin(0.05));
  }
}

TEST_CASE("the gradient of a dropout is the same dropout of the gradient",
          "[dropout]") {
  Context ctx(2);
  const int64_t count = 1000;
  std::vector<float> x = ramp(count), grad(count);
  for (int64_t i = 0; i < count; ++i)
    grad[i] = std::sin(static_cast<float>(i));
  DropoutKey key{11, 2, 9, 0};
  std::vector<float> y = drop(ctx, x, {count}, 0.3, key);
  std::vector<float> dx = drop(ctx, grad, {count}, 0.3, key);
  auto scale = static_cast<float>(1.0 / 0.7);
  for (int64_t i = 0; i < count; ++i) {
    // d(y_i)/d(x_i) is scale where y kept x, else 0.
    bool kept = y[i] != 0;
    REQUIRE(dx[i] == (kept ? grad[i] * scale : 0.0f));
  }
}

TEST_CASE("dropout of NaN stays NaN where dropped, as PyTorch's mask does",
          "[dropout]") {
  Context ctx(1);
  std::vector<float> input(64, std::nanf(""));
  for (float value : drop(ctx, input, {64}, 0.5, {0, 1, 0, 0}))
    CHECK(std::isnan(value));
}

TEST_CASE("ranks draw their part of the whole tensor's mask", "[dropout]") {
  Context ctx(2);
  // The whole tensor [4, 6, 3]: dim 0 is the batch, dim 1 is split over
  // tp = 2 in 3 chunks (a fused q/k/v projection's layout).
  Shape wholeShape{4, 6, 3};
  std::vector<float> whole = ramp(wholeShape.getNumElements());
  DropoutKey key{3, 4, 1, 0};
  std::vector<float> expected = drop(ctx, whole, wholeShape, 0.5, key);
  Tensor expectedTensor(expected.data(), DType::F32, wholeShape);
  Tensor wholeTensor(whole.data(), DType::F32, wholeShape);
  ShardLayout layout{/*axis=*/1, /*chunks=*/3, /*tp=*/2};
  Shape shardShape = getShardShape(wholeShape, layout);
  for (int64_t tpRank = 0; tpRank < 2; ++tpRank) {
    std::vector<float> shard(shardShape.getNumElements()),
        shardExpected(shard.size());
    sliceShard(wholeTensor, Tensor(shard.data(), DType::F32, shardShape),
               layout, tpRank);
    sliceShard(expectedTensor,
               Tensor(shardExpected.data(), DType::F32, shardShape), layout,
               tpRank);
    INFO("tp rank " << tpRank);
    CHECK(drop(ctx, shard, shardShape, 0.5, key, {0, layout, tpRank}) ==
          shardExpected);
  }
  // Data-parallel ranks hold consecutive blocks of the batch (dim 0).
  int64_t half = wholeShape.getNumElements() / 2;
  for (int64_t dpRank = 0; dpRank < 2; ++dpRank) {
    std::vector<float> rows(whole.begin() + dpRank * half,
                            whole.begin() + (dpRank + 1) * half);
    std::vector<float> rowsExpected(expected.begin() + dpRank * half,
                                    expected.begin() + (dpRank + 1) * half);
    INFO("dp rank " << dpRank);
    CHECK(drop(ctx, rows, {2, 6, 3}, 0.5, key, {dpRank}) == rowsExpected);
  }
  // Both at once: dp rank 1's rows, tp rank 1's shard of them.
  Shape rowsShape{2, 6, 3};
  Tensor rowsExpected(expected.data() + half, DType::F32, rowsShape);
  Tensor rows(whole.data() + half, DType::F32, rowsShape);
  Shape partShape = getShardShape(rowsShape, layout);
  std::vector<float> part(partShape.getNumElements()),
      partExpected(part.size());
  sliceShard(rows, Tensor(part.data(), DType::F32, partShape), layout, 1);
  sliceShard(rowsExpected, Tensor(partExpected.data(), DType::F32, partShape),
             layout, 1);
  CHECK(drop(ctx, part, partShape, 0.5, key, {1, layout, 1}) == partExpected);
}

TEST_CASE("dropout computes bf16 in f32 and rounds once", "[dropout]") {
  Context ctx(1);
  std::vector<BFloat16> in(256), out(256);
  for (int i = 0; i < 256; ++i)
    in[i] = BFloat16::fromFloat(1.0f + i / 256.0f);
  DropoutKey key{5, 1, 0, 0};
  dropout(ctx, Tensor(in.data(), DType::BF16, {256}),
          Tensor(out.data(), DType::BF16, {256}), 0.25, key, {});
  uint64_t stream = dropoutStream(1, 0, 0);
  auto scale = static_cast<float>(1.0 / 0.75);
  for (int i = 0; i < 256; ++i) {
    bool keep = uniform01(randomBits(5, stream, i)) >= 0.25;
    REQUIRE(
        out[i].toFloat() ==
        BFloat16::fromFloat(keep ? in[i].toFloat() * scale : 0.0f).toFloat());
  }
}
