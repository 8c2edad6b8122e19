//===- DropoutCounter.h - a dropout mask element's place --------*- C++ -*-===//
//
// A dropout mask is drawn for the whole tensor that one device would compute
// for the global batch: element e of it is kept iff keepsElement(key, e, ...)
// (Random.h). A rank's operand is a part of that tensor (its data-parallel
// rank's rows, its tensor-parallel rank's slices of the split dim), so each
// of its elements needs its index in the whole tensor. The CPU and CUDA
// dropout kernels and both backends' flash attention (AttentionGeometry.h)
// all count with this one mapping, so that they draw the same mask.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_DROPOUTCOUNTER_H
#define SLAPO_RUNTIME_DROPOUTCOUNTER_H

#include "slapo/runtime/HostDevice.h"
#include "slapo/runtime/KernelTypes.h"
#include "slapo/runtime/Tensor.h"

#include <algorithm>
#include <cstdint>

namespace slapo::rt {

/// The counters of a rank's operand of shape `shape` placed by `placement`.
/// The operand is [outer, local, inner] around the split dim; each of its
/// rows of `inner` elements is a row of the whole tensor too, which has
/// `whole` slices where the operand has `local`, in chunks of which this tp
/// rank holds `part` slices each.
struct DropoutCounter {
  int64_t outer = 1, local = 1, inner = 1;

  /// An unsplit tensor on data-parallel rank 0: element e's counter is e.
  DropoutCounter() = default;
  DropoutCounter(const Shape &shape, const DropoutPlacement &placement) {
    const ShardLayout &shard = placement.shard;
    // Without a split any dim does: the last gives the most rows to share
    // out and makes every element's counter `first` + its index.
    int axis = shard.tp > 1 ? shard.axis : std::max(shape.rank - 1, 0);
    if (shape.rank)
      local = shape[axis];
    for (int d = 0; d < axis; ++d)
      outer *= shape[d];
    for (int d = axis + 1; d < shape.rank; ++d)
      inner *= shape[d];
    whole = local * shard.tp;
    chunk = whole / shard.chunks;
    part = local / shard.chunks;
    tpRank = placement.tpRank;
    consecutive = shard.tp == 1;
    // This data-parallel rank's rows follow the lower ranks' in the batch.
    first = uint64_t(placement.dpRank) * uint64_t(outer * whole * inner);
  }

  /// The counter of the first element of row `row` (of `inner` elements,
  /// outer * local of them); the row's elements follow it.
  SLAPO_HOST_DEVICE uint64_t rowStart(int64_t row) const {
    if (consecutive)
      return first + uint64_t(row * inner);
    int64_t slice = row % local;
    int64_t wholeSlice = slice / part * chunk + tpRank * part + slice % part;
    return first + uint64_t(((row / local) * whole + wholeSlice) * inner);
  }

  /// The counter of element `e` of the operand.
  SLAPO_HOST_DEVICE uint64_t operator()(int64_t e) const {
    if (consecutive)
      return first + uint64_t(e);
    int64_t row = e / inner;
    return rowStart(row) + uint64_t(e - row * inner);
  }

private:
  uint64_t first = 0;
  int64_t whole = 1, chunk = 1, part = 1, tpRank = 0;
  /// No tp split: the operand's rows are consecutive rows of the whole
  /// tensor.
  bool consecutive = true;
};

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_DROPOUTCOUNTER_H
