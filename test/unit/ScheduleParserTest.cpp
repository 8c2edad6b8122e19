//===- ScheduleParserTest.cpp - schedule text to syntax tree --------------===//
//
// The parser's trees and its recovery, and a replay of the fuzzer's corpus
// (test/fuzz/corpus) through the parser and the declaration checks, so that
// every build checks those inputs, not only sanitizer builds.
//
//===----------------------------------------------------------------------===//
#include "slapo/Schedule/Parser.h"
#include "slapo/Schedule/Schedule.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <catch2/catch.hpp>

namespace {

using namespace slapo::schedule;

/// The messages reported for `text`, each prefixed by its line:column.
std::vector<std::string> errorsOf(llvm::StringRef text) {
  CollectingDiagnosticReporter reporter;
  (void)parseSchedule(text, reporter);
  std::vector<std::string> errors;
  for (const auto &diagnostic : reporter.getDiagnostics()) {
    llvm::StringRef before(text.data(),
                           diagnostic.loc.getPointer() - text.data());
    size_t line = before.count('\n') + 1;
    size_t column = before.size() - (before.rfind('\n') + 1) + 1;
    errors.push_back(std::to_string(line) + ":" + std::to_string(column) + " " +
                     diagnostic.message);
  }
  return errors;
}

TEST_CASE("declarations and primitives parse into calls", "[schedule]") {
  llvm::StringRef text = "mesh(dp=1, tp=2)\n"
                         "input(\"x\", f32[4, 16])\n"
                         "train(betas=(0.9, 0.95),\n"
                         "      lr=-3e-4)\n"
                         "sch[\"h.{0..1}\"].shard(\"weight\", axis=1)\n";
  CollectingDiagnosticReporter reporter;
  std::vector<ast::Statement> statements = parseSchedule(text, reporter);
  CHECK(reporter.getDiagnostics().empty());
  REQUIRE(statements.size() == 4);

  const ast::Call &mesh = statements[0].call;
  CHECK(statements[0].kind == ast::Statement::Kind::Declaration);
  CHECK(mesh.name == "mesh");
  REQUIRE(mesh.arguments.size() == 2);
  CHECK(mesh.arguments[1].keyword == "tp");
  CHECK(mesh.arguments[1].value.integer == 2);

  const ast::Value &type = statements[1].call.arguments[1].value;
  CHECK(type.kind == ast::Value::Kind::TypedShape);
  CHECK(type.string == "f32");
  REQUIRE(type.elements.size() == 2);
  CHECK(type.elements[1].integer == 16);
  CHECK(llvm::StringRef(type.range.Start.getPointer(),
                        type.range.End.getPointer() -
                            type.range.Start.getPointer()) == "f32[4, 16]");

  const ast::Call &train = statements[2].call;
  CHECK(train.arguments[0].value.kind == ast::Value::Kind::Tuple);
  CHECK(train.arguments[0].value.elements[1].number == 0.95);
  CHECK(train.arguments[1].value.number == -3e-4);

  const ast::Statement &shard = statements[3];
  CHECK(shard.kind == ast::Statement::Kind::Primitive);
  CHECK(shard.selector.string == "h.{0..1}");
  REQUIRE(shard.pattern);
  CHECK(shard.pattern->matches("h.1"));
  CHECK(shard.call.name == "shard");
  CHECK(!shard.call.arguments[0].isKeyword());
}

TEST_CASE("every bad statement is reported, then parsing resumes",
          "[schedule]") {
  CHECK(errorsOf("mesh(tp=2\n"
                 "mesh(tp=2)\n"
                 "  x()\n"
                 "y() z\n"
                 "sch[\"a..b\"].checkpoint()\n"
                 "w(\"unterminated\n"
                 "ok()\n") ==
        std::vector<std::string>{
            "1:10 expected ',' or ')', found end of line",
            "3:3 statements start in column 1; only lines that continue a "
            "statement inside brackets are indented",
            "4:5 expected end of line after the statement, found 'z'",
            "5:8 empty path component in selector",
            "6:3 unterminated string",
        });
  // The unclosed bracket is named in a note.
  CollectingDiagnosticReporter reporter;
  (void)parseSchedule("f(1,\n", reporter);
  REQUIRE(reporter.getDiagnostics().size() == 1);
  REQUIRE(reporter.getDiagnostics()[0].notes.size() == 1);
  CHECK(reporter.getDiagnostics()[0].notes[0].message == "to match this '('");
}

TEST_CASE("the error limit stops parsing with one note", "[schedule]") {
  std::string text;
  for (int i = 0; i < 30; ++i)
    text += "1\n";
  CollectingDiagnosticReporter reporter(/*errorLimit=*/5);
  (void)parseSchedule(text, reporter);
  REQUIRE(reporter.getDiagnostics().size() == 6);
  CHECK(reporter.getNumErrors() == 5);
  CHECK_FALSE(reporter.getDiagnostics()[5].isError);
  CHECK(reporter.getDiagnostics()[5].message ==
        "too many errors (5), stopping here");
  CHECK(reporter.stopped());
}

TEST_CASE("deep nesting is an error, not a stack overflow", "[schedule]") {
  std::string text = "f(" + std::string(100000, '(') + "\n";
  std::vector<std::string> errors = errorsOf(text);
  REQUIRE(errors.size() == 1);
  CHECK(errors[0] ==
        "1:20 expected at most 16 levels of nested brackets, found '('");
}

TEST_CASE("the fuzz corpus parses without crashing", "[schedule]") {
  std::string corpus = SLAPO_SOURCE_DIR "/test/fuzz/corpus";
  std::error_code error;
  size_t files = 0;
  for (llvm::sys::fs::directory_iterator it(corpus, error), end;
       it != end && !error; it.increment(error)) {
    auto buffer = llvm::MemoryBuffer::getFile(it->path());
    REQUIRE(buffer);
    llvm::StringRef text = (*buffer)->getBuffer();
    CollectingDiagnosticReporter reporter;
    std::vector<ast::Statement> statements = parseSchedule(text, reporter);
    (void)buildSchedule(statements, llvm::SMLoc::getFromPointer(text.data()),
                        reporter);
    INFO(it->path());
    CHECK(reporter.getNumErrors() <= DiagnosticReporter::kDefaultErrorLimit);
    for (const auto &diagnostic : reporter.getDiagnostics()) {
      CHECK(diagnostic.loc.getPointer() >= text.begin());
      CHECK(diagnostic.loc.getPointer() <= text.end());
    }
    ++files;
  }
  CHECK_FALSE(error);
  CHECK(files >= 8);
}

} // namespace
