//===- MLIRDiagnostics.cpp - schedule problems as MLIR diagnostics --------===//
#include "slapo/Schedule/MLIRDiagnostics.h"

#include "mlir/IR/Diagnostics.h"

namespace slapo::schedule {

mlir::Location getScheduleLocation(const llvm::SourceMgr &sourceMgr,
                                   llvm::SMLoc loc,
                                   mlir::MLIRContext *context) {
  unsigned bufferID = sourceMgr.FindBufferContainingLoc(loc);
  if (bufferID == 0)
    return mlir::UnknownLoc::get(context);
  auto [line, column] = sourceMgr.getLineAndColumn(loc, bufferID);
  return mlir::FileLineColLoc::get(
      context, sourceMgr.getMemoryBuffer(bufferID)->getBufferIdentifier(), line,
      column);
}

void MLIRDiagnosticReporter::report(Severity severity, llvm::SMLoc loc,
                                    const llvm::Twine &message,
                                    llvm::ArrayRef<DiagnosticNote> notes) {
  mlir::Location location = getScheduleLocation(sourceMgr, loc, &context);
  mlir::InFlightDiagnostic diagnostic = context.getDiagEngine().emit(
      location, severity == Severity::Error ? mlir::DiagnosticSeverity::Error
                                            : mlir::DiagnosticSeverity::Note);
  diagnostic << message;
  for (const DiagnosticNote &note : notes)
    diagnostic.attachNote(getScheduleLocation(sourceMgr, note.loc, &context))
        << note.message;
}

} // namespace slapo::schedule
