//===- MLIRDiagnostics.h - schedule problems as MLIR diagnostics -*- C++
//-*-===//
//
// Schedule positions become FileLineColLocs of the buffer in the compiler's
// SourceMgr that holds them, so a SourceMgrDiagnosticHandler prints
// `s.sched:3:7: error: ...` with the line and a caret, and a
// SourceMgrDiagnosticVerifierHandler checks them against `# expected-error`
// comments in the schedule.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_SCHEDULE_MLIRDIAGNOSTICS_H
#define SLAPO_SCHEDULE_MLIRDIAGNOSTICS_H

#include "slapo/Schedule/Diagnostics.h"

#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/SourceMgr.h"

namespace slapo::schedule {

/// `loc` as file:line:col of the `sourceMgr` buffer holding it (unknown if
/// none does).
mlir::Location getScheduleLocation(const llvm::SourceMgr &sourceMgr,
                                   llvm::SMLoc loc, mlir::MLIRContext *context);

/// Reports through `context`'s diagnostic engine.
class MLIRDiagnosticReporter : public DiagnosticReporter {
public:
  MLIRDiagnosticReporter(const llvm::SourceMgr &sourceMgr,
                         mlir::MLIRContext &context,
                         unsigned errorLimit = kDefaultErrorLimit)
      : DiagnosticReporter(errorLimit), sourceMgr(sourceMgr), context(context) {
  }

protected:
  void report(Severity severity, llvm::SMLoc loc, const llvm::Twine &message,
              llvm::ArrayRef<DiagnosticNote> notes) override;

private:
  const llvm::SourceMgr &sourceMgr;
  mlir::MLIRContext &context;
};

} // namespace slapo::schedule

#endif // SLAPO_SCHEDULE_MLIRDIAGNOSTICS_H
