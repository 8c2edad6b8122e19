//===- Collectives.cpp - tensor collectives over a Communicator -----------===//
//
// A Communicator moves flat runs of elements, one block per rank. A tensor
// split along `dim` has its rank blocks contiguous only when every dim
// before `dim` has size 1; otherwise the blocks are interleaved, and the
// tensor is viewed as [outer, size, block] (outer: the dims before `dim`,
// block: one rank's part of the rest) and its two leading dims swapped in the
// group's scratch buffer, so that each rank's block becomes one run.
//
//===----------------------------------------------------------------------===//
#include "slapo/runtime/Collectives.h"

#include "slapo/runtime/Error.h"
#include "slapo/runtime/Kernels.h"

#include <string>

namespace slapo::rt {

namespace {

int64_t product(const Shape &shape, int begin, int end) {
  int64_t result = 1;
  for (int d = begin; d < end; ++d)
    result *= shape.dims[d];
  return result;
}

/// "F32 [2, 3]".
std::string describe(const Tensor &tensor) {
  return std::string(getName(tensor.dtype)) + " " + tensor.shape.str();
}

/// Checks that `whole` is `parts` blocks of `block` along `dim` (same dtype,
/// same rank, same sizes but dim, whole's dim `parts` times block's) and
/// returns the dim made non-negative.
int checkBlocks(const char *operation, const char *wholeRole,
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
void swapLeadingDims(cpu::Context &ctx, void *from, void *to, DType dtype,
                     int64_t a, int64_t b, int64_t block) {
  static const int64_t kSwap[] = {1, 0, 2};
  cpu::permute(ctx, Tensor(from, dtype, {a, b, block}),
               Tensor(to, dtype, {b, a, block}), kSwap);
}

void divide(cpu::Context &ctx, const Tensor &input, const Tensor &output,
            int divisor) {
  float value = static_cast<float>(divisor);
  cpu::binary(ctx, cpu::BinaryKind::Div, input,
              Tensor(&value, DType::F32, Shape()), output);
}

/// Whether each output starts where the previous one ends.
bool liesBackToBack(const Tensor *tensors, int count) {
  for (int i = 1; i < count; ++i)
    if (tensors[i].data != static_cast<std::byte *>(tensors[i - 1].data) +
                               tensors[i - 1].getBytes())
      return false;
  return true;
}

} // namespace

void allReduce(cpu::Context &ctx, Communicator &group, const Tensor *inputs,
               const Tensor *outputs, int count, bool mean) {
  int64_t elements = 0;
  for (int i = 0; i < count; ++i) {
    const Tensor &input = inputs[i], &output = outputs[i];
    if (input.dtype != DType::F32 || output.dtype != DType::F32 ||
        input.shape != output.shape)
      throw Error("all-reduce of tensor " + std::to_string(i) +
                  " of a bucket: input " + describe(input) + " and output " +
                  describe(output) + " must be F32 tensors of one shape");
    elements += input.getNumElements();
  }
  if (count <= 0)
    return;
  auto copyUnlessInPlace = [&](int i) {
    if (inputs[i].data != outputs[i].data)
      cpu::copy(ctx, inputs[i], outputs[i]);
  };
  int size = group.getSize();
  if (size == 1) {
    for (int i = 0; i < count; ++i)
      copyUnlessInPlace(i);
    return;
  }
  if (liesBackToBack(outputs, count)) {
    for (int i = 0; i < count; ++i)
      copyUnlessInPlace(i);
    group.allReduceSum(outputs[0].data, elements, DType::F32);
    // Elementwise over equal shapes: each element is read before it is
    // written, so the division runs in place.
    Tensor bucket(outputs[0].data, DType::F32, {elements});
    if (mean)
      divide(ctx, bucket, bucket, size);
    return;
  }
  std::byte *staged = group.getScratch(elements * getSize(DType::F32));
  std::byte *next = staged;
  for (int i = 0; i < count; ++i) {
    cpu::copy(ctx, inputs[i], Tensor(next, DType::F32, inputs[i].shape));
    next += inputs[i].getBytes();
  }
  group.allReduceSum(staged, elements, DType::F32);
  next = staged;
  for (int i = 0; i < count; ++i) {
    Tensor sum(next, DType::F32, outputs[i].shape);
    if (mean)
      divide(ctx, sum, outputs[i], size);
    else
      cpu::copy(ctx, sum, outputs[i]);
    next += outputs[i].getBytes();
  }
}

void allGather(cpu::Context &ctx, Communicator &group, const Tensor &input,
               const Tensor &output, int dim) {
  int size = group.getSize();
  int d =
      checkBlocks("all-gather", "output", output, "input", input, size, dim);
  int64_t outer = product(input.shape, 0, d);
  int64_t block = product(input.shape, d, input.getRank());
  if (outer == 1 || size == 1) {
    group.allGather(input.data, output.data, input.getNumElements(),
                    input.dtype);
    return;
  }
  std::byte *staged = group.getScratch(output.getBytes());
  group.allGather(input.data, staged, input.getNumElements(), input.dtype);
  swapLeadingDims(ctx, staged, output.data, output.dtype, size, outer, block);
}

void reduceScatter(cpu::Context &ctx, Communicator &group, const Tensor &input,
                   const Tensor &output, int dim) {
  int size = group.getSize();
  int d = checkBlocks("reduce-scatter", "input", input, "output", output, size,
                      dim);
  int64_t outer = product(output.shape, 0, d);
  int64_t block = product(output.shape, d, output.getRank());
  if (outer == 1 || size == 1) {
    group.reduceScatterSum(input.data, output.data, output.getNumElements(),
                           output.dtype);
    return;
  }
  std::byte *staged = group.getScratch(input.getBytes());
  swapLeadingDims(ctx, input.data, staged, input.dtype, outer, size, block);
  group.reduceScatterSum(staged, output.data, output.getNumElements(),
                         output.dtype);
}

void scatter(cpu::Context &ctx, Communicator &group, const Tensor &input,
             const Tensor &output, int dim) {
  int d = checkBlocks("scatter", "input", input, "output", output,
                      group.getSize(), dim);
  cpu::slice(ctx, input, output, d, group.getRank() * output.shape[d], 1);
}

} // namespace slapo::rt
