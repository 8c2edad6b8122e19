//===- Kernels.h - the CUDA kernels generated code calls --------*- C++ -*-===//
//
// The kernel set of KernelSet.inc on an NVIDIA GPU: cuBLASLt contractions
// and CUDA kernels, all queued on the Context's stream. Numbers agree with
// the CPU backend's within the conformance test's tolerances
// (test/runtime/ConformanceTest.cpp); dropout masks are the same bits.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CUDA_KERNELS_H
#define SLAPO_RUNTIME_CUDA_KERNELS_H

#include "slapo/runtime/KernelTypes.h"
#include "slapo/runtime/Tensor.h"
#include "slapo/runtime/cuda/Context.h"

#include <cstdint>

namespace slapo::rt::cuda {
#include "slapo/runtime/KernelSet.inc"
} // namespace slapo::rt::cuda

#endif // SLAPO_RUNTIME_CUDA_KERNELS_H
