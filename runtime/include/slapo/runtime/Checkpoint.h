//===- Checkpoint.h - saving and resuming training --------------*- C++ -*-===//
//
// A checkpoint directory holds one directory per saved step and a `latest`
// file naming the newest complete one:
//
//   DIR/step-00000100/rank0.safetensors   parameters and optimizer state
//   DIR/step-00000100/rank1.safetensors   (each rank its own tensors)
//   DIR/step-00000100/index.json          step, world size, fingerprint, files
//   DIR/latest                            "step-00000100"
//
// Every file is written to a temporary name and renamed, and `latest` moves
// only after every rank's file is complete, so a crash while saving leaves
// the previous checkpoint in place; saving never touches another step's
// directory. Each rank file's metadata records the program's fingerprint,
// the step, the rank, the world size and, under "fnv1a64:NAME", the FNV-1a
// 64-bit hash of tensor NAME's bytes as 16 hex digits; loading refuses a file
// of another program, a truncated file or changed bytes.
//
// With several ranks, saving is two-phase:
//
//   every rank:          stepDir = saveCheckpoint(dir, step, ..., rank, n)
//   all ranks:           barrier
//   rank 0 only:         commitCheckpoint(dir, stepDir, step, ..., n)
//
// commitCheckpoint refuses to commit while a rank's file is missing.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CHECKPOINT_H
#define SLAPO_RUNTIME_CHECKPOINT_H

#include "slapo/runtime/SafeTensors.h"

#include <cstdint>
#include <string>
#include <vector>

namespace slapo::rt {

/// Creates `dir` (and its parents) if needed and checks that files can be
/// created in it: before training starts, not after the first hour. Throws
/// Error naming `dir`.
void checkCheckpointDirectory(const std::string &dir);

/// Writes this rank's tensors of step `step` to
/// DIR/step-<step, 8 digits>/rank<rank>.safetensors (creating DIR if needed;
/// an unusable DIR is an Error naming it, thrown before anything is written)
/// and returns the step directory. The checkpoint is not the latest until
/// commitCheckpoint.
std::string saveCheckpoint(const std::string &dir, int64_t step,
                           const std::string &fingerprint,
                           const std::vector<NamedTensor> &tensors, int rank,
                           int worldSize);

/// Run by rank 0 once every rank's saveCheckpoint of the step returned:
/// writes the step's index.json ({"step", "world_size", "fingerprint",
/// "files": ["rank0.safetensors", ...]}) and then points DIR/latest at the
/// step directory, both atomically.
void commitCheckpoint(const std::string &dir, const std::string &stepDir,
                      int64_t step, const std::string &fingerprint,
                      int worldSize);

/// Fills `tensors` from this rank's file of the checkpoint at `path` (a
/// checkpoint directory, whose `latest` step is used, or a step directory);
/// returns its step. Every tensor must be in the file with its dtype, shape
/// and checksum, and the file must carry `fingerprint` and `rank`; otherwise
/// an Error names the file and what is wrong.
int64_t loadCheckpoint(const std::string &path, const std::string &fingerprint,
                       const std::vector<NamedTensor> &tensors, int rank);

/// One rank's file of a saved step, opened by openCheckpoint: what
/// loadCheckpoint reads from, and what tools that read checkpoints without
/// being the program that wrote them (slapo-merge) use.
struct CheckpointFile {
  SafeTensorsReader reader;
  /// The metadata's step, fingerprint and world size.
  int64_t step;
  std::string fingerprint;
  int worldSize;
};

/// Opens rank `rank`'s file of the checkpoint at `path` (a checkpoint
/// directory, whose `latest` step is used, or a step directory) and checks
/// that its metadata is a slapoc checkpoint's of rank `rank` with a step and
/// a world size. The fingerprint is not compared: the caller knows which
/// program's it must be. Throws Error naming the file.
CheckpointFile openCheckpoint(const std::string &path, int rank);

/// Reads tensor `named.name` of `file` into `named.tensor`, which has the
/// tensor's dtype and shape, and checks its bytes against the FNV-1a 64
/// checksum the file's metadata records for it: a mismatch is an Error naming
/// the file and the tensor ("the file is corrupt").
void readCheckpointTensor(const CheckpointFile &file, const NamedTensor &named);

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_CHECKPOINT_H
