//===- Optimizer.cpp - SGD and AdamW parameter updates --------------------===//
//
// In place, with torch.optim's single-tensor formulas and order of
// operations: scalars are computed in f64 as Python does and converted to
// the compute type once, as PyTorch converts a Python scalar.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.h"
#include "KernelVariant.h"

SLAPO_CPU_VARIANT_ISA_BEGIN
namespace slapo::rt::cpu::SLAPO_CPU_VARIANT {

using namespace detail;

namespace {

/// Calls `update(param, grad, begin, end)` with the data of `param` and
/// `grad` as `T *` and `const G *` over ranges of their elements in
/// parallel: T the parameter's element type, G the gradient's, T or a
/// narrower float that T holds exactly (a bf16 product's gradient of an f32
/// weight, widened as it is read).
template <typename F>
void updateInParallel(Context &ctx, const char *kernel, const Tensor &param,
                      const Tensor &grad, F &&update) {
  dispatchHeldExactly(kernel, "parameter", param, "gradient", grad,
                      [&](auto tag, auto gradTag) {
                        using T = typename decltype(tag)::type;
                        using G = typename decltype(gradTag)::type;
                        parallelFor(ctx, param.getNumElements(), kGrain,
                                    [&](int64_t begin, int64_t end) {
                                      update(param.as<T>(), grad.as<const G>(),
                                             begin, end);
                                    });
                      });
}

/// Reads gradient elements as the update uses them: widened to the
/// parameter's compute type C and, with a scale (0-d, the parameter's
/// dtype: clipping's coefficient, read once), multiplied by it and rounded
/// to the parameter's dtype T, as a slapo.mul of the gradient would have
/// written it.
template <typename T, typename C> struct GradientReader {
  explicit GradientReader(const Tensor &coefficient)
      : scaled(coefficient.data),
        scale(scaled ? load(*coefficient.as<const T>()) : C(1)) {}
  template <typename G> C operator()(const G *grad, int64_t i) const {
    C value = load(grad[i]);
    return scaled ? load(store<T>(value * scale)) : value;
  }
  bool scaled;
  C scale;
};

} // namespace

void sgdUpdate(Context &ctx, const Tensor &param, const Tensor &grad,
               const Tensor &gradScale, const Tensor &momentumBuffer,
               const Tensor &lr, double momentum, double weightDecay) {
  double rate = *lr.as<double>();
  updateInParallel(
      ctx, "sgdUpdate", param, grad,
      [&](auto *p, const auto *g, int64_t begin, int64_t end) {
        using T = std::remove_pointer_t<decltype(p)>;
        using C = Compute<T>;
        GradientReader<T, C> read(gradScale);
        T *buffer = momentumBuffer.as<T>();
        C decay = C(weightDecay), factor = C(momentum), alpha = C(-rate);
        for (int64_t i = begin; i < end; ++i) {
          C x = load(p[i]);
          C d = read(g, i);
          if (weightDecay != 0) // d_p = d_p.add(param, alpha=weight_decay)
            d = d + decay * x;
          if (buffer) { // buf.mul_(momentum).add_(d_p)
            d = load(buffer[i]) * factor + d;
            buffer[i] = store<T>(d);
          }
          p[i] = store<T>(x + alpha * d); // param.add_(d_p, alpha=-lr)
        }
      });
}

void adamwUpdate(Context &ctx, const Tensor &param, const Tensor &grad,
                 const Tensor &gradScale, const Tensor &expAvg,
                 const Tensor &expAvgSq, const Tensor &lr, int64_t step,
                 double beta1, double beta2, double eps, double weightDecay) {
  double rate = *lr.as<double>();
  double correction1 = 1 - std::pow(beta1, double(step));
  double correction2 = 1 - std::pow(beta2, double(step));
  updateInParallel(ctx, "adamwUpdate", param, grad,
                   [&](auto *p, const auto *g, int64_t begin, int64_t end) {
                     using T = std::remove_pointer_t<decltype(p)>;
                     using C = Compute<T>;
                     GradientReader<T, C> read(gradScale);
                     T *m = expAvg.as<T>();
                     T *v = expAvgSq.as<T>();
                     C decay = C(1 - rate * weightDecay);
                     C weight = C(1 - beta1); // exp_avg.lerp_(grad, 1 - beta1)
                     C keep2 = C(beta2), weight2 = C(1 - beta2);
                     C correction2Sqrt = C(std::sqrt(correction2));
                     C epsilon = C(eps), alpha = C(-(rate / correction1));
                     for (int64_t i = begin; i < end; ++i) {
                       C x = load(p[i]) * decay;
                       C gi = read(g, i);
                       C mi = load(m[i]);
                       // torch.lerp's two forms, chosen by the weight.
                       mi = weight < C(0.5) ? mi + weight * (gi - mi)
                                            : gi - (gi - mi) * (C(1) - weight);
                       C vi = load(v[i]) * keep2 + weight2 * gi * gi;
                       m[i] = store<T>(mi);
                       v[i] = store<T>(vi);
                       // The state as stored (rounded for bf16), as PyTorch
                       // reads it back.
                       C denominator =
                           std::sqrt(load(v[i])) / correction2Sqrt + epsilon;
                       p[i] = store<T>(x + alpha * (load(m[i]) / denominator));
                     }
                   });
}

} // namespace slapo::rt::cpu::SLAPO_CPU_VARIANT
SLAPO_CPU_VARIANT_ISA_END
