//===- Signature.cpp - checking a call's arguments ------------------------===//
#include "slapo/Schedule/Signature.h"

#include "slapo/Schedule/Suggestions.h"
#include "slapo/Transforms/PassOptions.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include <cmath>

namespace slapo::schedule {

std::string Signature::str() const {
  std::vector<std::string> items;
  for (const Parameter &parameter : parameters) {
    if (!parameter.positional)
      items.push_back((parameter.name + "=").str());
    else if (parameter.required)
      items.push_back(parameter.name.str());
    else
      items.push_back(("[" + parameter.name + "]").str());
  }
  return (name + "(" + llvm::join(items, ", ") + ")").str();
}

static const char *describeKind(ast::Value::Kind kind) {
  switch (kind) {
  case ast::Value::Kind::Integer:
    return "an integer";
  case ast::Value::Kind::Float:
    return "a floating-point number";
  case ast::Value::Kind::String:
    return "a string";
  case ast::Value::Kind::Tuple:
    return "a tuple";
  case ast::Value::Kind::TypedShape:
    return "a typed shape";
  }
  return "a value";
}

static const char *describeType(Parameter::Type type) {
  switch (type) {
  case Parameter::Type::Integer:
    return "an integer";
  case Parameter::Type::Number:
    return "a number";
  case Parameter::Type::String:
  case Parameter::Type::Choice:
    return "a string";
  case Parameter::Type::NumberPair:
    return "a pair of numbers, like (0.9, 0.999)";
  case Parameter::Type::TypedShape:
    return "a dtype and a shape, like i64[8, 256]";
  }
  return "a value";
}

/// "greater than 0", "in [0, 1)", or "" when every number is valid.
static std::string describeRange(const Parameter &parameter) {
  bool hasMin = std::isfinite(parameter.min);
  bool hasMax = std::isfinite(parameter.max);
  if (hasMin && hasMax)
    return (parameter.minExcluded ? "in (" : "in [") +
           formatNumber(parameter.min) + ", " + formatNumber(parameter.max) +
           (parameter.maxExcluded ? ")" : "]");
  if (hasMin)
    return (parameter.minExcluded ? "greater than " : "at least ") +
           formatNumber(parameter.min);
  if (hasMax)
    return (parameter.maxExcluded ? "less than " : "at most ") +
           formatNumber(parameter.max);
  return "";
}

static bool inRange(const Parameter &parameter, double value) {
  return (parameter.minExcluded ? value > parameter.min
                                : value >= parameter.min) &&
         (parameter.maxExcluded ? value < parameter.max
                                : value <= parameter.max);
}

namespace {
/// Checks one argument's value against its parameter.
class ValueChecker {
public:
  ValueChecker(const Signature &signature, const Parameter &parameter,
               DiagnosticReporter &reporter)
      : signature(signature), parameter(parameter), reporter(reporter) {}

  bool check(const ast::Value &value) {
    switch (parameter.type) {
    case Parameter::Type::Integer:
      return expectKind(value, value.kind == ast::Value::Kind::Integer) &&
             checkRange(value);
    case Parameter::Type::Number:
      return expectKind(value, value.isNumber()) && checkRange(value);
    case Parameter::Type::String:
      return expectKind(value, value.kind == ast::Value::Kind::String);
    case Parameter::Type::Choice:
      return expectKind(value, value.kind == ast::Value::Kind::String) &&
             checkChoice(value);
    case Parameter::Type::NumberPair:
      if (!expectKind(value, value.kind == ast::Value::Kind::Tuple &&
                                 value.elements.size() == 2))
        return false;
      for (const ast::Value &element : value.elements)
        if (!expectKind(element, element.isNumber()) || !checkRange(element))
          return false;
      return true;
    case Parameter::Type::TypedShape:
      return expectKind(value, value.kind == ast::Value::Kind::TypedShape);
    }
    return false;
  }

private:
  std::string argumentName() const {
    return ("argument '" + parameter.name + "' of " + signature.name + "()")
        .str();
  }
  bool expectKind(const ast::Value &value, bool ok) {
    if (!ok)
      reporter.error(value.getLoc(), argumentName() + " must be " +
                                         describeType(parameter.type) +
                                         ", not " + describeKind(value.kind));
    return ok;
  }
  bool checkRange(const ast::Value &value) {
    if (inRange(parameter, value.number))
      return true;
    reporter.error(value.getLoc(), argumentName() + " must be " +
                                       describeRange(parameter) + ", not " +
                                       formatNumber(value.number));
    return false;
  }
  bool checkChoice(const ast::Value &value) {
    if (llvm::is_contained(parameter.choices, value.string))
      return true;
    llvm::SmallVector<llvm::StringRef> candidates(parameter.choices.begin(),
                                                  parameter.choices.end());
    reporter.error(
        value.getLoc(),
        describeUnknownName("invalid " + parameter.name + " \"" + value.string +
                                "\" for " + signature.name + "()",
                            value.string, candidates, Spelling::String));
    return false;
  }

  const Signature &signature;
  const Parameter &parameter;
  DiagnosticReporter &reporter;
};
} // namespace

std::optional<BoundArguments> bindArguments(const ast::Call &call,
                                            const Signature &signature,
                                            DiagnosticReporter &reporter) {
  llvm::ArrayRef<Parameter> parameters = signature.parameters;
  llvm::SmallVector<size_t> positionalIndices;
  for (size_t i = 0; i < parameters.size(); ++i)
    if (parameters[i].positional)
      positionalIndices.push_back(i);
  size_t numPositionalGiven = llvm::count_if(
      call.arguments, [](const ast::Argument &a) { return !a.isKeyword(); });

  BoundArguments bound(signature);
  bool ok = true;
  size_t nextPositional = 0;
  bool seenKeyword = false;
  for (const ast::Argument &argument : call.arguments) {
    size_t index;
    if (!argument.isKeyword()) {
      if (seenKeyword) {
        reporter.error(argument.getLoc(),
                       "positional argument after a keyword argument");
        ok = false;
        continue;
      }
      if (nextPositional >= positionalIndices.size()) {
        // Reported at the first argument too many only.
        if (nextPositional++ == positionalIndices.size())
          reporter.error(argument.getLoc(),
                         signature.name + "() takes " +
                             llvm::Twine(positionalIndices.size()) +
                             " positional argument" +
                             (positionalIndices.size() == 1 ? "" : "s") +
                             " but " + llvm::Twine(numPositionalGiven) +
                             (numPositionalGiven == 1 ? " was" : " were") +
                             " given; usage: " + signature.str());
        ok = false;
        continue;
      }
      index = positionalIndices[nextPositional++];
    } else {
      seenKeyword = true;
      const Parameter *parameter =
          llvm::find_if(parameters, [&](const Parameter &p) {
            return p.name == argument.keyword;
          });
      if (parameter == parameters.end()) {
        llvm::SmallVector<llvm::StringRef> names;
        for (const Parameter &p : parameters)
          names.push_back(p.name);
        std::string problem = "unknown argument '" + argument.keyword +
                              "' of " + signature.name.str() + "()";
        reporter.error(argument.keywordLoc,
                       names.empty()
                           ? problem + ", which takes no arguments"
                           : describeUnknownName(problem, argument.keyword,
                                                 names, Spelling::Name));
        ok = false;
        continue;
      }
      index = parameter - parameters.begin();
    }
    if (const ast::Argument *previous = bound.values[index]) {
      reporter.error(argument.getLoc(),
                     "argument '" + parameters[index].name + "' of " +
                         signature.name + "() given twice",
                     {{previous->getLoc(), "first given here"}});
      ok = false;
      continue;
    }
    bound.values[index] = &argument;
    if (!ValueChecker(signature, parameters[index], reporter)
             .check(argument.value))
      ok = false;
  }
  // A missing argument is often the consequence of one misspelt or
  // misplaced: reported only when nothing else was wrong.
  bool reportMissing = ok;
  for (size_t i = 0; reportMissing && i < parameters.size(); ++i)
    if (parameters[i].required && !bound.values[i]) {
      reporter.error(call.nameLoc, "missing argument '" + parameters[i].name +
                                       "' of " + signature.str());
      ok = false;
    }
  if (!ok)
    return std::nullopt;
  return bound;
}

const ast::Argument *BoundArguments::lookup(llvm::StringRef name) const {
  for (size_t i = 0; i < values.size(); ++i)
    if (signature->parameters[i].name == name)
      return values[i];
  return nullptr;
}

llvm::SMLoc BoundArguments::getLoc(llvm::StringRef name,
                                   llvm::SMLoc fallback) const {
  const ast::Argument *argument = lookup(name);
  return argument ? argument->getLoc() : fallback;
}

int64_t BoundArguments::getInteger(llvm::StringRef name,
                                   int64_t fallback) const {
  const ast::Argument *argument = lookup(name);
  return argument ? argument->value.integer : fallback;
}

double BoundArguments::getNumber(llvm::StringRef name, double fallback) const {
  const ast::Argument *argument = lookup(name);
  return argument ? argument->value.number : fallback;
}

std::string BoundArguments::getString(llvm::StringRef name,
                                      llvm::StringRef fallback) const {
  const ast::Argument *argument = lookup(name);
  return argument ? argument->value.string : fallback.str();
}

std::pair<double, double>
BoundArguments::getNumberPair(llvm::StringRef name,
                              std::pair<double, double> fallback) const {
  const ast::Argument *argument = lookup(name);
  if (!argument)
    return fallback;
  return {argument->value.elements[0].number,
          argument->value.elements[1].number};
}

} // namespace slapo::schedule
