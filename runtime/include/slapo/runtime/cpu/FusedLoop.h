//===- FusedLoop.h - the loops slapoc generates for fusion groups -*- C++
//-*-===//
//
// A fusion group (slapo.fused) becomes one loop in the generated program:
// element by element, the group's ops with ElementMath.h's scalar math,
// their intermediate values in registers. Like the runtime's own loops, each
// is compiled for every KernelIsa and run with the build that the context
// chose at start-up, so one program runs on every x86-64 CPU. A group with
// row reductions or softmaxes along the last dim is a loop over rows: per
// row, a pass over its elements for each reduction (into a scratch row that
// the loop allocates), then one that writes the results. A group with
// column sums is a loop over blocks of columns (ElementMath.h's column
// order): per block, the rows in order, each row's values written and added
// to the block's sums.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CPU_FUSEDLOOP_H
#define SLAPO_RUNTIME_CPU_FUSEDLOOP_H

#include "slapo/runtime/Random.h"
#include "slapo/runtime/cpu/Context.h"
#include "slapo/runtime/cpu/ElementMath.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace slapo::rt::cpu {

/// One build of a fused loop: elements [begin, end) of the group's loop (or
/// its rows [begin, end), runFusedRows, or its column blocks,
/// runFusedColumns),
/// reading its operands and writing its results at `data`, operands first,
/// then two numbers for each dropout of the group (the key and the first
/// counter of its mask, Random.h's dropoutKey).
using FusedLoopBuild = void (*)(void *const *data, int64_t begin, int64_t end);

/// A fused loop built for each KernelIsa, in the enum's order.
struct FusedLoop {
  FusedLoopBuild builds[3];
};

/// Runs the build of `loop` that ctx's kernels use over `numElements`
/// elements, split over ctx's threads as the elementwise kernels are.
void runFusedLoop(Context &ctx, const FusedLoop &loop, void *const *data,
                  int64_t numElements);

/// Runs the build of `loop` that ctx's kernels use over `numRows` rows of
/// `rowLength` elements, whole rows split over ctx's threads as the softmax
/// kernel's are: each row is computed by one thread, in the same order
/// whatever their number.
void runFusedRows(Context &ctx, const FusedLoop &loop, void *const *data,
                  int64_t numRows, int64_t rowLength);

/// Runs the build of `loop` that ctx's kernels use over the column blocks
/// of `numRows` rows of `rowLength` elements (cpu::getColumnBlocks), split
/// over ctx's threads as the reduce kernel's column sums are: each block's
/// columns take the rows in order, whatever the threads' number.
void runFusedColumns(Context &ctx, const FusedLoop &loop, void *const *data,
                     int64_t numRows, int64_t rowLength);

} // namespace slapo::rt::cpu

/// Defines the FusedLoop `NAME` from `BODY`, an always-inline function of
/// FusedLoopBuild's signature: one build of it for each KernelIsa. The
/// builds target x86-64-vN levels, which share the baseline's arch, so GCC
/// inlines BODY and ElementMath.h's math into each and vectorizes for its
/// instruction set.
#define SLAPO_CPU_FUSED_LOOP(NAME, BODY)                                       \
  inline void BODY##X86_64(void *const *data, int64_t begin, int64_t end) {    \
    BODY(data, begin, end);                                                    \
  }                                                                            \
  __attribute__((target("arch=x86-64-v3"))) inline void BODY##Avx2(            \
      void *const *data, int64_t begin, int64_t end) {                         \
    BODY(data, begin, end);                                                    \
  }                                                                            \
  __attribute__((target("arch=x86-64-v4"))) inline void BODY##Avx512(          \
      void *const *data, int64_t begin, int64_t end) {                         \
    BODY(data, begin, end);                                                    \
  }                                                                            \
  inline const ::slapo::rt::cpu::FusedLoop NAME = {                            \
      {BODY##X86_64, BODY##Avx2, BODY##Avx512}};

#endif // SLAPO_RUNTIME_CPU_FUSEDLOOP_H
