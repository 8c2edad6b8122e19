//===- Merge.h - one state_dict from a compiled program's ranks -*- C++ -*-===//
//
// slapoc's output directory OUT holds manifest.json, which says where every
// state_dict entry of the model lives:
//
//   "parameters": [{"name": "wte.weight", "buffer": false, "shape": [128, 32],
//                   "aliases": ["lm_head.weight"]},
//                  {"name": "h.0.attn.c_attn.weight", "buffer": false,
//                   "shape": [32, 96], "aliases": [],
//                   "shard": {"axis": 1, "chunks": 3}}, ...],
//   "ranks": [{"rank": 0, "dir": "rank0", "fingerprint": "...", ...}, ...],
//   "mesh": {"dp": 1, "tp": 2, "pp": 1}
//
// Each rank's tensors are in OUT/<dir>/weights.safetensors (the initial
// weights) and in its file of every checkpoint the rank program saves (see
// Checkpoint.h). "shape" is the model's; a parameter with a "shard" is split
// over the tp ranks as Shard.h lays out, every rank's files holding its
// shard, and the others are whole in every rank's files. World rank w is dp
// rank w / tp and tp rank w % tp, and the dp ranks hold the same tensors, so
// the files of dp rank 0, world ranks 0..tp-1, hold them all.
//
// Merging gathers them into one state_dict: every parameter and buffer
// under its name, sharded ones assembled from their tp ranks' shards, and,
// for a tied tensor, under each alias as well, so that PyTorch's
// load_state_dict(strict=True) accepts it.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_MERGE_H
#define SLAPO_RUNTIME_MERGE_H

#include "slapo/runtime/SafeTensors.h"
#include "slapo/runtime/Shard.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace slapo::rt {

/// A state_dict entry of the manifest.
struct ManifestParameter {
  std::string name;
  /// A buffer rather than a trained parameter.
  bool buffer = false;
  /// The model's shape, of the merged tensor.
  Shape shape;
  /// The entry's other state_dict names (tied tensors).
  std::vector<std::string> aliases;
  /// How the tp ranks split it; none: every rank holds all of it.
  std::optional<ShardLayout> shard;
  /// The pipeline stage whose ranks' files it is read from: the first of
  /// the manifest's "stages" that hold it (0 without pipeline stages).
  int stage = 0;
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
  /// The mesh's sizes.
  int dp = 1, tp = 1, pp = 1;
  std::vector<ManifestParameter> parameters;
  /// Indexed by rank: ranks[r].rank == r.
  std::vector<ManifestRank> ranks;
};

/// Reads OUT/manifest.json. A missing file, malformed JSON, a missing or
/// ill-typed field, ranks that are not 0..n-1 with n = dp * tp * pp, a
/// shard that is not a layout of the parameter's shape over the tp ranks or
/// a state_dict name given twice is an Error naming the file.
Manifest readManifest(const std::string &outDir);

struct MergeOptions {
  /// A checkpoint directory (its latest step) or a step directory; empty:
  /// the initial weights, OUT/<rank dir>/weights.safetensors.
  std::string checkpoint;
  /// Also the optimizer state of the checkpoint (`<param>.exp_avg`, ...),
  /// under the names rank 0's file gives it. Refused where a parameter is
  /// sharded: its state is sharded too, and assembling it is not implemented.
  bool optimizerState = false;
};

/// The merged state_dict, owning its bytes.
struct MergedState {
  /// Each manifest parameter followed by its aliases, which view the same
  /// bytes, then any optimizer state.
  std::vector<NamedTensor> tensors;
  /// The checkpoint's step; 0 for the initial weights.
  int64_t step = 0;
  /// The rank files read: those of tp ranks 0..tp-1 of dp rank 0.
  std::vector<std::string> files;
  std::vector<std::unique_ptr<uint8_t[]>> storage;

  /// The bytes of all tensors, aliases counted again (as written).
  uint64_t getBytes() const;
};

/// Merges the tensors of the compiled program in `outDir`. Every manifest
/// parameter must be in rank 0's file with the manifest's shape or, if
/// sharded, in every tp rank's with its shard's shape and one dtype; a
/// checkpoint file must carry its rank's fingerprint ("the checkpoint was
/// written by a different program"), the manifest's world size, the step of
/// the other ranks' files and every tensor's checksum. Each failure is an
/// Error naming the file and, where it is about a tensor, the tensor.
MergedState mergeState(const std::string &outDir, const MergeOptions &options);

/// Writes `state` to `path` atomically, with metadata "format" = "pt" and
/// "step".
void writeMergedState(const std::string &path, const MergedState &state);

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_MERGE_H
