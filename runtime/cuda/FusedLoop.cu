//===- FusedLoop.cu - running the generated fused kernels -----------------===//
#include "slapo/runtime/cuda/FusedLoop.cuh"

#include "KernelSupport.cuh"

namespace slapo::rt::cuda {

void runFusedLoop(Context &ctx, const FusedLoop &loop, void *const *data,
                  int64_t numElements) {
  if (numElements <= 0)
    return;
  loop.launch(ctx.getStream(),
              detail::getGridSize(ctx, numElements, detail::kBlockSize),
              detail::kBlockSize, data, numElements);
  detail::checkLaunch(loop.name);
}

void runFusedRows(Context &ctx, const FusedLoop &loop, void *const *data,
                  int64_t numRows, int64_t rowLength) {
  if (numRows <= 0)
    return;
  loop.launch(ctx.getStream(), detail::getGridSize(ctx, numRows, 1),
              detail::getRowBlockSize(rowLength, 8), data, numRows);
  detail::checkLaunch(loop.name);
}

void runFusedColumns(Context &ctx, const FusedColumns &loop, void *const *data,
                     int64_t numRows, int64_t rowLength) {
  if (numRows <= 0)
    return;
  cudaStream_t stream = ctx.getStream();
  int64_t tiles = (rowLength + kColumnTile - 1) / kColumnTile;
  int splits = detail::getColumnSplits(ctx, tiles, numRows);
  char *partials =
      splits > 1 ? static_cast<char *>(ctx.getImpl().getScratch(
                       Scratch::Partials, splits * loop.partialBytes, stream))
                 : nullptr;
  loop.launch(stream, dim3(detail::getGridSize(ctx, tiles, 1), splits),
              kColumnTile * kColumnSlices, data, numRows, partials);
  detail::checkLaunch(loop.name);
  if (splits == 1)
    return;
  loop.finish(stream, detail::getGridSize(ctx, rowLength, detail::kBlockSize),
              detail::kBlockSize, data, splits, partials);
  detail::checkLaunch(loop.name);
}

} // namespace slapo::rt::cuda
