//===- CppEmitter.h - a rank's training step as C++ --------------*- C++ -*-===//
#ifndef SLAPO_TARGET_CPPEMITTER_H
#define SLAPO_TARGET_CPPEMITTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <string>
#include <vector>

namespace slapo {

struct RankProgramInfo {
  /// The model file, recorded in the program (and its checkpoints).
  std::string modelName;
  /// The mesh: every rank of a pipeline stage runs the same program on its
  /// own shards; the runtime knows which rank it is. `stage` is the
  /// program's stage.
  int64_t dp = 1, tp = 1, pp = 1, stage = 0;
  /// train(seed=): data sampling and dropout masks derive from it.
  uint64_t seed = 0;
  /// The backend whose kernels the program calls: "cpu" or "cuda" (the
  /// namespace of its kernel set in the runtime).
  std::string target = "cpu";
};

/// A file of a rank program's source, named relative to its directory.
struct SourceFile {
  std::string name;
  std::string text;
};

/// The step's source (step.cpp, or step.cu for CUDA) for a module whose
/// @train_step has a memory plan (slapo-plan-memory): tables of the arena's
/// persistent tensors, one function per phase calling libslapo_runtime's
/// kernels on views at planned offsets (each call commented with its module
/// path), and a main that hands them to the runtime's training driver. The
/// blocks of a module list whose calls in a phase are the same but for their
/// tensors' offsets share one function, called per block with a row of a
/// table of offsets; those functions are a second translation unit,
/// blocks.cpp (blocks.cu), with a header step.h that both include. Names from
/// the model appear only escaped, inside string literals and comments. Fails
/// with a diagnostic at an op code generation does not support.
mlir::FailureOr<std::vector<SourceFile>>
emitRankProgram(mlir::ModuleOp module, const RankProgramInfo &info);

/// 16 hex digits identifying the compiled program (its planned IR without
/// locations): checkpoints record it, and a program refuses another's.
std::string getProgramFingerprint(mlir::ModuleOp module);

/// `text` as a C++ string literal: every character but letters, digits and
/// `._/-: ` is written as a three-digit octal escape, so no name can end the
/// literal or a comment, or continue a line.
std::string quoteForCpp(llvm::StringRef text);

} // namespace slapo

#endif // SLAPO_TARGET_CPPEMITTER_H
