//===- Convolution.cpp - 2-d convolutions and their gradients via oneDNN --===//
//
// The forward and the two gradient products each run as one oneDNN
// primitive on the tensors where they are (NCHW data, OIHW or GOIHW
// weights), created the first time a combination of shapes and window is
// seen and kept in the context, as the contractions are (Matmul.cpp).
// fp32 only: the compiler builds convolutions in f32 (mixed precision
// leaves them alone).
//
//===----------------------------------------------------------------------===//
#include "ContextImpl.h"
#include "KernelSupport.h"

#include "slapo/runtime/cpu/Kernels.h"

#include <unordered_map>

namespace slapo::rt::cpu {

using namespace detail;

namespace {

using Dims = dnnl::memory::dims;
using DataType = dnnl::memory::data_type;

enum class Product : int64_t { Forward, GradInput, GradWeight };

/// A convolution as oneDNN describes it: the NCHW input and output, the
/// weights (with a leading groups dim when there are several), and the
/// window.
struct ConvolutionDescs {
  dnnl::memory::desc src, weights, bias, dst;
  Dims strides, dilates, padding;
};

dnnl::memory::desc f32Desc(const Dims &dims) {
  Dims strides(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;)
    strides[d - 1] = strides[d] * dims[d];
  return dnnl::memory::desc(dims, DataType::f32, strides);
}

Dims dimsOf(const Shape &shape) { return Dims(shape.dims, shape.dims + 4); }

/// The descriptors of input * weight = output with `window` in `groups`
/// groups; `bias` says whether the forward adds one.
ConvolutionDescs describe(const Shape &input, const Shape &weight,
                          const Shape &output, const Window2d &window,
                          int64_t groups, bool bias) {
  ConvolutionDescs descs;
  descs.src = f32Desc(dimsOf(input));
  descs.dst = f32Desc(dimsOf(output));
  Dims weights = dimsOf(weight);
  if (groups > 1) {
    weights[0] /= groups;
    weights.insert(weights.begin(), groups);
  }
  descs.weights = f32Desc(weights);
  if (bias)
    descs.bias = f32Desc({weight.dims[0]});
  descs.strides = {window.stride[0], window.stride[1]};
  // oneDNN counts the elements a dilation skips: PyTorch's dilation - 1.
  descs.dilates = {window.dilation[0] - 1, window.dilation[1] - 1};
  descs.padding = {window.padding[0], window.padding[1]};
  return descs;
}

dnnl::convolution_forward::primitive_desc
forwardDesc(dnnl::engine &engine, const ConvolutionDescs &d) {
  using Forward = dnnl::convolution_forward;
  auto algorithm = dnnl::algorithm::convolution_direct;
  auto kind = dnnl::prop_kind::forward_training;
  if (d.bias.is_zero())
    return Forward::primitive_desc(
        Forward::desc(kind, algorithm, d.src, d.weights, d.dst, d.strides,
                      d.dilates, d.padding, d.padding),
        engine);
  return Forward::primitive_desc(
      Forward::desc(kind, algorithm, d.src, d.weights, d.bias, d.dst, d.strides,
                    d.dilates, d.padding, d.padding),
      engine);
}

/// A gradient primitive of the convolution `forward` describes: the
/// backward-data and backward-weights descriptors take the same arguments.
template <typename Primitive>
Primitive backward(dnnl::engine &engine, const ConvolutionDescs &d,
                   const dnnl::convolution_forward::primitive_desc &forward) {
  using Desc = typename Primitive::desc;
  using PrimitiveDesc = typename Primitive::primitive_desc;
  return Primitive(
      PrimitiveDesc(Desc(dnnl::algorithm::convolution_direct, d.src, d.weights,
                         d.dst, d.strides, d.dilates, d.padding, d.padding),
                    engine, forward));
}

/// The product's primitive for these descriptors (cached in the context) and
/// the DNNL_ARG_* of its arguments, in the order execute() takes the data.
const CachedPrimitive &getConvolution(Context &ctx, Product product,
                                      const char *kernel,
                                      const ConvolutionDescs &d,
                                      const Window2d &window, int64_t groups) {
  std::vector<int64_t> key = {int64_t(product), groups, !d.bias.is_zero()};
  for (const dnnl::memory::desc *desc : {&d.src, &d.weights, &d.dst})
    for (int64_t size : desc->dims())
      key.push_back(size);
  for (const int64_t *values : {window.stride, window.padding, window.dilation})
    key.insert(key.end(), values, values + 2);
  Context::Impl &impl = ctx.getImpl();
  std::lock_guard<std::mutex> lock(impl.mutex);
  auto found = impl.primitives.find(key);
  if (found != impl.primitives.end())
    return found->second;
  CachedPrimitive cached;
  try {
    auto forward = forwardDesc(impl.engine, d);
    switch (product) {
    case Product::Forward:
      cached.primitive = dnnl::convolution_forward(forward);
      cached.args = {{DNNL_ARG_SRC, d.src},
                     {DNNL_ARG_WEIGHTS, d.weights},
                     {DNNL_ARG_DST, d.dst}};
      if (!d.bias.is_zero())
        cached.args.push_back({DNNL_ARG_BIAS, d.bias});
      break;
    case Product::GradInput:
      cached.primitive =
          backward<dnnl::convolution_backward_data>(impl.engine, d, forward);
      cached.args = {{DNNL_ARG_DIFF_DST, d.dst},
                     {DNNL_ARG_WEIGHTS, d.weights},
                     {DNNL_ARG_DIFF_SRC, d.src}};
      break;
    case Product::GradWeight:
      cached.primitive =
          backward<dnnl::convolution_backward_weights>(impl.engine, d, forward);
      cached.args = {{DNNL_ARG_DIFF_DST, d.dst},
                     {DNNL_ARG_SRC, d.src},
                     {DNNL_ARG_DIFF_WEIGHTS, d.weights}};
      break;
    }
  } catch (const dnnl::error &error) {
    throw Error(std::string("the CPU kernel '") + kernel +
                "' could not create a oneDNN convolution: " + error.what());
  }
  return impl.primitives.emplace(key, std::move(cached)).first->second;
}

/// Runs `cached` on `data`, one pointer per argument in its order.
void execute(Context &ctx, const CachedPrimitive &cached,
             std::initializer_list<void *> data) {
  Context::Impl &impl = ctx.getImpl();
  std::unordered_map<int, dnnl::memory> args;
  auto pointer = data.begin();
  for (const auto &[arg, desc] : cached.args)
    args.emplace(arg, dnnl::memory(desc, impl.engine, *pointer++));
  cached.primitive.execute(impl.stream, args);
  impl.stream.wait();
}

/// Throws unless every tensor is f32.
void checkF32(const char *kernel, std::initializer_list<const Tensor *> all) {
  for (const Tensor *tensor : all)
    if (*tensor && tensor->dtype != DType::F32)
      throwUnsupported(kernel, tensor->dtype);
}

/// Whether the product is empty or sums nothing: `out` is then its bias or
/// zeros, which oneDNN does not compute for empty tensors.
bool fillIfEmpty(const Tensor &out, std::initializer_list<const Tensor *> all) {
  for (const Tensor *tensor : all)
    if (tensor->getNumElements() == 0) {
      std::memset(out.data, 0, out.getBytes());
      return true;
    }
  return false;
}

} // namespace

void conv2d(Context &ctx, const Tensor &input, const Tensor &weight,
            const Tensor &bias, const Tensor &out, const Window2d &window,
            int64_t groups) {
  checkF32("conv2d", {&input, &weight, &bias, &out});
  if (out.getNumElements() == 0)
    return;
  if (fillIfEmpty(out, {&input, &weight})) {
    if (bias) // an empty sum plus the bias of each output channel
      for (int64_t n = 0; n < out.shape.dims[0]; ++n)
        for (int64_t o = 0; o < out.shape.dims[1]; ++o)
          std::fill_n(out.as<float>() + (n * out.shape.dims[1] + o) *
                                            product(out.shape, 2, 4),
                      product(out.shape, 2, 4), bias.as<float>()[o]);
    return;
  }
  ConvolutionDescs d = describe(input.shape, weight.shape, out.shape, window,
                                groups, bool(bias));
  const CachedPrimitive &cached =
      getConvolution(ctx, Product::Forward, "conv2d", d, window, groups);
  if (bias)
    execute(ctx, cached, {input.data, weight.data, out.data, bias.data});
  else
    execute(ctx, cached, {input.data, weight.data, out.data});
}

void conv2dGradInput(Context &ctx, const Tensor &grad, const Tensor &weight,
                     const Tensor &out, const Window2d &window,
                     int64_t groups) {
  checkF32("conv2dGradInput", {&grad, &weight, &out});
  if (out.getNumElements() == 0 || fillIfEmpty(out, {&grad, &weight}))
    return;
  ConvolutionDescs d = describe(out.shape, weight.shape, grad.shape, window,
                                groups, /*bias=*/false);
  execute(ctx,
          getConvolution(ctx, Product::GradInput, "conv2dGradInput", d, window,
                         groups),
          {grad.data, weight.data, out.data});
}

void conv2dGradWeight(Context &ctx, const Tensor &grad, const Tensor &input,
                      const Tensor &out, const Window2d &window,
                      int64_t groups) {
  checkF32("conv2dGradWeight", {&grad, &input, &out});
  if (out.getNumElements() == 0 || fillIfEmpty(out, {&grad, &input}))
    return;
  ConvolutionDescs d = describe(input.shape, out.shape, grad.shape, window,
                                groups, /*bias=*/false);
  execute(ctx,
          getConvolution(ctx, Product::GradWeight, "conv2dGradWeight", d,
                         window, groups),
          {grad.data, input.data, out.data});
}

} // namespace slapo::rt::cpu
