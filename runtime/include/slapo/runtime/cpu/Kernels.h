//===- Kernels.h - the CPU kernels generated code calls ---------*- C++ -*-===//
//
// The kernel set of KernelSet.inc on the CPU: oneDNN contractions (one
// primitive per shape, cached in the Context) and vectorized OpenMP loops;
// and the kernels only the CPU has yet (convolution and pooling).
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CPU_KERNELS_H
#define SLAPO_RUNTIME_CPU_KERNELS_H

#include "slapo/runtime/KernelTypes.h"
#include "slapo/runtime/Tensor.h"
#include "slapo/runtime/cpu/Context.h"

#include <cstdint>

namespace slapo::rt::cpu {
#include "slapo/runtime/KernelSet.inc"

// Kernels the CPU backend alone has: slapoc refuses their ops for other
// targets (--target=cuda) until those backends have them too. Float tensors
// [N, C, H, W], windows as Window2d describes them (KernelTypes.h).
/// out[N, O, OH, OW] = the convolution of input[N, C, H, W] by weight
/// [O, C/groups, kH, kW] in `groups` groups, plus bias[O] if not null (f32).
void conv2d(Context &ctx, const Tensor &input, const Tensor &weight,
            const Tensor &bias, const Tensor &out, const Window2d &window,
            int64_t groups);
/// The gradient of conv2d's input (out, [N, C, H, W]) from the gradient of
/// its result and its weight (f32).
void conv2dGradInput(Context &ctx, const Tensor &grad, const Tensor &weight,
                     const Tensor &out, const Window2d &window, int64_t groups);
/// The gradient of conv2d's weight (out, [O, C/groups, kH, kW]) from the
/// gradient of its result and its input (f32).
void conv2dGradWeight(Context &ctx, const Tensor &grad, const Tensor &input,
                      const Tensor &out, const Window2d &window,
                      int64_t groups);
/// out[N, C, OH, OW] = the maximum of each window of input, padding
/// excluded, NaN if the window holds one.
void maxPool2d(Context &ctx, const Tensor &input, const Tensor &out,
               const Window2d &window);
/// out (input's shape) = zeros plus each element of grad (of maxPool2d's
/// result) at the input element its window took the maximum from (the first
/// among equal maxima in row-major order, as PyTorch's CPU kernel).
void maxPool2dGrad(Context &ctx, const Tensor &grad, const Tensor &input,
                   const Tensor &out, const Window2d &window);
} // namespace slapo::rt::cpu

#endif // SLAPO_RUNTIME_CPU_KERNELS_H
