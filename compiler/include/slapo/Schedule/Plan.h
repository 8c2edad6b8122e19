//===- Plan.h - a schedule applied to a model -------------------*- C++ -*-===//
//
// Planning resolves a schedule against the imported slapo IR: selectors
// become lists of module paths, every primitive is checked against the
// modules it names (parameters exist, axes are in range, dimensions divide
// by tp, pipeline cuts give `pp` stages, the forward returns what train()
// expects), and each primitive becomes one pass of the pipeline, with
// options, in schedule order, where that pass exists:
//
//   slapo-shard{modules=transformer.h.0.attn.c_attn,... param=weight axis=1}
//
// The plan gives the training pipeline (slapo/Transforms/Pipeline.h) its
// options.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_SCHEDULE_PLAN_H
#define SLAPO_SCHEDULE_PLAN_H

#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Schedule/Schedule.h"
#include "slapo/Transforms/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include <optional>
#include <string>
#include <vector>

namespace slapo::schedule {

/// The modules of an imported model as selectors see them.
class ModuleIndex {
public:
  explicit ModuleIndex(mlir::ModuleOp module);

  /// Every module path: those of the forward's ops, the owners of
  /// parameters and buffers (aliases included), and all their prefixes; in
  /// natural order (numeric components compare as numbers: h.2 < h.10).
  llvm::ArrayRef<std::string> getPaths() const { return paths; }
  /// The paths `selector` matches, in natural order.
  std::vector<std::string> match(const SelectorPattern &selector) const;
  /// The parameter or buffer named `fullName` (its symbol or an alias).
  ParamOp lookupParameter(llvm::StringRef fullName) const {
    return parameters.lookup(fullName);
  }
  /// The names of the parameters and buffers directly on module `path`.
  std::vector<std::string> getParameterNames(llvm::StringRef path) const;
  /// The function the model's ops are in (null if the module has none).
  mlir::func::FuncOp getForward() const { return forward; }

  /// Whether `a` comes before `b` in natural order.
  static bool naturalLess(llvm::StringRef a, llvm::StringRef b);

private:
  std::vector<std::string> paths;
  llvm::StringMap<ParamOp> parameters;
  mlir::func::FuncOp forward;
};

/// A primitive applied to the modules it selects: one pass of the pipeline.
struct PipelineEntry {
  PrimitiveKind kind;
  llvm::SMLoc loc; // of the primitive in the schedule
  std::vector<std::string> modules;
  /// Pass options after `modules`, in order: {"param", "weight"}, ...
  std::vector<std::pair<std::string, std::string>> options;
  /// shard: the symbols of the parameters it splits.
  std::vector<std::string> parameterSymbols;

  /// "slapo-shard", "slapo-cut-pipeline-stage".
  std::string getPassName() const;
  /// The pass with its options: `slapo-shard{modules=a,b param=weight}`.
  std::string getPass() const;
  /// `{modules=a,b param=weight axis=1}`, values printed as the passes'
  /// ModelName options print them.
  void printOptions(llvm::raw_ostream &os) const;
};

struct Plan {
  std::vector<PipelineEntry> pipeline;
  /// With train(memory_budget=): the modules slapo-checkpoint may add to
  /// meet it, the outermost numbered ones (the blocks of module lists).
  std::vector<std::string> checkpointCandidates;
  /// Of train(memory_budget=), if given.
  llvm::SMLoc memoryBudgetLoc;
  /// train(microbatches=), and where it says so if above 1.
  int64_t microbatches = 1;
  llvm::SMLoc microbatchesLoc;
};

/// Checks `schedule` against `module` and builds its pipeline; reports
/// every problem and returns nullopt if there was any.
std::optional<Plan> planSchedule(const Schedule &schedule,
                                 mlir::ModuleOp module,
                                 DiagnosticReporter &reporter);

/// Fuses each primitive's schedule location into the locations of the ops
/// it will transform (the ops of the selected modules, and for shard the
/// parameters), schedule first, so that later diagnostics point at the
/// schedule line as well as at the model's source. With a memory budget,
/// the module gets its location: slapo-checkpoint reports a budget it
/// cannot meet there; so does slapo-microbatch what it cannot split, at
/// train(microbatches=).
void attachScheduleLocations(const Plan &plan, mlir::ModuleOp module,
                             const llvm::SourceMgr &sourceMgr);

/// The options of the training pipeline for `mesh`, `train` and `plan` (if
/// any): its primitives' passes, in schedule order.
void setTrainingPipelineOptions(const Mesh &mesh, const TrainOptions &train,
                                const Plan *plan,
                                TrainingPipelineOptions &options);

/// The declarations and `pipeline` (built from the plan) as MLIR's textual
/// pipeline, one item per line, for --emit=schedule.
void printPlan(const Schedule &schedule, llvm::ArrayRef<InputSpec> inputs,
               const Plan &plan, const mlir::OpPassManager &pipeline,
               llvm::raw_ostream &os);

} // namespace slapo::schedule

#endif // SLAPO_SCHEDULE_PLAN_H
