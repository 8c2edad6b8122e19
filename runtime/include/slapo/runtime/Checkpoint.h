//===- Checkpoint.h - saving and resuming training --------------*- C++ -*-===//
//
// A checkpoint directory holds one directory per saved step and a `latest`
// file naming the newest complete one:
//
//   DIR/step-00000100/rank0.safetensors   parameters and optimizer state
//   DIR/step-00000100/rank1.safetensors   (each rank its own tensors)
//   DIR/step-00000100/index.json          step, world size, fingerprint, files
//   DIR/latest                            "step-00000100" and its checksum
//   DIR/.lock                             who saves here now
//
// Every file is written to a temporary name and renamed, and `latest` moves
// only after every rank's file is complete, so a crash while saving leaves
// the previous checkpoint in place; saving never touches another step's
// directory. Each rank file's metadata records the program's fingerprint,
// the step, the rank, the world size and, under "fnv1a64:NAME", the FNV-1a
// 64-bit hash of tensor NAME's bytes as 16 hex digits; "metadata_fnv1a64"
// hashes the other metadata entries (each key and value followed by a NUL,
// in key order), and the second line of `latest`, "fnv1a64 HASH", hashes its
// first. Loading refuses a file of another program, a truncated file or
// changed bytes, in a tensor or in the metadata (a step number).
//
// A directory belongs to one program and, while it saves, to one run: rank 0
// claims it before any rank saves (claimCheckpointDirectory), holding an
// advisory lock on DIR/.lock that ends with its process, however it ends. A
// second run is refused while the first runs; a directory holding another
// program's checkpoints, or checkpoints after the step the run starts from
// (`latest` would move backwards), is refused; and what a crashed run left
// (temporary files, step directories without index.json) is removed.
//
// With several ranks, saving is two-phase:
//
//   rank 0 only, first:  lock = claimCheckpointDirectory(dir, ...)
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

/// The claim of one run on a checkpoint directory: an open, locked
/// DIR/.lock, released when this is destroyed or the process ends.
class CheckpointDirectoryLock {
public:
  explicit CheckpointDirectoryLock(int fd) : fd(fd) {}
  CheckpointDirectoryLock(CheckpointDirectoryLock &&other) noexcept
      : fd(other.fd) {
    other.fd = -1;
  }
  CheckpointDirectoryLock &operator=(CheckpointDirectoryLock &&) = delete;
  CheckpointDirectoryLock(const CheckpointDirectoryLock &) = delete;
  CheckpointDirectoryLock &operator=(const CheckpointDirectoryLock &) = delete;
  ~CheckpointDirectoryLock();

private:
  int fd;
};

/// Run by rank 0 of a run that saves into `dir`, before any rank saves
/// there (before training starts, not after the first hour): creates `dir`
/// and its parents if needed, locks it for this run and records the
/// run as its owner (process, host, fingerprint, time), checks that every
/// checkpoint in it is `fingerprint`'s and none is after `startStep` (the
/// step the run resumed from, 0 for a fresh run), and removes what crashed
/// runs left: temporary files and step directories without index.json.
/// Throws Error naming the directory, and the owner of the lock if another
/// run holds it, before anything in `dir` is changed.
CheckpointDirectoryLock claimCheckpointDirectory(const std::string &dir,
                                                 const std::string &fingerprint,
                                                 int64_t startStep);

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
/// step directory, both atomically. Refuses to move `latest` to an earlier
/// step than the one it names.
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
/// a world size, matching its checksum. The fingerprint is not compared: the
/// caller knows which program's it must be. Throws Error naming the file.
CheckpointFile openCheckpoint(const std::string &path, int rank);

/// Reads tensor `named.name` of `file` into `named.tensor`, which has the
/// tensor's dtype and shape, and checks its bytes against the FNV-1a 64
/// checksum the file's metadata records for it: a mismatch is an Error naming
/// the file and the tensor ("the file is corrupt").
void readCheckpointTensor(const CheckpointFile &file, const NamedTensor &named);

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_CHECKPOINT_H
