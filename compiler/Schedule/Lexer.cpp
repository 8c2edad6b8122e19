//===- Lexer.cpp - tokens of the schedule language ------------------------===//
#include "slapo/Schedule/Lexer.h"

#include "llvm/ADT/StringExtras.h"
#include <cmath>
#include <limits>

namespace slapo::schedule {

static bool isIdentifierStart(char c) { return llvm::isAlpha(c) || c == '_'; }
static bool isIdentifierChar(char c) { return llvm::isAlnum(c) || c == '_'; }

/// A byte as a message shows it: printable ASCII in quotes, anything else in
/// hex (the byte may be half of a UTF-8 sequence or a control character).
static std::string describeByte(char c) {
  if (llvm::isPrint(c))
    return ("'" + llvm::Twine(c) + "'").str();
  unsigned char byte = static_cast<unsigned char>(c);
  return std::string("byte 0x") + llvm::hexdigit(byte >> 4) +
         llvm::hexdigit(byte & 15);
}

llvm::SMLoc Token::getStringCharLoc(size_t index) const {
  size_t offset =
      index < stringOffsets.size() ? stringOffsets[index] : spelling.size() - 1;
  return llvm::SMLoc::getFromPointer(spelling.data() + offset);
}

std::string Token::describe() const {
  // Messages quote at most this much of a token: a whole line of garbage
  // would only hide the message.
  constexpr size_t kMaxQuoted = 32;
  llvm::StringRef shown = spelling.take_front(kMaxQuoted);
  std::string ellipsis = spelling.size() > kMaxQuoted ? "..." : "";
  switch (kind) {
  case Kind::Identifier:
    return ("'" + shown + ellipsis + "'").str();
  case Kind::Integer:
  case Kind::Float:
    return ("number " + shown + ellipsis).str();
  case Kind::String:
    return "a string";
  case Kind::Newline:
    return "end of line";
  case Kind::EndOfFile:
    return "end of file";
  case Kind::Error:
    return "an invalid token";
  default:
    return ("'" + spelling + "'").str();
  }
}

Token Lexer::makeToken(Token::Kind kind, const char *start) {
  Token token;
  token.kind = kind;
  token.spelling = llvm::StringRef(start, current - start);
  token.atLineStart = start == bufferStart || start[-1] == '\n';
  return token;
}

Token Lexer::makeError(const char *start, const char *errorPos,
                       const std::string &message) {
  Token token = makeToken(Token::Kind::Error, start);
  token.errorMessage = message;
  token.errorPos = errorPos;
  return token;
}

Token Lexer::lex() {
  while (current != bufferEnd) {
    const char *start = current;
    char c = *current++;
    switch (c) {
    case ' ':
    case '\t':
    case '\r':
    case '\v':
    case '\f':
      continue;
    case '#':
      while (current != bufferEnd && *current != '\n')
        ++current;
      continue;
    case '\n':
      return makeToken(Token::Kind::Newline, start);
    case '(':
      return makeToken(Token::Kind::LParen, start);
    case ')':
      return makeToken(Token::Kind::RParen, start);
    case '[':
      return makeToken(Token::Kind::LBracket, start);
    case ']':
      return makeToken(Token::Kind::RBracket, start);
    case ',':
      return makeToken(Token::Kind::Comma, start);
    case '.':
      return makeToken(Token::Kind::Dot, start);
    case '=':
      return makeToken(Token::Kind::Equals, start);
    case '-':
      return makeToken(Token::Kind::Minus, start);
    case '"':
      return lexString(start);
    default:
      if (isIdentifierStart(c))
        return lexIdentifier(start);
      if (llvm::isDigit(c))
        return lexNumber(start);
      return makeError(start, start, "unexpected " + describeByte(c));
    }
  }
  return makeToken(Token::Kind::EndOfFile, current);
}

Token Lexer::lexIdentifier(const char *start) {
  while (current != bufferEnd && isIdentifierChar(*current))
    ++current;
  return makeToken(Token::Kind::Identifier, start);
}

Token Lexer::lexNumber(const char *start) {
  auto skipDigits = [&] {
    while (current != bufferEnd && llvm::isDigit(*current))
      ++current;
  };
  skipDigits();
  const char *integerEnd = current;
  bool isFloat = false;
  if (current != bufferEnd && *current == '.') {
    isFloat = true;
    ++current;
    skipDigits();
  }
  if (current != bufferEnd && (*current == 'e' || *current == 'E')) {
    isFloat = true;
    ++current;
    if (current != bufferEnd && (*current == '+' || *current == '-'))
      ++current;
    const char *exponentStart = current;
    skipDigits();
    if (current == exponentStart)
      return makeError(start, current, "missing digits in the exponent");
  }
  // `0x10`, `2k`, `1.5f`: one bad token rather than a number and a name.
  if (current != bufferEnd && isIdentifierChar(*current)) {
    const char *suffix = current;
    while (current != bufferEnd && isIdentifierChar(*current))
      ++current;
    return makeError(start, suffix,
                     "invalid number '" +
                         llvm::StringRef(start, current - start).str() +
                         "': numbers are decimal, like 42, 0.1 or 3e-4");
  }
  if (integerEnd - start > 1 && *start == '0')
    return makeError(start, start, "leading zeros are not allowed in numbers");

  Token token =
      makeToken(isFloat ? Token::Kind::Float : Token::Kind::Integer, start);
  if (isFloat) {
    // APFloat parsing is exact and locale-independent; overflow gives inf.
    if (token.spelling.getAsDouble(token.number) ||
        !std::isfinite(token.number))
      return makeError(start, start, "number out of range");
    return token;
  }
  int64_t value = 0;
  for (char digit : token.spelling) {
    int64_t digitValue = digit - '0';
    if (value > (std::numeric_limits<int64_t>::max() - digitValue) / 10)
      return makeError(start, start, "integer too large");
    value = value * 10 + digitValue;
  }
  token.integer = value;
  return token;
}

Token Lexer::lexString(const char *start) {
  std::string value;
  std::vector<uint32_t> offsets;
  const char *badEscape = nullptr;
  char badEscapeChar = 0;
  while (true) {
    if (current == bufferEnd || *current == '\n')
      return makeError(start, start, "unterminated string");
    const char *charStart = current;
    char c = *current++;
    if (c == '"')
      break;
    if (c == '\\') {
      if (current == bufferEnd || *current == '\n')
        return makeError(start, start, "unterminated string");
      char escaped = *current++;
      switch (escaped) {
      case '\\':
      case '"':
        c = escaped;
        break;
      case 'n':
        c = '\n';
        break;
      case 't':
        c = '\t';
        break;
      default:
        // Keep scanning to the closing quote so the whole string is skipped.
        if (!badEscape) {
          badEscape = charStart;
          badEscapeChar = escaped;
        }
        continue;
      }
    }
    value.push_back(c);
    offsets.push_back(static_cast<uint32_t>(charStart - start));
  }
  if (badEscape)
    return makeError(start, badEscape,
                     "unknown escape '\\" +
                         (llvm::isPrint(badEscapeChar)
                              ? std::string(1, badEscapeChar)
                              : describeByte(badEscapeChar)) +
                         "' in string (valid: \\\\ \\\" \\n \\t)");
  Token token = makeToken(Token::Kind::String, start);
  token.string = std::move(value);
  token.stringOffsets = std::move(offsets);
  return token;
}

std::vector<Token> Lexer::tokenize(llvm::StringRef buffer) {
  Lexer lexer(buffer);
  std::vector<Token> tokens;
  do
    tokens.push_back(lexer.lex());
  while (!tokens.back().is(Token::Kind::EndOfFile));
  return tokens;
}

} // namespace slapo::schedule
