//===- KernelVariant.h - the runtime's loops, built per ISA -----*- C++ -*-===//
//
// Attention.cpp, Elementwise.cpp, LinearCrossEntropy.cpp, NN.cpp, Reduce.cpp,
// Rotary.cpp and Optimizer.cpp hold the runtime's own loops. Each is compiled
// once per KernelIsa (runtime/cpu/CMakeLists.txt) with SLAPO_CPU_VARIANT naming
// that build's namespace and SLAPO_CPU_VARIANT_TARGET its instruction set, so
// that one program holds the loops for every CPU; Dispatch.cpp calls the build
// that the context chose at start-up.
//
// Only the code between SLAPO_CPU_VARIANT_ISA_BEGIN and _END, after every
// #include, is compiled for the build's instruction set (GCC's target
// pragma). Inline functions of the headers keep the baseline's: the linker
// keeps one copy of each, from whichever build, and it must run on every CPU.
// Inlined into a kernel they take its instruction set. The targets are
// x86-64-vN levels, which share x86-64's arch and tuning: GCC inlines a
// baseline function only into a caller of the same arch.
//
// Private to runtime/cpu.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CPU_KERNELVARIANT_H
#define SLAPO_RUNTIME_CPU_KERNELVARIANT_H

#include "slapo/runtime/KernelTypes.h"
#include "slapo/runtime/Tensor.h"
#include "slapo/runtime/cpu/Context.h"

#include <cstdint>

// Each build declares the whole kernel set in its namespace and defines the
// kernels of its files.
namespace slapo::rt::cpu {
namespace x86_64 {
#include "slapo/runtime/KernelSet.inc"
} // namespace x86_64
namespace avx2 {
#include "slapo/runtime/KernelSet.inc"
} // namespace avx2
namespace avx512 {
#include "slapo/runtime/KernelSet.inc"
} // namespace avx512
} // namespace slapo::rt::cpu

#define SLAPO_CPU_VARIANT_PRAGMA(text) _Pragma(#text)
#define SLAPO_CPU_VARIANT_TARGET_PRAGMA(isa)                                   \
  SLAPO_CPU_VARIANT_PRAGMA(GCC target(isa))
#define SLAPO_CPU_VARIANT_ISA_BEGIN                                            \
  _Pragma("GCC push_options")                                                  \
      SLAPO_CPU_VARIANT_TARGET_PRAGMA(SLAPO_CPU_VARIANT_TARGET)
#define SLAPO_CPU_VARIANT_ISA_END _Pragma("GCC pop_options")

#endif // SLAPO_RUNTIME_CPU_KERNELVARIANT_H
