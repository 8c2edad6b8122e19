//===- ScheduleLexerTest.cpp - tokens of the schedule language ------------===//
#include "slapo/Schedule/Lexer.h"

#include <catch2/catch.hpp>

namespace {

using slapo::schedule::Lexer;
using slapo::schedule::Token;
using Kind = Token::Kind;

std::vector<Kind> kinds(llvm::StringRef text) {
  std::vector<Kind> result;
  for (const Token &token : Lexer::tokenize(text))
    result.push_back(token.kind);
  return result;
}

/// The single token of `text` (before EndOfFile).
Token only(llvm::StringRef text) {
  std::vector<Token> tokens = Lexer::tokenize(text);
  REQUIRE(tokens.size() == 2);
  REQUIRE(tokens[1].is(Kind::EndOfFile));
  return tokens[0];
}

TEST_CASE("a primitive statement splits into its tokens", "[schedule]") {
  llvm::StringRef text = "sch[\"h.*\"].shard(\"weight\", axis=-1)  # c\n";
  CHECK(kinds(text) ==
        std::vector<Kind>{
            Kind::Identifier, Kind::LBracket, Kind::String, Kind::RBracket,
            Kind::Dot, Kind::Identifier, Kind::LParen, Kind::String,
            Kind::Comma, Kind::Identifier, Kind::Equals, Kind::Minus,
            Kind::Integer, Kind::RParen, Kind::Newline, Kind::EndOfFile});
  std::vector<Token> tokens = Lexer::tokenize(text);
  CHECK(tokens[0].spelling == "sch");
  CHECK(tokens[0].atLineStart);
  CHECK_FALSE(tokens[1].atLineStart);
  CHECK(tokens[2].string == "h.*");
  CHECK(tokens[12].integer == 1);
  // Positions are pointers into the text.
  CHECK(tokens[5].getLoc().getPointer() == text.data() + 11);
}

TEST_CASE("numbers are decimal integers and floats", "[schedule]") {
  CHECK(only("42").integer == 42);
  CHECK(only("0").integer == 0);
  CHECK(only("9223372036854775807").integer == INT64_MAX);
  CHECK(only("3e-4").is(Kind::Float));
  CHECK(only("3e-4").number == 3e-4);
  CHECK(only("0.1").number == 0.1);
  CHECK(only("1.").number == 1.0);
  CHECK(only("1.5E+2").number == 150.0);

  CHECK(only("9223372036854775808").errorMessage == "integer too large");
  CHECK(only("007").errorMessage == "leading zeros are not allowed in numbers");
  CHECK(only("1e").errorMessage == "missing digits in the exponent");
  CHECK(only("1e999").errorMessage == "number out of range");
  Token hex = only("0x1F");
  CHECK(hex.is(Kind::Error));
  CHECK(hex.spelling == "0x1F");
  CHECK(hex.errorPos == hex.spelling.data() + 1);
}

TEST_CASE("strings decode escapes and remember source offsets", "[schedule]") {
  Token token = only(R"("a\"b\\c\nd\te")");
  CHECK(token.string == "a\"b\\c\nd\te");
  // a at 1, \" at 2, b at 4, \\ at 5, c at 7, \n at 8, d at 10, \t at 11...
  CHECK(token.stringOffsets ==
        std::vector<uint32_t>{1, 2, 4, 5, 7, 8, 10, 11, 13});
  CHECK(token.getStringCharLoc(2).getPointer() == token.spelling.data() + 4);
  // Past the end: the closing quote.
  CHECK(token.getStringCharLoc(9).getPointer() == token.spelling.data() + 14);
  // Raw UTF-8 passes through.
  CHECK(only("\"caf\xC3\xA9\"").string == "caf\xC3\xA9");

  Token unterminated = Lexer::tokenize("\"abc\nx")[0];
  CHECK(unterminated.errorMessage == "unterminated string");
  CHECK(unterminated.spelling == "\"abc");
  Token badEscape = only(R"("a\qb")");
  CHECK(badEscape.errorPos == badEscape.spelling.data() + 2);
  CHECK(badEscape.errorMessage ==
        R"(unknown escape '\q' in string (valid: \\ \" \n \t))");
}

TEST_CASE("comments and blank space vanish; line ends stay", "[schedule]") {
  CHECK(kinds("# only a comment") == std::vector<Kind>{Kind::EndOfFile});
  CHECK(kinds("a \t\r\n  # c\n\tb") ==
        std::vector<Kind>{Kind::Identifier, Kind::Newline, Kind::Newline,
                          Kind::Identifier, Kind::EndOfFile});
  std::vector<Token> tokens = Lexer::tokenize("a\n  b\nc");
  CHECK(tokens[0].atLineStart);
  CHECK_FALSE(tokens[2].atLineStart);
  CHECK(tokens[4].atLineStart);
}

TEST_CASE("stray bytes are error tokens, NULs included", "[schedule]") {
  CHECK(only("$").errorMessage == "unexpected '$'");
  CHECK(only("\xC3").errorMessage == "unexpected byte 0xC3");
  std::string withNul("a\0b", 3);
  std::vector<Token> tokens = Lexer::tokenize(withNul);
  REQUIRE(tokens.size() == 4);
  CHECK(tokens[1].errorMessage == "unexpected byte 0x00");
  CHECK(tokens[2].spelling == "b");
  // A NUL inside a string is part of it; the lexer stops at the buffer's
  // end, not at a NUL.
  std::string nulString("\"x\0y\"", 5);
  CHECK(only(nulString).string == std::string("x\0y", 3));
}

TEST_CASE("describe names tokens for messages", "[schedule]") {
  CHECK(only("shard").describe() == "'shard'");
  CHECK(only("1.5").describe() == "number 1.5");
  CHECK(only("\"x\"").describe() == "a string");
  CHECK(only(")").describe() == "')'");
  CHECK(Lexer::tokenize("")[0].describe() == "end of file");
  std::string longName(100, 'x');
  CHECK(only(longName).describe() == "'" + std::string(32, 'x') + "...'");
}

} // namespace
