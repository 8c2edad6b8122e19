//===- ProcessMesh.cpp - groups of ranks over MPI -------------------------===//
//
// The mesh's groups: MPI communicators split from a duplicate of
// MPI_COMM_WORLD (so the runtime's messages never mix with a host program's),
// and a local group for every group of one member, which never calls MPI.
//
//===----------------------------------------------------------------------===//
#include "CommInternal.h"
#include "slapo/runtime/Comm.h"
#include "slapo/runtime/Error.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace slapo::rt {

Communicator::~Communicator() = default;

std::byte *Communicator::getScratch(size_t bytes) {
  if (bytes > scratchBytes) {
    // The old contents are dead (staging never spans calls): free them
    // before allocating, and leave the new bytes uninitialised.
    scratch.reset();
    scratch.reset(new std::byte[bytes]);
    scratchBytes = bytes;
  }
  return scratch.get();
}

namespace {

/// The MPI type of one element, for moving elements (any dtype) and for
/// MPI_SUM (the summable dtypes).
MPI_Datatype getMpiType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return MPI_FLOAT;
  case DType::F64:
    return MPI_DOUBLE;
  case DType::BF16:
  case DType::F16:
    return MPI_UINT16_T;
  case DType::I8:
    return MPI_INT8_T;
  case DType::I32:
    return MPI_INT32_T;
  case DType::I64:
    return MPI_INT64_T;
  case DType::Bool:
    return MPI_UINT8_T;
  }
  throw Error("unknown dtype in a collective");
}

std::string getMpiErrorText(int status) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(status, text, &length) != MPI_SUCCESS)
    return "MPI error code " + std::to_string(status);
  return std::string(text, length);
}

/// Throws "<operation> failed: <MPI's text>" unless `status` is success.
void checkMpi(int status, const std::string &operation) {
  if (status != MPI_SUCCESS)
    throw Error(operation + " failed: " + getMpiErrorText(status));
}

void checkWorldSize(int64_t launched, int dp, int tp, int pp) {
  int64_t size = int64_t(dp) * tp * pp;
  if (launched != size)
    throw Error("launched with " + countRanks(launched) +
                ", but the program was compiled for mesh dp=" +
                std::to_string(dp) + " x tp=" + std::to_string(tp) +
                " x pp=" + std::to_string(pp) + " (" + countRanks(size) + ")");
}

/// The world size a launcher announces to the processes it starts (Open
/// MPI's mpirun; MPICH's Hydra and Slurm's PMI), or 1 when none did. A mesh
/// of one reads it because it does not initialise MPI to ask.
int64_t getAnnouncedWorldSize() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char *value = std::getenv(name)) {
      int64_t size = std::atoll(value);
      if (size > 0)
        return size;
    }
  return 1;
}

/// A group of one member: every collective is a copy (or nothing in place).
class LocalCommunicator final : public Communicator {
public:
  int getRank() const override { return 0; }
  int getSize() const override { return 1; }

  void allReduceSum(void *, int64_t, DType dtype) override {
    checkSummable(dtype, "all-reduce");
  }
  void allGather(const void *local, void *gathered, int64_t count,
                 DType dtype) override {
    copy(local, gathered, count, dtype);
  }
  void reduceScatterSum(const void *full, void *local, int64_t count,
                        DType dtype) override {
    checkSummable(dtype, "reduce-scatter");
    copy(full, local, count, dtype);
  }
  void broadcast(void *, int64_t, int root) override {
    checkBroadcastRoot(root, 1);
  }
  void send(const void *, int64_t, int peer) override {
    checkPeer(peer, 0, 1, "send");
  }
  void recv(void *, int64_t, int peer) override {
    checkPeer(peer, 0, 1, "recv");
  }

private:
  static void copy(const void *from, void *to, int64_t count, DType dtype) {
    if (from != to)
      std::memcpy(to, from, count * rt::getSize(dtype));
  }
};

} // namespace

/// Ends a job in which a rank stopped making progress (stopped, deadlocked,
/// unreachable) instead of letting its peers wait in a collective forever,
/// spinning. The collectives stay blocking MPI calls (MPI's nonblocking
/// ones, which a waiting rank could test against a deadline, are up to a few
/// times slower); the communicators tell the watchdog's thread when one
/// starts and ends, and the thread ends the job when one has not completed
/// within the timeout. Its only MPI call is that MPI_Abort.
class Watchdog {
public:
  explicit Watchdog(int worldRank)
      : worldRank(worldRank), thread([this] { watch(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_one();
    thread.join();
  }
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;

  void setTimeout(double seconds) {
    std::lock_guard<std::mutex> lock(mutex);
    timeoutSeconds = seconds;
    wake.notify_one();
  }

  /// This rank entered the collective `operation` ("MPI_Allreduce") over
  /// `group` ("the data-parallel group"), whose other members are `peers`
  /// ("rank 1", "ranks 1, 2 and 3"); both outlive the call.
  void enter(const char *operation, const std::string &group,
             const std::string &peers) {
    std::lock_guard<std::mutex> lock(mutex);
    waiting = {operation, &group, &peers, std::chrono::steady_clock::now()};
  }
  /// ... and left it.
  void leave() {
    std::lock_guard<std::mutex> lock(mutex);
    waiting.operation = nullptr;
  }

private:
  struct Wait {
    const char *operation = nullptr;
    const std::string *group = nullptr;
    const std::string *peers = nullptr;
    std::chrono::steady_clock::time_point since;
  };

  void watch() {
    std::unique_lock<std::mutex> lock(mutex);
    auto checked = std::chrono::steady_clock::now();
    while (!stopping) {
      // Late by a tenth of the timeout at most.
      auto period =
          std::chrono::duration<double>(std::min(1.0, timeoutSeconds / 10));
      wake.wait_for(lock, period);
      auto now = std::chrono::steady_clock::now();
      // A process that was stopped itself (SIGSTOP, a suspended machine)
      // does not blame its peers for the time: its wait starts again.
      if (now - checked > 2 * period + std::chrono::seconds(1))
        waiting.since = now;
      checked = now;
      if (!waiting.operation)
        continue;
      double waited =
          std::chrono::duration<double>(now - waiting.since).count();
      if (waited <= timeoutSeconds)
        continue;
      std::fprintf(stderr,
                   "rank %d: error: %s over the %s has not completed in %.0f "
                   "s (--timeout %g): %s has not joined it, stopped (SIGSTOP, "
                   "a debugger), deadlocked or unreachable; ending the job\n",
                   worldRank, waiting.operation, waiting.group->c_str(), waited,
                   timeoutSeconds, waiting.peers->c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }

  const int worldRank;
  std::mutex mutex;
  std::condition_variable wake;
  Wait waiting;
  double timeoutSeconds = ProcessMesh::kDefaultTimeoutSeconds;
  bool stopping = false;
  /// Last: started once the rest is initialised.
  std::thread thread;
};

namespace {

/// The world ranks of `comm`'s members but this rank, as the watchdog names
/// the one that has not joined a collective: "rank 1", "one of ranks 1, 2
/// and 3".
std::string describePeers(MPI_Comm comm, const std::string &name) {
  MPI_Group group, world;
  checkMpi(MPI_Comm_group(comm, &group), "MPI_Comm_group of the " + name);
  checkMpi(MPI_Comm_group(MPI_COMM_WORLD, &world), "MPI_Comm_group");
  int size = 0, self = 0;
  MPI_Group_size(group, &size);
  MPI_Group_rank(group, &self);
  std::vector<int> ranks(size), worldRanks(size);
  for (int i = 0; i < size; ++i)
    ranks[i] = i;
  checkMpi(MPI_Group_translate_ranks(group, size, ranks.data(), world,
                                     worldRanks.data()),
           "MPI_Group_translate_ranks of the " + name);
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  worldRanks.erase(worldRanks.begin() + self);
  std::string text = worldRanks.size() == 1 ? "rank " : "one of ranks ";
  for (size_t i = 0; i < worldRanks.size(); ++i)
    text += (i == 0                       ? ""
             : i + 1 == worldRanks.size() ? " and "
                                          : ", ") +
            std::to_string(worldRanks[i]);
  return text;
}

/// A group of several ranks: one MPI communicator, owned.
class MpiCommunicator final : public Communicator {
public:
  /// `name` completes "MPI_Allreduce over the ..." in error messages;
  /// `watchdog` ends the job when a collective waits too long for a peer.
  MpiCommunicator(MPI_Comm comm, const char *name,
                  std::shared_ptr<Watchdog> watchdog)
      : comm(comm), name(name), watchdog(std::move(watchdog)) {
    checkMpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN),
             "MPI_Comm_set_errhandler on the " + this->name);
    checkMpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank of the " + this->name);
    checkMpi(MPI_Comm_size(comm, &size), "MPI_Comm_size of the " + this->name);
    peers = describePeers(comm, this->name);
  }
  ~MpiCommunicator() override {
    // A host program that finalised MPI has freed every communicator.
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (finalised)
      return;
    try {
      completeSends(/*wait=*/true);
    } catch (const Error &) {
      // The job is failing already; its abort ends the peers.
    }
    MPI_Comm_free(&comm);
  }

  int getRank() const override { return rank; }
  int getSize() const override { return size; }

  void allReduceSum(void *data, int64_t count, DType dtype) override {
    checkSummable(dtype, "all-reduce");
    ScopedTimer timer(commSeconds);
    // MPI counts are ints: a bucket beyond 2^31 elements goes in pieces.
    auto *elements = static_cast<std::byte *>(data);
    size_t elementBytes = rt::getSize(dtype);
    for (int64_t done = 0; done < count;) {
      int piece = static_cast<int>(std::min<int64_t>(count - done, INT_MAX));
      collective("MPI_Allreduce", [&] {
        return MPI_Allreduce(MPI_IN_PLACE, elements + done * elementBytes,
                             piece, getMpiType(dtype), MPI_SUM, comm);
      });
      done += piece;
    }
  }

  void allGather(const void *local, void *gathered, int64_t count,
                 DType dtype) override {
    int mpiCount = toMpiCount(count, "MPI_Allgather");
    MPI_Datatype type = getMpiType(dtype);
    ScopedTimer timer(commSeconds);
    collective("MPI_Allgather", [&] {
      return MPI_Allgather(local, mpiCount, type, gathered, mpiCount, type,
                           comm);
    });
  }

  void reduceScatterSum(const void *full, void *local, int64_t count,
                        DType dtype) override {
    checkSummable(dtype, "reduce-scatter");
    ScopedTimer timer(commSeconds);
    int mpiCount = toMpiCount(count, "MPI_Reduce_scatter_block");
    collective("MPI_Reduce_scatter_block", [&] {
      return MPI_Reduce_scatter_block(full, local, mpiCount, getMpiType(dtype),
                                      MPI_SUM, comm);
    });
  }

  void broadcast(void *data, int64_t bytes, int root) override {
    checkBroadcastRoot(root, size);
    int mpiCount = toMpiCount(bytes, "MPI_Bcast");
    collective("MPI_Bcast",
               [&] { return MPI_Bcast(data, mpiCount, MPI_BYTE, root, comm); });
  }

  void send(const void *data, int64_t bytes, int peer) override {
    checkPeer(peer, rank, size, "send");
    ScopedTimer timer(pointToPointSeconds);
    // The copy is sent while this rank goes on: a peer that sends to this
    // one before receiving from it does not wait for this rank's receive.
    PendingSend &pending = pendingSends.emplace_back();
    pending.bytes.reset(new std::byte[std::max<int64_t>(bytes, 1)]);
    std::memcpy(pending.bytes.get(), data, bytes);
    forEachPiece(bytes, [&](int64_t offset, int piece) {
      MPI_Request request;
      checkMpi(MPI_Isend(pending.bytes.get() + offset, piece, MPI_BYTE, peer,
                         /*tag=*/0, comm, &request),
               "MPI_Isend over the " + name);
      pending.requests.push_back(request);
    });
    completeSends(/*wait=*/false);
  }

  void recv(void *data, int64_t bytes, int peer) override {
    checkPeer(peer, rank, size, "recv");
    ScopedTimer timer(pointToPointSeconds);
    forEachPiece(bytes, [&](int64_t offset, int piece) {
      MPI_Status status;
      collective("MPI_Recv", [&] {
        return MPI_Recv(static_cast<std::byte *>(data) + offset, piece,
                        MPI_BYTE, peer, /*tag=*/0, comm, &status);
      });
      int received = 0;
      MPI_Get_count(&status, MPI_BYTE, &received);
      if (received != piece)
        throw Error("MPI_Recv from rank " + std::to_string(peer) +
                    " over the " + name + ": " + std::to_string(received) +
                    " bytes arrived where " + std::to_string(piece) +
                    " were expected");
    });
  }

private:
  /// A message send() copied, and its pieces' requests.
  struct PendingSend {
    std::unique_ptr<std::byte[]> bytes;
    std::vector<MPI_Request> requests;
  };

  /// Frees the copies of the sends that completed, oldest first; with
  /// `wait`, waits for all of them (watched, as a collective is).
  void completeSends(bool wait) {
    while (!pendingSends.empty()) {
      std::vector<MPI_Request> &requests = pendingSends.front().requests;
      int count = static_cast<int>(requests.size());
      if (wait) {
        collective("MPI_Waitall of a send", [&] {
          return MPI_Waitall(count, requests.data(), MPI_STATUSES_IGNORE);
        });
      } else {
        int done = 0;
        checkMpi(
            MPI_Testall(count, requests.data(), &done, MPI_STATUSES_IGNORE),
            "MPI_Testall of a send over the " + name);
        if (!done)
          return;
      }
      pendingSends.pop_front();
    }
  }

  /// Runs `call`, the blocking collective `operation` over this group, with
  /// the watchdog watching, and checks the status it returns.
  template <typename Call> void collective(const char *operation, Call call) {
    watchdog->enter(operation, name, peers);
    int status = call();
    watchdog->leave();
    checkMpi(status, std::string(operation) + " over the " + name);
  }
  /// Calls `pass(offset, bytes)` for each piece of a message of `bytes`
  /// bytes that MPI's int counts can pass, one after the other; a message of
  /// none is one empty piece, so that sends and receives still pair.
  template <typename Pass> static void forEachPiece(int64_t bytes, Pass pass) {
    int64_t offset = 0;
    do {
      int piece = static_cast<int>(std::min<int64_t>(bytes - offset, INT_MAX));
      pass(offset, piece);
      offset += piece;
    } while (offset < bytes);
  }
  int toMpiCount(int64_t count, const char *operation) const {
    if (count > INT_MAX)
      throw Error(std::string(operation) + " over the " + name + ": " +
                  std::to_string(count) +
                  " elements per rank exceed MPI's int count");
    return static_cast<int>(count);
  }

  MPI_Comm comm;
  std::string name;
  std::shared_ptr<Watchdog> watchdog;
  /// The other members, as the watchdog names them.
  std::string peers;
  std::deque<PendingSend> pendingSends;
  int rank = 0;
  int size = 0;
};

} // namespace

std::unique_ptr<ProcessMesh> ProcessMesh::create(int dp, int tp, int pp) {
  if (dp < 1 || tp < 1 || pp < 1)
    throw Error("invalid mesh dp=" + std::to_string(dp) +
                " x tp=" + std::to_string(tp) + " x pp=" + std::to_string(pp) +
                ": each must be at least 1");
  std::unique_ptr<ProcessMesh> mesh(new ProcessMesh(dp, tp, pp));
  if (dp * tp * pp == 1) {
    checkWorldSize(getAnnouncedWorldSize(), dp, tp, pp);
    mesh->world = std::make_unique<LocalCommunicator>();
    mesh->dataParallel = std::make_unique<LocalCommunicator>();
    mesh->tensorParallel = std::make_unique<LocalCommunicator>();
    mesh->pipeline = std::make_unique<LocalCommunicator>();
    mesh->tied = std::make_unique<LocalCommunicator>();
    return mesh;
  }
  // On a throw the half-built mesh's destructor frees what it made.
  mesh->joinMpiWorld();
  return mesh;
}

void ProcessMesh::joinMpiWorld() {
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  if (finalised)
    throw Error("MPI was finalised already: a process initialises MPI once, "
                "so it creates at most one multi-rank mesh");
  int provided = MPI_THREAD_SINGLE;
  if (initialised) {
    checkMpi(MPI_Query_thread(&provided), "MPI_Query_thread");
  } else {
    checkMpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided),
             "MPI_Init_thread");
    initialisedMpi = true;
  }
  usesMpi = true;
  if (provided < MPI_THREAD_FUNNELED)
    throw Error("MPI provides no MPI_THREAD_FUNNELED support, which the "
                "runtime needs (OpenMP kernels run beside MPI calls)");
  checkMpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
           "MPI_Comm_set_errhandler on MPI_COMM_WORLD");
  int worldSize = 0;
  checkMpi(MPI_Comm_size(MPI_COMM_WORLD, &worldSize), "MPI_Comm_size");
  checkMpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  checkWorldSize(worldSize, dp, tp, pp);

  watchdog = std::make_shared<Watchdog>(rank);
  MPI_Comm comm;
  checkMpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup of the world");
  world = std::make_unique<MpiCommunicator>(comm, "world", watchdog);
  // A group of `size` ranks that share `color` (MPI_UNDEFINED: this rank
  // is in none), ordered by `key`. Every rank takes the same branches: dp,
  // tp and pp are the same everywhere.
  auto makeGroup =
      [&](int size, int color, int key,
          const std::string &name) -> std::unique_ptr<Communicator> {
    if (size == 1)
      return std::make_unique<LocalCommunicator>();
    MPI_Comm group;
    checkMpi(MPI_Comm_split(MPI_COMM_WORLD, color, key, &group),
             "MPI_Comm_split into " + name + "s");
    if (group == MPI_COMM_NULL)
      return nullptr;
    return std::make_unique<MpiCommunicator>(group, name.c_str(), watchdog);
  };
  int ppRank = getPpRank(), dpRank = getDpRank(), tpRank = getTpRank();
  dataParallel =
      makeGroup(dp, ppRank * tp + tpRank, dpRank, "data-parallel group");
  tensorParallel =
      makeGroup(tp, ppRank * dp + dpRank, tpRank, "tensor-parallel group");
  int position = dpRank * tp + tpRank;
  pipeline = makeGroup(pp, position, ppRank, "pipeline group");
  bool holdsTied = ppRank == 0 || ppRank == pp - 1;
  tied = makeGroup(std::min(pp, 2), holdsTied ? position : MPI_UNDEFINED,
                   ppRank, "embedding group");
}

Communicator &ProcessMesh::getTied() {
  if (!tied)
    throw Error("pipeline stage " + std::to_string(getPpRank()) +
                " is in no embedding group: only the first and the last "
                "stage hold tied parameters");
  return *tied;
}

ProcessMesh::~ProcessMesh() {
  // The communicators go first: MPI_Comm_free is illegal after MPI_Finalize;
  // the device's groups before the host groups they use.
  world.reset();
  dataParallel.reset();
  tensorParallel.reset();
  pipeline.reset();
  tied.reset();
  hostDataParallel.reset();
  hostTensorParallel.reset();
  hostPipeline.reset();
  hostTied.reset();
  watchdog.reset();
  if (initialisedMpi)
    MPI_Finalize();
}

void ProcessMesh::setTimeout(double seconds) {
  if (!(seconds > 0))
    throw Error("a collective's timeout must be positive, not " +
                std::to_string(seconds) + " s");
  if (watchdog)
    watchdog->setTimeout(seconds);
}

void ProcessMesh::useDevice(Device &device) {
  auto replace = [&](std::unique_ptr<Communicator> &group,
                     std::unique_ptr<Communicator> &host) {
    if (!group)
      return;
    std::unique_ptr<Communicator> onDevice = device.createCommunicator(*group);
    if (!onDevice)
      return;
    host = std::move(group);
    group = std::move(onDevice);
  };
  replace(dataParallel, hostDataParallel);
  replace(tensorParallel, hostTensorParallel);
  replace(pipeline, hostPipeline);
  replace(tied, hostTied);
}

double ProcessMesh::sumOverGroups(GroupSeconds seconds) const {
  double sum = 0;
  // A device group staged through a host group leaves the timing to it.
  for (const auto *group :
       {&world, &dataParallel, &tensorParallel, &pipeline, &tied,
        &hostDataParallel, &hostTensorParallel, &hostPipeline, &hostTied})
    if (*group)
      sum += ((**group).*seconds)();
  return sum;
}

double ProcessMesh::getCommSeconds() const {
  return sumOverGroups(&Communicator::getCommSeconds);
}

double ProcessMesh::getPointToPointSeconds() const {
  return sumOverGroups(&Communicator::getPointToPointSeconds);
}

void ProcessMesh::abort(int exitCode) {
  if (usesMpi)
    MPI_Abort(MPI_COMM_WORLD, exitCode);
}

} // namespace slapo::rt
