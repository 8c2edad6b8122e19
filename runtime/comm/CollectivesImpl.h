//===- CollectivesImpl.h - the collectives over any backend ------*- C++ -*-===//
//
// The definitions of Collectives.h, a template over the backend's Context:
// their staging (packing buckets, reordering blocks, dividing by the group
// size) calls the backend's kernels, found by argument-dependent lookup on
// the Context (cpu::copy, cuda::copy, ...). Included only by the backends,
// which instantiate them for their Context.
//
// A Communicator moves flat runs of elements, one block per rank. A tensor
// split along `dim` has its rank blocks contiguous only when every dim
// before `dim` has size 1; otherwise the blocks are interleaved, and the
// tensor is viewed as [outer, size, block] (outer: the dims before `dim`,
// block: one rank's part of the rest) and its two leading dims swapped in the
// group's scratch buffer, so that each rank's block becomes one run.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_COMM_COLLECTIVESIMPL_H
#define SLAPO_RUNTIME_COMM_COLLECTIVESIMPL_H

#include "slapo/runtime/Collectives.h"
#include "slapo/runtime/Error.h"
#include "slapo/runtime/KernelTypes.h"

#include <cstddef>
#include <string>

namespace slapo::rt {
namespace detail {

inline int64_t product(const Shape &shape, int begin, int end) {
  int64_t result = 1;
  for (int d = begin; d < end; ++d)
    result *= shape.dims[d];
  return result;
}

/// "F32 [2, 3]".
inline std::string describe(const Tensor &tensor) {
  return std::string(getName(tensor.dtype)) + " " + tensor.shape.str();
}

/// Checks that `whole` is `parts` blocks of `block` along `dim` (same dtype,
/// same rank, same sizes but dim, whole's dim `parts` times block's) and
/// returns the dim made non-negative.
inline int checkBlocks(const char *operation, const char *wholeRole,
                const Tensor &whole, const char *blockRole, const Tensor &block,
                int parts, int dim) {
  std::string where =
      std::string(operation) + " along dim " + std::to_string(dim) + ": ";
  int rank = block.getRank();
  if (dim < -rank || dim >= rank)
    throw Error(where + blockRole + " " + describe(block) + " has no dim " +
                std::to_string(dim));
  int d = dim < 0 ? dim + rank : dim;
  bool matches = whole.dtype == block.dtype && whole.getRank() == rank &&
                 whole.shape[d] == parts * block.shape[d];
  for (int other = 0; other < rank && matches; ++other)
    matches = other == d || whole.shape[other] == block.shape[other];
  if (!matches)
    throw Error(where + wholeRole + " " + describe(whole) + " must be " +
                std::to_string(parts) + " blocks of " + blockRole + " " +
                describe(block) + " along dim " + std::to_string(dim) +
                ", one per rank of the group");
  return d;
}

/// `to` [b, a, block] = `from` [a, b, block] with its leading dims swapped.
template <class Context>
void swapLeadingDims(Context &ctx, void *from, void *to, DType dtype,
                     int64_t a, int64_t b, int64_t block) {
  static const int64_t kSwap[] = {1, 0, 2};
  permute(ctx, Tensor(from, dtype, {a, b, block}),
               Tensor(to, dtype, {b, a, block}), kSwap);
}

/// output = input / divisor, the divisor a 0-d F32 tensor written at
/// `scalar` (in the device's memory: the end of the group's scratch).
template <class Context>
void divide(Context &ctx, const Tensor &input, const Tensor &output,
            int divisor, std::byte *scalar) {
  Tensor value(scalar, DType::F32, Shape());
  fill(ctx, value, divisor);
  binary(ctx, BinaryKind::Div, input, value, output);
}

/// Whether each output starts where the previous one ends.
inline bool liesBackToBack(const Tensor *tensors, int count) {
  for (int i = 1; i < count; ++i)
    if (tensors[i].data != static_cast<std::byte *>(tensors[i - 1].data) +
                               tensors[i - 1].getBytes())
      return false;
  return true;
}

} // namespace detail

template <class Context>
void allReduce(Context &ctx, Communicator &group, const Tensor *inputs,
               const Tensor *outputs, int count, bool mean) {
  int64_t elements = 0;
  for (int i = 0; i < count; ++i) {
    const Tensor &input = inputs[i], &output = outputs[i];
    if (input.dtype != DType::F32 || output.dtype != DType::F32 ||
        input.shape != output.shape)
      throw Error("all-reduce of tensor " + std::to_string(i) +
                  " of a bucket: input " + detail::describe(input) + " and output " +
                  detail::describe(output) + " must be F32 tensors of one shape");
    elements += input.getNumElements();
  }
  if (count <= 0)
    return;
  auto copyUnlessInPlace = [&](int i) {
    if (inputs[i].data != outputs[i].data)
      copy(ctx, inputs[i], outputs[i]);
  };
  int size = group.getSize();
  if (size == 1) {
    for (int i = 0; i < count; ++i)
      copyUnlessInPlace(i);
    return;
  }
  if (detail::liesBackToBack(outputs, count)) {
    for (int i = 0; i < count; ++i)
      copyUnlessInPlace(i);
    group.allReduceSum(outputs[0].data, elements, DType::F32);
    // Elementwise over equal shapes: each element is read before it is
    // written, so the division runs in place.
    Tensor bucket(outputs[0].data, DType::F32, {elements});
    if (mean)
      detail::divide(ctx, bucket, bucket, size, group.getScratch(sizeof(float)));
    return;
  }
  size_t stagedBytes = elements * getSize(DType::F32);
  std::byte *staged = group.getScratch(stagedBytes + sizeof(float));
  std::byte *next = staged;
  for (int i = 0; i < count; ++i) {
    copy(ctx, inputs[i], Tensor(next, DType::F32, inputs[i].shape));
    next += inputs[i].getBytes();
  }
  group.allReduceSum(staged, elements, DType::F32);
  next = staged;
  for (int i = 0; i < count; ++i) {
    Tensor sum(next, DType::F32, outputs[i].shape);
    if (mean)
      detail::divide(ctx, sum, outputs[i], size, staged + stagedBytes);
    else
      copy(ctx, sum, outputs[i]);
    next += outputs[i].getBytes();
  }
}

template <class Context>
void allGather(Context &ctx, Communicator &group, const Tensor &input,
               const Tensor &output, int dim) {
  int size = group.getSize();
  int d =
      detail::checkBlocks("all-gather", "output", output, "input", input, size, dim);
  int64_t outer = detail::product(input.shape, 0, d);
  int64_t block = detail::product(input.shape, d, input.getRank());
  if (outer == 1 || size == 1) {
    group.allGather(input.data, output.data, input.getNumElements(),
                    input.dtype);
    return;
  }
  std::byte *staged = group.getScratch(output.getBytes());
  group.allGather(input.data, staged, input.getNumElements(), input.dtype);
  detail::swapLeadingDims(ctx, staged, output.data, output.dtype, size, outer, block);
}

template <class Context>
void reduceScatter(Context &ctx, Communicator &group, const Tensor &input,
                   const Tensor &output, int dim) {
  int size = group.getSize();
  int d = detail::checkBlocks("reduce-scatter", "input", input, "output", output, size,
                      dim);
  int64_t outer = detail::product(output.shape, 0, d);
  int64_t block = detail::product(output.shape, d, output.getRank());
  if (outer == 1 || size == 1) {
    group.reduceScatterSum(input.data, output.data, output.getNumElements(),
                           output.dtype);
    return;
  }
  std::byte *staged = group.getScratch(input.getBytes());
  detail::swapLeadingDims(ctx, input.data, staged, input.dtype, outer, size, block);
  group.reduceScatterSum(staged, output.data, output.getNumElements(),
                         output.dtype);
}

template <class Context>
void scatter(Context &ctx, Communicator &group, const Tensor &input,
             const Tensor &output, int dim) {
  int d = detail::checkBlocks("scatter", "input", input, "output", output,
                      group.getSize(), dim);
  slice(ctx, input, output, d, group.getRank() * output.shape[d], 1);
}

template <class Context>
void sendTensor(Context &, Communicator &group, const Tensor &input, int peer) {
  group.send(input.data, input.getBytes(), peer);
}

template <class Context>
void recvTensor(Context &, Communicator &group, const Tensor &output,
                int peer) {
  group.recv(output.data, output.getBytes(), peer);
}

// Each backend instantiates the collectives for its Context
// (runtime/cpu/Collectives.cpp, runtime/cuda/Collectives.cu).
#define SLAPO_INSTANTIATE_COLLECTIVES(Context)                                 \
  template void allReduce<Context>(Context &, Communicator &, const Tensor *,  \
                                   const Tensor *, int, bool);                 \
  template void allGather<Context>(Context &, Communicator &, const Tensor &,  \
                                   const Tensor &, int);                       \
  template void reduceScatter<Context>(Context &, Communicator &,              \
                                       const Tensor &, const Tensor &, int);   \
  template void scatter<Context>(Context &, Communicator &, const Tensor &,    \
                                 const Tensor &, int);                         \
  template void sendTensor<Context>(Context &, Communicator &, const Tensor &, \
                                    int);                                      \
  template void recvTensor<Context>(Context &, Communicator &, const Tensor &, \
                                    int);

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_COMM_COLLECTIVESIMPL_H
