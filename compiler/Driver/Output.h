//===- Output.h - slapoc's output directory ---------------------*- C++ -*-===//
//
// `-o out/` is written under a temporary name next to `out` and renamed into
// place only when every file of it is complete: a failed compilation leaves
// no half-written directory, and an earlier output survives it.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_DRIVER_OUTPUT_H
#define SLAPO_DRIVER_OUTPUT_H

#include "slapo/Frontend/TorchScriptImporter.h"
#include "slapo/Target/CppEmitter.h"

#include "llvm/Support/Error.h"

#include <string>

namespace slapo {

/// A directory being written: removed on destruction unless published.
class StagedDirectory {
public:
  /// Refuses a `target` that exists and is not an earlier slapoc output (a
  /// directory with a manifest.json) or an empty directory.
  static llvm::Expected<StagedDirectory> create(llvm::StringRef target);
  StagedDirectory(StagedDirectory &&other);
  ~StagedDirectory();

  /// Where to write: a sibling of the target.
  const std::string &getPath() const { return staging; }
  /// Renames the staging directory to the target, replacing an earlier
  /// output.
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

/// Writes every rank's files under `dir`: rank0/step.cpp and, unless sources
/// only, the compiled program rank0/train, which the other ranks' directories
/// link to; rank<r>/weights.safetensors for each tp rank r (its shards), which
/// the ranks of the same tp rank link to. Returns the compile command it ran
/// (empty without compiling).
llvm::Expected<std::string>
writeRanks(llvm::StringRef dir, mlir::ModuleOp planned, TorchScriptModel &model,
           const RankProgramInfo &info, const HostBuild &build);

/// Writes manifest.json and the launch script for the ranks written.
llvm::Error writeManifestAndLauncher(llvm::StringRef dir,
                                     mlir::ModuleOp planned,
                                     const ManifestInfo &manifest,
                                     const HostBuild &build,
                                     llvm::StringRef compileCommand);

} // namespace slapo

#endif // SLAPO_DRIVER_OUTPUT_H
