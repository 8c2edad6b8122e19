//===- ScheduleSuggestionsTest.cpp - "did you mean" -----------------------===//
#include "slapo/Schedule/Suggestions.h"

#include <catch2/catch.hpp>

namespace {

using namespace slapo::schedule;

TEST_CASE("boundedEditDistance is exact up to its limit", "[schedule]") {
  CHECK(boundedEditDistance("shard", "shard", 3) == 0);
  CHECK(boundedEditDistance("shrad", "shard", 3) == 2);
  CHECK(boundedEditDistance("lr", "lrr", 3) == 1);
  CHECK(boundedEditDistance("", "abc", 5) == 3);
  CHECK(boundedEditDistance("abc", "xyz", 1) > 1);
  CHECK(boundedEditDistance("a", "b", 0) > 0);
  CHECK(boundedEditDistance("a", "a", 0) == 0);
  // A huge string against a short one gives up at once.
  std::string huge(1 << 20, 'x');
  CHECK(boundedEditDistance(huge, "shard", 4) > 4);
  CHECK(boundedEditDistance("shard", huge, 4) > 4);
}

TEST_CASE("findClosestName suggests likely typos only", "[schedule]") {
  llvm::SmallVector<llvm::StringRef> names = {"dp", "tp", "pp"};
  CHECK(findClosestName("pq", names) == llvm::StringRef("pp"));
  CHECK_FALSE(findClosestName("xy", names));

  llvm::SmallVector<llvm::StringRef> dtypes = {"f32", "f64", "i64", "i32"};
  // Two edits: a swapped pair.
  CHECK(findClosestName("f23", dtypes) == llvm::StringRef("f32"));
  CHECK(findClosestName("int64", dtypes) == llvm::StringRef("i64"));
  // Ties go to the first candidate.
  CHECK(findClosestName("f16", dtypes) == llvm::StringRef("f32"));

  llvm::SmallVector<llvm::StringRef> kernels = {"flash_attention",
                                                "fused_layer_norm"};
  CHECK(findClosestName("flash_attn", kernels) ==
        llvm::StringRef("flash_attention"));
  CHECK_FALSE(findClosestName("attention", kernels));
  // An abbreviation of two candidates suggests neither.
  llvm::SmallVector<llvm::StringRef> modes = {"fwd_pre", "fwd_post"};
  CHECK_FALSE(findClosestName("fwd", modes));
  CHECK_FALSE(findClosestName("x", {}));
}

TEST_CASE("describeUnknownName lists the valid names", "[schedule]") {
  llvm::SmallVector<llvm::StringRef> names = {"sgd", "adamw"};
  CHECK(describeUnknownName("bad", "adam", names, Spelling::String) ==
        "bad; did you mean \"adamw\"? (valid: \"sgd\", \"adamw\")");
  CHECK(describeUnknownName("bad", "zzzz", names, Spelling::Name) ==
        "bad (valid: sgd, adamw)");
}

TEST_CASE("findNearestPaths ranks paths by edit distance", "[schedule]") {
  std::vector<std::string> paths = {
      "lm_head",         "transformer",          "transformer.h",
      "transformer.h.0", "transformer.h.0.attn", "transformer.h.0.mlp",
      "transformer.h.1", "transformer.h.1.attn", "transformer.h.1.mlp"};
  CHECK(findNearestPaths("transformer.h.0.atn", paths, 3) ==
        std::vector<std::string>{"transformer.h.0.attn", "transformer.h.1.attn",
                                 "transformer.h.0.mlp"});
  // A path missing its first components is found through its suffix.
  CHECK(findNearestPaths("h.1.mlp", paths, 1) ==
        std::vector<std::string>{"transformer.h.1.mlp"});
  CHECK(findNearestPaths("x", paths, 0).empty());
  CHECK(findNearestPaths("x", {}, 3).empty());
  CHECK(findNearestPaths("lm_head", paths, 20).size() == paths.size());
}

} // namespace
