//===- ScheduleParserFuzzer.cpp - libFuzzer target of the schedule parser -===//
//
// Feeds arbitrary bytes to the lexer and parser, matches every selector
// that parses against a few module paths and looks up suggestions for every
// name. Sanitizers catch invalid reads and undefined behaviour; the checks
// here catch positions outside the input and a broken error limit.
//
//===----------------------------------------------------------------------===//
#include "slapo/Schedule/Parser.h"
#include "slapo/Schedule/Suggestions.h"

#include <cstdint>

using namespace slapo::schedule;

namespace {

const char *textBegin;
const char *textEnd;

void checkInText(llvm::SMLoc loc) {
  if (loc.getPointer() < textBegin || loc.getPointer() > textEnd)
    __builtin_trap();
}

void checkValue(const ast::Value &value) {
  checkInText(value.range.Start);
  checkInText(value.range.End);
  for (size_t i = 0; i <= value.string.size(); ++i)
    if (value.kind == ast::Value::Kind::String)
      checkInText(value.getStringCharLoc(i));
  for (const ast::Value &element : value.elements)
    checkValue(element);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  textBegin = text.begin();
  textEnd = text.end();

  CollectingDiagnosticReporter reporter;
  std::vector<ast::Statement> statements = parseSchedule(text, reporter);
  if (reporter.getNumErrors() > DiagnosticReporter::kDefaultErrorLimit)
    __builtin_trap();
  for (const auto &diagnostic : reporter.getDiagnostics()) {
    checkInText(diagnostic.loc);
    for (const DiagnosticNote &note : diagnostic.notes)
      checkInText(note.loc);
  }

  static const std::string paths[] = {"transformer",
                                      "transformer.h",
                                      "transformer.h.0",
                                      "transformer.h.0.attn",
                                      "transformer.h.10.mlp.c_fc",
                                      "lm_head",
                                      "bl\"ock\n*/\xC3\xA9",
                                      "0.1.2.3.4.5.6.7.8.9"};
  static const llvm::StringRef names[] = {
      "mesh", "input", "train", "shard", "sync", "cut_pipeline_stage"};
  for (const ast::Statement &statement : statements) {
    checkInText(statement.loc);
    checkInText(statement.call.nameLoc);
    (void)findClosestName(statement.call.name, names);
    for (const ast::Argument &argument : statement.call.arguments) {
      checkInText(argument.getLoc());
      checkValue(argument.value);
    }
    if (statement.kind != ast::Statement::Kind::Primitive)
      continue;
    checkValue(statement.selector);
    if (!statement.pattern)
      __builtin_trap(); // a primitive is kept only with its pattern
    for (const std::string &path : paths)
      (void)statement.pattern->matches(path);
    (void)statement.pattern->findUnmatchedElement(paths);
    (void)findNearestPaths(statement.selector.string, paths, 3);
  }
  return 0;
}
