//===- DataMovement.cpp - copies, permutes, slices, concats, broadcasts ---===//
//
// These kernels only move elements, so they dispatch on the element width
// rather than the dtype.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.h"

#include "slapo/runtime/cpu/Kernels.h"

#include <vector>

namespace slapo::rt::cpu {

using namespace detail;

namespace {

/// memcpy in parallel chunks.
void copyBytes(Context &ctx, void *to, const void *from, size_t bytes) {
  parallelFor(ctx, static_cast<int64_t>(bytes), kGrain * 4,
              [&](int64_t begin, int64_t end) {
                std::memcpy(static_cast<char *>(to) + begin,
                            static_cast<const char *>(from) + begin,
                            end - begin);
              });
}

} // namespace

void copyFrom(Context &ctx, const Tensor &out, const void *data) {
  copyBytes(ctx, out.data, data, out.getBytes());
}

void copy(Context &ctx, const Tensor &input, const Tensor &out) {
  copyBytes(ctx, out.data, input.data, out.getBytes());
}

void permute(Context &ctx, const Tensor &input, const Tensor &out,
             const int64_t *permutation) {
  int rank = out.getRank();
  if (rank == 0) {
    copy(ctx, input, out);
    return;
  }
  // strides[i]: the input stride of output dim i.
  int64_t strides[kMaxRank];
  for (int i = 0; i < rank; ++i)
    strides[i] = product(input.shape, int(permutation[i]) + 1, rank);
  int64_t inner = out.shape.dims[rank - 1];
  int64_t step = strides[rank - 1];
  int64_t rows = inner ? out.getNumElements() / inner : 0;
  dispatchWidth(out.dtype, [&](auto tag) {
    using W = typename decltype(tag)::type;
    const W *in = input.as<W>();
    W *result = out.as<W>();
    parallelFor(ctx, rows, grainFor(inner), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        int64_t offset = 0;
        for (int64_t d = rank - 2, index = row; d >= 0; --d) {
          offset += index % out.shape.dims[d] * strides[d];
          index /= out.shape.dims[d];
        }
        const W *x = in + offset;
        W *y = result + row * inner;
        if (step == 1)
          std::copy(x, x + inner, y);
        else
          for (int64_t i = 0; i < inner; ++i)
            y[i] = x[i * step];
      }
    });
  });
}

void slice(Context &ctx, const Tensor &input, const Tensor &out, int64_t dim,
           int64_t start, int64_t step) {
  int rank = input.getRank();
  int d = normalizeDim(dim, rank);
  int64_t outer = product(input.shape, 0, d);
  int64_t inLength = input.shape.dims[d], outLength = out.shape.dims[d];
  int64_t inner = product(input.shape, d + 1, rank);
  dispatchWidth(out.dtype, [&](auto tag) {
    using W = typename decltype(tag)::type;
    const W *in = input.as<W>();
    W *result = out.as<W>();
    if (step == 1) {
      // The lines along dim are adjacent: one block of outLength * inner
      // elements per outer index (a slice of the last dim would otherwise
      // copy one element per line).
      int64_t block = outLength * inner;
      parallelFor(ctx, outer, grainFor(block), [&](int64_t begin, int64_t end) {
        for (int64_t o = begin; o < end; ++o) {
          const W *x = in + (o * inLength + start) * inner;
          std::copy(x, x + block, result + o * block);
        }
      });
      return;
    }
    // One task per output line along dim: `inner` contiguous elements.
    parallelFor(ctx, outer * outLength, grainFor(inner),
                [&](int64_t begin, int64_t end) {
                  for (int64_t line = begin; line < end; ++line) {
                    int64_t o = line / outLength, i = line % outLength;
                    const W *x = in + (o * inLength + start + i * step) * inner;
                    std::copy(x, x + inner, result + line * inner);
                  }
                });
  });
}

void concat(Context &ctx, const Tensor *inputs, int count, const Tensor &out,
            int64_t dim) {
  if (count <= 0)
    return;
  int rank = out.getRank();
  int d = normalizeDim(dim, rank);
  int64_t outer = product(out.shape, 0, d);
  int64_t inner = product(out.shape, d + 1, rank);
  int64_t outLength = out.shape.dims[d];
  std::vector<int64_t> firsts(count + 1, 0); // each input's first line
  for (int k = 0; k < count; ++k)
    firsts[k + 1] = firsts[k] + inputs[k].shape.dims[d];
  dispatchWidth(out.dtype, [&](auto tag) {
    using W = typename decltype(tag)::type;
    W *result = out.as<W>();
    // One task per (outer index, input): a contiguous block of that input.
    parallelFor(ctx, outer * count, grainFor(outLength * inner / count),
                [&](int64_t begin, int64_t end) {
                  for (int64_t task = begin; task < end; ++task) {
                    int64_t o = task / count;
                    int k = static_cast<int>(task % count);
                    int64_t block = (firsts[k + 1] - firsts[k]) * inner;
                    const W *x = inputs[k].as<W>() + o * block;
                    std::copy(x, x + block,
                              result + (o * outLength + firsts[k]) * inner);
                  }
                });
  });
}

void broadcast(Context &ctx, const Tensor &input, const Tensor &out) {
  dispatchWidth(out.dtype, [&](auto tag) {
    using W = typename decltype(tag)::type;
    const W *in = input.as<W>();
    W *result = out.as<W>();
    BroadcastWalker<1>(out.shape, {input.shape})
        .run(ctx, [&](int64_t offset, const int64_t *offsets,
                      const int64_t *steps, int64_t length) {
          const W *x = in + offsets[0];
          if (steps[0])
            std::copy(x, x + length, result + offset);
          else
            std::fill(result + offset, result + offset + length, *x);
        });
  });
}

} // namespace slapo::rt::cpu
