// SGD and AdamW updates against torch.optim's formulas, evaluated here in
// f64 (the kernels compute in f32, so they agree to f32 precision).
#include "slapo/runtime/Error.h"
#include "slapo/runtime/cpu/Kernels.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

using namespace slapo::rt;
using namespace slapo::rt::cpu;

TEST_CASE("sgd without momentum: param -= lr * (grad + wd * param)") {
  Context ctx(1);
  std::vector<float> param = {1, -2, 0.5f}, grad = {0.1f, 0.2f, -0.3f};
  std::vector<float> before = param;
  double lr = 0.1, weightDecay = 0.01;
  sgdUpdate(ctx, Tensor(param.data(), DType::F32, {3}),
            Tensor(grad.data(), DType::F32, {3}), Tensor(), Tensor(),
            Tensor(&lr, DType::F64, {}), 0.0, weightDecay);
  for (int i = 0; i < 3; ++i)
    CHECK(param[i] ==
          Approx(before[i] - lr * (grad[i] + weightDecay * before[i]))
              .epsilon(1e-6));
}

TEST_CASE("sgd with momentum accumulates the buffer over steps") {
  Context ctx(1);
  std::vector<float> param = {1, -2}, grad = {0.5f, -0.25f}, buffer = {0, 0};
  std::vector<double> p(param.begin(), param.end()), b(2, 0.0);
  double lr = 0.05, momentum = 0.9, weightDecay = 0.1;
  for (int step = 0; step < 3; ++step) {
    sgdUpdate(ctx, Tensor(param.data(), DType::F32, {2}),
              Tensor(grad.data(), DType::F32, {2}), Tensor(),
              Tensor(buffer.data(), DType::F32, {2}),
              Tensor(&lr, DType::F64, {}), momentum, weightDecay);
    for (int i = 0; i < 2; ++i) {
      double g = grad[i] + weightDecay * p[i];
      b[i] = momentum * b[i] + g;
      p[i] -= lr * b[i];
      CHECK(buffer[i] == Approx(b[i]).epsilon(1e-5));
      CHECK(param[i] == Approx(p[i]).epsilon(1e-5));
    }
  }
}

TEST_CASE("adamw steps follow torch.optim.AdamW") {
  Context ctx(1);
  std::vector<float> param = {1, -2, 0.5f, 3}, grad = {0.1f, -0.2f, 0.3f, 0};
  std::vector<float> m(4, 0), v(4, 0);
  std::vector<double> p(param.begin(), param.end()), mRef(4, 0), vRef(4, 0);
  double lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.1;
  for (int64_t step = 1; step <= 2; ++step) {
    adamwUpdate(ctx, Tensor(param.data(), DType::F32, {4}),
                Tensor(grad.data(), DType::F32, {4}), Tensor(),
                Tensor(m.data(), DType::F32, {4}),
                Tensor(v.data(), DType::F32, {4}), Tensor(&lr, DType::F64, {}),
                step, beta1, beta2, eps, weightDecay);
    double correction1 = 1 - std::pow(beta1, step);
    double correction2 = 1 - std::pow(beta2, step);
    for (int i = 0; i < 4; ++i) {
      p[i] *= 1 - lr * weightDecay;
      mRef[i] = beta1 * mRef[i] + (1 - beta1) * grad[i];
      vRef[i] = beta2 * vRef[i] + (1 - beta2) * grad[i] * grad[i];
      double denominator = std::sqrt(vRef[i]) / std::sqrt(correction2) + eps;
      p[i] -= lr / correction1 * mRef[i] / denominator;
      INFO("step " << step << " element " << i);
      CHECK(m[i] == Approx(mRef[i]).epsilon(1e-5));
      CHECK(v[i] == Approx(vRef[i]).epsilon(1e-5));
      CHECK(param[i] == Approx(p[i]).epsilon(1e-6));
    }
  }
  // The first step moves each parameter with a gradient by about lr.
  CHECK(param[0] ==
        Approx((1 * (1 - lr * weightDecay) - lr) * (1 - lr * weightDecay) - lr)
            .epsilon(1e-4));
}

namespace {

/// The parameters and the first moments (SGD's momentum buffer, AdamW's
/// exp_avg) and second moments after 3 steps of SGD with momentum or AdamW
/// from `start` with gradient `grad` scaled by `gradScale` (may be null).
std::vector<float> runUpdates(const std::vector<float> &start,
                              const Tensor &grad, const Tensor &gradScale,
                              bool adamw) {
  int64_t count = static_cast<int64_t>(start.size());
  std::vector<float> param = start, m(count, 0.01f), v(count, 0.001f);
  Tensor p(param.data(), DType::F32, {count});
  Tensor first(m.data(), DType::F32, {count}),
      second(v.data(), DType::F32, {count});
  double lr = 0.02;
  Tensor rate(&lr, DType::F64, {});
  Context ctx(2);
  for (int64_t step = 1; step <= 3; ++step)
    if (adamw)
      adamwUpdate(ctx, p, grad, gradScale, first, second, rate, step, 0.9,
                  0.999, 1e-8, 0.1);
    else
      sgdUpdate(ctx, p, grad, gradScale, first, rate, 0.9, 0.01);
  param.insert(param.end(), m.begin(), m.end());
  param.insert(param.end(), v.begin(), v.end());
  return param;
}

/// A bf16 gradient of `count` elements and its widened f32 copy, and a
/// parameter to start from.
struct UpdateInputs {
  std::vector<BFloat16> narrow;
  std::vector<float> wide, start;
  explicit UpdateInputs(int64_t count)
      : narrow(count), wide(count), start(count) {
    for (int64_t i = 0; i < count; ++i) {
      narrow[i] = BFloat16::fromFloat(std::sin(0.29f * float(i)) * 5.0f);
      wide[i] = narrow[i].toFloat();
      start[i] = std::cos(0.13f * float(i));
    }
  }
  Tensor getNarrow() { return Tensor(narrow.data(), DType::BF16, {count()}); }
  Tensor getWide() { return Tensor(wide.data(), DType::F32, {count()}); }
  int64_t count() const { return static_cast<int64_t>(wide.size()); }
};

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

} // namespace

TEST_CASE("updates read a bf16 gradient of an f32 parameter as its widened "
          "f32 copy, bit for bit") {
  // Mixed precision's weight gradients are bf16 products; the optimizer
  // reads them without a cast to f32 first (slapo-propagate-casts).
  UpdateInputs in(1000);
  for (bool adamw : {false, true}) {
    INFO((adamw ? "adamw" : "sgd"));
    std::vector<float> fromNarrow =
        runUpdates(in.start, in.getNarrow(), Tensor(), adamw);
    REQUIRE(sameBits(fromNarrow,
                     runUpdates(in.start, in.getWide(), Tensor(), adamw)));
    Tensor other(in.start.data(), DType::F32, {in.count()});
    REQUIRE_FALSE(sameBits(fromNarrow, runUpdates(in.start, other, Tensor(),
                                                  adamw))); // grad matters
  }
}

TEST_CASE("an update refuses a gradient wider than its parameter") {
  Context ctx(1);
  std::vector<BFloat16> param(4);
  std::vector<float> grad(4, 1), m(4), v(4);
  double lr = 0.1;
  REQUIRE_THROWS_WITH(
      adamwUpdate(ctx, Tensor(param.data(), DType::BF16, {4}),
                  Tensor(grad.data(), DType::F32, {4}), Tensor(),
                  Tensor(m.data(), DType::BF16, {4}),
                  Tensor(v.data(), DType::BF16, {4}),
                  Tensor(&lr, DType::F64, {}), 1, 0.9, 0.999, 1e-8, 0),
      Catch::Contains("adamwUpdate") && Catch::Contains("gradient F32") &&
          Catch::Contains("parameter BF16"));
}

TEST_CASE("a scaled update reads the gradient times the scale as the binary "
          "kernel's Mul writes it, bit for bit") {
  // Gradient clipping's coefficient, applied by the update as it reads each
  // element instead of by a Mul over every gradient first; the gradient in
  // the parameter's dtype or in bf16 (widened first, as a cast would).
  UpdateInputs in(777);
  float coefficient = 0.3712345f;
  Tensor scale(&coefficient, DType::F32, {});
  std::vector<float> scaled(in.count());
  Tensor product(scaled.data(), DType::F32, {in.count()});
  Context ctx(2);
  binary(ctx, BinaryKind::Mul, in.getWide(), scale, product);
  for (bool adamw : {false, true})
    for (Tensor grad : {in.getWide(), in.getNarrow()}) {
      INFO((adamw ? "adamw" : "sgd")
           << " with a " << getName(grad.dtype) << " gradient");
      std::vector<float> actual = runUpdates(in.start, grad, scale, adamw);
      REQUIRE(sameBits(actual, runUpdates(in.start, product, Tensor(), adamw)));
      REQUIRE_FALSE(sameBits(actual, runUpdates(in.start, grad, Tensor(),
                                                adamw))); // scale matters
    }
}
