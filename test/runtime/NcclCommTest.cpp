// The NCCL communicator in a group of one rank, on device memory. NCCL
// allows one rank per device in a communicator, so more ranks need a machine
// with several GPUs. Without a CUDA device the program says so and exits
// with kSkipped, which ctest reports as a skipped test: on a machine without
// a GPU the test shows that the communicator compiles and links.
#define CATCH_CONFIG_RUNNER

#include "Communicators.h"
#include "slapo/runtime/Error.h"

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <cstddef>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

using namespace slapo::rt;
using slapo::rt::cuda::createNcclCommunicator;

namespace {

/// The exit status ctest reads as "skipped" (SKIP_RETURN_CODE in
/// CMakeLists.txt).
constexpr int kSkipped = 77;

/// `count` elements of T in device memory, freed with the buffer.
template <typename T> class DeviceBuffer {
public:
  explicit DeviceBuffer(size_t count) : count(count) {
    REQUIRE(cudaMalloc(&data, count * sizeof(T)) == cudaSuccess);
  }
  explicit DeviceBuffer(const std::vector<T> &values)
      : DeviceBuffer(values.size()) {
    REQUIRE(cudaMemcpy(data, values.data(), count * sizeof(T),
                       cudaMemcpyHostToDevice) == cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;

  T *get() { return static_cast<T *>(data); }
  std::vector<T> read() const {
    std::vector<T> values(count);
    REQUIRE(cudaMemcpy(values.data(), data, count * sizeof(T),
                       cudaMemcpyDeviceToHost) == cudaSuccess);
    return values;
  }

private:
  void *data = nullptr;
  size_t count;
};

} // namespace

TEST_CASE(
    "an NCCL group of one rank sums, gathers and scatters on the device") {
  std::unique_ptr<ProcessMesh> mesh = ProcessMesh::create(1, 1);
  cuda::Context ctx(0);
  std::unique_ptr<Communicator> group =
      createNcclCommunicator(mesh->getWorld(), ctx);
  CHECK(group->getRank() == 0);
  CHECK(group->getSize() == 1);

  // Among one rank every collective leaves the values as they were.
  std::vector<float> values = {1.5f, -2, 3, 4};
  DeviceBuffer<float> data(values), gathered(4), local(4);
  group->allReduceSum(data.get(), 4, DType::F32);
  CHECK(data.read() == values);
  group->allGather(data.get(), gathered.get(), 4, DType::F32);
  CHECK(gathered.read() == values);
  group->reduceScatterSum(gathered.get(), local.get(), 4, DType::F32);
  CHECK(local.read() == values);
  DeviceBuffer<int64_t> counters(std::vector<int64_t>{7, 1LL << 40});
  group->allReduceSum(counters.get(), 2, DType::I64);
  CHECK(counters.read() == std::vector<int64_t>{7, 1LL << 40});
  group->broadcast(counters.get(), 2 * sizeof(int64_t), 0);
  CHECK(counters.read() == std::vector<int64_t>{7, 1LL << 40});
  CHECK(group->getCommSeconds() > 0);

  CHECK_THROWS_WITH(group->allReduceSum(data.get(), 2, DType::BF16),
                    "all-reduce of BF16 elements is not supported (F32, F64, "
                    "I64)");
  CHECK_THROWS_WITH(group->broadcast(data.get(), 4, 1),
                    "broadcast from rank 1 in a group of 1 rank");
}

TEST_CASE("a CUDA failure names the call") {
  int devices = 0;
  REQUIRE(cudaGetDeviceCount(&devices) == cudaSuccess);
  CHECK_THROWS_WITH(cuda::Context(devices),
                    "cudaSetDevice(" + std::to_string(devices) +
                        "): cudaErrorInvalidDevice (" +
                        cudaGetErrorString(cudaErrorInvalidDevice) + ")");
}

int main(int argc, char **argv) {
  int devices = 0;
  cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::cout << "skipped: no CUDA device (cudaGetDeviceCount: "
              << (status == cudaSuccess ? "0 devices"
                                        : cudaGetErrorString(status))
              << ")\n";
    return kSkipped;
  }
  return Catch::Session().run(argc, argv);
}
