//===- Selector.cpp - patterns over module paths --------------------------===//
#include "slapo/Schedule/Selector.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

namespace slapo::schedule {

/// Parses one selector, reporting the first problem at its exact byte.
class SelectorPattern::Parser {
public:
  Parser(llvm::StringRef text, llvm::function_ref<llvm::SMLoc(size_t)> locOf,
         DiagnosticReporter &reporter)
      : text(text), locOf(locOf), reporter(reporter) {}

  bool parse(std::vector<Component> &components);

private:
  bool fail(size_t offset, const llvm::Twine &message) {
    reporter.error(locOf(offset), message);
    return false;
  }
  /// A range bound: decimal digits, no leading zero, fits in 64 bits.
  bool parseBound(size_t offset, llvm::StringRef bound, uint64_t &value);

  llvm::StringRef text;
  llvm::function_ref<llvm::SMLoc(size_t)> locOf;
  DiagnosticReporter &reporter;
};

bool SelectorPattern::Parser::parseBound(size_t offset, llvm::StringRef bound,
                                         uint64_t &value) {
  if (bound.empty() || !llvm::all_of(bound, llvm::isDigit) ||
      (bound.size() > 1 && bound.front() == '0') ||
      bound.getAsInteger(10, value))
    return fail(offset, "range bounds are integers without leading zeros, "
                        "like {0..5}; found '" +
                            bound + "'");
  return true;
}

bool SelectorPattern::Parser::parse(std::vector<Component> &components) {
  if (text.empty())
    return fail(0, "empty selector; \"**\" selects every module");
  Component component;
  size_t componentStart = 0;
  auto addLiteral = [&](size_t offset, char c) {
    if (component.pieces.empty() ||
        component.pieces.back().kind != Piece::Kind::Literal) {
      Piece piece;
      piece.kind = Piece::Kind::Literal;
      piece.offset = offset;
      component.pieces.push_back(piece);
    }
    component.pieces.back().literal.push_back(c);
    ++component.pieces.back().length;
  };
  auto finishComponent = [&](size_t end) {
    if (!component.anyDepth && component.pieces.empty())
      return fail(end == text.size() ? end - 1 : end,
                  "empty path component in selector");
    components.push_back(std::move(component));
    component = Component();
    componentStart = end + 1;
    return true;
  };

  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    if (c == '.') {
      if (!finishComponent(i))
        return false;
      ++i;
      continue;
    }
    if (component.anyDepth)
      return fail(i, "'**' must be a whole path component");
    if (c == '*') {
      if (i + 1 < text.size() && text[i + 1] == '*') {
        size_t end = i + 2;
        if (i != componentStart || (end < text.size() && text[end] != '.'))
          return fail(i, "'**' must be a whole path component");
        component.anyDepth = true;
        i = end;
        continue;
      }
      Piece piece;
      piece.kind = Piece::Kind::Star;
      piece.offset = i;
      piece.length = 1;
      component.pieces.push_back(piece);
      ++i;
      continue;
    }
    if (c == '}')
      return fail(i, "unmatched '}' in selector");
    if (c != '{') {
      addLiteral(i, c);
      ++i;
      continue;
    }

    size_t close = text.find_first_of("{}", i + 1);
    if (close == llvm::StringRef::npos)
      return fail(i, "unclosed '{' in selector");
    if (text[close] == '{')
      return fail(close, "'{' inside braces: ranges and sets do not nest");
    llvm::StringRef contents = text.slice(i + 1, close);
    Piece piece;
    piece.offset = i;
    piece.length = close + 1 - i;
    size_t dots = contents.find("..");
    if (dots != llvm::StringRef::npos) {
      piece.kind = Piece::Kind::Range;
      if (!parseBound(i + 1, contents.take_front(dots), piece.low) ||
          !parseBound(i + 1 + dots + 2, contents.drop_front(dots + 2),
                      piece.high))
        return false;
      if (piece.low > piece.high)
        return fail(i + 1, "empty range {" + contents +
                               "}: " + llvm::Twine(piece.low) +
                               " is greater than " + llvm::Twine(piece.high));
      if (piece.high - piece.low >= SelectorPattern::kMaxRangeSize)
        return fail(i + 1, "range {" + contents + "} holds more than " +
                               llvm::Twine(SelectorPattern::kMaxRangeSize) +
                               " integers");
    } else {
      piece.kind = Piece::Kind::Set;
      size_t elementStart = i + 1;
      for (llvm::StringRef element : llvm::split(contents, ',')) {
        if (element.empty())
          return fail(elementStart, contents.empty()
                                        ? "empty set '{}' in selector"
                                        : "empty element in selector set");
        size_t bad = element.find_first_of(".*");
        if (bad != llvm::StringRef::npos)
          return fail(elementStart + bad,
                      "'" + llvm::Twine(element[bad]) +
                          "' inside a set: set elements are plain names");
        piece.elements.push_back(element.str());
        elementStart += element.size() + 1;
      }
    }
    component.pieces.push_back(std::move(piece));
    i = close + 1;
  }
  return finishComponent(text.size());
}

std::optional<SelectorPattern>
SelectorPattern::parse(llvm::StringRef text,
                       llvm::function_ref<llvm::SMLoc(size_t)> locOf,
                       DiagnosticReporter &reporter) {
  SelectorPattern pattern;
  pattern.text = text.str();
  if (!Parser(text, locOf, reporter).parse(pattern.components))
    return std::nullopt;
  return pattern;
}

bool SelectorPattern::matchComponent(llvm::ArrayRef<Piece> pieces,
                                     llvm::StringRef name) {
  // reachable[p]: the pieces so far can match name[0, p).
  std::vector<char> reachable(name.size() + 1, 0), next(name.size() + 1);
  reachable[0] = 1;
  for (const Piece &piece : pieces) {
    std::fill(next.begin(), next.end(), 0);
    for (size_t pos = 0; pos <= name.size(); ++pos) {
      if (!reachable[pos])
        continue;
      llvm::StringRef rest = name.drop_front(pos);
      switch (piece.kind) {
      case Piece::Kind::Literal:
        if (rest.startswith(piece.literal))
          next[pos + piece.literal.size()] = 1;
        break;
      case Piece::Kind::Star:
        // Everything from the first reachable position on is reachable.
        std::fill(next.begin() + pos, next.end(), 1);
        pos = name.size();
        break;
      case Piece::Kind::Set:
        for (const std::string &element : piece.elements)
          if (rest.startswith(element))
            next[pos + element.size()] = 1;
        break;
      case Piece::Kind::Range: {
        size_t digits = 0;
        while (digits < rest.size() && llvm::isDigit(rest[digits]))
          ++digits;
        // Integers are written without leading zeros: "03" is not 3.
        // 20 digits hold every 64-bit bound.
        size_t maxLength =
            rest.startswith("0") ? 1 : std::min<size_t>(digits, 20);
        for (size_t length = 1; length <= maxLength; ++length) {
          uint64_t value;
          if (!rest.take_front(length).getAsInteger(10, value) &&
              value >= piece.low && value <= piece.high)
            next[pos + length] = 1;
        }
        break;
      }
      }
    }
    std::swap(reachable, next);
  }
  return reachable[name.size()];
}

bool SelectorPattern::matches(llvm::StringRef modulePath) const {
  llvm::SmallVector<llvm::StringRef> names;
  modulePath.split(names, '.');
  size_t numComponents = components.size(), numNames = names.size();
  // ok[c * (numNames + 1) + n]: components[c..] match names[n..].
  std::vector<char> ok((numComponents + 1) * (numNames + 1), 0);
  auto at = [&](size_t c, size_t n) -> char & {
    return ok[c * (numNames + 1) + n];
  };
  at(numComponents, numNames) = 1;
  for (size_t c = numComponents; c-- > 0;) {
    for (size_t n = numNames + 1; n-- > 0;) {
      if (components[c].anyDepth)
        at(c, n) = at(c + 1, n) || (n < numNames && at(c, n + 1));
      else
        at(c, n) = n < numNames && at(c + 1, n + 1) &&
                   matchComponent(components[c].pieces, names[n]);
    }
  }
  return at(0, 0);
}

std::optional<SelectorPattern::UnmatchedElement>
SelectorPattern::findUnmatchedElement(
    llvm::ArrayRef<std::string> modulePaths) const {
  for (size_t c = 0; c < components.size(); ++c) {
    for (size_t p = 0; p < components[c].pieces.size(); ++p) {
      const Piece &piece = components[c].pieces[p];
      std::vector<std::string> elements = piece.elements;
      if (piece.kind == Piece::Kind::Range)
        for (uint64_t i = 0; i <= piece.high - piece.low; ++i)
          elements.push_back(std::to_string(piece.low + i));
      for (const std::string &element : elements) {
        SelectorPattern restricted = *this;
        Piece &fixed = restricted.components[c].pieces[p];
        fixed.kind = Piece::Kind::Literal;
        fixed.literal = element;
        if (llvm::none_of(modulePaths, [&](const std::string &path) {
              return restricted.matches(path);
            }))
          return UnmatchedElement{piece.offset, element,
                                  text.substr(piece.offset, piece.length)};
      }
    }
  }
  return std::nullopt;
}

} // namespace slapo::schedule
