#include "slapo/runtime/Random.h"

#include <catch2/catch.hpp>

#include <set>

using namespace slapo::rt;

TEST_CASE("splitmix64 is the reference SplitMix64 output", "[random]") {
  // The first two outputs of Vigna's splitmix64.c seeded with 0: the state
  // advances by the golden gamma before each output.
  CHECK(splitmix64(0) == 0xe220a8397b1dcdafull);
  CHECK(splitmix64(0x9e3779b97f4a7c15ull) == 0x6e789e6aa1b965f4ull);
}

TEST_CASE("randomBits chains splitmix64 over seed, stream and counter",
          "[random]") {
  for (uint64_t seed : {0ull, 1ull, 42ull})
    for (uint64_t stream : {0ull, 7ull})
      for (uint64_t counter : {0ull, 3ull, ~0ull})
        CHECK(randomBits(seed, stream, counter) ==
              splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ counter));
  // Nearby arguments give distinct values, in every position.
  std::set<uint64_t> seen;
  for (uint64_t a = 0; a < 8; ++a)
    for (uint64_t b = 0; b < 8; ++b)
      for (uint64_t c = 0; c < 8; ++c)
        seen.insert(randomBits(a, b, c));
  CHECK(seen.size() == 512);
}

TEST_CASE("uniform01 maps the 53 high bits into [0, 1)", "[random]") {
  CHECK(uniform01(0) == 0.0);
  CHECK(uniform01(1ull << 63) == 0.5);
  CHECK(uniform01(0x7ff) == 0.0); // the low 11 bits do not count
  CHECK(uniform01(~0ull) == 1.0 - 0x1.0p-53);
  double sum = 0;
  const int count = 100000;
  for (int i = 0; i < count; ++i) {
    double value = uniform01(randomBits(5, 1, i));
    REQUIRE(value >= 0.0);
    REQUIRE(value < 1.0);
    sum += value;
  }
  // The mean of n uniforms has standard deviation 1 / sqrt(12 n) ~ 0.0009.
  CHECK(sum / count == Approx(0.5).margin(0.005));
}

TEST_CASE("dropoutStream gives every step, op and rank stream its own stream",
          "[random]") {
  CHECK(dropoutStream(3, 1, 0) ==
        splitmix64(splitmix64(splitmix64(0x64726f706f7574ull ^ 3) ^ 1) ^ 0));
  std::set<uint64_t> seen;
  for (uint64_t step = 1; step <= 8; ++step)
    for (uint64_t stream = 0; stream < 8; ++stream)
      for (uint64_t rank = 0; rank < 4; ++rank) {
        uint64_t value = dropoutStream(step, stream, rank);
        // The data's streams are the step numbers themselves.
        CHECK(value > 1000000);
        seen.insert(value);
      }
  CHECK(seen.size() == 8 * 8 * 4);
}

TEST_CASE("keepsElement is uniform01(randomBits(...)) >= p in integers",
          "[random]") {
  // The threshold is exact at the edges: a uniform equal to p is kept.
  CHECK(dropoutThreshold(0.0) == 0);
  CHECK(dropoutThreshold(-0.5) == 0);
  CHECK(dropoutThreshold(1.0) == 1ull << 53);
  CHECK(dropoutThreshold(0.5) == 1ull << 52);
  CHECK(dropoutThreshold(0x1.0p-53) == 1);
  CHECK(dropoutThreshold(0x1.8p-53) == 2); // 1.5 rounds up
  for (double p : {0.0, 0.1, 1.0 / 3.0, 0.5, 0.9, 1.0}) {
    uint64_t key = dropoutKey(/*seed=*/42, /*step=*/3, /*opStream=*/2,
                              /*rankStream=*/1);
    uint64_t stream = dropoutStream(3, 2, 1);
    int64_t kept = 0;
    for (uint64_t counter = 0; counter < 20000; ++counter) {
      bool reference = uniform01(randomBits(42, stream, counter)) >= p;
      bool keep = keepsElement(key, counter, dropoutThreshold(p));
      REQUIRE(keep == reference);
      kept += keep;
    }
    CHECK(kept / 20000.0 == Approx(1.0 - p).margin(0.02));
  }
}
