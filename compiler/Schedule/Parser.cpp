//===- Parser.cpp - schedule text to syntax tree --------------------------===//
#include "slapo/Schedule/Parser.h"

#include "slapo/Schedule/Lexer.h"

namespace slapo::schedule {
namespace {

using Kind = Token::Kind;

/// Tuples and shapes nest; deeper than this is not a schedule but an attempt
/// to exhaust the stack.
constexpr unsigned kMaxValueNesting = 16;

class Parser {
public:
  Parser(llvm::StringRef buffer, DiagnosticReporter &reporter)
      : tokens(Lexer::tokenize(buffer)), reporter(reporter) {}

  std::vector<ast::Statement> parseFile();

private:
  const Token &current() const { return tokens[position]; }
  const Token &next() const {
    return tokens[std::min(position + 1, tokens.size() - 1)];
  }
  void advance() {
    if (!current().is(Kind::EndOfFile))
      ++position;
  }
  /// One past the last character of the previous token.
  llvm::SMLoc previousEnd() const {
    return llvm::SMLoc::getFromPointer(tokens[position - 1].spelling.end());
  }

  /// Reports that `what` was expected at the current token (or the lexer's
  /// own error, if the current token is malformed). `open` is the bracket
  /// left unclosed when the statement ended early.
  bool fail(const llvm::Twine &what, const Token *open = nullptr);
  bool expect(Kind kind, const char *what, const Token *open = nullptr);
  /// Inside brackets, a line end followed by an indented line continues the
  /// statement; one followed by a line in column 1 does not.
  void skipContinuationNewlines();
  /// Skips to the next line that starts in column 1.
  void recover();

  bool parseStatement(ast::Statement &statement);
  bool parseArguments(ast::Call &call);
  /// `(`...`)` or `[`...`]` holding comma-separated items, the current token
  /// being the opening bracket.
  bool parseList(Kind close, const char *closeSpelling,
                 llvm::function_ref<bool()> parseItem);
  bool parseValue(ast::Value &value, unsigned depth);

  std::vector<Token> tokens;
  size_t position = 0;
  DiagnosticReporter &reporter;
};

} // namespace

bool Parser::fail(const llvm::Twine &what, const Token *open) {
  const Token &token = current();
  if (token.is(Kind::Error)) {
    reporter.error(llvm::SMLoc::getFromPointer(token.errorPos),
                   token.errorMessage);
    return false;
  }
  std::vector<DiagnosticNote> notes;
  if (open && (token.is(Kind::Newline) || token.is(Kind::EndOfFile)))
    notes.push_back(
        {open->getLoc(), ("to match this '" + open->spelling + "'").str()});
  reporter.error(token.getLoc(),
                 "expected " + what + ", found " + token.describe(), notes);
  return false;
}

bool Parser::expect(Kind kind, const char *what, const Token *open) {
  if (!current().is(kind))
    return fail(what, open);
  advance();
  return true;
}

void Parser::skipContinuationNewlines() {
  while (current().is(Kind::Newline) && !next().atLineStart &&
         !next().is(Kind::EndOfFile))
    advance();
}

void Parser::recover() {
  do
    advance();
  while (!current().is(Kind::EndOfFile) &&
         !(current().atLineStart && !current().is(Kind::Newline)));
}

std::vector<ast::Statement> Parser::parseFile() {
  std::vector<ast::Statement> statements;
  while (!current().is(Kind::EndOfFile) && !reporter.stopped()) {
    if (current().is(Kind::Newline)) {
      advance();
      continue;
    }
    ast::Statement statement;
    bool parsed;
    if (!current().atLineStart && !current().is(Kind::Error)) {
      reporter.error(current().getLoc(),
                     "statements start in column 1; only lines that continue "
                     "a statement inside brackets are indented");
      parsed = false;
    } else {
      parsed = parseStatement(statement) &&
               (current().is(Kind::EndOfFile) ||
                expect(Kind::Newline, "end of line after the statement"));
    }
    if (parsed)
      statements.push_back(std::move(statement));
    else
      recover();
  }
  return statements;
}

bool Parser::parseStatement(ast::Statement &statement) {
  statement.loc = current().getLoc();
  if (!current().is(Kind::Identifier))
    return fail("a statement: mesh(...), input(...), train(...) or "
                "sch[\"...\"].primitive(...)");
  if (current().spelling != "sch") {
    statement.kind = ast::Statement::Kind::Declaration;
    statement.call.name = current().spelling.str();
    statement.call.nameLoc = current().getLoc();
    advance();
    return parseArguments(statement.call);
  }

  statement.kind = ast::Statement::Kind::Primitive;
  advance();
  const Token &open = current();
  if (!expect(Kind::LBracket, "'[' after 'sch'"))
    return false;
  if (!current().is(Kind::String))
    return fail("a selector string, like \"transformer.h.*.attn\"");
  if (!parseValue(statement.selector, /*depth=*/0) ||
      !expect(Kind::RBracket, "']' after the selector", &open) ||
      !expect(Kind::Dot, "'.' and a primitive after 'sch[...]'"))
    return false;
  if (!current().is(Kind::Identifier))
    return fail("a primitive name");
  statement.call.name = current().spelling.str();
  statement.call.nameLoc = current().getLoc();
  advance();
  if (!parseArguments(statement.call))
    return false;
  const ast::Value &selector = statement.selector;
  statement.pattern = SelectorPattern::parse(
      selector.string,
      [&](size_t index) { return selector.getStringCharLoc(index); }, reporter);
  return statement.pattern.has_value();
}

bool Parser::parseList(Kind close, const char *closeSpelling,
                       llvm::function_ref<bool()> parseItem) {
  const Token &open = current();
  advance();
  while (true) {
    skipContinuationNewlines();
    if (current().is(close)) {
      advance();
      return true;
    }
    if (current().is(Kind::Newline) || current().is(Kind::EndOfFile))
      return fail(llvm::Twine("'") + closeSpelling + "'", &open);
    if (!parseItem())
      return false;
    skipContinuationNewlines();
    if (current().is(Kind::Comma)) {
      advance();
      continue;
    }
    if (!current().is(close))
      return fail(llvm::Twine("',' or '") + closeSpelling + "'", &open);
  }
}

bool Parser::parseArguments(ast::Call &call) {
  if (!current().is(Kind::LParen))
    return fail("'(' after '" + call.name + "'");
  return parseList(Kind::RParen, ")", [&] {
    ast::Argument argument;
    if (current().is(Kind::Identifier) && next().is(Kind::Equals)) {
      argument.keyword = current().spelling.str();
      argument.keywordLoc = current().getLoc();
      advance();
      advance();
      skipContinuationNewlines();
    }
    if (!parseValue(argument.value, /*depth=*/0))
      return false;
    call.arguments.push_back(std::move(argument));
    return true;
  });
}

bool Parser::parseValue(ast::Value &value, unsigned depth) {
  if (depth > kMaxValueNesting)
    return fail("at most " + llvm::Twine(kMaxValueNesting) +
                " levels of nested brackets");
  const Token &first = current();
  value.range.Start = first.getLoc();
  switch (first.kind) {
  case Kind::Minus:
    advance();
    if (current().is(Kind::Integer)) {
      value.kind = ast::Value::Kind::Integer;
      value.integer = -current().integer;
      value.number = static_cast<double>(value.integer);
    } else if (current().is(Kind::Float)) {
      value.kind = ast::Value::Kind::Float;
      value.number = -current().number;
    } else {
      return fail("a number after '-'");
    }
    break;
  case Kind::Integer:
    value.kind = ast::Value::Kind::Integer;
    value.integer = first.integer;
    value.number = static_cast<double>(first.integer);
    break;
  case Kind::Float:
    value.kind = ast::Value::Kind::Float;
    value.number = first.number;
    break;
  case Kind::String:
    value.kind = ast::Value::Kind::String;
    value.string = first.string;
    value.stringOffsets = first.stringOffsets;
    break;
  case Kind::LParen:
    value.kind = ast::Value::Kind::Tuple;
    if (!parseList(Kind::RParen, ")", [&] {
          value.elements.emplace_back();
          return parseValue(value.elements.back(), depth + 1);
        }))
      return false;
    value.range.End = previousEnd();
    return true;
  case Kind::Identifier:
    if (next().is(Kind::LBracket)) {
      value.kind = ast::Value::Kind::TypedShape;
      value.string = first.spelling.str();
      advance();
      if (!parseList(Kind::RBracket, "]", [&] {
            value.elements.emplace_back();
            return parseValue(value.elements.back(), depth + 1);
          }))
        return false;
      value.range.End = previousEnd();
      return true;
    }
    return fail("a value (strings are written in double quotes: \"" +
                first.spelling + "\")");
  default:
    return fail("a value");
  }
  advance();
  value.range.End = previousEnd();
  return true;
}

std::vector<ast::Statement> parseSchedule(llvm::StringRef buffer,
                                          DiagnosticReporter &reporter) {
  return Parser(buffer, reporter).parseFile();
}

} // namespace slapo::schedule
