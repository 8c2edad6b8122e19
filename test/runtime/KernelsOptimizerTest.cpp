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

TEST_CASE("updates read a bf16 gradient of an f32 parameter as its widened "
          "f32 copy, bit for bit") {
  // Mixed precision's weight gradients are bf16 products; the optimizer
  // reads them without a cast to f32 first (slapo-propagate-casts).
  const int64_t count = 1000;
  std::vector<BFloat16> narrow(count);
  std::vector<float> wide(count), start(count);
  for (int64_t i = 0; i < count; ++i) {
    narrow[i] = BFloat16::fromFloat(std::sin(0.37f * float(i)) * 3.0f);
    wide[i] = narrow[i].toFloat();
    start[i] = std::cos(0.11f * float(i));
  }
  double lr = 0.01;
  Tensor rate(&lr, DType::F64, {});
  Tensor bf16Grad(narrow.data(), DType::BF16, {count});
  Tensor f32Grad(wide.data(), DType::F32, {count});
  Context ctx(2);
  auto run = [&](const Tensor &grad, bool adamw) {
    std::vector<float> param = start, m(count, 0.01f), v(count, 0.001f);
    Tensor p(param.data(), DType::F32, {count});
    Tensor first(m.data(), DType::F32, {count}),
        second(v.data(), DType::F32, {count});
    for (int64_t step = 1; step <= 3; ++step)
      if (adamw)
        adamwUpdate(ctx, p, grad, Tensor(), first, second, rate, step, 0.9,
                    0.999, 1e-8, 0.1);
      else
        sgdUpdate(ctx, p, grad, Tensor(), first, rate, 0.9, 0.01);
    param.insert(param.end(), m.begin(), m.end());
    param.insert(param.end(), v.begin(), v.end());
    return param;
  };
  for (bool adamw : {false, true}) {
    INFO((adamw ? "adamw" : "sgd"));
    std::vector<float> fromNarrow = run(bf16Grad, adamw);
    std::vector<float> fromWide = run(f32Grad, adamw);
    REQUIRE(std::memcmp(fromNarrow.data(), fromWide.data(),
                        fromWide.size() * sizeof(float)) == 0);
    REQUIRE(fromNarrow != run(Tensor(start.data(), DType::F32, {count}),
                              adamw)); // the gradient matters
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
  const int64_t count = 777;
  std::vector<float> start(count), wide(count), scaled(count);
  std::vector<BFloat16> narrow(count);
  for (int64_t i = 0; i < count; ++i) {
    start[i] = std::cos(0.13f * float(i));
    narrow[i] = BFloat16::fromFloat(std::sin(0.29f * float(i)) * 5.0f);
    wide[i] = narrow[i].toFloat();
  }
  float coefficient = 0.3712345f;
  double lr = 0.02;
  Tensor rate(&lr, DType::F64, {}), scale(&coefficient, DType::F32, {});
  Context ctx(2);
  binary(ctx, BinaryKind::Mul, Tensor(wide.data(), DType::F32, {count}), scale,
         Tensor(scaled.data(), DType::F32, {count}));
  auto run = [&](const Tensor &grad, const Tensor &gradScale, bool adamw) {
    std::vector<float> param = start, m(count, 0.01f), v(count, 0.001f);
    Tensor p(param.data(), DType::F32, {count});
    Tensor first(m.data(), DType::F32, {count}),
        second(v.data(), DType::F32, {count});
    for (int64_t step = 1; step <= 3; ++step)
      if (adamw)
        adamwUpdate(ctx, p, grad, gradScale, first, second, rate, step, 0.9,
                    0.999, 1e-8, 0.1);
      else
        sgdUpdate(ctx, p, grad, gradScale, first, rate, 0.9, 0.01);
    param.insert(param.end(), m.begin(), m.end());
    return param;
  };
  Tensor product(scaled.data(), DType::F32, {count});
  for (bool adamw : {false, true})
    for (DType dtype : {DType::F32, DType::BF16}) {
      INFO((adamw ? "adamw" : "sgd")
           << " with a " << getName(dtype) << " gradient");
      Tensor grad = dtype == DType::F32
                        ? Tensor(wide.data(), DType::F32, {count})
                        : Tensor(narrow.data(), DType::BF16, {count});
      std::vector<float> expected = run(product, Tensor(), adamw);
      std::vector<float> actual = run(grad, scale, adamw);
      REQUIRE(std::memcmp(actual.data(), expected.data(),
                          expected.size() * sizeof(float)) == 0);
      REQUIRE(actual != run(grad, Tensor(), adamw)); // the scale matters
    }
}
