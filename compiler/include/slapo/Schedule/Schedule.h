//===- Schedule.h - what a schedule declares and asks for -------*- C++ -*-===//
//
// The checked content of a schedule file, independent of the model: the
// device mesh, the forward inputs, the training options and the primitives
// in file order. Everything that can be checked without the model (argument
// names, types, ranges, choices, duplicate declarations) is checked when it
// is built; Plan.h checks it against the imported model.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_SCHEDULE_SCHEDULE_H
#define SLAPO_SCHEDULE_SCHEDULE_H

#include "slapo/Frontend/InputSpec.h"
#include "slapo/Schedule/AST.h"
#include "slapo/Schedule/Diagnostics.h"
#include "slapo/Schedule/Selector.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/SMLoc.h"
#include <optional>
#include <string>
#include <vector>

namespace slapo::schedule {

/// `mesh(dp=, tp=, pp=)`: data-, tensor- and pipeline-parallel degrees.
struct Mesh {
  int64_t dp = 1, tp = 1, pp = 1;
  llvm::SMLoc loc;   // of the declaration; invalid if there is none
  llvm::SMLoc ppLoc; // of the pp argument, or loc
  int64_t getWorldSize() const { return dp * tp * pp; }
};

/// `train(...)`; the defaults are documented in schedules/README.md.
struct TrainOptions {
  std::string optimizer = "adamw";
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999; // adamw
  double eps = 1e-8;                 // adamw
  double weightDecay = 0;
  double momentum = 0; // sgd
  double gradClip = 0; // 0: no clipping
  std::string precision = "fp32";
  int64_t microbatches = 1;
  int64_t seed = 0;
  /// "forward": the forward returns the scalar loss; "cross_entropy": it
  /// returns logits and the loss is added.
  std::string loss = "forward";
  std::string lrSchedule = "constant";
  int64_t warmupSteps = 0; // warmup_cosine
  /// The limit of each rank's planned arena in bytes; 0: none.
  int64_t memoryBudget = 0;
  /// "none": one kernel per op, but in the modules of fuse(); "auto": every
  /// module's elementwise chains fused (slapo-fuse-elementwise).
  std::string fusion = "auto";
  llvm::SMLoc loc;             // of the declaration; invalid if there is none
  llvm::SMLoc lossLoc;         // of the loss argument, or loc
  llvm::SMLoc microbatchesLoc; // of the microbatches argument, or loc
  llvm::SMLoc memoryBudgetLoc; // of the memory_budget argument, if given
};

/// `input("name", dtype[shape])`.
struct InputDeclaration {
  InputSpec spec;
  llvm::SMLoc loc;
};

enum class PrimitiveKind {
  Shard,
  Sync,
  Checkpoint,
  Fuse,
  Replace,
  Decompose,
  ForkRng,
  CutPipelineStage,
};

/// "shard", "cut_pipeline_stage": the name in schedules.
llvm::StringRef getPrimitiveName(PrimitiveKind kind);

/// One argument of a primitive as the pipeline passes it on.
struct PrimitiveArgument {
  std::string name;
  std::string value; // as printed: a choice, a number, a parameter name
  int64_t integer = 0;
  double number = 0; // a number's value (an integer's too)
  llvm::SMLoc loc;
};

/// `sch[SELECTOR].PRIMITIVE(arguments)`.
struct Primitive {
  PrimitiveKind kind;
  llvm::SMLoc loc; // of the primitive's name
  SelectorPattern selector;
  /// The selector as written: its position and those of its characters.
  ast::Value selectorString;
  /// The arguments given, in signature order.
  std::vector<PrimitiveArgument> arguments;

  const PrimitiveArgument *getArgument(llvm::StringRef name) const;
};

struct Schedule {
  Mesh mesh;
  std::vector<InputDeclaration> inputs;
  TrainOptions train;
  std::vector<Primitive> primitives;
  /// False if an input() declaration had an error: importing the model
  /// with the remaining inputs would only add confusing errors.
  bool inputsValid = true;
  /// The start of the schedule text, where problems of the schedule as a
  /// whole are reported.
  llvm::SMLoc fileStart;
};

/// "12GiB", "512MiB", "1.5GB", "4096B" (binary units as 1024^n, decimal
/// ones as 1000^n) in bytes; nullopt if `text` is not such a size.
std::optional<int64_t> parseByteSize(llvm::StringRef text);

/// Checks the statements' meaning apart from the model; every problem is
/// reported, and the statements with problems are left out.
Schedule buildSchedule(llvm::ArrayRef<ast::Statement> statements,
                       llvm::SMLoc fileStart, DiagnosticReporter &reporter);

/// The inputs to import the model with: the schedule's input() declarations
/// or the --input flags. Both may be given only if they agree exactly; each
/// disagreement is reported. Returns nullopt if there was one.
std::optional<std::vector<InputSpec>>
resolveInputs(const Schedule &schedule,
              llvm::ArrayRef<InputSpec> commandLineInputs,
              DiagnosticReporter &reporter);

/// The inputs of one microbatch of one rank, the shapes the model is
/// imported with: with mesh(dp=N), the `inputs` declare the global batch and
/// each rank of a dp group gets rows [r * B/N, (r+1) * B/N) of dim 0 of every
/// input; train(microbatches=M) cuts a rank's rows in M equal microbatches. A
/// dim 0 that does not divide by N * M is reported.
std::optional<std::vector<InputSpec>>
splitBatchIntoMicrobatches(const Schedule &schedule,
                           llvm::ArrayRef<InputSpec> inputs,
                           DiagnosticReporter &reporter);

} // namespace slapo::schedule

#endif // SLAPO_SCHEDULE_SCHEDULE_H
