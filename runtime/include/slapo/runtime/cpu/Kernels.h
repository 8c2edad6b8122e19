//===- Kernels.h - the CPU kernels generated code calls ---------*- C++ -*-===//
//
// The kernel set of KernelSet.inc on the CPU: oneDNN contractions and
// convolutions (one primitive per shape, cached in the Context) and
// vectorized OpenMP loops.
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
} // namespace slapo::rt::cpu

#endif // SLAPO_RUNTIME_CPU_KERNELS_H
