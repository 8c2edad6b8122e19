//===- Contraction.h - what the oneDNN contractions share -------*- C++ -*-===//
//
// Private to runtime/cpu: linear, matmul (Matmul.cpp) and the convolutions
// (Convolution.cpp) take f32 or bf16 operands; bf16 ones sum in f32 inside
// oneDNN and are rounded once, to the output's dtype. On a CPU where oneDNN
// has no bf16 contractions (AVX2) the context's path is
// Bf16Matmul::F32Fallback: the operands are widened to f32, which is exact,
// and the f32 primitive sums the same exact products in f32, rounded once.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CPU_CONTRACTION_H
#define SLAPO_RUNTIME_CPU_CONTRACTION_H

#include "ContextImpl.h"
#include "KernelSupport.h"

#include "slapo/runtime/cpu/Kernels.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <iterator>
#include <mutex>

namespace slapo::rt::cpu::detail {

/// oneDNN's type of a contraction's f32 or bf16 tensor; throws for others.
inline dnnl::memory::data_type getContractionType(const char *kernel,
                                                  DType dtype) {
  switch (dtype) {
  case DType::F32:
    return dnnl::memory::data_type::f32;
  case DType::BF16:
    return dnnl::memory::data_type::bf16;
  default:
    throwUnsupported(kernel, dtype);
  }
}

/// Row-major strides of `dims`.
inline dnnl::memory::dims getContiguousStrides(const dnnl::memory::dims &dims) {
  dnnl::memory::dims strides(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;)
    strides[d - 1] = strides[d] * dims[d];
  return strides;
}

/// A row-major tensor of `dims` and `type`.
inline dnnl::memory::desc makeContiguousDesc(const dnnl::memory::dims &dims,
                                             dnnl::memory::data_type type) {
  return dnnl::memory::desc(dims, type, getContiguousStrides(dims));
}

/// Whether a contraction of `operand`'s dtype runs as an f32 one.
inline bool runsInF32(Context &ctx, const Tensor &operand) {
  return operand.dtype == DType::BF16 &&
         ctx.getPaths().bf16Matmul == Bf16Matmul::F32Fallback;
}

/// `tensor` as f32: bf16 values widened into the context's scratch `slot`, a
/// tensor of any other dtype (or none) as it is.
inline Tensor widenToF32(Context &ctx, const Tensor &tensor, Scratch slot) {
  if (!tensor || tensor.dtype != DType::BF16)
    return tensor;
  Tensor widened(ctx.getImpl().getScratch(slot, tensor.getNumElements()),
                 DType::F32, tensor.shape);
  cast(ctx, tensor, widened);
  return widened;
}

/// Calls `contract(operands, result)` with the bf16 `operands` widened to f32
/// and an f32 `result` that is then rounded into `out`.
template <size_t N, typename F>
void contractInF32(Context &ctx, const std::array<Tensor, N> &operands,
                   const Tensor &out, F &&contract) {
  constexpr Scratch kOperandSlots[] = {Scratch::WidenedOperand0,
                                       Scratch::WidenedOperand1,
                                       Scratch::WidenedOperand2};
  static_assert(N <= std::size(kOperandSlots), "a scratch slot per operand");
  Context::Impl &impl = ctx.getImpl();
  std::lock_guard<std::mutex> lock(impl.scratchMutex);
  std::array<Tensor, N> widened;
  for (size_t i = 0; i < N; ++i)
    widened[i] = widenToF32(ctx, operands[i], kOperandSlots[i]);
  Tensor result = out;
  if (out.dtype != DType::F32)
    result =
        Tensor(impl.getScratch(Scratch::WidenedResult, out.getNumElements()),
               DType::F32, out.shape);
  contract(widened, result);
  if (result.data != out.data)
    cast(ctx, result, out);
}

} // namespace slapo::rt::cpu::detail

namespace slapo::rt::cpu {

/// out += matmul(lhs, rhs) (cpu::matmul's operands and permutations): the
/// product is added to an f32 `out` inside the GEMM (oneDNN's sum
/// post-op), with no pass of its own; throws for another out dtype.
/// (Not in KernelSet.inc: no op calls it, the LM head kernels do.)
void addMatmul(Context &ctx, const Tensor &lhs, const Tensor &rhs,
               const Tensor &out, const MatmulPermutations &permutations);

} // namespace slapo::rt::cpu

#endif // SLAPO_RUNTIME_CPU_CONTRACTION_H
