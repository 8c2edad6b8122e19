//===- FusedLoop.cpp - running the generated fused loops ------------------===//
#include "slapo/runtime/cpu/FusedLoop.h"

#include "KernelSupport.h"

namespace slapo::rt::cpu {

void runFusedLoop(Context &ctx, const FusedLoop &loop, void *const *data,
                  int64_t numElements) {
  FusedLoopBuild build = loop.builds[static_cast<int>(ctx.getPaths().kernels)];
  detail::parallelFor(
      ctx, numElements, detail::kGrain,
      [&](int64_t begin, int64_t end) { build(data, begin, end); });
}

void runFusedRows(Context &ctx, const FusedLoop &loop, void *const *data,
                  int64_t numRows, int64_t rowLength) {
  FusedLoopBuild build = loop.builds[static_cast<int>(ctx.getPaths().kernels)];
  detail::parallelFor(
      ctx, numRows, detail::grainFor(rowLength),
      [&](int64_t begin, int64_t end) { build(data, begin, end); });
}

void runFusedColumns(Context &ctx, const FusedLoop &loop, void *const *data,
                     int64_t numRows, int64_t rowLength) {
  FusedLoopBuild build = loop.builds[static_cast<int>(ctx.getPaths().kernels)];
  detail::parallelFor(
      ctx, getColumnBlocks(rowLength), detail::grainFor(numRows * kColumnBlock),
      [&](int64_t begin, int64_t end) { build(data, begin, end); });
}

} // namespace slapo::rt::cpu
