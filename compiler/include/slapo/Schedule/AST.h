//===- AST.h - the syntax tree of a schedule --------------------*- C++ -*-===//
//
// What the parser produces: statements as written, with the position of
// every part, before any meaning is checked.
//
//   mesh(dp=1, tp=2)                          a declaration: a call
//   sch["transformer.h.*.attn"].checkpoint()  a primitive: selector + call
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_SCHEDULE_AST_H
#define SLAPO_SCHEDULE_AST_H

#include "slapo/Schedule/Selector.h"

#include "llvm/Support/SMLoc.h"
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace slapo::schedule::ast {

/// An argument value: 42, -1, 3e-4, "weight", (0.9, 0.95), i64[8, 256].
struct Value {
  enum class Kind { Integer, Float, String, Tuple, TypedShape };

  Kind kind = Kind::Integer;
  /// From the first character to one past the last.
  llvm::SMRange range;
  /// Integer: the value.
  int64_t integer = 0;
  /// Integer and Float: the value as a double.
  double number = 0;
  /// String: the decoded contents. TypedShape: the element type's name.
  std::string string;
  /// String: for each byte of `string`, the offset of its source character
  /// from the opening quote.
  std::vector<uint32_t> stringOffsets;
  /// Tuple: the elements. TypedShape: the dimensions.
  std::vector<Value> elements;

  llvm::SMLoc getLoc() const { return range.Start; }
  /// The source position of byte `index` of a String (the closing quote
  /// for index == size, the opening one for an empty string).
  llvm::SMLoc getStringCharLoc(size_t index) const {
    const char *start = range.Start.getPointer();
    if (index < stringOffsets.size())
      return llvm::SMLoc::getFromPointer(start + stringOffsets[index]);
    return stringOffsets.empty()
               ? range.Start
               : llvm::SMLoc::getFromPointer(range.End.getPointer() - 1);
  }
  bool isNumber() const { return kind == Kind::Integer || kind == Kind::Float; }
};

/// `name=value` or a positional `value`.
struct Argument {
  std::string keyword; // empty for a positional argument
  llvm::SMLoc keywordLoc;
  Value value;

  bool isKeyword() const { return !keyword.empty(); }
  llvm::SMLoc getLoc() const {
    return isKeyword() ? keywordLoc : value.getLoc();
  }
};

/// `name(arguments)`.
struct Call {
  std::string name;
  llvm::SMLoc nameLoc;
  std::vector<Argument> arguments;
};

struct Statement {
  enum class Kind { Declaration, Primitive };

  Kind kind = Kind::Declaration;
  /// The first token of the statement.
  llvm::SMLoc loc;
  /// Primitive only: the selector string and its parsed pattern.
  Value selector;
  std::optional<SelectorPattern> pattern;
  Call call;
};

} // namespace slapo::schedule::ast

#endif // SLAPO_SCHEDULE_AST_H
