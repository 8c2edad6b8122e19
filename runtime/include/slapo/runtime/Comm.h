//===- Comm.h - groups of ranks and the process mesh ------------*- C++ -*-===//
//
// A job's ranks form a dp x tp mesh; each rank communicates within its
// data-parallel group (gradient all-reduce), its tensor-parallel group
// (sharded activations) or the whole world. On the CPU the groups are MPI
// communicators; a group of one member never calls MPI, so a one-rank program
// runs without mpirun. This header does not include mpi.h: generated code
// compiles without MPI's include directories.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_COMM_H
#define SLAPO_RUNTIME_COMM_H

#include "slapo/runtime/Device.h"
#include "slapo/runtime/Tensor.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace slapo::rt {

/// A group of ranks that exchange tensors: the data-parallel or the
/// tensor-parallel group of this rank, or the world. Every member must make
/// the same calls with the same counts and dtypes in the same order; a
/// failing call throws Error naming the operation and the group.
class Communicator {
public:
  Communicator() = default;
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;
  virtual ~Communicator();

  /// This rank's rank within the group.
  virtual int getRank() const = 0;
  virtual int getSize() const = 0;
  /// In place: `count` elements of `dtype` at `data` become their elementwise
  /// sum over the group. F32, F64, I64.
  virtual void allReduceSum(void *data, int64_t count, DType dtype) = 0;
  /// `gathered` (getSize() * count elements) = every rank's `count` elements
  /// of `local`, in group-rank order. Any dtype; the buffers do not overlap
  /// unless they are the same (a group of one then copies nothing).
  virtual void allGather(const void *local, void *gathered, int64_t count,
                         DType dtype) = 0;
  /// `local` (count elements) = block getRank() of the elementwise sum over
  /// the group of `full` (getSize() * count elements). F32, F64, I64.
  virtual void reduceScatterSum(const void *full, void *local, int64_t count,
                                DType dtype) = 0;
  /// `bytes` bytes at `data` on every rank become those of group rank `root`.
  /// It sets up other communicators (the NCCL communicator's unique id), so
  /// getCommSeconds() does not count it. Throws Error when `root` is not a
  /// rank of the group.
  virtual void broadcast(void *data, int64_t bytes, int root) = 0;

  /// Point to point, between pipeline stages: send() passes `bytes` bytes at
  /// `data` to group rank `peer`, whose recv() from this rank writes them at
  /// its `data`; messages between two ranks arrive in the order they were
  /// sent. recv blocks until the message is there; send returns once `data`
  /// may be reused, without waiting for the peer to receive (an MPI group
  /// sends a copy): a pipeline schedule whose stages each send before they
  /// receive (1F1B's steady state) cannot deadlock on it. Throws Error
  /// when `peer` is this rank or not in the group (a group of one has no
  /// peer), or when the message received is not `bytes` long.
  virtual void send(const void *data, int64_t bytes, int peer) = 0;
  virtual void recv(void *data, int64_t bytes, int peer) = 0;

  /// Staging memory of the collectives in Collectives.h (packing a bucket of
  /// tensors into one message, reordering blocks along a non-leading dim):
  /// one grow-only buffer per group, allocated on first use outside the
  /// planned arena, as large as the largest message staged so far, in the
  /// memory the group communicates in (host memory here; a communicator over
  /// a GPU's memory overrides it). Its contents do not survive the next call.
  virtual std::byte *getScratch(size_t bytes);

  /// Wall seconds this rank has spent in the group's collectives so far:
  /// inside allReduceSum, allGather and reduceScatterSum of a group of
  /// several ranks, waiting for slower peers included. A group of one passes
  /// no messages and stays at 0. Always counted: it costs two clock reads per
  /// call.
  double getCommSeconds() const { return commSeconds; }
  /// Wall seconds this rank has spent in the group's point-to-point messages
  /// so far, counted apart from getCommSeconds(): inside send (which copies
  /// the message and does not wait for the peer) and recv (which waits until
  /// the peer's message is there). Between pipeline stages it is the time a
  /// stage waits for its neighbours: the pipeline's bubble, as measured.
  double getPointToPointSeconds() const { return pointToPointSeconds; }

protected:
  /// What getCommSeconds() and getPointToPointSeconds() return; the groups
  /// that pass messages add to them.
  double commSeconds = 0;
  double pointToPointSeconds = 0;

private:
  std::unique_ptr<std::byte[]> scratch;
  size_t scratchBytes = 0;
};

class Watchdog;

/// The ranks of a job as a dp x tp x pp mesh, in Megatron's order: world
/// rank = ppRank * dp * tp + dpRank * tp + tpRank, so the ranks of one
/// tensor-parallel group are neighbours (as Megatron places them on a node)
/// and each pipeline stage is a block of dp * tp ranks. The dp group of a
/// rank = the ranks of its stage with its tpRank; the tp group = the ranks
/// of its stage with its dpRank; the pipeline group = the ranks with its
/// dpRank and tpRank, one per stage, in stage order.
class ProcessMesh {
public:
  /// How long a collective waits for a peer by default (setTimeout).
  static constexpr double kDefaultTimeoutSeconds = 300;

  /// dp * tp * pp == 1: a mesh of one rank, whose groups have one member; MPI
  /// is not initialised at all (so a one-rank program runs without mpirun and
  /// without MPI's singleton start-up). It throws Error when a launcher says
  /// it started several ranks (two copies would write the same files).
  /// Otherwise initialises MPI (MPI_Init_thread, MPI_THREAD_FUNNELED: kernels
  /// use OpenMP, only the main thread communicates) unless the program did,
  /// sets MPI_ERRORS_RETURN, and throws Error when the world size is not
  /// dp * tp * pp. MPI can be initialised once per process, so a program
  /// creates at most one multi-rank mesh unless it initialises MPI itself (as
  /// the tests do).
  static std::unique_ptr<ProcessMesh> create(int dp, int tp, int pp = 1);
  /// Frees the groups and calls MPI_Finalize when create() initialised MPI.
  /// After a failure call abort() instead: MPI_Finalize would wait for peers
  /// that are stuck in a collective.
  ~ProcessMesh();
  ProcessMesh(const ProcessMesh &) = delete;
  ProcessMesh &operator=(const ProcessMesh &) = delete;

  int getRank() const { return rank; }
  int getWorldSize() const { return dp * tp * pp; }
  int getDpRank() const { return rank / tp % dp; }
  int getTpRank() const { return rank % tp; }
  /// This rank's pipeline stage.
  int getPpRank() const { return rank / (dp * tp); }
  int getDp() const { return dp; }
  int getTp() const { return tp; }
  int getPp() const { return pp; }
  /// The world: a group over host memory, for the driver's own messages.
  Communicator &getWorld() { return *world; }
  /// The groups generated code's collectives use, over the memory of the
  /// device given to useDevice() (host memory before).
  Communicator &getDataParallel() { return *dataParallel; }
  Communicator &getTensorParallel() { return *tensorParallel; }
  /// Stage k of this rank's pipeline is group rank k (stage_send/recv).
  Communicator &getPipeline() { return *pipeline; }
  /// Megatron's embedding group: this rank's pipeline ranks of the first and
  /// the last stage (group ranks 0 and 1), which hold copies of the
  /// parameters tied across them and sum their gradients. Throws Error on
  /// the stages between, which are in no such group.
  Communicator &getTied();
  /// Makes the dp and tp groups communicate in `device`'s memory: each is
  /// replaced by device.createCommunicator(group) where that is not null
  /// (a GPU); the replaced host groups stay alive for the new ones. Called
  /// once, before any collective.
  void useDevice(Device &device);
  /// The getCommSeconds() of this rank's groups together.
  double getCommSeconds() const;
  /// The getPointToPointSeconds() of this rank's groups together.
  double getPointToPointSeconds() const;
  /// A collective of the MPI groups (not of a device's own communicator)
  /// that has not completed within `seconds` means that a peer stopped
  /// making progress: a watchdog thread of this rank prints an error naming
  /// the collective, its group and the peers one of which has not joined it
  /// (in a group of two, the silent rank), and ends the job (MPI_Abort, exit
  /// status 2). kDefaultTimeoutSeconds until set; a mesh of one has no
  /// collectives to wait in. Throws Error for `seconds` <= 0.
  void setTimeout(double seconds);

  /// After a failure on this rank: ends the job on every rank (MPI_Abort
  /// with `exitCode`) so that no peer waits forever in a collective. For a
  /// mesh of one it returns (the caller then returns the exit code).
  void abort(int exitCode);

private:
  ProcessMesh(int dp, int tp, int pp) : dp(dp), tp(tp), pp(pp) {}
  void joinMpiWorld();
  /// getCommSeconds or getPointToPointSeconds.
  using GroupSeconds = double (Communicator::*)() const;
  /// `seconds` of every group of this rank, summed.
  double sumOverGroups(GroupSeconds seconds) const;

  int dp;
  int tp;
  int pp;
  int rank = 0;
  /// Whether this mesh called MPI_Init_thread (and so must finalise MPI).
  bool initialisedMpi = false;
  /// Whether the groups are MPI communicators (dp * tp * pp > 1).
  bool usesMpi = false;
  std::unique_ptr<Communicator> world;
  std::unique_ptr<Communicator> dataParallel;
  std::unique_ptr<Communicator> tensorParallel;
  std::unique_ptr<Communicator> pipeline;
  /// Null on the stages between the first and the last.
  std::unique_ptr<Communicator> tied;
  /// The host groups that useDevice() replaced, which the device's groups
  /// may still use.
  std::unique_ptr<Communicator> hostDataParallel;
  std::unique_ptr<Communicator> hostTensorParallel;
  std::unique_ptr<Communicator> hostPipeline;
  std::unique_ptr<Communicator> hostTied;
  /// What the MPI groups share to end a job whose rank stopped (null in a
  /// mesh of one).
  std::shared_ptr<Watchdog> watchdog;
};

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_COMM_H
