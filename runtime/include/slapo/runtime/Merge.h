//===- Merge.h - one state_dict from a compiled program's ranks -*- C++ -*-===//
//
// slapoc's output directory OUT holds manifest.json, which says where every
// state_dict entry of the model lives:
//
//   "parameters": [{"name": "wte.weight", "buffer": false, "shape": [128, 32],
//                   "aliases": ["lm_head.weight"], "rank": 0}, ...],
//   "ranks": [{"rank": 0, "dir": "rank0", "fingerprint": "...", ...}, ...],
//   "mesh": {"dp": 1, "tp": 1, "pp": 1}
//
// Each rank's tensors are in OUT/<dir>/weights.safetensors (the initial
// weights) and in its file of every checkpoint the rank program saves (see
// Checkpoint.h). Merging gathers them into one state_dict: every parameter
// and buffer under its name and, for a tied tensor, under each alias as well,
// so that PyTorch's load_state_dict(strict=True) accepts it.
//
// A parameter sharded over tensor-parallel ranks will carry "shard": {"axis",
// "ranks"}, its shards to be concatenated along the axis; no compiled program
// shards yet, and a manifest that does is refused as not implemented.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_MERGE_H
#define SLAPO_RUNTIME_MERGE_H

#include "slapo/runtime/SafeTensors.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace slapo::rt {

/// A state_dict entry of the manifest.
struct ManifestParameter {
  std::string name;
  /// A buffer rather than a trained parameter.
  bool buffer = false;
  Shape shape;
  /// The entry's other state_dict names (tied tensors).
  std::vector<std::string> aliases;
  /// The rank that holds it.
  int rank = 0;
};

/// A rank of the manifest.
struct ManifestRank {
  int rank = 0;
  /// The rank's directory, relative to the output directory.
  std::string dir;
  /// Its program's fingerprint, which its checkpoints record.
  std::string fingerprint;
};

struct Manifest {
  /// OUT/manifest.json, for messages.
  std::string path;
  std::vector<ManifestParameter> parameters;
  /// Indexed by rank: ranks[r].rank == r.
  std::vector<ManifestRank> ranks;
};

/// Reads OUT/manifest.json. A missing file, malformed JSON, a missing or
/// ill-typed field, ranks that are not 0..n-1 with n = dp * tp * pp, a
/// parameter on no rank or a state_dict name given twice is an Error naming
/// the file; so is a sharded parameter ("not implemented yet").
Manifest readManifest(const std::string &outDir);

struct MergeOptions {
  /// A checkpoint directory (its latest step) or a step directory; empty:
  /// the initial weights, OUT/<rank dir>/weights.safetensors.
  std::string checkpoint;
  /// Also the optimizer state of the checkpoint (`<param>.exp_avg`, ...),
  /// under the names the rank files give it.
  bool optimizerState = false;
};

/// The merged state_dict, owning its bytes.
struct MergedState {
  /// Each manifest parameter followed by its aliases, which view the same
  /// bytes, then any optimizer state.
  std::vector<NamedTensor> tensors;
  /// The checkpoint's step; 0 for the initial weights.
  int64_t step = 0;
  /// The rank files read, rank by rank.
  std::vector<std::string> files;
  std::vector<std::unique_ptr<uint8_t[]>> storage;

  /// The bytes of all tensors, aliases counted again (as written).
  uint64_t getBytes() const;
};

/// Merges the tensors of the compiled program in `outDir`. Every manifest
/// parameter must be in its rank's file with the manifest's shape; a
/// checkpoint file must carry its rank's fingerprint ("the checkpoint was
/// written by a different program"), the manifest's world size, the step of
/// the other ranks' files and every tensor's checksum. Each failure is an
/// Error naming the file.
MergedState mergeState(const std::string &outDir, const MergeOptions &options);

/// Writes `state` to `path` atomically, with metadata "format" = "pt" and
/// "step".
void writeMergedState(const std::string &path, const MergedState &state);

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_MERGE_H
