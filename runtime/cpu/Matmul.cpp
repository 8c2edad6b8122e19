//===- Matmul.cpp - linear and matmul through oneDNN ----------------------===//
//
// Both contractions run as one oneDNN matmul primitive, created the first
// time a combination of shapes and dtypes is seen and kept in the context.
// bf16 operands accumulate in f32 inside oneDNN and are rounded once, to
// out's dtype (bf16, or f32 for mixed precision).
//
//===----------------------------------------------------------------------===//
#include "ContextImpl.h"
#include "KernelSupport.h"

#include "slapo/runtime/Kernels.h"

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

/// The dims of `shape` with leading 1s up to `rank`.
Dims padDims(const Shape &shape, int rank) {
  Dims dims(rank - shape.rank, 1);
  dims.insert(dims.end(), shape.dims, shape.dims + shape.rank);
  return dims;
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

} // namespace

void linear(Context &ctx, const Tensor &input, const Tensor &weight,
            const Tensor &bias, const Tensor &out) {
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
  std::vector<int64_t> key = {int64_t(Contraction::Linear),
                              int64_t(input.dtype),
                              int64_t(out.dtype),
                              bool(bias),
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
            const Tensor &out) {
  DataType type = getDataType("matmul", lhs.dtype);
  DataType outType = getDataType("matmul", out.dtype);
  int rank = out.getRank();
  Dims src = padDims(lhs.shape, rank);
  Dims weights = padDims(rhs.shape, rank);
  Dims dst = padDims(out.shape, rank);
  if (out.getNumElements() == 0)
    return;
  if (src[rank - 1] == 0) { // an empty sum
    std::memset(out.data, 0, out.getBytes());
    return;
  }
  std::vector<int64_t> key = {int64_t(Contraction::Matmul), int64_t(lhs.dtype),
                              int64_t(out.dtype), rank};
  key.insert(key.end(), src.begin(), src.end());
  key.insert(key.end(), weights.begin(), weights.end());
  const CachedMatmul &cached =
      getMatmul(ctx, key, "matmul", [&](CachedMatmul &descs) {
        descs.src = makeDesc(src, type);
        descs.weights = makeDesc(weights, type);
        descs.dst = makeDesc(dst, outType);
      });
  execute(ctx, cached, lhs.data, rhs.data, nullptr, out.data);
}

} // namespace slapo::rt::cpu
