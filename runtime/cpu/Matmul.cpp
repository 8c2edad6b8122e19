//===- Matmul.cpp - linear and matmul through oneDNN ----------------------===//
//
// Both contractions run as one oneDNN matmul primitive, created the first
// time a combination of shapes and dtypes is seen and kept in the context.
// bf16 operands accumulate in f32 inside oneDNN and are rounded once, to
// out's dtype (bf16, or f32 for mixed precision). On a CPU where oneDNN has
// no bf16 matmul (AVX2) the context's path is Bf16Matmul::F32Fallback: the
// operands are widened to f32, which is exact, and multiplied by the f32
// primitive, so the same exact products are summed in f32 and rounded once.
//
//===----------------------------------------------------------------------===//
#include "ContextImpl.h"
#include "KernelSupport.h"

#include "slapo/runtime/cpu/Kernels.h"

#include <array>
#include <memory>
#include <unordered_map>

namespace slapo::rt::cpu {

using namespace detail;

namespace {

using Dims = dnnl::memory::dims;
using DataType = dnnl::memory::data_type;

enum class Contraction : int64_t { Linear, Matmul };

DataType getDataType(const char *kernel, DType dtype) {
  switch (dtype) {
  case DType::F32:
    return DataType::f32;
  case DType::BF16:
    return DataType::bf16;
  default:
    throwUnsupported(kernel, dtype);
  }
}

/// Row-major strides of `dims`.
Dims getContiguousStrides(const Dims &dims) {
  Dims strides(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;)
    strides[d - 1] = strides[d] * dims[d];
  return strides;
}

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

dnnl::memory::desc makeDesc(const Dims &dims, DataType type) {
  return dnnl::memory::desc(dims, type, getContiguousStrides(dims));
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
        impl.engine);
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

/// Whether a contraction of `operand`'s dtype runs as an f32 one.
bool runsInF32(Context &ctx, const Tensor &operand) {
  return operand.dtype == DType::BF16 &&
         ctx.getPaths().bf16Matmul == Bf16Matmul::F32Fallback;
}

/// `tensor` as f32: bf16 values widened into `storage`, a tensor of any other
/// dtype (or none) as it is.
Tensor widenToF32(Context &ctx, const Tensor &tensor,
                  std::unique_ptr<float[]> &storage) {
  if (!tensor || tensor.dtype != DType::BF16)
    return tensor;
  storage.reset(new float[tensor.getNumElements()]);
  Tensor widened(storage.get(), DType::F32, tensor.shape);
  cast(ctx, tensor, widened);
  return widened;
}

/// Calls `contract(operands, result)` with the bf16 `operands` widened to f32
/// and an f32 `result` that is then rounded into `out`.
template <size_t N, typename F>
void contractInF32(Context &ctx, const std::array<Tensor, N> &operands,
                   const Tensor &out, F &&contract) {
  std::unique_ptr<float[]> storage[N + 1];
  std::array<Tensor, N> widened;
  for (size_t i = 0; i < N; ++i)
    widened[i] = widenToF32(ctx, operands[i], storage[i]);
  Tensor result = out;
  if (out.dtype != DType::F32) {
    storage[N].reset(new float[out.getNumElements()]);
    result = Tensor(storage[N].get(), DType::F32, out.shape);
  }
  contract(widened, result);
  if (result.data != out.data)
    cast(ctx, result, out);
}

} // namespace

void linear(Context &ctx, const Tensor &input, const Tensor &weight,
            const Tensor &bias, const Tensor &out) {
  if (runsInF32(ctx, input))
    return contractInF32(ctx, std::array{input, weight, bias}, out,
                         [&](const auto &f32, const Tensor &result) {
                           linear(ctx, f32[0], f32[1], f32[2], result);
                         });
  DataType type = getDataType("linear", input.dtype);
  DataType outType = getDataType("linear", out.dtype);
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
        descs.src = makeDesc({m, k}, type);
        // weight is [N, K] row-major: as the [K, N] operand it has strides
        // {1, K}.
        descs.weights = dnnl::memory::desc({k, n}, type, Dims{1, k});
        if (bias)
          descs.bias = makeDesc({1, n}, getDataType("linear", bias.dtype));
        descs.dst = makeDesc({m, n}, outType);
      });
  execute(ctx, cached, input.data, weight.data, bias.data, out.data);
}

void matmul(Context &ctx, const Tensor &lhs, const Tensor &rhs,
            const Tensor &out, const MatmulPermutations &permutations) {
  if (runsInF32(ctx, lhs))
    return contractInF32(ctx, std::array{lhs, rhs}, out,
                         [&](const auto &f32, const Tensor &result) {
                           matmul(ctx, f32[0], f32[1], result, permutations);
                         });
  DataType type = getDataType("matmul", lhs.dtype);
  DataType outType = getDataType("matmul", out.dtype);
  int rank = out.getRank();
  StridedDims src = padDims(permuteDims(lhs.shape, permutations.lhs), rank);
  StridedDims weights = padDims(permuteDims(rhs.shape, permutations.rhs), rank);
  StridedDims dst = unpermuteDims(out.shape, permutations.result);
  if (out.getNumElements() == 0)
    return;
  if (src.dims[rank - 1] == 0) { // an empty sum
    std::memset(out.data, 0, out.getBytes());
    return;
  }
  std::vector<int64_t> key = {int64_t(Contraction::Matmul), int64_t(lhs.dtype),
                              int64_t(out.dtype), rank};
  for (const StridedDims *tensor : {&src, &weights, &dst}) {
    key.insert(key.end(), tensor->dims.begin(), tensor->dims.end());
    key.insert(key.end(), tensor->strides.begin(), tensor->strides.end());
  }
  const CachedMatmul &cached =
      getMatmul(ctx, key, "matmul", [&](CachedMatmul &descs) {
        descs.src = dnnl::memory::desc(src.dims, type, src.strides);
        descs.weights = dnnl::memory::desc(weights.dims, type, weights.strides);
        descs.dst = dnnl::memory::desc(dst.dims, outType, dst.strides);
      });
  execute(ctx, cached, lhs.data, rhs.data, nullptr, out.data);
}

} // namespace slapo::rt::cpu
