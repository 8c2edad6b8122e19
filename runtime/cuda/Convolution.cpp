//===- Convolution.cpp - 2-d convolutions and their gradients via cuDNN ---===//
//
// The forward and the two gradient products each run as one cuDNN call on
// the tensors where they are (NCHW data, [O, C/groups, kH, kW] filters),
// with descriptors and an algorithm made the first time a combination of
// shapes, dtypes and window is seen and kept in the context. The algorithm
// is the first deterministic one cuDNN's heuristic ranks whose workspace
// fits the scratch limit, so that a step gives the same bits every run.
//
// f32 runs in exact f32 (CUDNN_FMA_MATH: no TF32, as the CPU backend and
// PyTorch's deterministic defaults); bf16 operands with a bf16 output run as
// cuDNN's bf16 convolution computing in f32 (its PSEUDO_BFLOAT16 config),
// rounded once. cuDNN takes one dtype for input, filter and output: bf16
// operands with an f32 output (mixed precision's forward) are widened to
// f32, which is exact, and convolved in f32, so the same exact products are
// summed in f32 as on the CPU. A bias is added to the sums afterwards (one
// more rounding than oneDNN's).
//
// cuDNN 9 marks these (its "legacy") calls deprecated in favour of its graph
// API, which would need far more code for the same three products; they are
// what PyTorch 2 still calls through cudnn_frontend's fallbacks.
//
//===----------------------------------------------------------------------===//
#include "ContextImpl.h"

#include "slapo/runtime/Error.h"
#include "slapo/runtime/cuda/Kernels.h"

#include <string>
#include <vector>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace slapo::rt::cuda {

namespace {

enum class Product : int64_t { Forward, GradInput, GradWeight };

cudnnDataType_t getDataType(const char *kernel, DType dtype) {
  switch (dtype) {
  case DType::F32:
    return CUDNN_DATA_FLOAT;
  case DType::BF16:
    return CUDNN_DATA_BFLOAT16;
  default:
    throw Error(std::string("the CUDA kernel '") + kernel +
                "' does not support " + getName(dtype) + " tensors");
  }
}

/// Throws unless `a` and `b` (the two tensors a product multiplies) share
/// one dtype, and f32 operands give f32, bf16 ones bf16 or f32.
void checkTypes(const char *kernel, const Tensor &a, const Tensor &b,
                const Tensor &out) {
  getDataType(kernel, a.dtype);
  getDataType(kernel, out.dtype);
  if (a.dtype != b.dtype || (a.dtype == DType::F32 && out.dtype != DType::F32))
    throw Error(std::string("the CUDA kernel '") + kernel + "' does not " +
                "support " + getName(a.dtype) + " by " + getName(b.dtype) +
                " into " + getName(out.dtype));
}

/// `tensor` in f32: a bf16 one widened into `slot`'s scratch.
Tensor widenToF32(Context &ctx, const Tensor &tensor, Scratch slot) {
  if (tensor.dtype == DType::F32)
    return tensor;
  Tensor widened(ctx.getImpl().getScratch(slot, tensor.getNumElements() * 4,
                                          ctx.getStream()),
                 DType::F32, tensor.shape);
  cast(ctx, tensor, widened);
  return widened;
}

/// Sets `algorithm` to the first deterministic one of cuDNN's heuristic
/// ranking (`query(Count, &returned, results)`, named `what`) whose
/// workspace, set in `workspaceBytes`, is within the limit.
template <typename Perf, int Count, typename Query, typename Algorithm>
void chooseAlgorithm(Query query, const char *what, Algorithm &algorithm,
                     size_t &workspaceBytes) {
  Perf results[Count];
  int returned = 0;
  checkCudnn(query(Count, &returned, results), what);
  for (int i = 0; i < returned; ++i)
    if (results[i].status == CUDNN_STATUS_SUCCESS &&
        results[i].determinism == CUDNN_DETERMINISTIC &&
        results[i].memory <= Context::Impl::kMaxConvolutionWorkspace) {
      algorithm = results[i].algo;
      workspaceBytes = results[i].memory;
      return;
    }
  throw Error(std::string(what) +
              ": cuDNN has no deterministic algorithm for this convolution "
              "within " +
              std::to_string(Context::Impl::kMaxConvolutionWorkspace) +
              " bytes of workspace");
}

/// The plan of one product: input `x` [N, C, H, W], filter `w`, output `y`,
/// all of the plan's dtype.
const ConvolutionPlan &getPlan(Context &ctx, Product product, DType dtype,
                               const Shape &x, const Shape &w, const Shape &y,
                               const Window2d &window, int64_t groups) {
  std::vector<int64_t> key = {int64_t(product), int64_t(dtype), groups};
  for (const Shape *shape : {&x, &w, &y})
    key.insert(key.end(), shape->dims, shape->dims + 4);
  for (const int64_t *values : {window.stride, window.padding, window.dilation})
    key.insert(key.end(), values, values + 2);
  Context::Impl &impl = ctx.getImpl();
  auto found = impl.convolutionPlans.find(key);
  if (found != impl.convolutionPlans.end())
    return found->second;

  cudnnHandle_t handle = impl.getCudnn(ctx.getStream());
  ConvolutionPlan plan;
  try {
    cudnnDataType_t type = getDataType("conv2d", dtype);
    checkCudnn(cudnnCreateTensorDescriptor(&plan.x), "cudnnCreateTensor");
    checkCudnn(cudnnCreateTensorDescriptor(&plan.y), "cudnnCreateTensor");
    checkCudnn(cudnnCreateFilterDescriptor(&plan.w), "cudnnCreateFilter");
    checkCudnn(cudnnCreateConvolutionDescriptor(&plan.convolution),
               "cudnnCreateConvolution");
    auto toInt = [](int64_t value) { return static_cast<int>(value); };
    checkCudnn(cudnnSetTensor4dDescriptor(plan.x, CUDNN_TENSOR_NCHW, type,
                                          toInt(x.dims[0]), toInt(x.dims[1]),
                                          toInt(x.dims[2]), toInt(x.dims[3])),
               "cudnnSetTensor4dDescriptor(input)");
    checkCudnn(cudnnSetTensor4dDescriptor(plan.y, CUDNN_TENSOR_NCHW, type,
                                          toInt(y.dims[0]), toInt(y.dims[1]),
                                          toInt(y.dims[2]), toInt(y.dims[3])),
               "cudnnSetTensor4dDescriptor(output)");
    checkCudnn(cudnnSetFilter4dDescriptor(plan.w, type, CUDNN_TENSOR_NCHW,
                                          toInt(w.dims[0]), toInt(w.dims[1]),
                                          toInt(w.dims[2]), toInt(w.dims[3])),
               "cudnnSetFilter4dDescriptor");
    checkCudnn(cudnnSetConvolution2dDescriptor(
                   plan.convolution, toInt(window.padding[0]),
                   toInt(window.padding[1]), toInt(window.stride[0]),
                   toInt(window.stride[1]), toInt(window.dilation[0]),
                   toInt(window.dilation[1]), CUDNN_CROSS_CORRELATION,
                   CUDNN_DATA_FLOAT),
               "cudnnSetConvolution2dDescriptor");
    checkCudnn(cudnnSetConvolutionGroupCount(plan.convolution, toInt(groups)),
               "cudnnSetConvolutionGroupCount");
    checkCudnn(cudnnSetConvolutionMathType(
                   plan.convolution,
                   dtype == DType::F32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH),
               "cudnnSetConvolutionMathType");

    switch (product) {
    case Product::Forward:
      chooseAlgorithm<cudnnConvolutionFwdAlgoPerf_t,
                      CUDNN_CONVOLUTION_FWD_ALGO_COUNT>(
          [&](int count, int *returned, auto *results) {
            return cudnnGetConvolutionForwardAlgorithm_v7(
                handle, plan.x, plan.w, plan.convolution, plan.y, count,
                returned, results);
          },
          "cudnnGetConvolutionForwardAlgorithm_v7", plan.forward,
          plan.workspaceBytes);
      break;
    case Product::GradInput:
      chooseAlgorithm<cudnnConvolutionBwdDataAlgoPerf_t,
                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>(
          [&](int count, int *returned, auto *results) {
            return cudnnGetConvolutionBackwardDataAlgorithm_v7(
                handle, plan.w, plan.y, plan.convolution, plan.x, count,
                returned, results);
          },
          "cudnnGetConvolutionBackwardDataAlgorithm_v7", plan.gradInput,
          plan.workspaceBytes);
      break;
    case Product::GradWeight:
      chooseAlgorithm<cudnnConvolutionBwdFilterAlgoPerf_t,
                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>(
          [&](int count, int *returned, auto *results) {
            return cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                handle, plan.x, plan.y, plan.convolution, plan.w, count,
                returned, results);
          },
          "cudnnGetConvolutionBackwardFilterAlgorithm_v7", plan.gradWeight,
          plan.workspaceBytes);
      break;
    }
  } catch (...) {
    destroyPlan(plan);
    throw;
  }
  return impl.convolutionPlans.emplace(key, plan).first->second;
}

/// Runs `product` on input x, filter w and output y, whichever of them it
/// computes (the forward y, the gradients x or w), all of one dtype.
void runProduct(Context &ctx, Product product, const Tensor &x, const Tensor &w,
                const Tensor &y, const Window2d &window, int64_t groups) {
  DType dtype = product == Product::GradInput ? w.dtype : x.dtype;
  const ConvolutionPlan &plan =
      getPlan(ctx, product, dtype, x.shape, w.shape, y.shape, window, groups);
  Context::Impl &impl = ctx.getImpl();
  cudnnHandle_t handle = impl.getCudnn(ctx.getStream());
  void *workspace = plan.workspaceBytes
                        ? impl.getScratch(Scratch::ConvolutionWorkspace,
                                          plan.workspaceBytes, ctx.getStream())
                        : nullptr;
  // cuDNN scales by float for f32 and bf16 data alike.
  float one = 1, zero = 0;
  switch (product) {
  case Product::Forward:
    checkCudnn(cudnnConvolutionForward(handle, &one, plan.x, x.data, plan.w,
                                       w.data, plan.convolution, plan.forward,
                                       workspace, plan.workspaceBytes, &zero,
                                       plan.y, y.data),
               "cudnnConvolutionForward");
    break;
  case Product::GradInput:
    checkCudnn(cudnnConvolutionBackwardData(
                   handle, &one, plan.w, w.data, plan.y, y.data,
                   plan.convolution, plan.gradInput, workspace,
                   plan.workspaceBytes, &zero, plan.x, x.data),
               "cudnnConvolutionBackwardData");
    break;
  case Product::GradWeight:
    checkCudnn(cudnnConvolutionBackwardFilter(
                   handle, &one, plan.x, x.data, plan.y, y.data,
                   plan.convolution, plan.gradWeight, workspace,
                   plan.workspaceBytes, &zero, plan.w, w.data),
               "cudnnConvolutionBackwardFilter");
    break;
  }
}

/// `a` and `b`, the operands of a product into `out`, as it runs them:
/// bf16 ones into an f32 `out` widened to f32 in scratch.
void widenForOutput(Context &ctx, Tensor &a, Tensor &b, const Tensor &out) {
  if (a.dtype == out.dtype)
    return;
  a = widenToF32(ctx, a, Scratch::ConvolutionLhs);
  b = widenToF32(ctx, b, Scratch::ConvolutionRhs);
}

/// Whether the product is empty or sums nothing: `out` is then zeros, which
/// cuDNN does not compute for empty tensors.
bool fillIfEmpty(Context &ctx, const Tensor &out,
                 std::initializer_list<const Tensor *> all) {
  for (const Tensor *tensor : all)
    if (tensor->getNumElements() == 0) {
      fill(ctx, out, 0);
      return true;
    }
  return false;
}

} // namespace

void conv2d(Context &ctx, const Tensor &input, const Tensor &weight,
            const Tensor &bias, const Tensor &out, const Window2d &window,
            int64_t groups) {
  checkTypes("conv2d", input, weight, out);
  if (bias && bias.dtype != out.dtype)
    throw Error(std::string("the CUDA kernel 'conv2d' adds a bias of its "
                            "result's dtype ") +
                getName(out.dtype) + ", not " + getName(bias.dtype));
  if (out.getNumElements() == 0)
    return;
  // With a bias the sums go to scratch first, and the bias [O], as
  // [1, O, 1, 1], is added on the way into out.
  Tensor sums = out;
  if (bias)
    sums = Tensor(ctx.getImpl().getScratch(Scratch::ConvolutionResult,
                                           out.getBytes(), ctx.getStream()),
                  out.dtype, out.shape);
  if (!fillIfEmpty(ctx, sums, {&input, &weight})) {
    Tensor x = input, w = weight;
    widenForOutput(ctx, x, w, sums);
    runProduct(ctx, Product::Forward, x, w, sums, window, groups);
  }
  if (bias)
    binary(ctx, BinaryKind::Add, sums,
           Tensor(bias.data, bias.dtype, {1, bias.shape.dims[0], 1, 1}), out);
}

void conv2dGradInput(Context &ctx, const Tensor &grad, const Tensor &weight,
                     const Tensor &out, const Window2d &window,
                     int64_t groups) {
  checkTypes("conv2dGradInput", grad, weight, out);
  if (out.getNumElements() == 0 || fillIfEmpty(ctx, out, {&grad, &weight}))
    return;
  Tensor y = grad, w = weight;
  widenForOutput(ctx, y, w, out);
  runProduct(ctx, Product::GradInput, out, w, y, window, groups);
}

void conv2dGradWeight(Context &ctx, const Tensor &grad, const Tensor &input,
                      const Tensor &out, const Window2d &window,
                      int64_t groups) {
  checkTypes("conv2dGradWeight", grad, input, out);
  if (out.getNumElements() == 0 || fillIfEmpty(ctx, out, {&grad, &input}))
    return;
  Tensor y = grad, x = input;
  widenForOutput(ctx, y, x, out);
  runProduct(ctx, Product::GradWeight, x, out, y, window, groups);
}

} // namespace slapo::rt::cuda
