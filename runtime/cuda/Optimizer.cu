//===- Optimizer.cu - SGD and AdamW parameter updates ---------------------===//
//
// In place, with torch.optim's single-tensor formulas and the CPU backend's
// order of operations; the gradient has the parameter's dtype or a narrower
// float, widened as it is read. The learning rate lives in device memory (a
// schedule may write it on the GPU), so each thread reads it and derives its
// scalars in f64, unfused, as the CPU does on the host; the step's bias
// corrections depend on host values only and are computed once per launch.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.cuh"

#include "slapo/runtime/cuda/Kernels.h"

#include <cmath>

namespace slapo::rt::cuda {

using namespace detail;

namespace {

/// Element i of `grad` as the update uses it: widened to the parameter's
/// compute type and, with a scale (clipping's coefficient, `*scale` read
/// once per thread, of the parameter's dtype T), multiplied by it and
/// rounded to T, as a slapo.mul of the gradient would have written it.
template <typename T> struct GradientReader {
  __device__ explicit GradientReader(const T *coefficient)
      : scaled(coefficient),
        scale(coefficient ? load(*coefficient) : Compute<T>(1)) {}
  template <typename G>
  __device__ Compute<T> operator()(const G *grad, int64_t i) const {
    Compute<T> value = load(grad[i]);
    return scaled ? load(store<T>(value * scale)) : value;
  }
  bool scaled;
  Compute<T> scale;
};

template <typename T, typename G>
__global__ void sgdKernel(int64_t count, T *param, const G *grad,
                          const T *scale, T *buffer, const double *lr,
                          double momentum, double weightDecay) {
  using C = Compute<T>;
  GradientReader<T> read(scale);
  C decay = C(weightDecay), factor = C(momentum), alpha = C(-*lr);
  for (int64_t i = getGlobalThread(); i < count; i += getGlobalThreads()) {
    C x = load(param[i]);
    C d = read(grad, i);
    if (weightDecay != 0) // d_p = d_p.add(param, alpha=weight_decay)
      d = d + decay * x;
    if (buffer) { // buf.mul_(momentum).add_(d_p)
      d = load(buffer[i]) * factor + d;
      buffer[i] = store<T>(d);
    }
    param[i] = store<T>(x + alpha * d); // param.add_(d_p, alpha=-lr)
  }
}

/// The host-side scalars of an AdamW step.
struct AdamWScalars {
  double beta1, beta2, eps, weightDecay;
  /// 1 - beta1^step, and the square root of 1 - beta2^step.
  double correction1, correction2Sqrt;
};

template <typename T, typename G>
__global__ void adamwKernel(int64_t count, T *param, const G *grad,
                            const T *scale, T *expAvg, T *expAvgSq,
                            const double *lr, AdamWScalars scalars) {
  using C = Compute<T>;
  GradientReader<T> read(scale);
  double rate = *lr;
  C decay = C(__dsub_rn(1.0, __dmul_rn(rate, scalars.weightDecay)));
  C weight = C(1 - scalars.beta1); // exp_avg.lerp_(grad, 1 - beta1)
  C keep2 = C(scalars.beta2), weight2 = C(1 - scalars.beta2);
  C correction2Sqrt = C(scalars.correction2Sqrt);
  C epsilon = C(scalars.eps), alpha = C(-(rate / scalars.correction1));
  for (int64_t i = getGlobalThread(); i < count; i += getGlobalThreads()) {
    C x = load(param[i]) * decay;
    C gi = read(grad, i);
    C mi = load(expAvg[i]);
    // torch.lerp's two forms, chosen by the weight.
    mi = weight < C(0.5) ? mi + weight * (gi - mi)
                         : gi - (gi - mi) * (C(1) - weight);
    C vi = load(expAvgSq[i]) * keep2 + weight2 * gi * gi;
    T storedM = store<T>(mi), storedV = store<T>(vi);
    expAvg[i] = storedM;
    expAvgSq[i] = storedV;
    // The state as stored (rounded for bf16), as PyTorch reads it back.
    C denominator = sqrt(load(storedV)) / correction2Sqrt + epsilon;
    param[i] = store<T>(x + alpha * (load(storedM) / denominator));
  }
}

/// Calls `launch(TypeTag<T>(), TypeTag<G>())` for the parameter's element
/// type T and the gradient's G (T or a narrower float that T holds
/// exactly), then checks the launch.
template <typename Launch>
void launchUpdate(const char *kernel, const Tensor &param, const Tensor &grad,
                  Launch &&launch) {
  dispatchHeldExactly(kernel, "parameter", param, "gradient", grad,
                      [&](auto tag, auto gradTag) {
                        launch(tag, gradTag);
                        checkLaunch(kernel);
                      });
}

} // namespace

void sgdUpdate(Context &ctx, const Tensor &param, const Tensor &grad,
               const Tensor &gradScale, const Tensor &momentumBuffer,
               const Tensor &lr, double momentum, double weightDecay) {
  int64_t count = param.getNumElements();
  if (count == 0)
    return;
  launchUpdate("sgdUpdate", param, grad, [&](auto tag, auto gradTag) {
    using T = typename decltype(tag)::type;
    using G = typename decltype(gradTag)::type;
    sgdKernel<<<getGridSize(ctx, count, kBlockSize), kBlockSize, 0,
                ctx.getStream()>>>(count, param.as<T>(), grad.as<G>(),
                                   gradScale.as<T>(), momentumBuffer.as<T>(),
                                   lr.as<double>(), momentum, weightDecay);
  });
}

void adamwUpdate(Context &ctx, const Tensor &param, const Tensor &grad,
                 const Tensor &gradScale, const Tensor &expAvg,
                 const Tensor &expAvgSq, const Tensor &lr, int64_t step,
                 double beta1, double beta2, double eps, double weightDecay) {
  int64_t count = param.getNumElements();
  if (count == 0)
    return;
  AdamWScalars scalars{beta1,
                       beta2,
                       eps,
                       weightDecay,
                       1 - std::pow(beta1, double(step)),
                       std::sqrt(1 - std::pow(beta2, double(step)))};
  launchUpdate("adamwUpdate", param, grad, [&](auto tag, auto gradTag) {
    using T = typename decltype(tag)::type;
    using G = typename decltype(gradTag)::type;
    adamwKernel<<<getGridSize(ctx, count, kBlockSize), kBlockSize, 0,
                  ctx.getStream()>>>(
        count, param.as<T>(), grad.as<G>(), gradScale.as<T>(), expAvg.as<T>(),
        expAvgSq.as<T>(), lr.as<double>(), scalars);
  });
}

} // namespace slapo::rt::cuda
