//===- Lexer.h - tokens of the schedule language ----------------*- C++ -*-===//
//
// Splits a schedule into tokens. Comments (`#` to the end of the line) and
// blank space vanish; line ends are tokens because they end statements. A
// malformed token (unterminated string, bad escape, stray character, number
// out of range) becomes an Error token with its message: the parser decides
// whether to report it, so that recovery can skip over the rest of a bad
// line silently. The lexer never reads past the buffer's end, whatever the
// bytes (NULs included).
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_SCHEDULE_LEXER_H
#define SLAPO_SCHEDULE_LEXER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"
#include <cstdint>
#include <string>
#include <vector>

namespace slapo::schedule {

struct Token {
  enum class Kind {
    Identifier,
    Integer,
    Float,
    String,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Dot,
    Equals,
    Minus,
    Newline,
    EndOfFile,
    Error,
  };

  Kind kind = Kind::Error;
  /// The token's spelling in the buffer (empty for EndOfFile).
  llvm::StringRef spelling;
  /// True if the token is the first character of its line (column 1).
  bool atLineStart = false;

  /// Integer: the value (literals are non-negative and fit in int64_t).
  int64_t integer = 0;
  /// Float: the value (finite).
  double number = 0;
  /// String: the decoded contents, and for each of its bytes the offset of
  /// the source character it came from, counted from the opening quote.
  std::string string;
  std::vector<uint32_t> stringOffsets;
  /// Error: what is wrong, and where exactly (inside the token).
  std::string errorMessage;
  const char *errorPos = nullptr;

  bool is(Kind k) const { return kind == k; }
  llvm::SMLoc getLoc() const {
    return llvm::SMLoc::getFromPointer(spelling.data());
  }
  /// The position of the source character behind byte `index` of a String
  /// token's contents (the closing quote for index == size).
  llvm::SMLoc getStringCharLoc(size_t index) const;
  /// How the token is named in "expected X, found Y" messages.
  std::string describe() const;
};

class Lexer {
public:
  explicit Lexer(llvm::StringRef buffer)
      : bufferStart(buffer.begin()), bufferEnd(buffer.end()),
        current(buffer.begin()) {}

  /// The next token; EndOfFile forever once the buffer is exhausted.
  Token lex();

  /// Every token of `buffer`, the last one EndOfFile.
  static std::vector<Token> tokenize(llvm::StringRef buffer);

private:
  Token makeToken(Token::Kind kind, const char *start);
  Token makeError(const char *start, const char *errorPos,
                  const std::string &message);
  Token lexIdentifier(const char *start);
  Token lexNumber(const char *start);
  Token lexString(const char *start);

  const char *bufferStart;
  const char *bufferEnd;
  const char *current;
};

} // namespace slapo::schedule

#endif // SLAPO_SCHEDULE_LEXER_H
