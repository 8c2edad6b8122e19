//===- Context.cpp - an NVIDIA GPU as a device ----------------------------===//

#include "Communicators.h"
#include "ContextImpl.h"
#include "slapo/runtime/Collectives.h"
#include "slapo/runtime/Error.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <string>

namespace slapo::rt::cuda {

void checkCuda(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    throw Error(std::string(what) + ": " + cudaGetErrorName(status) + " (" +
                cudaGetErrorString(status) + ")");
}

Context::Impl::Impl() {
  int device = 0;
  checkCuda(cudaGetDevice(&device), "cudaGetDevice");
  checkCuda(cudaDeviceGetAttribute(&multiprocessors,
                                   cudaDevAttrMultiProcessorCount, device),
            "cudaDeviceGetAttribute(multiprocessors)");
  try {
    checkCublas(cublasLtCreate(&lt), "cublasLtCreate");
    checkCuda(cudaMalloc(&workspace, kWorkspaceBytes),
              "cudaMalloc(cuBLASLt workspace)");
    void *claim = nullptr;
    checkCuda(cudaMalloc(&claim, sizeof(int32_t)),
              "cudaMalloc(kernel error claim)");
    errorClaim = static_cast<int32_t *>(claim);
    checkCuda(cudaMemset(errorClaim, 0, sizeof(int32_t)),
              "cudaMemset(kernel error claim)");
    void *record = nullptr;
    checkCuda(
        cudaHostAlloc(&record, sizeof(KernelErrorRecord), cudaHostAllocMapped),
        "cudaHostAlloc(kernel error record)");
    errorRecord = static_cast<KernelErrorRecord *>(record);
    errorRecord->kind = KernelErrorRecord::None;
  } catch (...) {
    // The destructor does not run for a constructor that throws.
    release();
    throw;
  }
}

Context::Impl::~Impl() { release(); }

void Context::Impl::release() noexcept {
  // Errors are ignored: the destructor cannot report them.
  for (auto &[key, plan] : matmulPlans)
    destroyPlan(plan);
  matmulPlans.clear();
  for (auto &[key, plan] : convolutionPlans)
    destroyPlan(plan);
  convolutionPlans.clear();
  attentionPlans.reset();
  if (cudnn)
    cudnnDestroy(cudnn);
  cudnn = nullptr;
  for (ScratchBuffer &buffer : scratch) {
    cudaFree(buffer.data);
    buffer = {};
  }
  cudaFreeHost(errorRecord);
  errorRecord = nullptr;
  cudaFree(errorClaim);
  errorClaim = nullptr;
  cudaFree(workspace);
  workspace = nullptr;
  if (lt)
    cublasLtDestroy(lt);
  lt = nullptr;
}

void Context::Impl::checkKernelErrors(cudaStream_t stream) {
  if (errorRecord->kind == KernelErrorRecord::None)
    return;
  std::string message;
  if (errorRecord->kind == KernelErrorRecord::CausalKeepMask) {
    message = "flash attention's keep mask changed after it was found causal "
              "and cuDNN's causal mask chosen for it: element " +
              std::to_string(errorRecord->position) + " of " +
              std::to_string(errorRecord->bound) + " is now " +
              (errorRecord->value ? "true" : "false");
  } else {
    const char *what = errorRecord->kind == KernelErrorRecord::EmbeddingIndex
                           ? "embedding index "
                           : "cross entropy target ";
    message = what + std::to_string(errorRecord->value) + " at position " +
              std::to_string(errorRecord->position) + " is out of range [0, " +
              std::to_string(errorRecord->bound) + ")";
  }
  errorRecord->kind = KernelErrorRecord::None;
  checkCuda(cudaMemsetAsync(errorClaim, 0, sizeof(int32_t), stream),
            "cudaMemsetAsync(kernel error claim)");
  throw Error(message);
}

Context::Context(int device) : device(device) {
  checkCuda(cudaSetDevice(device),
            ("cudaSetDevice(" + std::to_string(device) + ")").c_str());
  // Non-blocking: the rank's work never waits for the legacy default stream
  // that libraries may use behind its back.
  checkCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags");
  try {
    impl = std::make_unique<Impl>();
  } catch (...) {
    // The destructor does not run for a constructor that throws.
    cudaStreamDestroy(stream);
    throw;
  }
}

Context::~Context() {
  // Errors are ignored: a destructor cannot report them, and after a failure
  // the process ends anyway.
  cudaStreamSynchronize(stream);
  impl.reset();
  cudaStreamDestroy(stream);
}

std::string Context::describe() const {
  cudaDeviceProp properties;
  if (cudaGetDeviceProperties(&properties, device) != cudaSuccess)
    return "cuda:" + std::to_string(device);
  char text[256];
  std::snprintf(text, sizeof text, "cuda:%d %s (sm_%d%d, %.0f GiB)", device,
                properties.name, properties.major, properties.minor,
                properties.totalGlobalMem / 1073741824.0);
  return text;
}

void *Context::allocate(size_t bytes) {
  void *data = nullptr;
  cudaError_t status = cudaMalloc(&data, bytes ? bytes : 1);
  if (status != cudaSuccess) {
    // Clears the error, which would otherwise stick to later calls.
    cudaGetLastError();
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    throw Error("cannot allocate " + std::to_string(bytes) + " bytes on GPU " +
                std::to_string(device) + " (" + std::to_string(free) +
                " of " + std::to_string(total) + " bytes free): " +
                cudaGetErrorString(status));
  }
  // cudaMalloc aligns to 256 bytes; the zeros are queued like a kernel.
  checkCuda(cudaMemsetAsync(data, 0, bytes, stream), "cudaMemsetAsync");
  return data;
}

void Context::release(void *data) noexcept {
  if (data)
    cudaFree(data);
}

void Context::copyToDevice(void *device, const void *host, size_t bytes) {
  checkCuda(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice,
                            stream),
            "cudaMemcpyAsync to the GPU");
  // Pageable host memory may be reused by the caller at once.
  synchronize();
}

void Context::copyToHost(void *host, const void *device, size_t bytes) {
  checkCuda(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost,
                            stream),
            "cudaMemcpyAsync from the GPU");
  synchronize();
}

void Context::synchronize() {
  // A kernel that failed to launch reports here, one that failed while
  // running at the synchronization, and a bad index that a kernel found
  // (embedding, cross-entropy) once the kernels have run.
  checkCuda(cudaGetLastError(), "a CUDA kernel launch");
  checkCuda(cudaStreamSynchronize(stream), "a CUDA kernel");
  impl->checkKernelErrors(stream);
}

std::unique_ptr<Communicator>
Context::createCommunicator(Communicator &hostGroup) {
  if (hostGroup.getSize() == 1)
    return createLocalCommunicator(*this);
  if (useNccl)
    return createNcclCommunicator(hostGroup, *this);
  return createHostStagedCommunicator(hostGroup, *this);
}

void Context::allGather(Communicator &group, const Tensor &input,
                        const Tensor &output, int dim) {
  rt::allGather(*this, group, input, output, dim);
}

std::unique_ptr<Device> createDevice(const DeviceOptions &options) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess)
    throw Error(std::string("no usable CUDA device: ") +
                cudaGetErrorName(status) + " (" + cudaGetErrorString(status) +
                ")");
  if (count == 0)
    throw Error("no CUDA device");
  if (options.comm != "auto" && options.comm != "nccl" &&
      options.comm != "mpi")
    throw Error("--comm must be auto, nccl or mpi, not '" + options.comm +
                "'");
  bool sharesGpu = options.localRanks > count;
  if (options.comm == "nccl" && sharesGpu)
    throw Error("--comm nccl: " + std::to_string(options.localRanks) +
                " ranks share this node's " + std::to_string(count) +
                " GPU(s), and NCCL needs one GPU per rank; use --comm mpi");
  auto ctx = std::make_unique<Context>(options.localRank % count);
  ctx->setUseNccl(options.comm == "nccl" ||
                  (options.comm == "auto" && !sharesGpu));
  return ctx;
}

} // namespace slapo::rt::cuda
