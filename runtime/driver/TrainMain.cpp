//===- TrainMain.cpp - the rank program's command line and training loop --===//
//
// Everything a rank program does besides running its phases: the command
// line, the arena, weights, data, checkpoints and logs. The generated step
// only computes; this file is the same for every model.
//
//===----------------------------------------------------------------------===//
#include "slapo/runtime/Checkpoint.h"
#include "slapo/runtime/Collectives.h"
#include "slapo/runtime/Data.h"
#include "slapo/runtime/Device.h"
#include "slapo/runtime/Error.h"
#include "slapo/runtime/Program.h"
#include "slapo/runtime/SafeTensors.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

namespace slapo::rt {
namespace {

struct TrainOptions {
  int64_t steps = 10;
  std::string data;
  std::vector<std::string> ownValues;
  std::string weights;
  std::string logJson;
  int threads = 0;
  std::string save;
  int64_t saveEvery = 0;
  std::string resume;
  bool forwardOnly = false;
  std::string saveGrads;
  std::string saveWeights;
  bool quiet = false;
  std::string comm = "auto";
  double timeout = ProcessMesh::kDefaultTimeoutSeconds;
};

/// The arena of one rank in its device's memory: every tensor of the step
/// lives at its planned offset. Zeroed, which is the optimizer state's
/// initial value.
struct Arena {
  Arena(Device &device, int64_t bytes)
      : device(device), data(static_cast<uint8_t *>(
                            device.allocate(static_cast<size_t>(bytes)))) {}
  ~Arena() { device.release(data); }
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;

  Tensor view(const ArenaSlot &slot) const {
    return Tensor(data + slot.offset, slot.dtype, slot.shape);
  }
  Device &device;
  uint8_t *data;
};

std::vector<NamedTensor> viewsOf(const Arena &arena, const ArenaSlot *slots,
                                 int count) {
  std::vector<NamedTensor> views;
  for (int i = 0; i < count; ++i)
    views.push_back({slots[i].name, arena.view(slots[i])});
  return views;
}

/// Host-memory copies of tensors in the device's memory, for what the
/// driver reads and writes (weights, checkpoints, gradient files). On the
/// CPU they are the tensors themselves and the copies do nothing.
class HostMirror {
public:
  HostMirror(Device &device, std::vector<NamedTensor> onDevice)
      : device(device), onDevice(std::move(onDevice)), host(this->onDevice) {
    if (device.isHostMemory())
      return;
    for (NamedTensor &named : host) {
      storage.push_back(std::make_unique<uint8_t[]>(named.tensor.getBytes()));
      named.tensor.data = storage.back().get();
    }
  }
  const std::vector<NamedTensor> &get() const { return host; }
  /// The host copies become the device's tensors.
  HostMirror &download() {
    for (size_t i = 0; i < host.size(); ++i)
      device.copyToHost(host[i].tensor.data, onDevice[i].tensor.data,
                        host[i].tensor.getBytes());
    return *this;
  }
  /// The device's tensors become the host copies.
  void upload() {
    for (size_t i = 0; i < host.size(); ++i)
      device.copyToDevice(onDevice[i].tensor.data, host[i].tensor.data,
                          host[i].tensor.getBytes());
  }

private:
  Device &device;
  std::vector<NamedTensor> onDevice;
  std::vector<NamedTensor> host;
  std::vector<std::unique_ptr<uint8_t[]>> storage;
};

/// Full tensors gathered from tensor-parallel shards, in host memory, for
/// files that hold the model's tensors (--save-grads, --save-weights).
class GatheredTensors {
public:
  /// The full tensors of the `views` of `slots`: the views of unsharded
  /// ones, and shards gathered over the tp group. Every rank of the group
  /// must gather alike.
  GatheredTensors(Device &device, ProcessMesh &mesh,
                  const std::vector<NamedTensor> &views,
                  const ArenaSlot *slots)
      : device(device) {
    int tp = mesh.getTp();
    std::vector<NamedTensor> full;
    for (size_t i = 0; i < views.size(); ++i) {
      const ArenaSlot &slot = slots[i];
      if (slot.shardAxis < 0) {
        full.push_back(views[i]);
        continue;
      }
      // Seen with the axis as [chunks, part], the rank's part of every
      // chunk is one block along the part dim: gathering there lays the
      // chunks out whole, in order.
      Tensor local = views[i].tensor;
      int axis = slot.shardAxis;
      int64_t part = local.shape[axis] / slot.shardChunks;
      Shape blocks, joined;
      for (int d = 0; d < local.getRank(); ++d) {
        if (d == axis) {
          blocks.dims[blocks.rank++] = slot.shardChunks;
          joined.dims[joined.rank++] = slot.shardChunks;
          blocks.dims[blocks.rank++] = part;
          joined.dims[joined.rank++] = part * tp;
          continue;
        }
        blocks.dims[blocks.rank++] = local.shape[d];
        joined.dims[joined.rank++] = local.shape[d];
      }
      gathered.push_back(device.allocate(local.getBytes() * tp));
      Tensor whole(gathered.back(), local.dtype, joined);
      device.allGather(mesh.getTensorParallel(),
                       Tensor(local.data, local.dtype, blocks), whole,
                       axis + 1);
      whole.shape = local.shape;
      whole.shape.dims[axis] *= tp;
      full.push_back({views[i].name, whole});
    }
    host = std::make_unique<HostMirror>(device, std::move(full));
    host->download();
  }
  ~GatheredTensors() {
    for (void *data : gathered)
      device.release(data);
  }
  const std::vector<NamedTensor> &get() const { return host->get(); }

private:
  Device &device;
  std::vector<void *> gathered;
  std::unique_ptr<HostMirror> host;
};

/// `tensors` with the bf16 ones widened to f32 in `storage`: a gradient
/// the optimizer reads in bf16 (the bf16 product's gradient of an f32
/// weight) is written as the f32 gradient it stands for, the parameter's
/// dtype, as PyTorch keeps it.
std::vector<NamedTensor>
widenBFloat16(std::vector<NamedTensor> tensors,
              std::vector<std::unique_ptr<float[]>> &storage) {
  for (NamedTensor &named : tensors) {
    Tensor &tensor = named.tensor;
    if (tensor.dtype != DType::BF16)
      continue;
    int64_t count = tensor.getNumElements();
    storage.push_back(std::make_unique<float[]>(count));
    const BFloat16 *narrow = tensor.as<const BFloat16>();
    for (int64_t i = 0; i < count; ++i)
      storage.back()[i] = narrow[i].toFloat();
    tensor = Tensor(storage.back().get(), DType::F32, tensor.shape);
  }
  return tensors;
}

/// What checkpoints hold: parameters (and buffers), then optimizer state.
std::vector<NamedTensor> trainingState(const ProgramDesc &program,
                                       const Arena &arena) {
  std::vector<NamedTensor> state =
      viewsOf(arena, program.params, program.numParams);
  for (NamedTensor &tensor :
       viewsOf(arena, program.optimizerState, program.numOptimizerState))
    state.push_back(std::move(tensor));
  return state;
}

/// The weights file next to the executable, where slapoc writes it.
std::string defaultWeightsPath() {
  std::vector<char> buffer(4096);
  ssize_t length = readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  if (length <= 0)
    return "weights.safetensors";
  std::string exe(buffer.data(), length);
  return exe.substr(0, exe.rfind('/') + 1) + "weights.safetensors";
}

/// The first of the launcher's variables `names` that is set, as a number
/// (Open MPI's, MPICH's Hydra's, Slurm's); `otherwise` when started alone.
int getLauncherNumber(std::initializer_list<const char *> names,
                      int otherwise) {
  for (const char *name : names)
    if (const char *value = std::getenv(name))
      return std::atoi(value);
  return otherwise;
}

DeviceOptions getDeviceOptions(const TrainOptions &options) {
  DeviceOptions device;
  device.threads = options.threads;
  device.localRank = getLauncherNumber(
      {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}, 0);
  device.localRanks = getLauncherNumber(
      {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}, 1);
  device.comm = options.comm;
  return device;
}

int64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

/// The wall seconds of one step on this rank, and how many of them it spent
/// in the mesh's collectives and in its point-to-point messages (the
/// pipeline's sends and receives).
struct StepTimes {
  double seconds = 0;
  double comm = 0;
  double pointToPoint = 0;
};

/// A run of training steps on one rank of the mesh.
class Trainer {
public:
  Trainer(const ProgramDesc &program, const TrainOptions &options,
          ProcessMesh &mesh)
      : program(program), options(options), mesh(mesh),
        device(program.createDevice(getDeviceOptions(options))),
        arena(*device, program.memory.arenaBytes) {
    mesh.useDevice(*device);
  }
  void run();

private:
  void prepare();
  void runStep(int64_t step);
  void log(int64_t step, const StepTimes &times);
  /// Every rank of a mesh of several says what its median step spent
  /// waiting, in point-to-point messages and in collectives.
  void printTimeSummary() const;
  void save(int64_t step);
  template <typename T> T read(const ArenaSlot &slot) const {
    T value;
    device->copyToHost(&value, arena.view(slot).data, sizeof value);
    return value;
  }
  void write(const ArenaSlot &slot, int64_t value) {
    device->copyToDevice(arena.view(slot).data, &value, sizeof value);
  }

  void fillInputs(int64_t step);
  /// Writes the model's tensors `full` (gathered over the tp group) to
  /// `path` from rank 0, with those of the other pipeline stages.
  void writeModelTensors(const std::string &path,
                         const std::vector<NamedTensor> &full);
  /// Rank 0 speaks for the mesh: every rank has the same loss and learning
  /// rate, and full parameters and gradients are gathered to it.
  bool isReporter() const { return mesh.getRank() == 0; }

  const ProgramDesc &program;
  const TrainOptions &options;
  ProcessMesh &mesh;
  std::unique_ptr<Device> device;
  Arena arena;
  std::unique_ptr<DataSource> data;
  /// What the data source fills: the global batch. With data parallelism,
  /// or a device whose memory is not the host's, it is staged in
  /// `globalBatch` and each rank copies its rows into its inputs; otherwise
  /// the inputs are filled in place.
  std::vector<DataInput> inputs;
  std::vector<std::unique_ptr<uint8_t[]>> globalBatch;
  std::unique_ptr<std::ofstream> logFile;
  std::optional<CheckpointDirectoryLock> checkpointLock;
  int64_t firstStep = 1;
  std::chrono::steady_clock::time_point start;
  std::vector<StepTimes> stepTimes;
};

void Trainer::prepare() {
  // Problems with where results go are found before any step is run.
  if (!options.logJson.empty() && isReporter()) {
    logFile = std::make_unique<std::ofstream>(options.logJson);
    if (!*logFile)
      throwSystemError(options.logJson);
  }

  HostMirror params(*device,
                    viewsOf(arena, program.params, program.numParams));
  SafeTensorsReader weights(options.weights);
  for (const NamedTensor &param : params.get())
    weights.read(param.name, param.tensor);
  params.upload();
  program.initialize(*device, mesh, arena.data, 0);
  if (!options.resume.empty()) {
    HostMirror state(*device, trainingState(program, arena));
    firstStep = loadCheckpoint(options.resume, program.fingerprint,
                               state.get(), mesh.getRank()) +
                1;
    state.upload();
  }
  if (firstStep > options.steps)
    throw Error("the checkpoint in " + options.resume + " is at step " +
                std::to_string(firstStep - 1) + ", not before --steps " +
                std::to_string(options.steps));
  if (!options.save.empty()) {
    // Rank 0 claims the directory for this run before any rank saves there;
    // if it cannot, it ends the job instead of joining this barrier.
    if (isReporter())
      checkpointLock.emplace(claimCheckpointDirectory(
          options.save, program.fingerprint, firstStep - 1));
    int64_t claimed = 1;
    mesh.getWorld().allReduceSum(&claimed, 1, DType::I64);
  }

  for (int i = 0; i < program.numInputs; ++i) {
    const InputSlot &input = program.inputs[i];
    Tensor local = arena.view(input.slot);
    if (program.dp == 1 && device->isHostMemory()) {
      inputs.push_back(
          {input.slot.name, local, input.indexBound, input.ignoredIndex});
      continue;
    }
    Shape shape = local.shape;
    shape.dims[0] *= program.dp;
    globalBatch.push_back(
        std::make_unique<uint8_t[]>(local.getBytes() * program.dp));
    inputs.push_back({input.slot.name,
                      Tensor(globalBatch.back().get(), local.dtype, shape),
                      input.indexBound, input.ignoredIndex});
  }
  data = options.data.empty()
             ? makeSyntheticDataSource(program.seed, inputs, options.ownValues)
             : openDataSource(options.data, program.seed, inputs);
}

void Trainer::fillInputs(int64_t step) {
  data->fill(step, inputs);
  if (globalBatch.empty())
    return;
  // Rows [r * B, (r + 1) * B) of dim 0 are dp rank r's, contiguous in the
  // row-major global batch.
  for (int i = 0; i < program.numInputs; ++i) {
    Tensor local = arena.view(program.inputs[i].slot);
    device->copyToDevice(local.data,
                         inputs[i].tensor.as<uint8_t>() +
                             mesh.getDpRank() * local.getBytes(),
                         local.getBytes());
  }
}

void Trainer::writeModelTensors(const std::string &path,
                                const std::vector<NamedTensor> &full) {
  if (mesh.getPp() == 1) {
    if (isReporter())
      writeSafeTensors(path, full);
    return;
  }
  // Each later stage's first rank writes its part next to `path`; once every
  // part is complete (the reduction), rank 0 joins them in stage order. A
  // parameter tied across stages is in two parts, alike: the first is kept.
  auto partOf = [&](int stage) {
    return path + ".stage" + std::to_string(stage);
  };
  int stage = mesh.getPpRank();
  if (stage > 0 && mesh.getDpRank() == 0 && mesh.getTpRank() == 0)
    writeSafeTensors(partOf(stage), full);
  int64_t written = 1;
  mesh.getWorld().allReduceSum(&written, 1, DType::I64);
  if (!isReporter())
    return;
  std::vector<NamedTensor> joined = full;
  std::set<std::string> names;
  for (const NamedTensor &tensor : full)
    names.insert(tensor.name);
  std::vector<std::unique_ptr<uint8_t[]>> storage;
  for (int other = 1; other < mesh.getPp(); ++other) {
    SafeTensorsReader part(partOf(other));
    for (const std::string &name : part.getNames()) {
      if (!names.insert(name).second)
        continue;
      const SafeTensorsReader::Info &info = part.getInfo(name);
      storage.push_back(std::make_unique<uint8_t[]>(info.end - info.begin));
      Tensor tensor(storage.back().get(), info.dtype, info.shape);
      part.read(name, tensor);
      joined.push_back({name, tensor});
    }
    std::remove(partOf(other).c_str());
  }
  writeSafeTensors(path, joined);
}

void Trainer::runStep(int64_t step) {
  write(program.step, step);
  write(program.totalSteps, options.steps);
  fillInputs(step);
  program.forward(*device, mesh, arena.data, step);
  if (!options.forwardOnly) {
    program.backward(*device, mesh, arena.data, step);
    if (step == 1 && !options.saveGrads.empty()) {
      GatheredTensors grads(
          *device, mesh,
          viewsOf(arena, program.gradients, program.numGradients),
          program.gradients);
      std::vector<std::unique_ptr<float[]>> widened;
      writeModelTensors(options.saveGrads, widenBFloat16(grads.get(), widened));
    }
    program.optimizer(*device, mesh, arena.data, step);
  }
  // A GPU runs the step's kernels asynchronously: the step ends when they
  // have.
  device->synchronize();
}

void Trainer::log(int64_t step, const StepTimes &times) {
  float loss = read<float>(program.loss);
  double lr = options.forwardOnly ? 0 : read<double>(program.learningRate);
  double tokensPerSecond = program.tokensPerStep / times.seconds;
  if (logFile) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "{\"step\": %lld, \"loss\": %.9g, \"lr\": %.17g, "
                  "\"step_time_s\": %.6f, \"comm_time_s\": %.6f, "
                  "\"p2p_wait_s\": %.6f, \"tokens_per_s\": %.3f, "
                  "\"arena_bytes\": %lld, \"rss_bytes\": %lld}\n",
                  static_cast<long long>(step), loss, lr, times.seconds,
                  times.comm, times.pointToPoint, tokensPerSecond,
                  static_cast<long long>(program.memory.arenaBytes),
                  static_cast<long long>(residentBytes()));
    *logFile << line << std::flush;
  }
  if (isReporter() && !options.quiet) {
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    std::printf("step %lld/%lld  loss %.6f  %.0f tokens/s  elapsed %.1fs\n",
                static_cast<long long>(step),
                static_cast<long long>(options.steps), loss, tokensPerSecond,
                elapsed);
    std::fflush(stdout);
  }
}

void Trainer::printTimeSummary() const {
  if (mesh.getWorldSize() == 1 || options.quiet)
    return;
  auto median = [&](double StepTimes::*member) {
    std::vector<double> values;
    for (const StepTimes &times : stepTimes)
      values.push_back(times.*member);
    std::sort(values.begin(), values.end());
    size_t middle = values.size() / 2;
    return values.size() % 2 ? values[middle]
                             : (values[middle - 1] + values[middle]) / 2;
  };
  double seconds = median(&StepTimes::seconds);
  double pointToPoint = median(&StepTimes::pointToPoint);
  double comm = median(&StepTimes::comm);
  // One line per rank, written at once, so that ranks do not interleave.
  std::printf("rank %d (pipeline stage %d of %d): median of %zu steps %.3f s, "
              "p2p_wait_s %.3f s (%.1f%%), comm_time_s %.3f s (%.1f%%)\n",
              mesh.getRank(), mesh.getPpRank(), mesh.getPp(), stepTimes.size(),
              seconds, pointToPoint, 100 * pointToPoint / seconds, comm,
              100 * comm / seconds);
  std::fflush(stdout);
}

void Trainer::save(int64_t step) {
  bool periodic = options.saveEvery > 0 && step % options.saveEvery == 0;
  if (options.save.empty() || !(periodic || step == options.steps))
    return;
  HostMirror state(*device, trainingState(program, arena));
  std::string stepDir = saveCheckpoint(options.save, step, program.fingerprint,
                                       state.download().get(),
                                       mesh.getRank(), mesh.getWorldSize());
  // Rank 0 commits once every rank's file is complete: a rank that failed
  // to save has ended the job instead of joining this reduction.
  int64_t saved = 1;
  mesh.getWorld().allReduceSum(&saved, 1, DType::I64);
  if (isReporter())
    commitCheckpoint(options.save, stepDir, step, program.fingerprint,
                     mesh.getWorldSize());
}

void Trainer::run() {
  prepare();
  if (isReporter() && !options.quiet) {
    std::printf("%s: %lld steps from step %lld, %s, %s, arena %.1f MiB\n",
                program.modelName, static_cast<long long>(options.steps),
                static_cast<long long>(firstStep), data->describe().c_str(),
                device->describe().c_str(),
                program.memory.arenaBytes / 1048576.0);
    std::fflush(stdout);
  }
  start = std::chrono::steady_clock::now();
  for (int64_t step = firstStep; step <= options.steps; ++step) {
    auto stepStart = std::chrono::steady_clock::now();
    double commBefore = mesh.getCommSeconds();
    double pointToPointBefore = mesh.getPointToPointSeconds();
    runStep(step);
    StepTimes times;
    times.seconds = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - stepStart)
                        .count();
    times.comm = mesh.getCommSeconds() - commBefore;
    times.pointToPoint = mesh.getPointToPointSeconds() - pointToPointBefore;
    stepTimes.push_back(times);
    log(step, times);
    if (!options.forwardOnly)
      save(step);
  }
  printTimeSummary();
  if (!options.saveWeights.empty()) {
    GatheredTensors weights(*device, mesh,
                            viewsOf(arena, program.params, program.numParams),
                            program.params);
    writeModelTensors(options.saveWeights, weights.get());
  }
}

/// What is wrong with flags that parsed, or nothing: a bad usage, found
/// before anything runs. `saveEveryGiven`: --save-every was on the command
/// line.
std::string findUsageError(const TrainOptions &options, bool saveEveryGiven) {
  if (options.steps < 1)
    return "--steps must be at least 1, got " + std::to_string(options.steps);
  if (saveEveryGiven && options.saveEvery < 1)
    return "--save-every must be at least 1 (a checkpoint every K steps), "
           "got " +
           std::to_string(options.saveEvery);
  if (saveEveryGiven && options.save.empty())
    return "--save-every needs --save DIR";
  // Far more threads than cores only slow a step down, and enough of them
  // exhaust what the OpenMP runtime and oneDNN can start.
  long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  if (options.threads < 0 || options.threads > 4 * cores)
    return "--threads " + std::to_string(options.threads) +
           " is out of range: give 1 to " + std::to_string(4 * cores) +
           " (4 x the " + std::to_string(cores) +
           " cores of this machine), or 0 for one thread per core";
  if (!(options.timeout > 0)) {
    char timeout[32];
    std::snprintf(timeout, sizeof timeout, "%g", options.timeout);
    return std::string("--timeout must be a positive number of seconds, "
                       "got ") +
           timeout;
  }
  return "";
}

} // namespace

int runTrainingMain(const ProgramDesc &program, int argc, char **argv) {
  std::unique_ptr<ProcessMesh> mesh;
  try {
    mesh = ProcessMesh::create(program.dp, program.tp, program.pp);
    if (mesh->getPpRank() != program.stage)
      throw Error("world rank " + std::to_string(mesh->getRank()) +
                  " is on pipeline stage " + std::to_string(mesh->getPpRank()) +
                  ", but this is stage " + std::to_string(program.stage) +
                  "'s program: start the ranks with the output "
                  "directory's launch");
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  int rank = mesh->getRank();
  TrainOptions options;
  options.weights = defaultWeightsPath();
  CLI::App app{std::string("Trains ") + program.modelName +
               " on a mesh of dp=" + std::to_string(program.dp) +
               " x tp=" + std::to_string(program.tp) + " x pp=" +
               std::to_string(program.pp) + " ranks (this is pipeline stage " +
               std::to_string(program.stage) +
               "'s program), compiled by slapoc. Rank 0 prints progress and "
               "writes the log, gradients and weights."};
  app.add_option("--steps", options.steps,
                 "train until this step (with --resume, counting the "
                 "checkpoint's steps); learning-rate schedules span it")
      ->capture_default_str();
  app.add_option("--data", options.data,
                 "training data: a .safetensors batch file or a flat token "
                 "file (uint16, or uint32 if it ends in .u32); synthetic "
                 "data without it");
  app.add_option("--own-values", options.ownValues,
                 "synthetic data: these inputs get values of their own "
                 "(by default inputs of one shape get the same values: "
                 "labels equal input_ids)")
      ->excludes("--data")
      ->delimiter(',');
  app.add_option("--weights", options.weights,
                 "initial weights (default: weights.safetensors next to the "
                 "program)");
  app.add_option("--log-json", options.logJson,
                 "write one JSON object per step to this file");
  app.add_option("--threads", options.threads,
                 "CPU programs: threads, at most 4 x the cores (default 0: "
                 "one per core)");
  app.add_option("--save", options.save,
                 "checkpoint directory: saved at the last step and every "
                 "--save-every steps");
  CLI::Option *saveEvery = app.add_option("--save-every", options.saveEvery,
                                          "save a checkpoint every K steps");
  app.add_option("--resume", options.resume,
                 "continue from a checkpoint (a --save directory or one of "
                 "its step directories)");
  app.add_flag("--forward-only", options.forwardOnly,
               "run the forward only: losses without training");
  app.add_option("--save-grads", options.saveGrads,
                 "write the gradients of step 1 (before clipping) to this "
                 "safetensors file");
  app.add_option("--save-weights", options.saveWeights,
                 "write the final parameters to this safetensors file");
  app.add_flag("--quiet", options.quiet, "no progress lines");
  app.add_option("--timeout", options.timeout,
                 "seconds a rank waits in a collective for its peers before "
                 "it ends the job, naming the ranks that stopped")
      ->capture_default_str();
  app.add_option("--comm", options.comm,
                 "GPU programs: how collectives communicate: nccl, mpi "
                 "(staged through host memory) or auto (NCCL unless ranks "
                 "share a GPU)")
      ->check(CLI::IsMember({"auto", "nccl", "mpi"}))
      ->capture_default_str();
  app.footer(
      "Environment:\n  SLAPO_CPU_ISA=ISA  CPU programs: use no instruction set "
      "beyond ISA, named as oneDNN names them (avx2, avx512_core, "
      "avx512_core_bf16, ...): the kernels, oneDNN's (DNNL_MAX_CPU_ISA) and "
      "the bf16 matmul (oneDNN's needs avx512_core; below it, the f32 "
      "fallback) follow it. Default: all the CPU has. The progress header "
      "names the paths taken.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    // --help is a success; every other parse error is a usage error. Every
    // rank has the same command line: one of them says what is wrong.
    int status = rank == 0 ? app.exit(e) : e.get_exit_code();
    return status == 0 ? 0 : 1;
  }
  std::string usageError = findUsageError(options, saveEvery->count() > 0);
  if (!usageError.empty()) {
    if (rank == 0)
      std::fprintf(stderr, "rank 0: error: %s\n", usageError.c_str());
    return 1;
  }
  mesh->setTimeout(options.timeout);
  try {
    Trainer(program, options, *mesh).run();
  } catch (const std::exception &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "rank %d: error: %s\n", rank, e.what());
    std::fflush(stderr);
    // Peers may be waiting in a collective for this rank: end them too.
    mesh->abort(2);
    return 2;
  }
  return 0;
}

} // namespace slapo::rt
