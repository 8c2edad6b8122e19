//===- ContextImpl.h - the CUDA context's library state ---------*- C++ -*-===//
//
// Private to runtime/cuda (and its tests): what the kernels of one GPU
// share. The cuBLASLt handle, its workspace and the matmul plans made so far
// (descriptors and the algorithm the heuristic chose, one per combination of
// shapes, strides, dtypes and alignments); the cuDNN handle (made at the
// first convolution or attention), its convolution plans and its attention
// graphs; scratch buffers that grow to
// the largest size asked for and are then reused, so that no kernel allocates
// in the steady state; and the record in which kernels report a bad index
// (an embedding index, a cross-entropy target) without the host waiting for
// them: synchronize() throws it.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CUDA_CONTEXTIMPL_H
#define SLAPO_RUNTIME_CUDA_CONTEXTIMPL_H

#include "slapo/runtime/Error.h"
#include "slapo/runtime/KernelTypes.h"
#include "slapo/runtime/Tensor.h"
#include "slapo/runtime/cuda/Context.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace slapo::rt::cuda {

/// A bad index that a kernel found: which kind of index, where it was, and
/// the bound it broke. Written by the one thread that claims the record, in
/// host memory that the GPU writes through (mapped pinned memory), so the
/// host reads it after synchronizing without another copy.
struct KernelErrorRecord {
  enum Kind : int32_t {
    None,
    EmbeddingIndex,
    CrossEntropyTarget,
    /// A keep mask that changed after attention chose cuDNN's causal mask
    /// for it (value: the element, position: its index, bound: the count).
    CausalKeepMask
  };
  /// Set last, after the other fields.
  volatile int32_t kind;
  volatile int64_t value;
  volatile int64_t position;
  volatile int64_t bound;
};

/// What a kernel passes to report a bad index; see reportBadIndex in
/// KernelSupport.cuh.
struct KernelErrorSink {
  /// Device memory: 0 until a thread claims the record.
  int32_t *claimed;
  /// The record, mapped into the device's address space.
  KernelErrorRecord *record;
};

/// The cuBLASLt objects of one contraction shape, made once; all null when
/// cuBLASLt has no algorithm for it (with a bias epilogue, which the
/// product then goes without).
struct MatmulPlan {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algorithm{};
};

/// Destroys the objects of `plan` that exist and clears it.
inline void destroyPlan(MatmulPlan &plan) noexcept {
  for (cublasLtMatrixLayout_t layout : {plan.a, plan.b, plan.d})
    if (layout)
      cublasLtMatrixLayoutDestroy(layout);
  if (plan.operation)
    cublasLtMatmulDescDestroy(plan.operation);
  plan = MatmulPlan();
}

/// The cuDNN objects of one convolution product (the forward or one of its
/// gradients) and the algorithm chosen for it.
struct ConvolutionPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t convolution = nullptr;
  cudnnConvolutionFwdAlgo_t forward{};
  cudnnConvolutionBwdDataAlgo_t gradInput{};
  cudnnConvolutionBwdFilterAlgo_t gradWeight{};
  size_t workspaceBytes = 0;
};

/// Destroys the objects of `plan` that exist and clears it.
inline void destroyPlan(ConvolutionPlan &plan) noexcept {
  for (cudnnTensorDescriptor_t tensor : {plan.x, plan.y})
    if (tensor)
      cudnnDestroyTensorDescriptor(tensor);
  if (plan.w)
    cudnnDestroyFilterDescriptor(plan.w);
  if (plan.convolution)
    cudnnDestroyConvolutionDescriptor(plan.convolution);
  plan = ConvolutionPlan();
}

/// Scratch buffers of the kernels; kernels that run one after the other on
/// the stream may share one, a kernel that needs several at once uses
/// different ones.
enum class Scratch {
  /// Partial results of reductions split across blocks.
  Partials,
  /// f32 sums of a 16-bit embedding gradient.
  Accumulator,
  /// A matmul's operands and result where cuBLASLt cannot address them.
  MatmulLhs,
  MatmulRhs,
  MatmulResult,
  /// A convolution's bf16 operands widened to f32, its sums before the
  /// bias, and cuDNN's workspace.
  ConvolutionLhs,
  ConvolutionRhs,
  ConvolutionResult,
  ConvolutionWorkspace,
  /// cuDNN's attention: the masks as one additive bias, and its workspace.
  AttentionBias,
  AttentionWorkspace,
  Count,
};

/// cuDNN's attention graphs and what the attentions found of their keep
/// masks (CudnnAttention.cpp): opaque here, so that only that file includes
/// cuDNN's frontend.
struct AttentionPlans;

struct Context::Impl {
  Impl();
  ~Impl();
  Impl(const Impl &) = delete;
  Impl &operator=(const Impl &) = delete;

  /// At least `bytes` of device memory for `slot`, valid for work queued on
  /// `stream` after this call. Growing it frees the old buffer in stream
  /// order (after the kernels queued before that used it).
  void *getScratch(Scratch slot, size_t bytes, cudaStream_t stream);

  KernelErrorSink getErrorSink() const { return {errorClaim, errorRecord}; }
  /// Throws Error for the bad index a kernel recorded, if any, and clears
  /// the record. Call after the stream has synchronized.
  void checkKernelErrors(cudaStream_t stream);

  int multiprocessors = 0;
  cublasLtHandle_t lt = nullptr;
  void *workspace = nullptr;
  /// PyTorch's cuBLAS workspace on Hopper.
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;
  /// Keyed by everything the plan's descriptors and algorithm depend on.
  std::map<std::vector<int64_t>, MatmulPlan> matmulPlans;

  /// The cuDNN handle, made on first use (a program without convolutions
  /// never loads cuDNN's kernels), working on `stream`.
  cudnnHandle_t getCudnn(cudaStream_t stream);
  /// The most workspace a convolution algorithm may take.
  static constexpr size_t kMaxConvolutionWorkspace = size_t(256) << 20;
  /// Keyed by the product, dtype, groups, shapes and window.
  std::map<std::vector<int64_t>, ConvolutionPlan> convolutionPlans;
  /// Made at the first attention that tries cuDNN; released before the
  /// cuDNN handle.
  std::shared_ptr<AttentionPlans> attentionPlans;

private:
  /// Frees what the constructor made, as far as it got.
  void release() noexcept;

  struct ScratchBuffer {
    void *data = nullptr;
    size_t bytes = 0;
  };
  ScratchBuffer scratch[static_cast<int>(Scratch::Count)];
  int32_t *errorClaim = nullptr;
  KernelErrorRecord *errorRecord = nullptr;
  cudnnHandle_t cudnn = nullptr;
};

/// Throws Error "<what>: <cuBLAS's status name>" unless `status` is
/// CUBLAS_STATUS_SUCCESS.
inline void checkCublas(cublasStatus_t status, const char *what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string(what) + ": " + cublasLtGetStatusName(status) +
                " (" + cublasLtGetStatusString(status) + ")");
}

/// Throws Error "<what>: <cuDNN's message>" unless `status` is
/// CUDNN_STATUS_SUCCESS.
inline void checkCudnn(cudnnStatus_t status, const char *what) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw Error(std::string(what) + ": " + cudnnGetErrorString(status));
}

inline cudnnHandle_t Context::Impl::getCudnn(cudaStream_t stream) {
  if (!cudnn) {
    checkCudnn(cudnnCreate(&cudnn), "cudnnCreate");
    checkCudnn(cudnnSetStream(cudnn, stream), "cudnnSetStream");
  }
  return cudnn;
}

inline void *Context::Impl::getScratch(Scratch slot, size_t bytes,
                                       cudaStream_t stream) {
  ScratchBuffer &buffer = scratch[static_cast<int>(slot)];
  if (bytes <= buffer.bytes)
    return buffer.data;
  // Stream-ordered, so that growing never waits for the whole device.
  if (buffer.data)
    checkCuda(cudaFreeAsync(buffer.data, stream), "cudaFreeAsync(scratch)");
  buffer = {};
  // Rounded up, so that slowly growing requests do not reallocate often.
  size_t rounded = (bytes + (size_t(1) << 20) - 1) >> 20 << 20;
  checkCuda(cudaMallocAsync(&buffer.data, rounded, stream),
            ("cudaMallocAsync(" + std::to_string(rounded) +
             " bytes of kernel scratch)")
                .c_str());
  buffer.bytes = rounded;
  return buffer.data;
}

/// out += matmul(lhs, rhs) (matmul's operands and permutations) for an f32
/// `out` whose strides fit a cuBLASLt layout: beta = 1, the sum inside the
/// GEMM (Matmul.cpp; linearCrossEntropy's weight gradient over its chunks).
void addMatmul(Context &ctx, const Tensor &lhs, const Tensor &rhs,
               const Tensor &out, const MatmulPermutations &permutations);

} // namespace slapo::rt::cuda

#endif // SLAPO_RUNTIME_CUDA_CONTEXTIMPL_H
