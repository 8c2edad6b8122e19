//===- Convolution.cpp - 2-d convolutions and their gradients via oneDNN --===//
//
// The forward and the two gradient products each run as one oneDNN
// primitive on the tensors where they are (NCHW data, OIHW or GOIHW
// weights), created the first time a combination of shapes, dtypes and
// window is seen and kept in the context, as the contractions are
// (Matmul.cpp). f32 or bf16 operands; bf16 ones sum in f32 and are rounded
// once to the output's dtype, by oneDNN or by the f32 fallback
// (Contraction.h), as mixed precision asks: bf16 products giving an f32
// forward result and bf16 gradients.
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

enum class Product : int64_t { Forward, GradInput, GradWeight };

/// A convolution as oneDNN describes it: the NCHW input and output, the
/// weights (with a leading groups dim when there are several), and the
/// window.
struct ConvolutionDescs {
  dnnl::memory::desc src, weights, bias, dst;
  Dims strides, dilates, padding;
};

Dims dimsOf(const Shape &shape) { return Dims(shape.dims, shape.dims + 4); }

/// The data types of a convolution's tensors, each f32 or bf16.
struct ConvolutionTypes {
  DataType src, weights, dst;
};

/// The descriptors of input * weight = output with `window` in `groups`
/// groups, in `types`; `bias` says whether the forward adds one (of the
/// output's type).
ConvolutionDescs describe(const Shape &input, const Shape &weight,
                          const Shape &output, const ConvolutionTypes &types,
                          const Window2d &window, int64_t groups, bool bias) {
  ConvolutionDescs descs;
  descs.src = makeContiguousDesc(dimsOf(input), types.src);
  descs.dst = makeContiguousDesc(dimsOf(output), types.dst);
  Dims weights = dimsOf(weight);
  if (groups > 1) {
    weights[0] /= groups;
    weights.insert(weights.begin(), groups);
  }
  descs.weights = makeContiguousDesc(weights, types.weights);
  if (bias)
    descs.bias = makeContiguousDesc({weight.dims[0]}, types.dst);
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
  for (const dnnl::memory::desc *desc : {&d.src, &d.weights, &d.dst}) {
    key.push_back(int64_t(desc->data_type()));
    for (int64_t size : desc->dims())
      key.push_back(size);
  }
  for (const int64_t *values : {window.stride, window.padding, window.dilation})
    key.insert(key.end(), values, values + 2);
  Context::Impl &impl = ctx.getImpl();
  std::lock_guard<std::mutex> lock(impl.mutex);
  auto found = impl.primitives.find(key);
  if (found != impl.primitives.end())
    return found->second;
  CachedPrimitive cached;
  try {
    // The gradients' hint is the forward whose products they are: all its
    // tensors in the operands' type.
    ConvolutionDescs hint = d;
    DataType operands = product == Product::GradWeight ? d.src.data_type()
                                                       : d.weights.data_type();
    for (dnnl::memory::desc *desc : {&hint.src, &hint.weights, &hint.dst})
      *desc = makeContiguousDesc(desc->dims(), operands);
    auto forward =
        forwardDesc(impl.engine, product == Product::Forward ? d : hint);
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

/// The types of a product's two operands, which share one, and of its
/// output: each f32 or bf16.
struct ProductTypes {
  DataType operands, out;
};

/// The types of `a` * `b` = `out`; throws unless they are ProductTypes.
ProductTypes checkTypes(const char *kernel, const Tensor &a, const Tensor &b,
                        const Tensor &out) {
  DataType operands = getContractionType(kernel, a.dtype);
  if (b.dtype != a.dtype)
    throw Error(std::string("the CPU kernel '") + kernel +
                "' multiplies tensors of one dtype, not " + getName(a.dtype) +
                " and " + getName(b.dtype));
  return {operands, getContractionType(kernel, out.dtype)};
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
  ProductTypes types = checkTypes("conv2d", input, weight, out);
  if (bias && bias.dtype != out.dtype)
    throw Error(std::string("the CPU kernel 'conv2d' adds a bias of its "
                            "result's dtype ") +
                getName(out.dtype) + ", not " + getName(bias.dtype));
  if (runsInF32(ctx, input))
    return contractInF32(ctx, std::array{input, weight, bias}, out,
                         [&](const auto &f32, const Tensor &result) {
                           conv2d(ctx, f32[0], f32[1], f32[2], result, window,
                                  groups);
                         });
  if (out.getNumElements() == 0)
    return;
  if (fillIfEmpty(out, {&input, &weight})) {
    if (bias) { // an empty sum plus the bias of each output channel
      size_t size = getSize(out.dtype);
      int64_t planeSize = product(out.shape, 2, 4);
      for (int64_t plane = 0; plane < product(out.shape, 0, 2); ++plane)
        for (int64_t i = 0; i < planeSize; ++i)
          std::memcpy(static_cast<char *>(out.data) +
                          (plane * planeSize + i) * size,
                      static_cast<const char *>(bias.data) +
                          plane % out.shape.dims[1] * size,
                      size);
    }
    return;
  }
  ConvolutionDescs d = describe(input.shape, weight.shape, out.shape,
                                {types.operands, types.operands, types.out},
                                window, groups, bool(bias));
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
  ProductTypes types = checkTypes("conv2dGradInput", grad, weight, out);
  if (runsInF32(ctx, grad))
    return contractInF32(ctx, std::array{grad, weight}, out,
                         [&](const auto &f32, const Tensor &result) {
                           conv2dGradInput(ctx, f32[0], f32[1], result, window,
                                           groups);
                         });
  if (out.getNumElements() == 0 || fillIfEmpty(out, {&grad, &weight}))
    return;
  ConvolutionDescs d =
      describe(out.shape, weight.shape, grad.shape,
               {types.out, types.operands, types.operands}, window, groups,
               /*bias=*/false);
  execute(ctx,
          getConvolution(ctx, Product::GradInput, "conv2dGradInput", d, window,
                         groups),
          {grad.data, weight.data, out.data});
}

void conv2dGradWeight(Context &ctx, const Tensor &grad, const Tensor &input,
                      const Tensor &out, const Window2d &window,
                      int64_t groups) {
  ProductTypes types = checkTypes("conv2dGradWeight", grad, input, out);
  if (runsInF32(ctx, grad))
    return contractInF32(ctx, std::array{grad, input}, out,
                         [&](const auto &f32, const Tensor &result) {
                           conv2dGradWeight(ctx, f32[0], f32[1], result, window,
                                            groups);
                         });
  if (out.getNumElements() == 0 || fillIfEmpty(out, {&grad, &input}))
    return;
  ConvolutionDescs d =
      describe(input.shape, out.shape, grad.shape,
               {types.operands, types.out, types.operands}, window, groups,
               /*bias=*/false);
  execute(ctx,
          getConvolution(ctx, Product::GradWeight, "conv2dGradWeight", d,
                         window, groups),
          {grad.data, input.data, out.data});
}

} // namespace slapo::rt::cpu
