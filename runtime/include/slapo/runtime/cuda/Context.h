//===- Context.h - an NVIDIA GPU as a device ---------------------*- C++ -*-===//
//
// Every CUDA kernel takes this context: the GPU, the one stream every kernel
// of the rank runs on (in order, asynchronously to the host), and the
// library state the kernels share (cuBLASLt, its workspace and plans). As a
// Device, its memory is the GPU's: the driver stages what it reads and
// writes through host memory, and the collectives communicate over NCCL, or
// over MPI staged through host memory where ranks share a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CUDA_CONTEXT_H
#define SLAPO_RUNTIME_CUDA_CONTEXT_H

#include "slapo/runtime/Device.h"

#include <cuda_runtime_api.h>

#include <memory>

namespace slapo::rt::cuda {

class Context final : public Device {
public:
  /// Runs on GPU `device` (of those CUDA_VISIBLE_DEVICES shows); throws
  /// Error with CUDA's message when there is no such GPU or no driver.
  explicit Context(int device = 0);
  ~Context() override;

  int getDevice() const { return device; }
  cudaStream_t getStream() const { return stream; }
  /// Whether groups of several ranks communicate over NCCL (one GPU per
  /// rank) or over MPI staged through host memory (ranks sharing a GPU).
  void setUseNccl(bool nccl) { useNccl = nccl; }

  /// Library state the kernels share (cuBLASLt handle, workspace, cached
  /// matmul plans); defined in runtime/cuda.
  struct Impl;
  Impl &getImpl() { return *impl; }

  std::string describe() const override;
  void *allocate(size_t bytes) override;
  void release(void *data) noexcept override;
  bool isHostMemory() const override { return false; }
  void copyToDevice(void *device, const void *host, size_t bytes) override;
  void copyToHost(void *host, const void *device, size_t bytes) override;
  void synchronize() override;
  std::unique_ptr<Communicator>
  createCommunicator(Communicator &hostGroup) override;
  void allGather(Communicator &group, const Tensor &input,
                 const Tensor &output, int dim) override;

private:
  int device;
  cudaStream_t stream = nullptr;
  bool useNccl = true;
  std::unique_ptr<Impl> impl;
};

/// The GPU context of a rank program (ProgramDesc::createDevice): GPU
/// options.localRank % the number of GPUs, communicating as options.comm
/// says. Throws Error when there is no usable GPU.
std::unique_ptr<Device> createDevice(const DeviceOptions &options);

/// Throws Error "<what>: <CUDA's error name and text>" unless `status` is
/// cudaSuccess.
void checkCuda(cudaError_t status, const char *what);

} // namespace slapo::rt::cuda

#endif // SLAPO_RUNTIME_CUDA_CONTEXT_H
