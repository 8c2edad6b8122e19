//===- Context.h - the CPU as a device ---------------------------*- C++ -*-===//
//
// Every CPU kernel takes this context: the thread count, the oneDNN
// engine, stream and primitive cache, and the kernel paths chosen for this
// CPU. As a Device, its memory is the host's.
//
// One program runs on every x86-64 CPU: the paths are chosen at start-up from
// what the CPU and oneDNN support, lowered by SLAPO_CPU_ISA where it is set.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CPU_CONTEXT_H
#define SLAPO_RUNTIME_CPU_CONTEXT_H

#include "slapo/runtime/Device.h"

#include <memory>
#include <string>

namespace slapo::rt::cpu {

/// The instruction sets the runtime's own loops (elementwise, normalization,
/// reductions, optimizer updates) are compiled for, each a build of them
/// (runtime/cpu/KernelVariant.h): x86-64 runs everywhere, Avx2 is
/// x86-64-v3 and Avx512 x86-64-v4. oneDNN dispatches on its own.
enum class KernelIsa { X86_64, Avx2, Avx512 };

/// How linear, matmul and the convolutions multiply bf16 operands: with
/// oneDNN's bf16 matmul and convolutions (which need AVX-512), or, where
/// oneDNN has none, as oneDNN's f32 ones of the operands widened to f32
/// (exactly). Both sum the exact products in f32 and round the sums once to
/// the output's dtype.
enum class Bf16Matmul { OneDnn, F32Fallback };

/// The kernel paths a context uses.
struct CpuPaths {
  KernelIsa kernels;
  Bf16Matmul bf16Matmul;
};

/// The paths this CPU supports, detected once per process: the widest
/// kernels and oneDNN's bf16 matmul where both the CPU and oneDNN (at its
/// effective ISA, which SLAPO_CPU_ISA or DNNL_MAX_CPU_ISA may lower) allow
/// them. Throws Error for an SLAPO_CPU_ISA that is not one of
/// getCpuIsaNames().
const CpuPaths &getSupportedCpuPaths();

/// oneDNN's name of the ISA it dispatches to (avx2, avx512_core_bf16, ...).
std::string getEffectiveIsaName();

/// The values SLAPO_CPU_ISA accepts, oneDNN's names of its ISAs, comma
/// separated.
const char *getCpuIsaNames();

const char *getName(KernelIsa isa);
const char *getName(Bf16Matmul path);

class Context final : public Device {
public:
  /// `threads` <= 0 uses every core OpenMP reports. The kernels take the
  /// supported paths.
  explicit Context(int threads = 0);
  /// With chosen paths, for comparing them: throws Error naming what this
  /// CPU lacks for a path it does not support.
  Context(int threads, CpuPaths paths);
  ~Context() override;

  int getThreads() const { return threads; }
  const CpuPaths &getPaths() const { return paths; }

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
  void allGather(Communicator &group, const Tensor &input, const Tensor &output,
                 int dim) override;

private:
  int threads;
  CpuPaths paths;
  std::unique_ptr<Impl> impl;
};

/// The CPU context of a rank program (ProgramDesc::createDevice).
std::unique_ptr<Device> createDevice(const DeviceOptions &options);

} // namespace slapo::rt::cpu

#endif // SLAPO_RUNTIME_CPU_CONTEXT_H
