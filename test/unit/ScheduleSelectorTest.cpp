//===- ScheduleSelectorTest.cpp - patterns over module paths --------------===//
#include "slapo/Schedule/Selector.h"

#include <catch2/catch.hpp>

namespace {

using slapo::schedule::CollectingDiagnosticReporter;
using slapo::schedule::SelectorPattern;

/// Parses `text`; on error, records the message and the byte offset it is
/// reported at.
struct Parsed {
  std::optional<SelectorPattern> pattern;
  std::string error;
  size_t errorOffset = 0;
};

Parsed parse(llvm::StringRef text) {
  CollectingDiagnosticReporter reporter;
  // Offsets travel through the SMLoc as pointers relative to a base.
  const char *base = text.data();
  Parsed parsed;
  parsed.pattern = SelectorPattern::parse(
      text,
      [&](size_t offset) { return llvm::SMLoc::getFromPointer(base + offset); },
      reporter);
  if (!reporter.getDiagnostics().empty()) {
    parsed.error = reporter.getDiagnostics()[0].message;
    parsed.errorOffset = reporter.getDiagnostics()[0].loc.getPointer() - base;
  }
  return parsed;
}

bool matches(llvm::StringRef selector, llvm::StringRef path) {
  Parsed parsed = parse(selector);
  REQUIRE(parsed.pattern);
  return parsed.pattern->matches(path);
}

TEST_CASE("an exact path matches itself only", "[schedule]") {
  CHECK(matches("transformer.h.0", "transformer.h.0"));
  CHECK_FALSE(matches("transformer.h.0", "transformer.h.0.attn"));
  CHECK_FALSE(matches("transformer.h.0", "transformer.h"));
  CHECK_FALSE(matches("transformer.h.0", "transformer.h.01"));
}

TEST_CASE("* matches inside one component", "[schedule]") {
  CHECK(matches("transformer.h.*.attn", "transformer.h.11.attn"));
  CHECK_FALSE(matches("transformer.h.*.attn", "transformer.h.attn"));
  CHECK_FALSE(matches("transformer.h.*.attn", "transformer.h.1.2.attn"));
  CHECK(matches("h.*", "h.x"));
  CHECK_FALSE(matches("h.*", "h"));
  CHECK(matches("c_*", "c_attn"));
  CHECK(matches("c_*", "c_"));
  CHECK(matches("*_proj", "q_proj"));
  CHECK(matches("*a*b*", "xaybz"));
  CHECK_FALSE(matches("*a*b*", "xbya"));
}

TEST_CASE("** matches any number of components, zero included", "[schedule]") {
  CHECK(matches("transformer.**.c_proj", "transformer.h.0.attn.c_proj"));
  CHECK(matches("transformer.**.c_proj", "transformer.c_proj"));
  CHECK_FALSE(matches("transformer.**.c_proj", "c_proj"));
  CHECK(matches("**", "a"));
  CHECK(matches("**", "a.b.c"));
  CHECK(matches("**.ln_*", "transformer.h.0.ln_1"));
  CHECK(matches("a.**", "a"));
  CHECK(matches("a.**.**.b", "a.b"));
  CHECK_FALSE(matches("a.**.b", "a.bb"));
}

TEST_CASE("{a..b} matches the integers in the range, as written",
          "[schedule]") {
  CHECK(matches("h.{0..5}", "h.0"));
  CHECK(matches("h.{0..5}", "h.5"));
  CHECK_FALSE(matches("h.{0..5}", "h.6"));
  CHECK_FALSE(matches("h.{0..5}", "h.03"));
  CHECK_FALSE(matches("h.{0..5}", "h.x"));
  CHECK(matches("h.{8..12}", "h.10"));
  CHECK_FALSE(matches("h.{8..12}", "h.1"));
  CHECK(matches("layer{1..3}", "layer2"));
  CHECK(matches("{1..2}{3..4}", "13"));
  CHECK(matches("{1..12}*", "12x"));
  CHECK(matches("h.{18446744073709551610..18446744073709551615}",
                "h.18446744073709551615"));
}

TEST_CASE("{x,y} matches one of its names", "[schedule]") {
  CHECK(matches("attn.{q,k,v}_proj", "attn.k_proj"));
  CHECK_FALSE(matches("attn.{q,k,v}_proj", "attn.o_proj"));
  CHECK(matches("{attn,mlp}", "mlp"));
  CHECK(matches("{a,ab}b", "abb"));
  CHECK(matches("h.{1,3}", "h.3"));
  CHECK_FALSE(matches("h.{1,3}", "h.2"));
}

TEST_CASE("names may hold any character but '.'", "[schedule]") {
  CHECK(matches("bl\"ock\n*", "bl\"ock\n*/\xC3\xA9"));
  CHECK(matches("sub \"x\" \\ */", "sub \"x\" \\ */"));
}

TEST_CASE("malformed selectors are reported at their byte", "[schedule]") {
  auto check = [](llvm::StringRef text, llvm::StringRef error, size_t offset) {
    Parsed parsed = parse(text);
    CHECK_FALSE(parsed.pattern);
    CHECK(parsed.error == error.str());
    CHECK(parsed.errorOffset == offset);
  };
  check("", "empty selector; \"**\" selects every module", 0);
  check("a..b", "empty path component in selector", 2);
  check(".a", "empty path component in selector", 0);
  check("a.", "empty path component in selector", 1);
  check("h.{0..5", "unclosed '{' in selector", 2);
  check("h.0}", "unmatched '}' in selector", 3);
  check("h.{5..2}", "empty range {5..2}: 5 is greater than 2", 3);
  check("h.{0..x}",
        "range bounds are integers without leading zeros, like {0..5}; "
        "found 'x'",
        6);
  check("h.{00..1}",
        "range bounds are integers without leading zeros, like {0..5}; "
        "found '00'",
        3);
  check("h.{0..99999999999999999999}",
        "range bounds are integers without leading zeros, like {0..5}; "
        "found '99999999999999999999'",
        6);
  check("h.{0..65536}", "range {0..65536} holds more than 65536 integers", 3);
  check("h.{a,{b}}", "'{' inside braces: ranges and sets do not nest", 5);
  check("h.{}", "empty set '{}' in selector", 3);
  check("h.{a,,b}", "empty element in selector set", 5);
  check("h.{a,}", "empty element in selector set", 5);
  check("h.{a*,b}", "'*' inside a set: set elements are plain names", 4);
  check("{h.0,h.1}", "'.' inside a set: set elements are plain names", 2);
  check("a**", "'**' must be a whole path component", 1);
  check("**a", "'**' must be a whole path component", 0);
  check("a.***", "'**' must be a whole path component", 2);
}

TEST_CASE("range and set elements that match nothing are found", "[schedule]") {
  std::vector<std::string> paths = {"h",   "h.0",      "h.0.attn", "h.0.mlp",
                                    "h.1", "h.1.attn", "h.1.mlp"};
  auto unmatched = [&](llvm::StringRef selector) {
    Parsed parsed = parse(selector);
    REQUIRE(parsed.pattern);
    return parsed.pattern->findUnmatchedElement(paths);
  };
  CHECK_FALSE(unmatched("h.{0..1}"));
  CHECK_FALSE(unmatched("h.*.{attn,mlp}"));
  auto range = unmatched("h.{0..5}.attn");
  REQUIRE(range);
  CHECK(range->element == "2");
  CHECK(range->braces == "{0..5}");
  CHECK(range->offset == 2);
  auto set = unmatched("h.{0,1}.{attn,mpl}");
  REQUIRE(set);
  CHECK(set->element == "mpl");
  CHECK(set->offset == 8);
}

TEST_CASE("matching stays fast on adversarial patterns", "[schedule]") {
  // Exponential for a backtracking matcher; linear times the pattern here.
  std::string stars;
  for (int i = 0; i < 64; ++i)
    stars += "*a";
  std::string name(4000, 'a');
  CHECK_FALSE(matches(stars + "b", name));
  std::string depth;
  for (int i = 0; i < 64; ++i)
    depth += "**.";
  std::string path;
  for (int i = 0; i < 2000; ++i)
    path += "x.";
  CHECK_FALSE(matches(depth + "y", path + "z"));
}

} // namespace
