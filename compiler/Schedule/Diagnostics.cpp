//===- Diagnostics.cpp - problems found in a schedule ---------------------===//
#include "slapo/Schedule/Diagnostics.h"

namespace slapo::schedule {

void DiagnosticReporter::error(llvm::SMLoc loc, const llvm::Twine &message,
                               llvm::ArrayRef<DiagnosticNote> notes) {
  if (hasStopped)
    return;
  if (numErrors == errorLimit) {
    hasStopped = true;
    report(Severity::Note, loc,
           "too many errors (" + llvm::Twine(errorLimit) + "), stopping here",
           {});
    return;
  }
  ++numErrors;
  report(Severity::Error, loc, message, notes);
}

} // namespace slapo::schedule
