//===- Device.h - where a rank's tensors live and its kernels run -*- C++ -*-===//
//
// The training driver (runTrainingMain: arena, weights, data, checkpoints,
// logs) and the collectives are written once over this interface; the CPU
// (cpu::Context) and a GPU (cuda::Context) implement it, each with the kernel
// set of KernelSet.inc in its own namespace. Generated code calls the kernels
// of its backend directly; the driver only allocates, copies and waits.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_DEVICE_H
#define SLAPO_RUNTIME_DEVICE_H

#include "slapo/runtime/Tensor.h"

#include <cstddef>
#include <memory>
#include <string>

namespace slapo::rt {

class Communicator;

/// What the rank program's command line says about the device.
struct DeviceOptions {
  /// CPU threads; <= 0 uses every core.
  int threads = 0;
  /// This process's rank among the ranks of its node, and how many ranks
  /// the node runs (a GPU program uses GPU localRank % count; ranks that
  /// share a GPU cannot use NCCL).
  int localRank = 0;
  int localRanks = 1;
  /// How the collectives of a GPU program communicate: "nccl", "mpi" (staged
  /// through host memory) or "auto" (NCCL unless ranks share a GPU).
  std::string comm = "auto";
};

class Device {
public:
  Device() = default;
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;
  virtual ~Device() = default;

  /// One line for the progress header: which device and which kernel paths.
  virtual std::string describe() const = 0;

  /// `bytes` of the device's memory, zeroed, aligned to 256 bytes; throws
  /// Error naming the size when there is not enough. Freed by release().
  virtual void *allocate(size_t bytes) = 0;
  virtual void release(void *data) noexcept = 0;
  /// Whether the device's memory is the host's (the CPU): the driver then
  /// reads and writes tensors where they lie instead of staging copies.
  virtual bool isHostMemory() const = 0;
  /// Copies between host memory and the device's; both return when the
  /// bytes are there, after the kernels queued before them have run.
  virtual void copyToDevice(void *device, const void *host, size_t bytes) = 0;
  virtual void copyToHost(void *host, const void *device, size_t bytes) = 0;
  /// Returns when every kernel queued so far has finished (a GPU runs them
  /// asynchronously): step times are measured after it. Throws Error when a
  /// kernel failed.
  virtual void synchronize() = 0;

  /// The communicator that this device's collectives use for `hostGroup`, a
  /// group over host memory (MPI): null where they can use `hostGroup` as
  /// it is (the CPU); on a GPU one over device memory (NCCL, or `hostGroup`
  /// staged through host memory). It may keep a reference to `hostGroup`.
  virtual std::unique_ptr<Communicator>
  createCommunicator(Communicator &hostGroup) = 0;
  /// allGather (Collectives.h) with this device's kernels: `output` = the
  /// group's `input`s joined along `dim`, both in the device's memory.
  virtual void allGather(Communicator &group, const Tensor &input,
                         const Tensor &output, int dim) = 0;
};

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_DEVICE_H
