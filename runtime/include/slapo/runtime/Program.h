//===- Program.h - what a generated rank program tells the runtime -*- C++
//-*-===//
//
// slapoc emits, per rank, a step.cpp whose tables describe the rank's arena
// (where every persistent tensor lives) and whose functions run the phases of
// one training step on views into that arena. The runtime's training driver
// (runTrainingMain) owns everything else: the command line, data, weights,
// checkpoints, logging. Names in these tables are data (escaped string
// literals), never code.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_PROGRAM_H
#define SLAPO_RUNTIME_PROGRAM_H

#include "slapo/runtime/Comm.h"
#include "slapo/runtime/Device.h"
#include "slapo/runtime/Tensor.h"

#include <cstdint>
#include <optional>

namespace slapo::rt {

/// A tensor at a fixed offset of the rank's arena.
struct ArenaSlot {
  const char *name;
  DType dtype;
  Shape shape;
  int64_t offset;
  /// A tensor-parallel shard (parameters, their gradients and optimizer
  /// state): the full tensor's dim `shardAxis` is `shardChunks` equal chunks,
  /// and this rank holds its part of each, in chunk order. -1: not sharded.
  int shardAxis = -1;
  int shardChunks = 1;
};

/// A forward input: filled by the driver from the data source before each
/// step. `indexBound` > 0 says the values index a table of that many rows
/// (embedding, cross-entropy classes): synthetic data stays below it and file
/// data is checked against it, `ignoredIndex` allowed too where every table
/// the values index skips it (cross-entropy's ignore_index, -100 in Hugging
/// Face's labels).
struct InputSlot {
  ArenaSlot slot;
  int64_t indexBound;
  std::optional<int64_t> ignoredIndex;
};

/// Bytes of the arena by what they hold: the persistent tensors, then the
/// transient ones (gradients, activations kept for backward, temporaries,
/// the kernels' workspaces) at the point of the step where together they
/// peak. `arenaBytes` is the
/// arena's size, alignment included.
struct MemoryPlan {
  int64_t weights, optimizerState, inputs, constants;
  int64_t gradients, activations, temporaries, workspaces;
  int64_t arenaBytes;
};

/// One phase of the step (forward, backward, optimizer) of the 1-based step
/// number `step`: runs the kernels of `device` (the Device that the
/// program's createDevice made) on tensors in `arena`, the device's memory,
/// at planned offsets, and communicates within the groups of `mesh`.
using PhaseFn = void (*)(Device &device, ProcessMesh &mesh, uint8_t *arena,
                         int64_t step);

struct ProgramDesc {
  /// The model file slapoc compiled and a fingerprint of the compiled program
  /// (parameters, optimizer, schedule): a checkpoint of another program is
  /// refused.
  const char *modelName;
  const char *fingerprint;
  /// The mesh every rank runs this program in; which rank a process is,
  /// MPI says at start (ProcessMesh). Each pipeline stage has a program of
  /// its own: this one is stage `stage`'s (0 without pipeline stages).
  int dp, tp, pp, stage;
  /// train(seed=): the seed of sampled data and of dropout masks.
  uint64_t seed;
  MemoryPlan memory;

  /// Parameters and buffers, by state_dict name; read from the rank's
  /// weights.safetensors at start, saved in checkpoints.
  const ArenaSlot *params;
  int numParams;
  /// Optimizer state (AdamW moments, SGD momentum), zero at start, saved in
  /// checkpoints.
  const ArenaSlot *optimizerState;
  int numOptimizerState;
  /// The gradient of each parameter, named after it, before clipping; valid
  /// between backward and optimizer (the driver saves them for `--save-grads`
  /// and `slapoc --verify`).
  const ArenaSlot *gradients;
  int numGradients;
  const InputSlot *inputs;
  int numInputs;
  /// 0-d I64 slots the driver writes before each step: the 1-based step
  /// number and the run's last step (for learning-rate schedules computed on
  /// the device).
  ArenaSlot step, totalSteps;
  /// 0-d slots the step writes: the loss (F32, by forward; with pipeline
  /// stages the last stage computes it and sends it to every other) and the
  /// learning rate it used (F64, by optimizer).
  ArenaSlot loss, learningRate;
  /// Tokens one step consumes over all ranks (the product of the token
  /// input's global shape), for throughput.
  int64_t tokensPerStep;

  /// Writes the step's constants into their arena slots; run once.
  PhaseFn initialize;
  PhaseFn forward, backward, optimizer;
  /// The device of the backend the program was compiled for.
  std::unique_ptr<Device> (*createDevice)(const DeviceOptions &options);
};

/// The rank program's main: joins the mesh, parses the command line
/// (--steps, --data, ...), runs the training loop and returns the process
/// exit status (0, or 2 with a message naming the rank on any failure; in a
/// mesh of several ranks a failure ends every rank's process).
int runTrainingMain(const ProgramDesc &program, int argc, char **argv);

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_PROGRAM_H
