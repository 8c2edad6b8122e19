//===- Signature.h - checking a call's arguments ----------------*- C++ -*-===//
//
// Every declaration and primitive describes its parameters once, as a
// Signature; bindArguments matches a call against it, Python-style
// (positional arguments first, then keywords), and reports every problem:
// too many positional arguments, unknown keywords (with the closest valid
// one), duplicates, missing required arguments, wrong types, values out of
// range, strings that are not one of the choices (all listed).
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_SCHEDULE_SIGNATURE_H
#define SLAPO_SCHEDULE_SIGNATURE_H

#include "slapo/Schedule/AST.h"
#include "slapo/Schedule/Diagnostics.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include <limits>
#include <optional>
#include <string>

namespace slapo::schedule {

class Parameter {
public:
  enum class Type {
    Integer,    // 42
    Number,     // 42 or 0.1
    String,     // any string
    Choice,     // one of `choices`
    NumberPair, // (0.9, 0.95)
    TypedShape, // i64[8, 256]
  };

  llvm::StringLiteral name;
  Type type;
  /// May be given by position (parameters are positional in list order).
  bool positional = false;
  bool required = false;
  /// Numbers (and each number of a pair) lie in [min, max], an end excluded
  /// when its flag says so.
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool minExcluded = false, maxExcluded = false;
  llvm::ArrayRef<llvm::StringRef> choices;

  static constexpr Parameter integer(llvm::StringLiteral name) {
    return Parameter(name, Type::Integer);
  }
  static constexpr Parameter number(llvm::StringLiteral name) {
    return Parameter(name, Type::Number);
  }
  static constexpr Parameter string(llvm::StringLiteral name) {
    return Parameter(name, Type::String);
  }
  static constexpr Parameter choice(llvm::StringLiteral name,
                                    llvm::ArrayRef<llvm::StringRef> values) {
    Parameter parameter(name, Type::Choice);
    parameter.choices = values;
    return parameter;
  }
  static constexpr Parameter numberPair(llvm::StringLiteral name) {
    return Parameter(name, Type::NumberPair);
  }
  static constexpr Parameter typedShape(llvm::StringLiteral name) {
    return Parameter(name, Type::TypedShape);
  }

  constexpr Parameter asPositional() const {
    Parameter copy = *this;
    copy.positional = true;
    return copy;
  }
  constexpr Parameter asRequired() const {
    Parameter copy = *this;
    copy.required = true;
    return copy;
  }
  constexpr Parameter atLeast(double bound) const {
    Parameter copy = *this;
    copy.min = bound;
    return copy;
  }
  constexpr Parameter above(double bound) const {
    Parameter copy = atLeast(bound);
    copy.minExcluded = true;
    return copy;
  }
  constexpr Parameter atMost(double bound) const {
    Parameter copy = *this;
    copy.max = bound;
    return copy;
  }
  constexpr Parameter below(double bound) const {
    Parameter copy = atMost(bound);
    copy.maxExcluded = true;
    return copy;
  }

private:
  constexpr Parameter(llvm::StringLiteral name, Type type)
      : name(name), type(type) {}
};

struct Signature {
  llvm::StringLiteral name;
  llvm::ArrayRef<Parameter> parameters;

  /// How the call is written, for messages: `shard(param, axis)`,
  /// `mesh(dp=, tp=, pp=)`, `fuse([kind])`.
  std::string str() const;
};

/// A call's arguments matched to its signature's parameters. Values were
/// checked: the typed getters cannot fail.
class BoundArguments {
public:
  explicit BoundArguments(const Signature &signature)
      : signature(&signature), values(signature.parameters.size(), nullptr) {}

  bool has(llvm::StringRef name) const { return lookup(name) != nullptr; }
  /// The argument for `name` (declared in the signature), or null.
  const ast::Argument *lookup(llvm::StringRef name) const;
  /// Where the argument for `name` is, or `fallback` if it was not given.
  llvm::SMLoc getLoc(llvm::StringRef name, llvm::SMLoc fallback) const;

  int64_t getInteger(llvm::StringRef name, int64_t fallback) const;
  double getNumber(llvm::StringRef name, double fallback) const;
  /// String and Choice parameters.
  std::string getString(llvm::StringRef name, llvm::StringRef fallback) const;
  std::pair<double, double>
  getNumberPair(llvm::StringRef name, std::pair<double, double> fallback) const;

private:
  friend std::optional<BoundArguments>
  bindArguments(const ast::Call &call, const Signature &signature,
                DiagnosticReporter &reporter);

  const Signature *signature;
  std::vector<const ast::Argument *> values; // by parameter index
};

/// Matches `call` against `signature`; reports every problem and returns
/// nullopt if there was any. The result points into `call`.
std::optional<BoundArguments> bindArguments(const ast::Call &call,
                                            const Signature &signature,
                                            DiagnosticReporter &reporter);

} // namespace slapo::schedule

#endif // SLAPO_SCHEDULE_SIGNATURE_H
