//===- Selector.h - patterns over module paths ------------------*- C++ -*-===//
//
// A selector names modules by their dotted paths:
//
//   transformer.h.0.attn        one module
//   transformer.h.*.attn        `*` matches any text inside one component
//   transformer.**.c_proj       `**` is a whole component: any number of
//                               components, zero included
//   transformer.h.{0..5}        an integer range (inclusive, written without
//                               leading zeros)
//   model.layers.*.self_attn.{q,k,v}_proj   a set of alternatives
//
// `*`, `{...}` and text can be combined inside a component (`c_*`,
// `{q,k}_proj`); braces do not nest and hold either a range or a set of
// plain names. Matching is linear in the path length times the pattern size
// (memoized), whatever the pattern.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_SCHEDULE_SELECTOR_H
#define SLAPO_SCHEDULE_SELECTOR_H

#include "slapo/Schedule/Diagnostics.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace slapo::schedule {

class SelectorPattern {
public:
  /// The largest number of integers one `{a..b}` range may hold.
  static constexpr uint64_t kMaxRangeSize = 65536;

  /// Parses `text`. Problems are reported at `locOf(i)`, the source position
  /// of byte `i` of `text`; returns nullopt if there was any.
  static std::optional<SelectorPattern>
  parse(llvm::StringRef text, llvm::function_ref<llvm::SMLoc(size_t)> locOf,
        DiagnosticReporter &reporter);

  bool matches(llvm::StringRef modulePath) const;

  /// A `{...}` element that matches none of `modulePaths` although the whole
  /// pattern matches some: a range reaching past the last layer, a misspelt
  /// set member. The first such element, in pattern order.
  struct UnmatchedElement {
    size_t offset; // of the `{` in the pattern text
    std::string element;
    std::string braces; // the `{...}` text it belongs to
  };
  std::optional<UnmatchedElement>
  findUnmatchedElement(llvm::ArrayRef<std::string> modulePaths) const;

  const std::string &getText() const { return text; }

private:
  class Parser;
  struct Piece {
    enum class Kind { Literal, Star, Range, Set };
    Kind kind;
    std::string literal;               // Literal
    uint64_t low = 0, high = 0;        // Range, inclusive
    std::vector<std::string> elements; // Set
    size_t offset = 0;                 // in the pattern text
    size_t length = 0;                 // of its text
  };
  struct Component {
    bool anyDepth = false; // `**`
    std::vector<Piece> pieces;
  };

  static bool matchComponent(llvm::ArrayRef<Piece> pieces,
                             llvm::StringRef name);

  std::string text;
  std::vector<Component> components;
};

} // namespace slapo::schedule

#endif // SLAPO_SCHEDULE_SELECTOR_H
