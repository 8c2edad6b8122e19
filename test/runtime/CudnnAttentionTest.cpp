// The graphs of cuDNN's fused attention (runtime/cuda/CudnnAttention.cpp) as
// cuDNN's frontend validates them for a Hopper GPU, which needs no GPU: the
// shapes, layouts, masks, statistics and grouped key and value heads the
// runtime asks for are ones the frontend accepts, and a head size it does
// not take is refused with its reason (the runtime then runs its own
// kernel). Building the plans and running them needs a GPU: the conformance
// test does that on one (test/gpu/run.sh).
#include "CudnnAttention.h"

#include <catch2/catch.hpp>

#include <array>
#include <string>

using namespace slapo::rt;

namespace {

struct GraphCase {
  const char *name;
  DType dtype;
  std::array<int64_t, 6> sizes; // batch, heads, rows, keys, head and value size
  bool causal;
  int64_t biasBatch, biasHeads; // 0: no bias
};

/// A GraphCase whose key and value have `keyHeads` heads, fewer than the
/// query's (grouped-query attention).
struct GroupedCase {
  GraphCase graph;
  int64_t keyHeads;
};

constexpr int kHopper = 90;

} // namespace

TEST_CASE("cuDNN's frontend accepts the attention graphs for Hopper",
          "[cudnn]") {
  const GraphCase kCases[] = {
      {"GPT-2 small, causal",
       DType::BF16,
       {16, 12, 1024, 1024, 64, 64},
       true,
       0,
       0},
      {"the test GPT-2, causal",
       DType::BF16,
       {8, 2, 32, 32, 16, 16},
       true,
       0,
       0},
      {"odd lengths, causal", DType::BF16, {2, 3, 37, 37, 64, 64}, true, 0, 0},
      {"padding bias, more keys than rows",
       DType::BF16,
       {2, 2, 19, 45, 64, 64},
       false,
       2,
       1},
      {"causal and padding bias, f16",
       DType::F16,
       {2, 2, 45, 45, 64, 64},
       true,
       2,
       1},
      {"a full keep mask as a bias",
       DType::BF16,
       {1, 2, 17, 17, 64, 64},
       false,
       1,
       2},
      {"head size 128", DType::BF16, {1, 2, 129, 129, 128, 128}, true, 0, 0},
      {"value size other than head size",
       DType::BF16,
       {2, 2, 19, 45, 16, 40},
       false,
       2,
       1},
  };
  // Each heads-major, token-major (strided q, k, v, o and gradients: what
  // slapo-fold-permutes makes of GPT-2's attention), and token-major with
  // q, k, v and their gradients head windows of tensors of 3H heads (GPT-2's
  // packed projection read in place).
  struct Storage {
    const char *name;
    AttentionLayout layout;
    int64_t operandsPerTensor; // whose heads a stored tensor holds
  };
  const Storage kStorages[] = {{"", AttentionLayout::Bhsd, 1},
                               {", token-major", AttentionLayout::Bshd, 1},
                               {", head windows", AttentionLayout::Bshd, 3}};
  for (const GraphCase &c : kCases)
    for (const Storage &storage : kStorages)
      for (bool backward : {false, true}) {
        INFO(c.name << storage.name << (backward ? ", backward" : ", forward"));
        CHECK(cuda::validateCudnnAttention(
                  c.dtype, c.sizes, c.causal, c.biasBatch, c.biasHeads,
                  backward, kHopper, storage.layout,
                  storage.operandsPerTensor * c.sizes[1], c.sizes[1]) == "");
      }
}

TEST_CASE("cuDNN's frontend accepts grouped-query attention graphs for Hopper",
          "[cudnn]") {
  const GroupedCase kCases[] = {
      {{"4 query heads on 2, causal",
        DType::BF16,
        {2, 4, 37, 37, 64, 64},
        true,
        0,
        0},
       2},
      {{"4 query heads on 1 (multi-query), causal",
        DType::BF16,
        {2, 4, 37, 37, 64, 64},
        true,
        0,
        0},
       1},
      {{"4 query heads on 2, padding bias",
        DType::BF16,
        {2, 4, 19, 45, 64, 64},
        false,
        2,
        1},
       2},
      {{"4 query heads on 1, a full keep mask as a bias",
        DType::BF16,
        {1, 4, 17, 17, 64, 64},
        false,
        1,
        4},
       1},
      {{"Qwen2-0.5B's 14 query heads on 2, causal",
        DType::BF16,
        {2, 14, 512, 512, 64, 64},
        true,
        0,
        0},
       2},
      {{"Mistral 7B's 32 query heads on 8, causal",
        DType::BF16,
        {1, 32, 1024, 1024, 128, 128},
        true,
        0,
        0},
       8},
  };
  for (const GroupedCase &grouped : kCases)
    for (AttentionLayout layout :
         {AttentionLayout::Bhsd, AttentionLayout::Bshd})
      for (bool backward : {false, true}) {
        const GraphCase &c = grouped.graph;
        INFO(c.name << (layout == AttentionLayout::Bshd ? ", token-major" : "")
                    << (backward ? ", backward" : ", forward"));
        CHECK(cuda::validateCudnnAttention(c.dtype, c.sizes, c.causal,
                                           c.biasBatch, c.biasHeads, backward,
                                           kHopper, layout, c.sizes[1],
                                           grouped.keyHeads) == "");
      }
}

TEST_CASE("cuDNN's frontend sees grouped key and value heads: it refuses "
          "3 for 4 query heads",
          "[cudnn]") {
  // No attention the runtime checks has them (checkAttentionHeads): what
  // this shows is that the graphs' key and value have the key heads.
  for (AttentionLayout layout : {AttentionLayout::Bhsd, AttentionLayout::Bshd})
    for (bool backward : {false, true})
      CHECK_THAT(cuda::validateCudnnAttention(
                     DType::BF16, {2, 4, 37, 37, 64, 64}, true, 0, 0, backward,
                     kHopper, layout, 4, 3),
                 Catch::Contains("group-query attention"));
}

TEST_CASE("cuDNN's frontend refuses a head size that is not a multiple of 8",
          "[cudnn]") {
  for (bool backward : {false, true})
    CHECK_THAT(cuda::validateCudnnAttention(DType::BF16, {1, 2, 17, 17, 12, 12},
                                            false, 0, 0, backward, kHopper,
                                            AttentionLayout::Bhsd, 2, 2),
               Catch::Contains("multiple of 8"));
}
