//===- Context.cpp - the CPU execution context ----------------------------===//

#include "ContextImpl.h"
#include "slapo/runtime/Collectives.h"
#include "slapo/runtime/Error.h"

#include <omp.h>

#include <cstdlib>
#include <cstring>

namespace slapo::rt::cpu {

namespace {

/// `paths` if this CPU supports them, else throws naming what it lacks.
CpuPaths checkSupported(CpuPaths paths) {
  const CpuPaths &supported = getSupportedCpuPaths();
  if (paths.kernels > supported.kernels)
    throw Error(std::string("the CPU kernels for ") + getName(paths.kernels) +
                " cannot run here: this CPU (or SLAPO_CPU_ISA) allows " +
                getName(supported.kernels));
  if (paths.bf16Matmul == Bf16Matmul::OneDnn &&
      supported.bf16Matmul != Bf16Matmul::OneDnn)
    throw Error("oneDNN has no bf16 matmul on this CPU (its ISA: " +
                getEffectiveIsaName() + ")");
  return paths;
}

} // namespace

Context::Context(int threads) : Context(threads, getSupportedCpuPaths()) {}

Context::Context(int threads, CpuPaths paths)
    : threads(threads > 0 ? threads : omp_get_max_threads()),
      paths(checkSupported(paths)), impl(std::make_unique<Impl>()) {
  // oneDNN's OpenMP runtime sizes its parallel regions from this too.
  omp_set_num_threads(this->threads);
}

Context::~Context() = default;

std::string Context::describe() const {
  return "cpu " + getEffectiveIsaName() + ", " + std::to_string(threads) +
         " threads, kernels " + getName(paths.kernels) +
         ", bf16 matmul: " + getName(paths.bf16Matmul);
}

void *Context::allocate(size_t bytes) {
  // Rounded up to the alignment, as aligned_alloc requires.
  size_t size = (bytes + 255) / 256 * 256;
  void *data = std::aligned_alloc(256, size ? size : 256);
  if (!data)
    throw Error("cannot allocate " + std::to_string(bytes) +
                " bytes of host memory");
  std::memset(data, 0, size);
  return data;
}

void Context::release(void *data) noexcept { std::free(data); }

void Context::copyToDevice(void *device, const void *host, size_t bytes) {
  if (device != host)
    std::memcpy(device, host, bytes);
}

void Context::copyToHost(void *host, const void *device, size_t bytes) {
  if (device != host)
    std::memcpy(host, device, bytes);
}

std::unique_ptr<Communicator> Context::createCommunicator(Communicator &) {
  return nullptr;
}

void Context::allGather(Communicator &group, const Tensor &input,
                        const Tensor &output, int dim) {
  rt::allGather(*this, group, input, output, dim);
}

std::unique_ptr<Device> createDevice(const DeviceOptions &options) {
  return std::make_unique<Context>(options.threads);
}

size_t getCachedPrimitiveCount(Context &ctx) {
  Context::Impl &impl = ctx.getImpl();
  std::lock_guard<std::mutex> lock(impl.mutex);
  return impl.matmuls.size() + impl.primitives.size();
}

} // namespace slapo::rt::cpu
