//===- Context.h - the CPU as a device ---------------------------*- C++ -*-===//
//
// Every CPU kernel takes this context: the thread count and the oneDNN
// engine, stream and primitive cache. As a Device, its memory is the host's.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CPU_CONTEXT_H
#define SLAPO_RUNTIME_CPU_CONTEXT_H

#include "slapo/runtime/Device.h"

#include <memory>

namespace slapo::rt::cpu {

class Context final : public Device {
public:
  /// `threads` <= 0 uses every core OpenMP reports.
  explicit Context(int threads = 0);
  ~Context() override;

  int getThreads() const { return threads; }

  /// Backend state the kernels share (oneDNN objects, cached primitives);
  /// defined in runtime/cpu.
  struct Impl;
  Impl &getImpl() { return *impl; }

  std::string describe() const override;
  void *allocate(size_t bytes) override;
  void release(void *data) noexcept override;
  bool isHostMemory() const override { return true; }
  void copyToDevice(void *device, const void *host, size_t bytes) override;
  void copyToHost(void *host, const void *device, size_t bytes) override;
  void synchronize() override {}
  std::unique_ptr<Communicator>
  createCommunicator(Communicator &hostGroup) override;
  void allGather(Communicator &group, const Tensor &input,
                 const Tensor &output, int dim) override;

private:
  int threads;
  std::unique_ptr<Impl> impl;
};

/// The CPU context of a rank program (ProgramDesc::createDevice).
std::unique_ptr<Device> createDevice(const DeviceOptions &options);

} // namespace slapo::rt::cpu

#endif // SLAPO_RUNTIME_CPU_CONTEXT_H
