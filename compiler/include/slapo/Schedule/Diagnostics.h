//===- Diagnostics.h - problems found in a schedule -------------*- C++ -*-===//
//
// The schedule library reports every problem at a position in the schedule
// text (an llvm::SMLoc into the buffer it was given). A DiagnosticReporter
// counts the errors and, past a limit, reports one "too many errors" note and
// tells its callers to stop. The syntax layer (lexer, parser, selectors) sees
// only this interface, so it builds and is fuzzed without MLIR;
// MLIRDiagnostics.h turns the positions into MLIR diagnostics.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_SCHEDULE_DIAGNOSTICS_H
#define SLAPO_SCHEDULE_DIAGNOSTICS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/SMLoc.h"
#include <string>
#include <vector>

namespace slapo::schedule {

/// A second position that explains an error ("previous declaration here").
struct DiagnosticNote {
  llvm::SMLoc loc;
  std::string message;
};

class DiagnosticReporter {
public:
  static constexpr unsigned kDefaultErrorLimit = 20;

  explicit DiagnosticReporter(unsigned errorLimit = kDefaultErrorLimit)
      : errorLimit(errorLimit) {}
  virtual ~DiagnosticReporter() = default;

  /// Reports an error. The first error past the limit is reported as a
  /// "too many errors" note instead, and later ones are dropped.
  void error(llvm::SMLoc loc, const llvm::Twine &message,
             llvm::ArrayRef<DiagnosticNote> notes = {});

  bool hadErrors() const { return numErrors > 0; }
  unsigned getNumErrors() const { return numErrors; }
  /// True once an error past the limit was dropped: callers stop looking for
  /// more problems.
  bool stopped() const { return hasStopped; }

protected:
  enum class Severity { Error, Note };
  virtual void report(Severity severity, llvm::SMLoc loc,
                      const llvm::Twine &message,
                      llvm::ArrayRef<DiagnosticNote> notes) = 0;

private:
  unsigned errorLimit;
  unsigned numErrors = 0;
  bool hasStopped = false;
};

/// Keeps what is reported in memory, for tests and the fuzzer.
class CollectingDiagnosticReporter : public DiagnosticReporter {
public:
  struct Diagnostic {
    bool isError;
    llvm::SMLoc loc;
    std::string message;
    std::vector<DiagnosticNote> notes;
  };

  using DiagnosticReporter::DiagnosticReporter;
  const std::vector<Diagnostic> &getDiagnostics() const { return diagnostics; }

protected:
  void report(Severity severity, llvm::SMLoc loc, const llvm::Twine &message,
              llvm::ArrayRef<DiagnosticNote> notes) override {
    diagnostics.push_back(
        {severity == Severity::Error, loc, message.str(), notes.vec()});
  }

private:
  std::vector<Diagnostic> diagnostics;
};

} // namespace slapo::schedule

#endif // SLAPO_SCHEDULE_DIAGNOSTICS_H
