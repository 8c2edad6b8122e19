// The graphs of cuDNN's fused attention (runtime/cuda/CudnnAttention.cpp) as
// cuDNN's frontend validates them for a Hopper GPU, which needs no GPU: the
// shapes, layouts, masks and statistics the runtime asks for are ones the
// frontend accepts, and a head size it does not take is refused with its
// reason (the runtime then runs its own kernel). Building the plans and
// running them needs a GPU: the conformance test does that on one
// (test/gpu/run.sh).
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
                  storage.operandsPerTensor * c.sizes[1]) == "");
      }
}

TEST_CASE("cuDNN's frontend refuses a head size that is not a multiple of 8",
          "[cudnn]") {
  for (bool backward : {false, true})
    CHECK_THAT(cuda::validateCudnnAttention(DType::BF16, {1, 2, 17, 17, 12, 12},
                                            false, 0, 0, backward, kHopper,
                                            AttentionLayout::Bhsd, 2),
               Catch::Contains("multiple of 8"));
}
