// conv2d, its two gradients (in f32, and in bf16 on both bf16 paths), and
// max pooling and its gradient against the formulas, computed here in f64 by
// direct loops over every window.
#include "Bf16Paths.h"
#include "TestValues.h"

#include "slapo/runtime/cpu/Kernels.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

using namespace slapo::rt;
using namespace slapo::rt::cpu;

namespace {

/// The shapes and window of a convolution of input [N, C, H, W] by weight
/// [O, C/groups, kH, kW] giving [N, O, OH, OW].
struct Conv {
  int64_t n, c, h, w, o, groups;
  Window2d window;
  int64_t outH() const { return outSize(0, h); }
  int64_t outW() const { return outSize(1, w); }
  int64_t outSize(int d, int64_t in) const {
    return (in + 2 * window.padding[d] -
            window.dilation[d] * (window.kernel[d] - 1) - 1) /
               window.stride[d] +
           1;
  }
  /// Calls f(n, o, oh, ow, c, kh, kw, ih, iw) for every product the
  /// convolution sums: output element, input channel, kernel position and
  /// the input element it reads (inside the input: padding adds nothing).
  template <typename F> void forEachProduct(F &&f) const {
    int64_t perGroupIn = c / groups, perGroupOut = o / groups;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t oc = 0; oc < o; ++oc)
        for (int64_t y = 0; y < outH(); ++y)
          for (int64_t x = 0; x < outW(); ++x)
            for (int64_t ic = 0; ic < perGroupIn; ++ic)
              for (int64_t ky = 0; ky < window.kernel[0]; ++ky)
                for (int64_t kx = 0; kx < window.kernel[1]; ++kx) {
                  int64_t iy = y * window.stride[0] - window.padding[0] +
                               ky * window.dilation[0];
                  int64_t ix = x * window.stride[1] - window.padding[1] +
                               kx * window.dilation[1];
                  if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                    continue;
                  int64_t channel = oc / perGroupOut * perGroupIn + ic;
                  f(((b * o + oc) * outH() + y) * outW() + x,
                    ((b * c + channel) * h + iy) * w + ix,
                    ((oc * perGroupIn + ic) * window.kernel[0] + ky) *
                            window.kernel[1] +
                        kx);
                }
  }
};

double toFloat(float value) { return value; }
double toFloat(BFloat16 value) { return value.toFloat(); }

void checkNear(const std::vector<float> &actual,
               const std::vector<double> &expected) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("element " << i);
    CHECK(actual[i] == Approx(expected[i]).margin(1e-5).epsilon(1e-5));
  }
}

} // namespace

TEST_CASE("conv2d and its gradients with stride, padding, dilation, groups "
          "and bias") {
  Conv conv{2, 4, 7, 6, 6, 2, {{3, 2}, {2, 1}, {1, 2}, {2, 1}}};
  REQUIRE(conv.outH() == 3);
  REQUIRE(conv.outW() == 9);
  Shape inputShape{conv.n, conv.c, conv.h, conv.w};
  Shape weightShape{conv.o, conv.c / conv.groups, 3, 2};
  Shape outShape{conv.n, conv.o, conv.outH(), conv.outW()};
  std::vector<float> input = pattern(inputShape.getNumElements(), 1);
  std::vector<float> weight = pattern(weightShape.getNumElements(), 2);
  std::vector<float> bias = pattern(conv.o, 3);
  std::vector<float> grad = pattern(outShape.getNumElements(), 4);

  std::vector<double> out(outShape.getNumElements()), gradInput(input.size()),
      gradWeight(weight.size());
  for (int64_t i = 0; i < outShape.getNumElements(); ++i)
    out[i] = bias[i / (conv.outH() * conv.outW()) % conv.o];
  conv.forEachProduct([&](int64_t o, int64_t i, int64_t k) {
    out[o] += double(input[i]) * weight[k];
    gradInput[i] += double(grad[o]) * weight[k];
    gradWeight[k] += double(grad[o]) * input[i];
  });

  for (int threads : {1, 2}) {
    Context ctx(threads);
    std::vector<float> result(out.size()), noBias(out.size());
    conv2d(ctx, Tensor(input.data(), DType::F32, inputShape),
           Tensor(weight.data(), DType::F32, weightShape),
           Tensor(bias.data(), DType::F32, {conv.o}),
           Tensor(result.data(), DType::F32, outShape), conv.window,
           conv.groups);
    checkNear(result, out);
    conv2d(ctx, Tensor(input.data(), DType::F32, inputShape),
           Tensor(weight.data(), DType::F32, weightShape), Tensor(),
           Tensor(noBias.data(), DType::F32, outShape), conv.window,
           conv.groups);
    for (size_t i = 0; i < out.size(); ++i)
      CHECK(noBias[i] ==
            Approx(result[i] - bias[i / (conv.outH() * conv.outW()) % conv.o])
                .margin(1e-5));

    std::vector<float> dInput(input.size(), -1), dWeight(weight.size(), -1);
    conv2dGradInput(ctx, Tensor(grad.data(), DType::F32, outShape),
                    Tensor(weight.data(), DType::F32, weightShape),
                    Tensor(dInput.data(), DType::F32, inputShape), conv.window,
                    conv.groups);
    checkNear(dInput, gradInput);
    conv2dGradWeight(ctx, Tensor(grad.data(), DType::F32, outShape),
                     Tensor(input.data(), DType::F32, inputShape),
                     Tensor(dWeight.data(), DType::F32, weightShape),
                     conv.window, conv.groups);
    checkNear(dWeight, gradWeight);
  }
}

TEST_CASE("bf16 conv2d and its gradients sum in f32 and round once") {
  // The mixed-precision forms: bf16 operands, an f32 forward result (plus an
  // f32 bias), bf16 gradients; also all-bf16 with a bf16 bias.
  Conv conv{2, 6, 5, 7, 8, 2, {{3, 3}, {1, 2}, {1, 1}, {1, 1}}};
  Shape inputShape{conv.n, conv.c, conv.h, conv.w};
  Shape weightShape{conv.o, conv.c / conv.groups, 3, 3};
  Shape outShape{conv.n, conv.o, conv.outH(), conv.outW()};
  std::vector<float> input = pattern(inputShape.getNumElements(), 11);
  std::vector<float> weight = pattern(weightShape.getNumElements(), 12);
  std::vector<float> bias = pattern(conv.o, 13);
  std::vector<float> grad = pattern(outShape.getNumElements(), 14);
  std::vector<BFloat16> inputBf = roundToBf16(input),
                        weightBf = roundToBf16(weight),
                        biasBf = roundToBf16(bias), gradBf = roundToBf16(grad);
  // The exact sums of the bf16 values, and the largest magnitude of their
  // terms, which bounds the f32 accumulation's error.
  std::vector<double> out(outShape.getNumElements()), outTerms(out.size()),
      gradInput(input.size()), gradInputTerms(input.size()),
      gradWeight(weight.size()), gradWeightTerms(weight.size());
  for (int64_t i = 0; i < outShape.getNumElements(); ++i)
    outTerms[i] =
        std::fabs(out[i] = bias[i / (conv.outH() * conv.outW()) % conv.o]);
  conv.forEachProduct([&](int64_t o, int64_t i, int64_t k) {
    out[o] += double(input[i]) * weight[k];
    outTerms[o] += std::fabs(double(input[i]) * weight[k]);
    gradInput[i] += double(grad[o]) * weight[k];
    gradInputTerms[i] += std::fabs(double(grad[o]) * weight[k]);
    gradWeight[k] += double(grad[o]) * input[i];
    gradWeightTerms[k] += std::fabs(double(grad[o]) * input[i]);
  });
  // f32 sums: a few f32 roundings of the terms' magnitude; bf16 results
  // round once more, by half a bf16 ulp (at most 2^-8 relative).
  auto check = [](const auto &actual, const std::vector<double> &expected,
                  const std::vector<double> &terms, double rounding) {
    REQUIRE(actual.size() == expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      INFO("element " << i);
      double value = toFloat(actual[i]);
      CHECK(std::fabs(value - expected[i]) <=
            std::fabs(expected[i]) * rounding + terms[i] * 1e-5);
    }
  };

  for (CpuPaths paths : getBf16MatmulPaths()) {
    Context ctx(2, paths);
    INFO(ctx.describe());
    Tensor x(inputBf.data(), DType::BF16, inputShape),
        w(weightBf.data(), DType::BF16, weightShape),
        g(gradBf.data(), DType::BF16, outShape);
    std::vector<float> result(out.size());
    conv2d(ctx, x, w, Tensor(bias.data(), DType::F32, {conv.o}),
           Tensor(result.data(), DType::F32, outShape), conv.window,
           conv.groups);
    check(result, out, outTerms, 0);
    std::vector<BFloat16> rounded(out.size());
    conv2d(ctx, x, w, Tensor(biasBf.data(), DType::BF16, {conv.o}),
           Tensor(rounded.data(), DType::BF16, outShape), conv.window,
           conv.groups);
    check(rounded, out, outTerms, 1.0 / 256);

    std::vector<BFloat16> dInput(input.size()), dWeight(weight.size());
    conv2dGradInput(ctx, g, w, Tensor(dInput.data(), DType::BF16, inputShape),
                    conv.window, conv.groups);
    check(dInput, gradInput, gradInputTerms, 1.0 / 256);
    conv2dGradWeight(ctx, g, x,
                     Tensor(dWeight.data(), DType::BF16, weightShape),
                     conv.window, conv.groups);
    check(dWeight, gradWeight, gradWeightTerms, 1.0 / 256);
  }
  if (getSupportedCpuPaths().bf16Matmul != Bf16Matmul::OneDnn)
    WARN(describeMissingBf16Matmul());
}

TEST_CASE("conv2d of an empty batch writes nothing; f16 and mixed operand "
          "dtypes are refused") {
  Context ctx(1);
  Window2d window{{1, 1}, {1, 1}, {0, 0}, {1, 1}};
  std::vector<float> weight(2 * 3), out(1, 7);
  conv2d(ctx, Tensor(nullptr, DType::F32, {0, 3, 2, 2}),
         Tensor(weight.data(), DType::F32, {2, 3, 1, 1}), Tensor(),
         Tensor(out.data(), DType::F32, {0, 2, 2, 2}), window, 1);
  CHECK(out[0] == 7);
  std::vector<uint16_t> half(12), halfWeight(6), halfOut(8);
  CHECK_THROWS_WITH(
      conv2d(ctx, Tensor(half.data(), DType::F16, {1, 3, 2, 2}),
             Tensor(halfWeight.data(), DType::F16, {2, 3, 1, 1}), Tensor(),
             Tensor(halfOut.data(), DType::F16, {1, 2, 2, 2}), window, 1),
      Catch::Contains("conv2d") && Catch::Contains("F16"));
  std::vector<float> image(12);
  CHECK_THROWS_WITH(
      conv2dGradWeight(ctx, Tensor(halfOut.data(), DType::BF16, {1, 2, 2, 2}),
                       Tensor(image.data(), DType::F32, {1, 3, 2, 2}),
                       Tensor(weight.data(), DType::F32, {2, 3, 1, 1}), window,
                       1),
      Catch::Contains("conv2dGradWeight") && Catch::Contains("one dtype"));
}

TEST_CASE("max pooling takes the first of equal maxima, NaN, and windows "
          "cut at the edge") {
  Context ctx(1);
  // One 3x4 plane; 2x2 windows with stride 2 and ceil_mode's second row of
  // windows (rows 2..3, only row 2 inside).
  std::vector<float> input = {1, 5,  5, 2, //
                              5, 0,  3, 3, //
                              4, -1, 9, 9};
  input.push_back(0); // a second channel, after the first plane
  input.resize(24, 0);
  float nan = std::numeric_limits<float>::quiet_NaN();
  input[12 + 5] = nan;
  Window2d window{{2, 2}, {2, 2}, {0, 0}, {1, 1}};
  std::vector<float> out(8);
  maxPool2d(ctx, Tensor(input.data(), DType::F32, {1, 2, 3, 4}),
            Tensor(out.data(), DType::F32, {1, 2, 2, 2}), window);
  CHECK(out[0] == 5);
  CHECK(out[1] == 5);
  CHECK(out[2] == 4);
  CHECK(out[3] == 9);
  CHECK(std::isnan(out[4]));

  std::vector<float> grad = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> gradInput(24, -1);
  maxPool2dGrad(ctx, Tensor(grad.data(), DType::F32, {1, 2, 2, 2}),
                Tensor(input.data(), DType::F32, {1, 2, 3, 4}),
                Tensor(gradInput.data(), DType::F32, {1, 2, 3, 4}), window);
  // Window (0, 0) holds 5 at (0, 1) and (1, 0): the first in row-major
  // order; window (0, 1) holds 5 at (0, 2); window (1, 1) 9 twice.
  std::vector<float> first(gradInput.begin(), gradInput.begin() + 12);
  CHECK(first == std::vector<float>{0, 1, 2, 0, //
                                    0, 0, 0, 0, //
                                    3, 0, 4, 0});
  CHECK(gradInput[12 + 5] == 5); // the NaN took its window's gradient
}

TEST_CASE("max pooling with padding and dilation against direct loops") {
  Window2d window{{3, 2}, {1, 2}, {1, 1}, {1, 2}};
  int64_t planes = 6, h = 6, w = 7, outH = 6, outW = 3;
  std::vector<float> input = pattern(planes * h * w, 5);
  std::vector<double> expected(planes * outH * outW);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t y = 0; y < outH; ++y)
      for (int64_t x = 0; x < outW; ++x) {
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t ky = 0; ky < 3; ++ky)
          for (int64_t kx = 0; kx < 2; ++kx) {
            int64_t iy = y - 1 + ky, ix = 2 * x - 1 + 2 * kx;
            if (iy >= 0 && iy < h && ix >= 0 && ix < w)
              max = std::max(max, double(input[(p * h + iy) * w + ix]));
          }
        expected[(p * outH + y) * outW + x] = max;
      }
  for (int threads : {1, 2}) {
    Context ctx(threads);
    std::vector<float> out(expected.size());
    maxPool2d(ctx, Tensor(input.data(), DType::F32, {2, 3, h, w}),
              Tensor(out.data(), DType::F32, {2, 3, outH, outW}), window);
    checkNear(out, expected);
  }
}
