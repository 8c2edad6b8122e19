//===- Parser.h - schedule text to syntax tree ------------------*- C++ -*-===//
//
// Grammar (line ends end statements, except inside brackets, where a
// statement continues on indented lines; `#` starts a comment):
//
//   schedule  := { [statement] NEWLINE }
//   statement := IDENT call                               declaration
//              | 'sch' '[' STRING ']' '.' IDENT call      primitive
//   call      := '(' [argument { ',' argument } [',']] ')'
//   argument  := [IDENT '='] value
//   value     := ['-'] INTEGER | ['-'] FLOAT | STRING
//              | '(' [value { ',' value } [',']] ')'      tuple
//              | IDENT '[' [value { ',' value } [',']] ']' typed shape
//
// Statements start in column 1. After a syntax error the parser reports it
// and resumes at the next line that starts in column 1, so every bad
// statement of a file is reported in one run (up to the reporter's limit).
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_SCHEDULE_PARSER_H
#define SLAPO_SCHEDULE_PARSER_H

#include "slapo/Schedule/AST.h"
#include "slapo/Schedule/Diagnostics.h"

#include "llvm/ADT/StringRef.h"
#include <vector>

namespace slapo::schedule {

/// The statements of `buffer` that parse; the others are reported. The
/// statements point into `buffer`, which must outlive them.
std::vector<ast::Statement> parseSchedule(llvm::StringRef buffer,
                                          DiagnosticReporter &reporter);

} // namespace slapo::schedule

#endif // SLAPO_SCHEDULE_PARSER_H
