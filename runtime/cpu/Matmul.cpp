//===- Matmul.cpp - linear and matmul through oneDNN ----------------------===//
//
// Both contractions run as one oneDNN matmul primitive, created the first
// time a combination of shapes and dtypes is seen and kept in the context.
// bf16 operands accumulate in f32 and are rounded once, to out's dtype (bf16,
// or f32 for mixed precision), by oneDNN or by the f32 fallback
// (Contraction.h).
//
//===----------------------------------------------------------------------===//
#include "ContextImpl.h"
#include "Contraction.h"

#include <unordered_map>

namespace slapo::rt::cpu {

using namespace detail;

namespace {

using Dims = dnnl::memory::dims;
using DataType = dnnl::memory::data_type;

enum class Contraction : int64_t { Linear, Matmul };

/// A tensor as a contraction addresses it: its dims and their strides in
/// elements.
struct StridedDims {
  Dims dims;
  Dims strides;
};

/// A tensor of `shape` stored row-major.
StridedDims rowMajor(const Shape &shape) {
  Dims dims(shape.dims, shape.dims + shape.rank);
  return {dims, getContiguousStrides(dims)};
}

/// A row-major tensor of `shape` read through `permutation` (null: none), as
/// slapo.permute reads its input: dim i is stored dim permutation[i].
StridedDims permuteDims(const Shape &shape, const int64_t *permutation) {
  StridedDims stored = rowMajor(shape), permuted = stored;
  for (int d = 0; permutation && d < shape.rank; ++d) {
    permuted.dims[d] = stored.dims[permutation[d]];
    permuted.strides[d] = stored.strides[permutation[d]];
  }
  return permuted;
}

/// The tensor that permute(tensor, permutation) (null: none) stores
/// row-major as `shape`: stored dim i is its dim permutation[i].
StridedDims unpermuteDims(const Shape &shape, const int64_t *permutation) {
  StridedDims stored = rowMajor(shape), logical = stored;
  for (int d = 0; permutation && d < shape.rank; ++d) {
    logical.dims[permutation[d]] = stored.dims[d];
    logical.strides[permutation[d]] = stored.strides[d];
  }
  return logical;
}

/// `tensor` with leading dims of size 1 up to `rank`.
StridedDims padDims(StridedDims tensor, int rank) {
  int64_t outer = tensor.dims.empty() ? 1 : tensor.dims[0] * tensor.strides[0];
  tensor.dims.insert(tensor.dims.begin(), rank - tensor.dims.size(), 1);
  tensor.strides.insert(tensor.strides.begin(), rank - tensor.strides.size(),
                        outer);
  return tensor;
}

/// The cached primitive for `key`, made by `create` on first use.
template <typename F>
const CachedMatmul &getMatmul(Context &ctx, const std::vector<int64_t> &key,
                              const char *kernel, F &&create) {
  Context::Impl &impl = ctx.getImpl();
  std::lock_guard<std::mutex> lock(impl.mutex);
  auto found = impl.matmuls.find(key);
  if (found != impl.matmuls.end())
    return found->second;
  CachedMatmul cached;
  try {
    create(cached);
    dnnl::matmul::primitive_desc descriptor(
        dnnl::matmul::desc(cached.src, cached.weights, cached.bias, cached.dst),
        cached.attributes, impl.engine);
    cached.primitive = dnnl::matmul(descriptor);
  } catch (const dnnl::error &error) {
    throw Error(std::string("the CPU kernel '") + kernel +
                "' could not create a oneDNN matmul: " + error.what());
  }
  return impl.matmuls.emplace(key, std::move(cached)).first->second;
}

void execute(Context &ctx, const CachedMatmul &cached, void *src, void *weights,
             void *bias, void *dst) {
  Context::Impl &impl = ctx.getImpl();
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, dnnl::memory(cached.src, impl.engine, src)},
      {DNNL_ARG_WEIGHTS, dnnl::memory(cached.weights, impl.engine, weights)},
      {DNNL_ARG_DST, dnnl::memory(cached.dst, impl.engine, dst)},
  };
  if (bias)
    args.emplace(DNNL_ARG_BIAS, dnnl::memory(cached.bias, impl.engine, bias));
  cached.primitive.execute(impl.stream, args);
  impl.stream.wait();
}

} // namespace

void linear(Context &ctx, const Tensor &input, const Tensor &weight,
            const Tensor &bias, const Tensor &out) {
  if (runsInF32(ctx, input))
    return contractInF32(ctx, std::array{input, weight, bias}, out,
                         [&](const auto &f32, const Tensor &result) {
                           linear(ctx, f32[0], f32[1], f32[2], result);
                         });
  DataType type = getContractionType("linear", input.dtype);
  DataType outType = getContractionType("linear", out.dtype);
  if (out.getNumElements() == 0)
    return;
  int64_t k = input.shape.dims[input.getRank() - 1];
  int64_t n = weight.shape.dims[0];
  int64_t m = out.getNumElements() / n;
  if (k == 0) { // an empty sum: the bias alone
    size_t rowBytes = n * getSize(out.dtype);
    for (int64_t row = 0; row < m; ++row) {
      char *to = static_cast<char *>(out.data) + row * rowBytes;
      if (bias)
        std::memcpy(to, bias.data, rowBytes);
      else
        std::memset(to, 0, rowBytes);
    }
    return;
  }
  // The bias's dtype too: its memory descriptor is part of the primitive.
  std::vector<int64_t> key = {int64_t(Contraction::Linear),
                              int64_t(input.dtype),
                              int64_t(out.dtype),
                              bias ? int64_t(bias.dtype) : -1,
                              m,
                              k,
                              n};
  const CachedMatmul &cached =
      getMatmul(ctx, key, "linear", [&](CachedMatmul &descs) {
        descs.src = makeContiguousDesc({m, k}, type);
        // weight is [N, K] row-major: as the [K, N] operand it has strides
        // {1, K}.
        descs.weights = dnnl::memory::desc({k, n}, type, Dims{1, k});
        if (bias)
          descs.bias = makeContiguousDesc(
              {1, n}, getContractionType("linear", bias.dtype));
        descs.dst = makeContiguousDesc({m, n}, outType);
      });
  execute(ctx, cached, input.data, weight.data, bias.data, out.data);
}

namespace {

/// out = lhs x rhs, or out += lhs x rhs where `accumulate` (an f32 out).
void contract(Context &ctx, const Tensor &lhs, const Tensor &rhs,
              const Tensor &out, const MatmulPermutations &permutations,
              bool accumulate) {
  if (runsInF32(ctx, lhs))
    return contractInF32(ctx, std::array{lhs, rhs}, out,
                         [&](const auto &f32, const Tensor &result) {
                           contract(ctx, f32[0], f32[1], result, permutations,
                                    accumulate);
                         });
  DataType type = getContractionType("matmul", lhs.dtype);
  DataType outType = getContractionType("matmul", out.dtype);
  int rank = out.getRank();
  StridedDims src = padDims(permuteDims(lhs.shape, permutations.lhs), rank);
  StridedDims weights = padDims(permuteDims(rhs.shape, permutations.rhs), rank);
  StridedDims dst = unpermuteDims(out.shape, permutations.result);
  if (out.getNumElements() == 0)
    return;
  if (src.dims[rank - 1] == 0) { // an empty sum
    if (!accumulate)
      std::memset(out.data, 0, out.getBytes());
    return;
  }
  std::vector<int64_t> key = {int64_t(Contraction::Matmul), int64_t(lhs.dtype),
                              int64_t(out.dtype), accumulate, rank};
  for (const StridedDims *tensor : {&src, &weights, &dst}) {
    key.insert(key.end(), tensor->dims.begin(), tensor->dims.end());
    key.insert(key.end(), tensor->strides.begin(), tensor->strides.end());
  }
  const CachedMatmul &cached =
      getMatmul(ctx, key, "matmul", [&](CachedMatmul &descs) {
        descs.src = dnnl::memory::desc(src.dims, type, src.strides);
        descs.weights = dnnl::memory::desc(weights.dims, type, weights.strides);
        descs.dst = dnnl::memory::desc(dst.dims, outType, dst.strides);
        if (accumulate) {
          dnnl::post_ops sum;
          sum.append_sum(1.0f);
          descs.attributes.set_post_ops(sum);
        }
      });
  execute(ctx, cached, lhs.data, rhs.data, nullptr, out.data);
}

} // namespace

void matmul(Context &ctx, const Tensor &lhs, const Tensor &rhs,
            const Tensor &out, const MatmulPermutations &permutations) {
  contract(ctx, lhs, rhs, out, permutations, false);
}

void addMatmul(Context &ctx, const Tensor &lhs, const Tensor &rhs,
               const Tensor &out, const MatmulPermutations &permutations) {
  if (out.dtype != DType::F32)
    throwUnsupported("addMatmul", out.dtype);
  contract(ctx, lhs, rhs, out, permutations, true);
}

} // namespace slapo::rt::cpu
