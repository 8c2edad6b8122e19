//===- Output.h - slapoc's output directory ---------------------*- C++ -*-===//
//
// `-o out/` is written under a temporary name next to `out` and renamed into
// place only when every file of it is complete: a failed compilation leaves
// no half-written directory, and an earlier output survives it.
//
// slapoc replaces only what it can prove it wrote: an output directory's
// manifest.json carries "format": "slapoc-output", the format's version and
// the list of files slapoc wrote there. A directory without such a manifest,
// or holding any file the manifest does not list (a checkpoint saved inside
// it, a user's notes), is never replaced: slapoc refuses and names them.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_DRIVER_OUTPUT_H
#define SLAPO_DRIVER_OUTPUT_H

#include "slapo/Frontend/TorchScriptImporter.h"
#include "slapo/Target/CppEmitter.h"

#include "mlir/Support/Timing.h"
#include "llvm/Support/Error.h"

#include <string>

namespace slapo {

/// A directory being written, `target.partial-<pid>`: removed on
/// destruction unless published, and when slapoc is ended by SIGINT, SIGTERM
/// or SIGHUP. One exists at a time in a process.
class StagedDirectory {
public:
  /// Refuses a `target` that exists and is neither an empty directory nor an
  /// earlier slapoc output holding only slapoc's files. Removes what
  /// crashed slapoc processes left next to `target` (their staging
  /// directories; an earlier output they were replacing is put back).
  static llvm::Expected<StagedDirectory> create(llvm::StringRef target);
  StagedDirectory(StagedDirectory &&other);
  ~StagedDirectory();

  /// Where to write: a sibling of the target.
  const std::string &getPath() const { return staging; }
  /// Renames the staging directory to the target, replacing an earlier
  /// output after checking again that it holds only slapoc's files (a run
  /// may have saved checkpoints into it meanwhile).
  llvm::Error publish();

private:
  StagedDirectory(std::string target, std::string staging)
      : target(std::move(target)), staging(std::move(staging)) {}
  std::string target, staging;
};

/// How a rank program is built from its source.
struct HostBuild {
  /// "cpu" or "cuda": the backend the program runs on.
  std::string target = "cpu";
  /// With target "cuda": the GPU architecture (90 for sm_90).
  unsigned cudaArch = 90;
  /// False for --emit=cpp: sources only.
  bool compile = true;
};

/// What the manifest records besides the memory plan.
struct ManifestInfo {
  std::string compilerVersion;
  std::string schedulePath, scheduleHash;
  int64_t dp = 1, tp = 1, pp = 1;
  /// The train() options as the compiler applied them, as JSON text.
  std::string trainOptions;
};

/// Writes every rank's files under `dir`. World rank r is, in Megatron's
/// order, tp rank r % tp, dp rank r / tp % dp and pipeline stage
/// r / (dp * tp); `stages` holds each stage's planned module (one without
/// pipeline stages). The first rank of stage k, k * dp * tp, gets the
/// stage's source (step.cpp, and, when blocks share functions, blocks.cpp
/// and step.h) and, unless sources only, its compiled program `train`,
/// which the stage's other ranks link to; the stage's ranks of dp rank 0
/// get the weights of their tp rank's shards of the stage's parameters,
/// which the other dp ranks link to. Returns the commands it ran to compile,
/// joined by " && " (empty without compiling). Times its weights, emission
/// and host compile as scopes nested in `timing`.
llvm::Expected<std::string>
writeRanks(llvm::StringRef dir, llvm::ArrayRef<mlir::ModuleOp> stages,
           TorchScriptModel &model, const RankProgramInfo &info,
           const HostBuild &build, mlir::TimingScope &timing);

/// Writes the launch script and then manifest.json, which lists every file
/// in `dir` (the ranks' and the launcher) as slapoc's, and each rank's
/// stage, dp and tp rank.
llvm::Error writeManifestAndLauncher(llvm::StringRef dir,
                                     llvm::ArrayRef<mlir::ModuleOp> stages,
                                     const ManifestInfo &manifest,
                                     const HostBuild &build,
                                     llvm::StringRef compileCommand);

} // namespace slapo

#endif // SLAPO_DRIVER_OUTPUT_H
