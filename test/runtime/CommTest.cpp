// The process mesh and the tensor collectives. This file is built twice: in
// slapo-runtime-tests (no mpirun) it tests the mesh of one rank, which needs
// no MPI; as slapo-comm-tests (SLAPO_COMM_TESTS_UNDER_MPI) it runs under
// mpirun with 2 or 4 ranks, every rank running every test case on every mesh
// shape the world size allows. Expected values are closed forms of the group
// rank and the element index. Each test makes all of its collective calls
// before it checks anything (and checks with CHECK, not REQUIRE), so a failed
// check on one rank cannot leave its peers waiting in a collective.
#ifdef SLAPO_COMM_TESTS_UNDER_MPI
// main() below initialises MPI and collects the reports of ranks > 0.
#define CATCH_CONFIG_RUNNER
#define CATCH_CONFIG_NOSTDOUT
#endif

#include "slapo/runtime/Comm.h"
#include "slapo/runtime/Collectives.h"
#include "slapo/runtime/Error.h"
#include "slapo/runtime/cpu/Kernels.h"

#include <catch2/catch.hpp>
#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace slapo::rt;

namespace {

/// "N blocks" messages of the collectives' shape checks, written out here.
std::string blocksMessage(const std::string &operation, int dim,
                          const std::string &wholeRole,
                          const std::string &whole, int parts,
                          const std::string &blockRole,
                          const std::string &block) {
  return operation + " along dim " + std::to_string(dim) + ": " + wholeRole +
         " " + whole + " must be " + std::to_string(parts) + " blocks of " +
         blockRole + " " + block + " along dim " + std::to_string(dim) +
         ", one per rank of the group";
}

/// Every mismatch is found before any communication, so every rank throws
/// alike and no rank is left in a collective.
void checkMismatchesThrow(cpu::Context &ctx, Communicator &group) {
  int size = group.getSize();
  std::string widened = std::to_string(3 * size + 1);
  std::vector<double> in(64 * size), out(64 * size);
  auto f32 = [](std::vector<double> &data, Shape shape) {
    return Tensor(data.data(), DType::F32, shape);
  };

  CHECK_THROWS_WITH(
      allGather(ctx, group, f32(in, {2, 3}), f32(out, {2, 3 * size + 1}), 1),
      blocksMessage("all-gather", 1, "output", "F32 [2, " + widened + "]", size,
                    "input", "F32 [2, 3]"));
  CHECK_THROWS_WITH(
      allGather(ctx, group, f32(in, {2, 3}), f32(out, {2, 3 * size}), 2),
      "all-gather along dim 2: input F32 [2, 3] has no dim 2");
  CHECK_THROWS_WITH(
      allGather(ctx, group, f32(in, {2, 3}), f32(out, {2 * size, 3, 1}), 0),
      blocksMessage("all-gather", 0, "output",
                    "F32 [" + std::to_string(2 * size) + ", 3, 1]", size,
                    "input", "F32 [2, 3]"));
  CHECK_THROWS_WITH(reduceScatter(ctx, group, f32(in, {3 * size, 2}),
                                  Tensor(out.data(), DType::F64, {3, 2}), 0),
                    blocksMessage("reduce-scatter", 0, "input",
                                  "F32 [" + std::to_string(3 * size) + ", 2]",
                                  size, "output", "F64 [3, 2]"));
  CHECK_THROWS_WITH(reduceScatter(ctx, group,
                                  Tensor(in.data(), DType::BF16, {2 * size}),
                                  Tensor(out.data(), DType::BF16, {2}), 0),
                    "reduce-scatter of BF16 elements is not supported (F32, "
                    "F64, I64)");
  CHECK_THROWS_WITH(
      scatter(ctx, group, f32(in, {2, 3 * size + 1}), f32(out, {2, 3}), -1),
      blocksMessage("scatter", -1, "input", "F32 [2, " + widened + "]", size,
                    "output", "F32 [2, 3]"));

  Tensor inputs[] = {f32(in, {2}), Tensor(in.data() + 2, DType::I64, {3})};
  Tensor outputs[] = {f32(out, {2}), Tensor(out.data() + 2, DType::I64, {3})};
  CHECK_THROWS_WITH(allReduce(ctx, group, inputs, outputs, 2, false),
                    "all-reduce of tensor 1 of a bucket: input I64 [3] and "
                    "output I64 [3] must be F32 tensors of one shape");
  Tensor reshaped[] = {f32(out, {1, 2})};
  CHECK_THROWS_WITH(allReduce(ctx, group, inputs, reshaped, 1, true),
                    "all-reduce of tensor 0 of a bucket: input F32 [2] and "
                    "output F32 [1, 2] must be F32 tensors of one shape");
}

} // namespace

TEST_CASE("a mesh needs positive dims") {
  CHECK_THROWS_WITH(ProcessMesh::create(0, 2),
                    "invalid mesh dp=0 x tp=2 x pp=1: each must be at least 1");
  CHECK_THROWS_WITH(
      ProcessMesh::create(2, -1),
      "invalid mesh dp=2 x tp=-1 x pp=1: each must be at least 1");
  CHECK_THROWS_WITH(ProcessMesh::create(1, 1, 0),
                    "invalid mesh dp=1 x tp=1 x pp=0: each must be at least 1");
}

#ifndef SLAPO_COMM_TESTS_UNDER_MPI

TEST_CASE("a mesh of one rank runs without MPI") {
  std::unique_ptr<ProcessMesh> mesh = ProcessMesh::create(1, 1);
  CHECK(mesh->getRank() == 0);
  CHECK(mesh->getWorldSize() == 1);
  CHECK(mesh->getDp() == 1);
  CHECK(mesh->getTp() == 1);
  CHECK(mesh->getDpRank() == 0);
  CHECK(mesh->getTpRank() == 0);
  for (Communicator *group : {&mesh->getWorld(), &mesh->getDataParallel(),
                              &mesh->getTensorParallel()}) {
    CHECK(group->getRank() == 0);
    CHECK(group->getSize() == 1);
  }

  cpu::Context ctx(1);
  Communicator &group = mesh->getDataParallel();
  // A bucket out of place is copied, also with `mean` (the mean of one).
  std::vector<float> first = {1, 2, 3}, second = {4, 5};
  std::vector<float> firstSum(3), secondSum(2);
  Tensor inputs[] = {Tensor(first.data(), DType::F32, {3}),
                     Tensor(second.data(), DType::F32, {1, 2})};
  Tensor outputs[] = {Tensor(firstSum.data(), DType::F32, {3}),
                      Tensor(secondSum.data(), DType::F32, {1, 2})};
  allReduce(ctx, group, inputs, outputs, 2, true);
  CHECK(firstSum == std::vector<float>{1, 2, 3});
  CHECK(secondSum == std::vector<float>{4, 5});
  allReduce(ctx, group, inputs, inputs, 2, false);
  CHECK(first == std::vector<float>{1, 2, 3});
  CHECK(second == std::vector<float>{4, 5});

  // Gathering, reduce-scattering and scattering among one is a copy.
  std::vector<float> grid = {0, 1, 2, 3, 4, 5}, result(6);
  Tensor input(grid.data(), DType::F32, {2, 3});
  Tensor output(result.data(), DType::F32, {2, 3});
  allGather(ctx, mesh->getTensorParallel(), input, output, 1);
  CHECK(result == grid);
  result.assign(6, 0);
  reduceScatter(ctx, mesh->getTensorParallel(), input, output, 1);
  CHECK(result == grid);
  result.assign(6, 0);
  scatter(ctx, mesh->getWorld(), input, output, 0);
  CHECK(result == grid);

  checkMismatchesThrow(ctx, group);
  // A group of one passes no messages, so it spends no time communicating.
  CHECK(mesh->getCommSeconds() == 0);

  int initialised = 1;
  MPI_Initialized(&initialised);
  CHECK(initialised == 0);
  // For a mesh of one abort() returns: the caller returns the exit code.
  mesh->abort(2);
}

TEST_CASE("a group of one broadcasts from its rank 0 only") {
  std::unique_ptr<ProcessMesh> mesh = ProcessMesh::create(1, 1);
  std::vector<int32_t> data = {1, 2, 3};
  mesh->getWorld().broadcast(data.data(), data.size() * sizeof(int32_t), 0);
  CHECK(data == std::vector<int32_t>{1, 2, 3});
  CHECK_THROWS_WITH(mesh->getWorld().broadcast(data.data(), 4, 1),
                    "broadcast from rank 1 in a group of 1 rank");
}

TEST_CASE("a group of one has no peer to send to or receive from") {
  std::unique_ptr<ProcessMesh> mesh = ProcessMesh::create(1, 1);
  int32_t data = 7;
  for (int peer : {0, 1}) {
    std::string suffix = " with rank " + std::to_string(peer) +
                         " by rank 0 of a group of 1 rank: the peer must be "
                         "another rank of the group";
    CHECK_THROWS_WITH(mesh->getWorld().send(&data, sizeof data, peer),
                      "send" + suffix);
    CHECK_THROWS_WITH(mesh->getWorld().recv(&data, sizeof data, peer),
                      "recv" + suffix);
  }
}

TEST_CASE("a mesh of one rank refuses a launch of several ranks") {
  // What mpirun tells each of the processes it starts.
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  CHECK_THROWS_WITH(ProcessMesh::create(1, 1),
                    "launched with 2 ranks, but the program was compiled for "
                    "mesh dp=1 x tp=1 x pp=1 (1 rank)");
  unsetenv("OMPI_COMM_WORLD_SIZE");
}

#else // SLAPO_COMM_TESTS_UNDER_MPI

namespace {

int getWorldRank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int getWorldSize() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

/// A group of a mesh of one of the shapes the world size allows.
struct GroupCase {
  int dp, tp;
  const char *kind; // "world", "dp", "tp"
};

/// Every group of every dp x tp mesh of the world: the tests run each
/// collective within each of them, all ranks at once.
std::vector<GroupCase> getGroupCases() {
  std::vector<GroupCase> cases;
  int size = getWorldSize();
  for (int dp = 1; dp <= size; ++dp)
    if (size % dp == 0)
      for (const char *kind : {"world", "dp", "tp"})
        cases.push_back({dp, size / dp, kind});
  return cases;
}

Communicator &getGroup(ProcessMesh &mesh, const GroupCase &which) {
  std::string kind = which.kind;
  if (kind == "dp")
    return mesh.getDataParallel();
  if (kind == "tp")
    return mesh.getTensorParallel();
  return mesh.getWorld();
}

/// Runs `body` with each group of each mesh shape, naming the group in
/// failure messages.
void forEachGroup(
    const std::function<void(Communicator &group, int size, int rank)> &body) {
  for (const GroupCase &which : getGroupCases()) {
    std::unique_ptr<ProcessMesh> mesh = ProcessMesh::create(which.dp, which.tp);
    Communicator &group = getGroup(*mesh, which);
    INFO("mesh dp=" << which.dp << " x tp=" << which.tp << ", " << which.kind
                    << " group, world rank " << getWorldRank());
    // The expected group: its size and this rank's place in it, from the
    // mesh layout world rank = dpRank * tp + tpRank.
    int worldRank = getWorldRank();
    int size = which.dp * which.tp, rank = worldRank;
    if (std::string(which.kind) == "dp") {
      size = which.dp;
      rank = worldRank / which.tp;
    } else if (std::string(which.kind) == "tp") {
      size = which.tp;
      rank = worldRank % which.tp;
    }
    body(group, size, rank);
  }
}

const Shape kBucketShapes[] = {{2, 3}, {5}, {4, 1, 2}};
constexpr int kBucketSize = 3;

/// Three F32 tensors of kBucketShapes, in separate vectors or back to back
/// in one (as the memory plan lays out a gradient bucket).
struct Bucket {
  explicit Bucket(bool backToBack) {
    int64_t total = 0;
    for (const Shape &shape : kBucketShapes)
      total += shape.getNumElements();
    if (backToBack)
      storage.emplace_back(total);
    else
      for (const Shape &shape : kBucketShapes)
        storage.emplace_back(shape.getNumElements());
    float *next = storage[0].data();
    for (int t = 0; t < kBucketSize; ++t) {
      if (!backToBack)
        next = storage[t].data();
      tensors[t] = Tensor(next, DType::F32, kBucketShapes[t]);
      next += kBucketShapes[t].getNumElements();
    }
  }

  /// Element i of tensor t on group rank r is r + 1 + i + 10 t.
  void fillContribution(int rank) {
    for (int t = 0; t < kBucketSize; ++t)
      for (int64_t i = 0; i < tensors[t].getNumElements(); ++i)
        tensors[t].as<float>()[i] = rank + 1 + i + 10 * t;
  }

  /// Whether every element is the sum over ranks 0..size-1 of the
  /// contributions, size (size + 1) / 2 + size (i + 10 t), or that over size.
  bool holdsReduction(int size, bool mean) const {
    for (int t = 0; t < kBucketSize; ++t)
      for (int64_t i = 0; i < tensors[t].getNumElements(); ++i) {
        double sum = size * (size + 1) / 2.0 + size * double(i + 10 * t);
        if (tensors[t].as<float>()[i] != float(mean ? sum / size : sum))
          return false;
      }
    return true;
  }

  bool holdsContribution(int rank) const {
    for (int t = 0; t < kBucketSize; ++t)
      for (int64_t i = 0; i < tensors[t].getNumElements(); ++i)
        if (tensors[t].as<float>()[i] != float(rank + 1 + i + 10 * t))
          return false;
    return true;
  }

  std::vector<std::vector<float>> storage;
  Tensor tensors[kBucketSize];
};

/// [a][j][b] of an [outer, size * block] layout: element b of block j of row a.
int64_t blockIndex(int64_t a, int64_t j, int64_t b, int size, int64_t block) {
  return (a * size + j) * block + b;
}

} // namespace

TEST_CASE("the mesh places tensor-parallel peers next to each other") {
  int worldRank = getWorldRank(), worldSize = getWorldSize();
  for (int dp = 1; dp <= worldSize; ++dp) {
    if (worldSize % dp)
      continue;
    int tp = worldSize / dp;
    INFO("mesh dp=" << dp << " x tp=" << tp << ", world rank " << worldRank);
    std::unique_ptr<ProcessMesh> mesh = ProcessMesh::create(dp, tp);
    // Which world ranks each group holds, asked of the group itself.
    std::vector<int64_t> world(worldSize, -1), dataParallel(worldSize, -1),
        tensorParallel(worldSize, -1);
    int64_t me = worldRank;
    mesh->getWorld().allGather(&me, world.data(), 1, DType::I64);
    mesh->getDataParallel().allGather(&me, dataParallel.data(), 1, DType::I64);
    mesh->getTensorParallel().allGather(&me, tensorParallel.data(), 1,
                                        DType::I64);

    int dpRank = worldRank / tp, tpRank = worldRank % tp;
    CHECK(mesh->getRank() == worldRank);
    CHECK(mesh->getWorldSize() == worldSize);
    CHECK(mesh->getDp() == dp);
    CHECK(mesh->getTp() == tp);
    CHECK(mesh->getDpRank() == dpRank);
    CHECK(mesh->getTpRank() == tpRank);
    CHECK(mesh->getWorld().getRank() == worldRank);
    CHECK(mesh->getWorld().getSize() == worldSize);
    CHECK(mesh->getDataParallel().getRank() == dpRank);
    CHECK(mesh->getDataParallel().getSize() == dp);
    CHECK(mesh->getTensorParallel().getRank() == tpRank);
    CHECK(mesh->getTensorParallel().getSize() == tp);
    for (int j = 0; j < worldSize; ++j)
      CHECK(world[j] == j);
    // The dp group: the ranks with this tpRank; the tp group: the
    // neighbours with this dpRank.
    for (int j = 0; j < dp; ++j)
      CHECK(dataParallel[j] == j * tp + tpRank);
    for (int j = 0; j < tp; ++j)
      CHECK(tensorParallel[j] == dpRank * tp + j);
    // The world (of several ranks) passed messages.
    CHECK(mesh->getCommSeconds() > 0);
  }
}

TEST_CASE("a group of several ranks counts the time of its collectives") {
  cpu::Context ctx(1);
  forEachGroup([&](Communicator &group, int size, int rank) {
    std::vector<float> local(4, float(rank)), whole(4 * size);
    Tensor block(local.data(), DType::F32, {4});
    Tensor full(whole.data(), DType::F32, {4 * size});
    // The group's seconds when new and after each call.
    std::vector<double> seconds = {group.getCommSeconds()};
    allReduce(ctx, group, &block, &block, 1, false);
    seconds.push_back(group.getCommSeconds());
    allGather(ctx, group, block, full, 0);
    seconds.push_back(group.getCommSeconds());
    reduceScatter(ctx, group, full, block, 0);
    seconds.push_back(group.getCommSeconds());
    // Scattering keeps a block of what every rank holds: no messages.
    scatter(ctx, group, full, block, 0);
    seconds.push_back(group.getCommSeconds());

    CHECK(seconds[0] == 0);
    for (int call = 1; call <= 3; ++call) {
      INFO("after call " << call);
      if (size == 1)
        CHECK(seconds[call] == 0);
      else
        CHECK(seconds[call] > seconds[call - 1]);
    }
    CHECK(seconds[4] == seconds[3]);
    // No point-to-point message passed.
    CHECK(group.getPointToPointSeconds() == 0);
  });
}

TEST_CASE("broadcast copies the root's bytes to every rank of the group") {
  forEachGroup([&](Communicator &group, int size, int rank) {
    // Each rank of the group is the root once; element i of rank r's
    // buffer is 100 r + i before the broadcast.
    std::vector<std::vector<int32_t>> received;
    for (int root = 0; root < size; ++root) {
      std::vector<int32_t> data(5);
      for (int i = 0; i < 5; ++i)
        data[i] = 100 * rank + i;
      group.broadcast(data.data(), data.size() * sizeof(int32_t), root);
      received.push_back(data);
    }
    CHECK_THROWS_WITH(group.broadcast(nullptr, 0, size),
                      "broadcast from rank " + std::to_string(size) +
                          " in a group of " + std::to_string(size) +
                          (size == 1 ? " rank" : " ranks"));
    for (int root = 0; root < size; ++root)
      for (int i = 0; i < 5; ++i)
        CHECK(received[root][i] == 100 * root + i);
    // Broadcasts set up other communicators: they are not counted.
    CHECK(group.getCommSeconds() == 0);
  });
}

TEST_CASE("the mesh lays out pipeline stages in Megatron's order") {
  int worldRank = getWorldRank(), worldSize = getWorldSize();
  for (int pp = 2; pp <= worldSize; ++pp) {
    if (worldSize % pp)
      continue;
    // The rest of the world is dp (tp = 1), then tp (dp = 1).
    for (bool data : {true, false}) {
      int dp = data ? worldSize / pp : 1, tp = data ? 1 : worldSize / pp;
      INFO("mesh dp=" << dp << " x tp=" << tp << " x pp=" << pp
                      << ", world rank " << worldRank);
      std::unique_ptr<ProcessMesh> mesh = ProcessMesh::create(dp, tp, pp);
      int stageSize = dp * tp, stage = worldRank / stageSize;
      CHECK(mesh->getWorldSize() == worldSize);
      CHECK(mesh->getPpRank() == stage);
      CHECK(mesh->getDpRank() == worldRank / tp % dp);
      CHECK(mesh->getTpRank() == worldRank % tp);
      int64_t me = worldRank;
      std::vector<int64_t> pipeline(pp, -1), dataParallel(dp, -1),
          tensorParallel(tp, -1);
      mesh->getPipeline().allGather(&me, pipeline.data(), 1, DType::I64);
      mesh->getDataParallel().allGather(&me, dataParallel.data(), 1,
                                        DType::I64);
      mesh->getTensorParallel().allGather(&me, tensorParallel.data(), 1,
                                          DType::I64);
      // One rank per stage, at this rank's place in each stage's block.
      for (int k = 0; k < pp; ++k)
        CHECK(pipeline[k] == k * stageSize + worldRank % stageSize);
      for (int j = 0; j < dp; ++j)
        CHECK(dataParallel[j] == stage * stageSize + j * tp + worldRank % tp);
      for (int j = 0; j < tp; ++j)
        CHECK(tensorParallel[j] == worldRank / tp * tp + j);
      // The embedding group: this rank's first and last stage.
      if (stage != 0 && stage != pp - 1) {
        CHECK_THROWS_WITH(mesh->getTied(),
                          Catch::Matchers::Contains("in no embedding group"));
        continue;
      }
      std::vector<int64_t> tied(2, -1);
      mesh->getTied().allGather(&me, tied.data(), 1, DType::I64);
      CHECK(tied[0] == worldRank % stageSize);
      CHECK(tied[1] == (pp - 1) * stageSize + worldRank % stageSize);
    }
  }
}

TEST_CASE("a send does not wait for the receive") {
  int worldSize = getWorldSize(), worldRank = getWorldRank();
  std::unique_ptr<ProcessMesh> mesh = ProcessMesh::create(1, 1, worldSize);
  Communicator &pipeline = mesh->getPipeline();
  // Every rank sends a message far beyond any eager limit to the next one
  // before it receives from the previous one: blocking sends would wait for
  // each other forever (as 1F1B's steady state would).
  constexpr size_t kCount = 4 << 20;
  std::vector<int32_t> sent(kCount, worldRank), received(kCount, -1);
  int next = (worldRank + 1) % worldSize;
  int previous = (worldRank + worldSize - 1) % worldSize;
  pipeline.send(sent.data(), kCount * sizeof(int32_t), next);
  // The message is a copy: changing the data does not change it.
  std::fill(sent.begin(), sent.end(), -7);
  pipeline.recv(received.data(), kCount * sizeof(int32_t), previous);
  CHECK(received.front() == previous);
  CHECK(received.back() == previous);
  // The mesh counts the pipeline's messages apart from its collectives.
  CHECK(mesh->getPointToPointSeconds() == pipeline.getPointToPointSeconds());
  CHECK(mesh->getPointToPointSeconds() > 0);
  CHECK(mesh->getCommSeconds() == 0);
}

TEST_CASE("send and recv pass messages around the ranks of a group, in "
          "order") {
  forEachGroup([&](Communicator &group, int size, int rank) {
    if (size == 1)
      return;
    // Each rank sends to the next one around the ring and receives from the
    // previous one: a message of 5 ints (100 sender + i), an empty one, then
    // one of 3. Even ranks send first, odd ones receive first, so that no
    // two ranks wait for each other whatever MPI buffers.
    int next = (rank + 1) % size, previous = (rank + size - 1) % size;
    std::vector<int32_t> first(5), last(3), sent(5);
    for (int i = 0; i < 5; ++i)
      sent[i] = 100 * rank + i;
    auto sendAll = [&] {
      group.send(sent.data(), 5 * sizeof(int32_t), next);
      group.send(nullptr, 0, next);
      group.send(sent.data(), 3 * sizeof(int32_t), next);
    };
    auto receiveAll = [&] {
      group.recv(first.data(), 5 * sizeof(int32_t), previous);
      group.recv(nullptr, 0, previous);
      group.recv(last.data(), 3 * sizeof(int32_t), previous);
    };
    if (rank % 2 == 0) {
      sendAll();
      receiveAll();
    } else {
      receiveAll();
      sendAll();
    }
    for (int i = 0; i < 5; ++i)
      CHECK(first[i] == 100 * previous + i);
    for (int i = 0; i < 3; ++i)
      CHECK(last[i] == 100 * previous + i);
    // A message shorter than the receive expects is an error on the
    // receiver; the sender's side completed.
    int32_t one = rank, two[2] = {-1, -1};
    if (rank == 0)
      group.send(&one, sizeof one, 1);
    if (rank == 1)
      CHECK_THROWS_WITH(
          group.recv(two, sizeof two, 0),
          Catch::Matchers::Contains("4 bytes arrived where 8 were expected"));
    CHECK_THROWS_WITH(group.send(&one, sizeof one, rank),
                      Catch::Matchers::Contains("the peer must be another "
                                                "rank of the group"));
    // Messages between two ranks are timed apart from the collectives.
    CHECK(group.getPointToPointSeconds() > 0);
    CHECK(group.getCommSeconds() == 0);
  });
}

TEST_CASE("allReduce sums and averages a bucket of three tensors") {
  cpu::Context ctx(1);
  forEachGroup([&](Communicator &group, int size, int rank) {
    CHECK(group.getSize() == size);
    CHECK(group.getRank() == rank);
    for (bool mean : {false, true}) {
      for (bool backToBack : {false, true}) {
        INFO((mean ? "mean" : "sum")
             << (backToBack ? ", back to back" : ", separate"));
        Bucket inPlace(backToBack);
        inPlace.fillContribution(rank);
        allReduce(ctx, group, inPlace.tensors, inPlace.tensors, kBucketSize,
                  mean);
        CHECK(inPlace.holdsReduction(size, mean));

        Bucket inputs(false), outputs(backToBack);
        inputs.fillContribution(rank);
        allReduce(ctx, group, inputs.tensors, outputs.tensors, kBucketSize,
                  mean);
        CHECK(outputs.holdsReduction(size, mean));
        CHECK(inputs.holdsContribution(rank));
      }
    }
  });
}

TEST_CASE("allGather joins the group's tensors along dim 0, 1 and the last") {
  cpu::Context ctx(1);
  forEachGroup([&](Communicator &group, int size, int rank) {
    // Along dim 0: rank j's [3, 2] holds 100 j + 10 a + b.
    std::vector<float> rows(6), gatheredRows(6 * size);
    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 2; ++b)
        rows[a * 2 + b] = 100 * rank + 10 * a + b;
    allGather(ctx, group, Tensor(rows.data(), DType::F32, {3, 2}),
              Tensor(gatheredRows.data(), DType::F32, {3 * size, 2}), 0);

    // Along the middle dim of [2, 3, 4]: 1000 j + 100 a + 10 c + e.
    auto middleValue = [](int j, int a, int c, int e) {
      return float(1000 * j + 100 * a + 10 * c + e);
    };
    std::vector<std::vector<float>> everyRank(size, std::vector<float>(24));
    for (int j = 0; j < size; ++j)
      for (int a = 0; a < 2; ++a)
        for (int c = 0; c < 3; ++c)
          for (int e = 0; e < 4; ++e)
            everyRank[j][(a * 3 + c) * 4 + e] = middleValue(j, a, c, e);
    std::vector<float> gatheredMiddle(24 * size);
    Tensor middleOut(gatheredMiddle.data(), DType::F32, {2, 3 * size, 4});
    allGather(ctx, group, Tensor(everyRank[rank].data(), DType::F32, {2, 3, 4}),
              middleOut, 1);

    // Along the last dim, I64: rank j's [2, 3] holds 100 j + 10 a + c.
    std::vector<int64_t> columns(6), gatheredColumns(6 * size);
    for (int a = 0; a < 2; ++a)
      for (int c = 0; c < 3; ++c)
        columns[a * 3 + c] = 100 * rank + 10 * a + c;
    allGather(ctx, group, Tensor(columns.data(), DType::I64, {2, 3}),
              Tensor(gatheredColumns.data(), DType::I64, {2, 3 * size}), -1);

    // 16-bit elements travel unchanged: rank j's [2] holds bf16(4 j + a).
    std::vector<BFloat16> halves(2), gatheredHalves(2 * size);
    for (int a = 0; a < 2; ++a)
      halves[a] = BFloat16::fromFloat(float(4 * rank + a));
    allGather(ctx, group, Tensor(halves.data(), DType::BF16, {2}),
              Tensor(gatheredHalves.data(), DType::BF16, {2 * size}), 0);

    for (int j = 0; j < size; ++j)
      for (int a = 0; a < 3; ++a)
        for (int b = 0; b < 2; ++b)
          CHECK(gatheredRows[(j * 3 + a) * 2 + b] == 100 * j + 10 * a + b);
    for (int a = 0; a < 2; ++a)
      for (int j = 0; j < size; ++j)
        for (int c = 0; c < 3; ++c)
          for (int e = 0; e < 4; ++e)
            CHECK(gatheredMiddle[blockIndex(a, j, c * 4 + e, size, 12)] ==
                  middleValue(j, a, c, e));
    for (int a = 0; a < 2; ++a)
      for (int j = 0; j < size; ++j)
        for (int c = 0; c < 3; ++c)
          CHECK(gatheredColumns[blockIndex(a, j, c, size, 3)] ==
                100 * j + 10 * a + c);
    for (int j = 0; j < size; ++j)
      for (int a = 0; a < 2; ++a)
        CHECK(gatheredHalves[j * 2 + a].toFloat() == float(4 * j + a));

    // The same as joining every rank's input here.
    std::vector<Tensor> pieces;
    for (std::vector<float> &piece : everyRank)
      pieces.emplace_back(piece.data(), DType::F32, Shape{2, 3, 4});
    std::vector<float> joined(24 * size);
    cpu::concat(ctx, pieces.data(), size,
                Tensor(joined.data(), DType::F32, {2, 3 * size, 4}), 1);
    CHECK(gatheredMiddle == joined);
  });
}

TEST_CASE(
    "reduceScatter sums the group's tensors and keeps this rank's block") {
  cpu::Context ctx(1);
  forEachGroup([&](Communicator &group, int size, int rank) {
    // Rank j contributes (j + 1) * base: the sum is base * size (size + 1) / 2.
    int64_t ranksSum = int64_t(size) * (size + 1) / 2;

    // Along dim 0 of [3 size, 2], base 1 + k + b.
    std::vector<float> rows(6 * size), rowBlock(6);
    for (int k = 0; k < 3 * size; ++k)
      for (int b = 0; b < 2; ++b)
        rows[k * 2 + b] = float((rank + 1) * (1 + k + b));
    reduceScatter(ctx, group, Tensor(rows.data(), DType::F32, {3 * size, 2}),
                  Tensor(rowBlock.data(), DType::F32, {3, 2}), 0);

    // Along the middle dim of [2, 3 size, 4], F64, base 1 + x + k + e.
    auto middleBase = [](int x, int k, int e) { return double(1 + x + k + e); };
    std::vector<double> middle(24 * size), middleBlock(24);
    for (int x = 0; x < 2; ++x)
      for (int k = 0; k < 3 * size; ++k)
        for (int e = 0; e < 4; ++e)
          middle[(x * 3 * size + k) * 4 + e] = (rank + 1) * middleBase(x, k, e);
    Tensor middleIn(middle.data(), DType::F64, {2, 3 * size, 4});
    reduceScatter(ctx, group, middleIn,
                  Tensor(middleBlock.data(), DType::F64, {2, 3, 4}), 1);

    // Along the last dim of [2, 2 size], I64, base 1 + 3 x + k.
    std::vector<int64_t> columns(4 * size), columnBlock(4);
    for (int x = 0; x < 2; ++x)
      for (int k = 0; k < 2 * size; ++k)
        columns[x * 2 * size + k] = (rank + 1) * (1 + 3 * x + k);
    reduceScatter(ctx, group, Tensor(columns.data(), DType::I64, {2, 2 * size}),
                  Tensor(columnBlock.data(), DType::I64, {2, 2}), 1);

    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 2; ++b)
        CHECK(rowBlock[a * 2 + b] == float((1 + rank * 3 + a + b) * ranksSum));
    for (int x = 0; x < 2; ++x)
      for (int c = 0; c < 3; ++c)
        for (int e = 0; e < 4; ++e)
          CHECK(middleBlock[(x * 3 + c) * 4 + e] ==
                ranksSum * middleBase(x, rank * 3 + c, e));
    for (int x = 0; x < 2; ++x)
      for (int c = 0; c < 2; ++c)
        CHECK(columnBlock[x * 2 + c] == ranksSum * (1 + 3 * x + rank * 2 + c));

    // The same as summing here and slicing out this rank's block.
    std::vector<double> sum(24 * size), expectedBlock(24);
    for (int x = 0; x < 2; ++x)
      for (int k = 0; k < 3 * size; ++k)
        for (int e = 0; e < 4; ++e)
          sum[(x * 3 * size + k) * 4 + e] = ranksSum * middleBase(x, k, e);
    cpu::slice(ctx, Tensor(sum.data(), DType::F64, {2, 3 * size, 4}),
               Tensor(expectedBlock.data(), DType::F64, {2, 3, 4}), 1, 3 * rank,
               1);
    CHECK(middleBlock == expectedBlock);
  });
}

TEST_CASE("scatter keeps this rank's block of a replicated tensor") {
  cpu::Context ctx(1);
  forEachGroup([&](Communicator &group, int size, int rank) {
    // Every rank holds the same [2, 3 size, 4] = its linear index.
    std::vector<float> full(24 * size), middleBlock(24), rowBlock(24);
    for (size_t i = 0; i < full.size(); ++i)
      full[i] = float(i);
    Tensor fullTensor(full.data(), DType::F32, {2, 3 * size, 4});
    scatter(ctx, group, fullTensor,
            Tensor(middleBlock.data(), DType::F32, {2, 3, 4}), 1);
    // Along dim 0, viewing the same elements as [6 size, 4].
    scatter(ctx, group, Tensor(full.data(), DType::F32, {6 * size, 4}),
            Tensor(rowBlock.data(), DType::F32, {6, 4}), 0);

    for (int x = 0; x < 2; ++x)
      for (int c = 0; c < 3; ++c)
        for (int e = 0; e < 4; ++e)
          CHECK(middleBlock[(x * 3 + c) * 4 + e] ==
                float((x * 3 * size + rank * 3 + c) * 4 + e));
    for (int i = 0; i < 24; ++i)
      CHECK(rowBlock[i] == float(24 * rank + i));
  });
}

TEST_CASE("collectives check shapes and dtypes before communicating") {
  cpu::Context ctx(1);
  forEachGroup([&](Communicator &group, int size, int rank) {
    checkMismatchesThrow(ctx, group);
    // No rank was left inside a collective: the group still works.
    Bucket bucket(true);
    bucket.fillContribution(rank);
    allReduce(ctx, group, bucket.tensors, bucket.tensors, kBucketSize, false);
    CHECK(bucket.holdsReduction(size, false));
  });
}

TEST_CASE("a mesh refuses a world of another size") {
  int size = getWorldSize();
  std::string ranks = std::to_string(size) + " ranks";
  CHECK_THROWS_WITH(
      ProcessMesh::create(size, 2),
      "launched with " + ranks +
          ", but the program was compiled for mesh dp=" + std::to_string(size) +
          " x tp=2 x pp=1 (" + std::to_string(2 * size) + " ranks)");
  // A program compiled for one rank but started by mpirun on several.
  CHECK_THROWS_WITH(ProcessMesh::create(1, 1),
                    "launched with " + ranks +
                        ", but the program was compiled for mesh dp=1 x tp=1 "
                        "x pp=1 (1 rank)");
}

namespace {

/// Where Catch reports on this rank: rank 0 prints, the others write into
/// memory, and rank 0 prints their reports after its own when they failed,
/// so the ranks' lines never interleave.
int reportingRank = 0;
std::ostringstream &getHeldReport() {
  static std::ostringstream report;
  return report;
}

} // namespace

namespace Catch {
std::ostream &cout() {
  return reportingRank == 0 ? std::cout : getHeldReport();
}
std::ostream &cerr() {
  return reportingRank == 0 ? std::cerr : getHeldReport();
}
std::ostream &clog() {
  return reportingRank == 0 ? std::clog : getHeldReport();
}
} // namespace Catch

int main(int argc, char **argv) {
  // The tests create many meshes, but MPI can be initialised only once per
  // process: the test program owns MPI, and every mesh finds it initialised.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &reportingRank);
  int worldSize = getWorldSize();

  int failed = Catch::Session().run(argc, argv);

  std::vector<int> failures(worldSize);
  MPI_Gather(&failed, 1, MPI_INT, failures.data(), 1, MPI_INT, 0,
             MPI_COMM_WORLD);
  if (reportingRank != 0 && failed) {
    std::string report = getHeldReport().str();
    int length = static_cast<int>(report.size());
    MPI_Send(&length, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
    MPI_Send(report.data(), length, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
  }
  if (reportingRank == 0)
    for (int rank = 1; rank < worldSize; ++rank) {
      if (!failures[rank])
        continue;
      int length = 0;
      MPI_Recv(&length, 1, MPI_INT, rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      std::string report(length, '\0');
      MPI_Recv(report.data(), length, MPI_CHAR, rank, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
      std::cout << "==== rank " << rank << " failed; its report: ====\n"
                << report;
    }
  int anyFailed = 0;
  MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return anyFailed;
}

#endif // SLAPO_COMM_TESTS_UNDER_MPI
