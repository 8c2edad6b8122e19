// embedding, layer norm, softmax, log-softmax, cross entropy, the fused
// linear cross entropy and flash attention with dropout against the
// formulas, computed here in f64; flash attention on token-major operands
// against the head-major one, on head windows of a packed tensor against
// separate operands, on grouped keys and values against them repeated to
// every query head, the norms with a folded cast against the norm and the
// cast kernel, and the norms' gradients plus an addend against the
// gradients and the binary kernel's Add, bit for bit.
#include "slapo/runtime/AttentionGeometry.h"
#include "slapo/runtime/Error.h"
#include "slapo/runtime/LinearCrossEntropyWorkspace.h"
#include "slapo/runtime/Random.h"
#include "slapo/runtime/cpu/Kernels.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace slapo::rt;
using namespace slapo::rt::cpu;

TEST_CASE("embedding gathers rows by I64 and I32 indices") {
  Context ctx(1);
  std::vector<float> weight = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32};
  std::vector<int64_t> indices = {3, 0, 3};
  std::vector<float> out(9);
  embedding(ctx, Tensor(weight.data(), DType::F32, {4, 3}),
            Tensor(indices.data(), DType::I64, {3}),
            Tensor(out.data(), DType::F32, {3, 3}));
  CHECK(out == std::vector<float>{30, 31, 32, 0, 1, 2, 30, 31, 32});
  std::vector<int32_t> small = {2, 1};
  std::vector<float> pair(6);
  embedding(ctx, Tensor(weight.data(), DType::F32, {4, 3}),
            Tensor(small.data(), DType::I32, {1, 2}),
            Tensor(pair.data(), DType::F32, {1, 2, 3}));
  CHECK(pair == std::vector<float>{20, 21, 22, 10, 11, 12});
}

TEST_CASE("embeddingGrad sums the rows of repeated indices, not padding") {
  // Rows of grad: lookup i has (i+1, 10*(i+1)); lookups 0 and 2 hit row 3,
  // lookup 1 row 0, lookup 3 row 1 (the padding row).
  std::vector<float> grad = {1, 10, 2, 20, 3, 30, 4, 40};
  std::vector<int64_t> indices = {3, 0, 3, 1};
  for (int threads : {1, 2}) {
    Context ctx(threads);
    std::vector<float> out(8, -1);
    embeddingGrad(ctx, Tensor(grad.data(), DType::F32, {2, 2, 2}),
                  Tensor(indices.data(), DType::I64, {2, 2}),
                  Tensor(out.data(), DType::F32, {4, 2}), /*paddingIdx=*/1);
    CHECK(out == std::vector<float>{2, 20, 0, 0, 0, 0, 1 + 3, 10 + 30});
  }
}

TEST_CASE("an embedding index out of range is an error naming it") {
  Context ctx(1);
  std::vector<float> weight(12), out(6);
  Tensor table(weight.data(), DType::F32, {4, 3});
  std::vector<int64_t> tooLarge = {1, 4};
  CHECK_THROWS_WITH(embedding(ctx, table,
                              Tensor(tooLarge.data(), DType::I64, {2}),
                              Tensor(out.data(), DType::F32, {2, 3})),
                    Catch::Contains("4") && Catch::Contains("[0, 4)"));
  std::vector<int32_t> negative = {-1, 0};
  CHECK_THROWS_AS(embedding(ctx, table,
                            Tensor(negative.data(), DType::I32, {2}),
                            Tensor(out.data(), DType::F32, {2, 3})),
                  Error);
}

namespace {

/// Layer norm of `in` viewed as [rows, size] with the biased variance, in
/// f64; `weight` and `bias` may be null.
std::vector<double> naiveLayerNorm(const std::vector<float> &in, int size,
                                   double eps, const float *weight,
                                   const float *bias) {
  std::vector<double> out(in.size());
  for (size_t row = 0; row < in.size() / size; ++row) {
    const float *x = in.data() + row * size;
    double mean = 0, variance = 0;
    for (int i = 0; i < size; ++i)
      mean += x[i] / double(size);
    for (int i = 0; i < size; ++i)
      variance += (x[i] - mean) * (x[i] - mean) / size;
    for (int i = 0; i < size; ++i)
      out[row * size + i] = (x[i] - mean) / std::sqrt(variance + eps) *
                                (weight ? weight[i] : 1.0) +
                            (bias ? bias[i] : 0.0);
  }
  return out;
}

} // namespace

TEST_CASE("layer norm uses the biased variance") {
  Context ctx(1);
  std::vector<float> in = {1, 2, 3, 4, -1, 0, 5, 10};
  std::vector<float> weight = {1, 2, 0.5f, -1}, bias = {0, 1, 0, 2}, out(8);
  layerNorm(ctx, Tensor(in.data(), DType::F32, {2, 4}),
            Tensor(weight.data(), DType::F32, {4}),
            Tensor(bias.data(), DType::F32, {4}),
            Tensor(out.data(), DType::F32, {2, 4}), 1, 1e-5);
  std::vector<double> expected =
      naiveLayerNorm(in, 4, 1e-5, weight.data(), bias.data());
  // Row 0: mean 2.5, variance 1.25.
  CHECK(expected[0] == Approx(-1.5 / std::sqrt(1.25 + 1e-5)));
  for (size_t i = 0; i < out.size(); ++i)
    CHECK(out[i] == Approx(expected[i]).margin(1e-5));
}

TEST_CASE("layer norm over enough rows to be threaded") {
  Context ctx(2);
  const int rows = 700, size = 64;
  std::vector<float> in(rows * size), out(rows * size);
  for (int i = 0; i < rows * size; ++i)
    in[i] = float((i * 31) % 97) * 0.1f + float(i / size);
  layerNorm(ctx, Tensor(in.data(), DType::F32, {rows, size}), Tensor(),
            Tensor(), Tensor(out.data(), DType::F32, {rows, size}), 1, 1e-5);
  std::vector<double> expected =
      naiveLayerNorm(in, size, 1e-5, nullptr, nullptr);
  for (size_t i = 0; i < out.size(); ++i)
    REQUIRE(out[i] == Approx(expected[i]).margin(1e-5));
}

TEST_CASE("layer norm over two trailing dims without weight or bias") {
  Context ctx(1);
  std::vector<float> in = {1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 6}, out(12);
  layerNorm(ctx, Tensor(in.data(), DType::F32, {2, 2, 3}), Tensor(), Tensor(),
            Tensor(out.data(), DType::F32, {2, 2, 3}), 2, 1e-5);
  std::vector<double> expected = naiveLayerNorm(in, 6, 1e-5, nullptr, nullptr);
  for (size_t i = 0; i < out.size(); ++i)
    CHECK(out[i] == Approx(expected[i]).margin(1e-5));
}

namespace {

/// The gradients of naiveLayerNorm (the formulas of PyTorch's
/// native_layer_norm_backward), in f64: the input's [rows, size], then
/// the weight's and the bias's [size].
struct NaiveLayerNormGrads {
  std::vector<double> input, weight, bias;
};

NaiveLayerNormGrads naiveLayerNormGrad(const std::vector<float> &grad,
                                       const std::vector<float> &in, int size,
                                       double eps, const float *weight) {
  NaiveLayerNormGrads grads{std::vector<double>(in.size()),
                            std::vector<double>(size),
                            std::vector<double>(size)};
  for (size_t row = 0; row < in.size() / size; ++row) {
    const float *x = in.data() + row * size, *g = grad.data() + row * size;
    double mean = 0, variance = 0;
    for (int i = 0; i < size; ++i)
      mean += x[i] / double(size);
    for (int i = 0; i < size; ++i)
      variance += (x[i] - mean) * (x[i] - mean) / size;
    double rstd = 1 / std::sqrt(variance + eps);
    std::vector<double> xhat(size), d(size);
    double meanD = 0, meanDXhat = 0;
    for (int i = 0; i < size; ++i) {
      xhat[i] = (x[i] - mean) * rstd;
      d[i] = g[i] * (weight ? weight[i] : 1.0);
      meanD += d[i] / size;
      meanDXhat += d[i] * xhat[i] / size;
      grads.weight[i] += g[i] * xhat[i];
      grads.bias[i] += g[i];
    }
    for (int i = 0; i < size; ++i)
      grads.input[row * size + i] = rstd * (d[i] - meanD - xhat[i] * meanDXhat);
  }
  return grads;
}

/// Values in [-2, 3) that differ from row to row.
std::vector<float> spreadValues(int count, int seed) {
  std::vector<float> values(count);
  for (int i = 0; i < count; ++i)
    values[i] = float((i * 37 + seed * 11) % 101) * 0.05f - 2 + float(i % 7);
  return values;
}

} // namespace

TEST_CASE("layer norm gradients: the input's per row, weight and bias summed "
          "over the rows") {
  for (int threads : {1, 2}) {
    Context ctx(threads);
    // 300 rows: threaded over rows and over columns.
    const int rows = 300, size = 40;
    std::vector<float> in = spreadValues(rows * size, 1);
    std::vector<float> grad = spreadValues(rows * size, 2);
    std::vector<float> weight = spreadValues(size, 3);
    std::vector<float> gradInput(rows * size), gradWeight(size), gradBias(size);
    layerNormGrad(ctx, Tensor(grad.data(), DType::F32, {rows, size}),
                  Tensor(in.data(), DType::F32, {rows, size}),
                  Tensor(weight.data(), DType::F32, {size}), Tensor(),
                  Tensor(gradInput.data(), DType::F32, {rows, size}),
                  Tensor(gradWeight.data(), DType::F32, {size}),
                  Tensor(gradBias.data(), DType::F32, {size}), 1, 1e-5);
    NaiveLayerNormGrads expected =
        naiveLayerNormGrad(grad, in, size, 1e-5, weight.data());
    for (int i = 0; i < rows * size; ++i)
      REQUIRE(gradInput[i] == Approx(expected.input[i]).margin(1e-4));
    for (int i = 0; i < size; ++i) {
      REQUIRE(gradWeight[i] == Approx(expected.weight[i]).epsilon(1e-5));
      REQUIRE(gradBias[i] == Approx(expected.bias[i]).epsilon(1e-5));
    }
  }
}

TEST_CASE("layer norm gradient over two dims without weight, nothing else "
          "asked") {
  Context ctx(1);
  std::vector<float> in = {1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 6};
  std::vector<float> grad = {1, -1, 2, 0, 0.5f, 3, -2, 1, 0, 4, 1, 1};
  std::vector<float> gradInput(12);
  layerNormGrad(ctx, Tensor(grad.data(), DType::F32, {2, 2, 3}),
                Tensor(in.data(), DType::F32, {2, 2, 3}), Tensor(), Tensor(),
                Tensor(gradInput.data(), DType::F32, {2, 2, 3}), Tensor(),
                Tensor(), 2, 1e-5);
  NaiveLayerNormGrads expected = naiveLayerNormGrad(grad, in, 6, 1e-5, nullptr);
  for (int i = 0; i < 12; ++i)
    CHECK(gradInput[i] == Approx(expected.input[i]).margin(1e-5));
}

TEST_CASE("RMS norm gradients: the input's per row, the weight's summed over "
          "the rows") {
  // PyTorch's autograd of weight * x * rsqrt(mean(x^2) + eps), by hand in
  // f64: with r = rsqrt(mean(x^2) + eps) and d = grad * weight,
  // x' = r * d - x * r^3 * mean(d * x), weight' = sum(grad * x * r).
  for (int threads : {1, 2}) {
    Context ctx(threads);
    const int rows = 300, size = 40;
    const double eps = 1e-6;
    std::vector<float> in = spreadValues(rows * size, 4);
    std::vector<float> grad = spreadValues(rows * size, 5);
    std::vector<float> weight = spreadValues(size, 6);
    std::vector<float> gradInput(rows * size), gradWeight(size);
    rmsNormGrad(ctx, Tensor(grad.data(), DType::F32, {rows, size}),
                Tensor(in.data(), DType::F32, {rows, size}),
                Tensor(weight.data(), DType::F32, {size}), Tensor(),
                Tensor(gradInput.data(), DType::F32, {rows, size}),
                Tensor(gradWeight.data(), DType::F32, {size}), eps);
    std::vector<double> expectedWeight(size);
    for (int row = 0; row < rows; ++row) {
      const float *x = in.data() + row * size, *g = grad.data() + row * size;
      double squares = 0, dx = 0;
      for (int i = 0; i < size; ++i) {
        squares += double(x[i]) * x[i];
        dx += double(g[i]) * weight[i] * x[i];
      }
      double r = 1 / std::sqrt(squares / size + eps);
      for (int i = 0; i < size; ++i) {
        double expected = r * g[i] * weight[i] - x[i] * r * r * r * dx / size;
        REQUIRE(gradInput[row * size + i] == Approx(expected).margin(1e-4));
        expectedWeight[i] += double(g[i]) * x[i] * r;
      }
    }
    for (int i = 0; i < size; ++i)
      REQUIRE(gradWeight[i] == Approx(expectedWeight[i]).epsilon(1e-5));
  }
}

namespace {

/// A norm's input dtype and a narrower float that it holds exactly: the
/// dtype of the out into which the compiler folds a rounding cast, and of
/// the grad whose widening cast it folds into the gradients.
const std::pair<DType, DType> kNarrowings[] = {{DType::F32, DType::BF16},
                                               {DType::F32, DType::F16},
                                               {DType::F64, DType::F32},
                                               {DType::F64, DType::BF16}};

/// Bytes for `count` elements of `dtype`, of a pattern (0x5a) that no
/// kernel writes here: an element left unwritten fails a bitwise
/// comparison.
std::vector<uint8_t> unwritten(DType dtype, int64_t count) {
  return std::vector<uint8_t>(count * getSize(dtype), 0x5a);
}

/// `values` rounded to `dtype` by the cast kernel.
std::vector<uint8_t> castBytes(Context &ctx, DType dtype,
                               std::vector<float> values) {
  int64_t count = values.size();
  std::vector<uint8_t> bytes = unwritten(dtype, count);
  cast(ctx, Tensor(values.data(), DType::F32, {count}),
       Tensor(bytes.data(), dtype, {count}));
  return bytes;
}

/// spreadValues(count, seed) rounded to `dtype` by the cast kernel.
std::vector<uint8_t> spreadBytes(Context &ctx, DType dtype, int count,
                                 int seed) {
  return castBytes(ctx, dtype, spreadValues(count, seed));
}

/// `bytes` as a tensor of `dtype` and `shape`.
Tensor view(std::vector<uint8_t> &bytes, DType dtype, Shape shape) {
  return Tensor(bytes.data(), dtype, shape);
}

} // namespace

TEST_CASE("layer norm and RMS norm into a narrower out give the bits of the "
          "norm then a cast") {
  Context ctx(2);
  // Rows of 70, not a multiple of any vector width, with weight and bias.
  const int count = 5 * 3 * 70, size = 70;
  const Shape shape = {5, 3, size};
  for (auto [dtype, narrow] : kNarrowings)
    for (bool rms : {false, true}) {
      INFO((rms ? "rmsNorm " : "layerNorm ")
           << getName(dtype) << " into " << getName(narrow));
      std::vector<uint8_t> input = spreadBytes(ctx, dtype, count, 1);
      std::vector<uint8_t> weight = spreadBytes(ctx, dtype, size, 2);
      std::vector<uint8_t> bias = spreadBytes(ctx, dtype, size, 3);
      auto norm = [&](std::vector<uint8_t> &out, DType outType) {
        Tensor x = view(input, dtype, shape), w = view(weight, dtype, {size});
        if (rms)
          rmsNorm(ctx, x, w, view(out, outType, shape), 1e-6);
        else
          layerNorm(ctx, x, w, view(bias, dtype, {size}),
                    view(out, outType, shape), 1, 1e-5);
      };
      std::vector<uint8_t> wide = unwritten(dtype, count);
      std::vector<uint8_t> want = unwritten(narrow, count);
      std::vector<uint8_t> got = unwritten(narrow, count);
      norm(wide, dtype);
      cast(ctx, view(wide, dtype, shape), view(want, narrow, shape));
      norm(got, narrow);
      CHECK(got == want);

      // Some element of the cast rounds up in magnitude, which truncation
      // never does: a kernel that truncated would fail the check above.
      std::vector<double> exact(count), rounded(count);
      cast(ctx, view(wide, dtype, shape),
           Tensor(exact.data(), DType::F64, shape));
      cast(ctx, view(want, narrow, shape),
           Tensor(rounded.data(), DType::F64, shape));
      int roundedUp = 0;
      for (int i = 0; i < count; ++i)
        roundedUp += std::fabs(rounded[i]) > std::fabs(exact[i]);
      CHECK(roundedUp > 0);
    }
}

TEST_CASE("layer norm and RMS norm gradients of a narrower grad give the bits "
          "of the grad widened first") {
  Context ctx(2);
  const int count = 5 * 3 * 70, size = 70;
  const Shape shape = {5, 3, size};
  for (auto [dtype, narrow] : kNarrowings)
    for (bool rms : {false, true}) {
      INFO((rms ? "rmsNormGrad " : "layerNormGrad ")
           << getName(dtype) << " of " << getName(narrow) << " grad");
      std::vector<uint8_t> input = spreadBytes(ctx, dtype, count, 4);
      std::vector<uint8_t> weight = spreadBytes(ctx, dtype, size, 5);
      std::vector<uint8_t> grad = spreadBytes(ctx, narrow, count, 6);
      std::vector<uint8_t> widened = unwritten(dtype, count);
      cast(ctx, view(grad, narrow, shape), view(widened, dtype, shape));
      // gradInput, gradWeight and gradBias (which the RMS norm leaves
      // unwritten).
      auto gradients = [&](const Tensor &g) {
        std::vector<std::vector<uint8_t>> out = {unwritten(dtype, count),
                                                 unwritten(dtype, size),
                                                 unwritten(dtype, size)};
        Tensor x = view(input, dtype, shape), w = view(weight, dtype, {size});
        Tensor gradInput = view(out[0], dtype, shape);
        Tensor gradWeight = view(out[1], dtype, {size});
        if (rms)
          rmsNormGrad(ctx, g, x, w, Tensor(), gradInput, gradWeight, 1e-6);
        else
          layerNormGrad(ctx, g, x, w, Tensor(), gradInput, gradWeight,
                        view(out[2], dtype, {size}), 1, 1e-5);
        return out;
      };
      std::vector<std::vector<uint8_t>> got =
          gradients(view(grad, narrow, shape));
      std::vector<std::vector<uint8_t>> want =
          gradients(view(widened, dtype, shape));
      CHECK(got[0] == want[0]);
      CHECK(got[1] == want[1]);
      CHECK(got[2] == want[2]);
      CHECK(want[0] != unwritten(dtype, count));
    }
}

TEST_CASE("layer norm and RMS norm gradients plus an addend give the bits of "
          "the gradients then binary Add, in place too") {
  Context ctx(2);
  const int count = 5 * 3 * 70, size = 70;
  const Shape shape = {5, 3, size};
  std::mt19937 generator(31);
  std::uniform_real_distribution<float> uniform(-4, 4);
  // Each float dtype with a grad of its own, then with a narrower grad.
  std::vector<std::pair<DType, DType>> pairs = {{DType::F32, DType::F32},
                                                {DType::F64, DType::F64},
                                                {DType::BF16, DType::BF16},
                                                {DType::F16, DType::F16}};
  pairs.insert(pairs.end(), std::begin(kNarrowings), std::end(kNarrowings));
  for (auto [dtype, gradType] : pairs)
    for (bool rms : {false, true}) {
      INFO((rms ? "rmsNormGrad " : "layerNormGrad ")
           << getName(dtype) << " of " << getName(gradType) << " grad");
      std::vector<uint8_t> input = spreadBytes(ctx, dtype, count, 7);
      std::vector<uint8_t> weight = spreadBytes(ctx, dtype, size, 8);
      std::vector<uint8_t> grad = spreadBytes(ctx, gradType, count, 9);
      std::vector<float> values(count);
      for (float &value : values)
        value = uniform(generator);
      std::vector<uint8_t> addend = castBytes(ctx, dtype, values);
      enum class Addend { None, Separate, InPlace };
      // gradInput, gradWeight and gradBias (which the RMS norm leaves
      // unwritten); in place, gradInput holds the addend before the call.
      auto gradients = [&](Addend mode) {
        std::vector<std::vector<uint8_t>> out = {
            mode == Addend::InPlace ? addend : unwritten(dtype, count),
            unwritten(dtype, size), unwritten(dtype, size)};
        Tensor x = view(input, dtype, shape), w = view(weight, dtype, {size});
        Tensor g = view(grad, gradType, shape);
        Tensor gradInput = view(out[0], dtype, shape);
        Tensor gradWeight = view(out[1], dtype, {size});
        Tensor plus = mode == Addend::None      ? Tensor()
                      : mode == Addend::InPlace ? gradInput
                                                : view(addend, dtype, shape);
        if (rms)
          rmsNormGrad(ctx, g, x, w, plus, gradInput, gradWeight, 1e-6);
        else
          layerNormGrad(ctx, g, x, w, plus, gradInput, gradWeight,
                        view(out[2], dtype, {size}), 1, 1e-5);
        return out;
      };
      std::vector<std::vector<uint8_t>> want = gradients(Addend::None);
      std::vector<uint8_t> sum = unwritten(dtype, count);
      binary(ctx, BinaryKind::Add, view(want[0], dtype, shape),
             view(addend, dtype, shape), view(sum, dtype, shape));
      CHECK(sum != want[0]);
      for (Addend mode : {Addend::Separate, Addend::InPlace}) {
        INFO((mode == Addend::InPlace ? "in place" : "a separate addend"));
        std::vector<std::vector<uint8_t>> got = gradients(mode);
        CHECK(got[0] == sum);
        CHECK(got[1] == want[1]);
        CHECK(got[2] == want[2]);
      }
    }
}

TEST_CASE("the norm gradients refuse an addend of another dtype than the "
          "input's") {
  Context ctx(1);
  const Shape shape = {2, 8};
  std::vector<uint8_t> f32 = spreadBytes(ctx, DType::F32, 16, 1);
  std::vector<uint8_t> bf16 = spreadBytes(ctx, DType::BF16, 16, 2);
  std::vector<uint8_t> f64 = spreadBytes(ctx, DType::F64, 16, 3);
  std::vector<uint8_t> gradInput = unwritten(DType::F32, 16);
  CHECK_THROWS_WITH(
      layerNormGrad(
          ctx, view(f32, DType::F32, shape), view(f32, DType::F32, shape),
          Tensor(), view(f64, DType::F64, shape),
          view(gradInput, DType::F32, shape), Tensor(), Tensor(), 1, 1e-5),
      "the CPU kernel 'layerNormGrad' does not support F64 tensors");
  // Nor a narrower one that the input's dtype holds exactly.
  CHECK_THROWS_WITH(rmsNormGrad(ctx, view(f32, DType::F32, shape),
                                view(f32, DType::F32, shape), Tensor(),
                                view(bf16, DType::BF16, shape),
                                view(gradInput, DType::F32, shape), Tensor(),
                                1e-6),
                    Catch::Contains("'rmsNormGrad' does not support BF16"));
  CHECK(gradInput == unwritten(DType::F32, 16));
}

TEST_CASE("the norms refuse an out or a grad that their input's dtype does "
          "not hold exactly") {
  Context ctx(1);
  const Shape shape = {2, 8};
  std::vector<uint8_t> bf16 = unwritten(DType::BF16, 16);
  std::vector<uint8_t> f16 = unwritten(DType::F16, 16);
  std::vector<uint8_t> f32 = unwritten(DType::F32, 16);
  std::vector<uint8_t> f64 = unwritten(DType::F64, 16);
  std::vector<uint8_t> i32 = unwritten(DType::I32, 16);
  std::vector<uint8_t> gradInput = unwritten(DType::F64, 16);
  // A wider out: the folded cast only narrows.
  CHECK_THROWS_WITH(layerNorm(ctx, view(bf16, DType::BF16, shape), Tensor(),
                              Tensor(), view(f32, DType::F32, shape), 1, 1e-5),
                    "the CPU kernel 'layerNorm' does not support out F32 with "
                    "input BF16 (out must be the input's dtype or a narrower "
                    "float)");
  // Neither of bf16 and f16 holds the other.
  CHECK_THROWS_WITH(rmsNorm(ctx, view(bf16, DType::BF16, shape), Tensor(),
                            view(f16, DType::F16, shape), 1e-6),
                    Catch::Contains("'rmsNorm' does not support out F16 with "
                                    "input BF16"));
  CHECK_THROWS_WITH(layerNorm(ctx, view(f32, DType::F32, shape), Tensor(),
                              Tensor(), view(i32, DType::I32, shape), 1, 1e-5),
                    Catch::Contains("'layerNorm' does not support out I32 "
                                    "with input F32"));
  CHECK_THROWS_WITH(
      layerNormGrad(ctx, view(f64, DType::F64, shape),
                    view(f32, DType::F32, shape), Tensor(), Tensor(),
                    view(gradInput, DType::F32, shape), Tensor(), Tensor(), 1,
                    1e-5),
      Catch::Contains("'layerNormGrad' does not support grad F64 with input "
                      "F32"));
  CHECK_THROWS_WITH(
      rmsNormGrad(ctx, view(f16, DType::F16, shape),
                  view(bf16, DType::BF16, shape), Tensor(), Tensor(),
                  view(gradInput, DType::BF16, shape), Tensor(), 1e-6),
      Catch::Contains("'rmsNormGrad' does not support grad F16 with input "
                      "BF16"));
}

namespace {

/// softmax of `line` (log-softmax with `log`), in f64.
std::vector<double> naiveSoftmax(const std::vector<double> &line, bool log) {
  double max = -std::numeric_limits<double>::infinity(), sum = 0;
  for (double x : line)
    max = std::max(max, x);
  for (double x : line)
    sum += std::exp(x - max);
  std::vector<double> out;
  for (double x : line)
    out.push_back(log ? x - max - std::log(sum) : std::exp(x - max) / sum);
  return out;
}

/// Checks softmax and log-softmax of `in` [outer, length, inner] along dim
/// 1 against naiveSoftmax, line by line.
void checkSoftmax(const std::vector<float> &in, int64_t outer, int64_t length,
                  int64_t inner) {
  Context ctx(2);
  int64_t dim = 1;
  Shape shape{outer, length, inner};
  std::vector<float> input = in, soft(in.size()), logSoft(in.size());
  softmax(ctx, Tensor(input.data(), DType::F32, shape),
          Tensor(soft.data(), DType::F32, shape), dim);
  logSoftmax(ctx, Tensor(input.data(), DType::F32, shape),
             Tensor(logSoft.data(), DType::F32, shape), dim);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      std::vector<double> line;
      for (int64_t i = 0; i < length; ++i)
        line.push_back(in[(o * length + i) * inner + j]);
      std::vector<double> p = naiveSoftmax(line, false);
      std::vector<double> logP = naiveSoftmax(line, true);
      double total = 0;
      for (int64_t i = 0; i < length; ++i) {
        int64_t index = (o * length + i) * inner + j;
        REQUIRE(soft[index] == Approx(p[i]).margin(1e-6));
        REQUIRE(logSoft[index] == Approx(logP[i]).margin(1e-5));
        total += soft[index];
      }
      REQUIRE(total == Approx(1.0).epsilon(1e-5));
    }
}

} // namespace

TEST_CASE("softmax and log-softmax of contiguous rows") {
  std::vector<float> in;
  for (int i = 0; i < 3 * 7; ++i)
    in.push_back(float(i % 5) - 2.5f);
  checkSoftmax(in, 3, 7, 1);
}

TEST_CASE("softmax and log-softmax along a strided dim") {
  // inner = 70 spans two column blocks.
  std::vector<float> in;
  for (int i = 0; i < 2 * 5 * 70; ++i)
    in.push_back(float((i * 13) % 17) * 0.3f - 2);
  checkSoftmax(in, 2, 5, 70);
}

TEST_CASE("softmax over enough rows to be threaded") {
  std::vector<float> in;
  for (int i = 0; i < 512 * 100; ++i)
    in.push_back(float((i * 7) % 23) * 0.5f - 5);
  checkSoftmax(in, 512, 100, 1);
}

TEST_CASE("softmax is stable for large values") {
  std::vector<float> in = {1000, 1001, 1002, -1000, 0, 1000};
  checkSoftmax(in, 2, 3, 1);
  Context ctx(1);
  std::vector<float> out(3);
  softmax(ctx, Tensor(in.data(), DType::F32, {3}),
          Tensor(out.data(), DType::F32, {3}), 0);
  double sum = 1 + std::exp(-1.0) + std::exp(-2.0);
  CHECK(out[2] == Approx(1 / sum));
  CHECK(out[0] == Approx(std::exp(-2.0) / sum));
}

namespace {

/// -log_softmax(row)[label] in f64.
double naiveLoss(const std::vector<float> &logits, int64_t row, int64_t classes,
                 int64_t label) {
  std::vector<double> line(logits.begin() + row * classes,
                           logits.begin() + (row + 1) * classes);
  return -naiveSoftmax(line, true)[label];
}

} // namespace

TEST_CASE("cross entropy with ignored targets") {
  Context ctx(1);
  const int64_t rows = 3, classes = 4, ignore = -100;
  std::vector<float> logits = {1, 2, 3, 4, 0, 0, 0, 0, -1, 0.5f, 2, -3};
  std::vector<int64_t> target = {1, ignore, 3};
  Tensor x(logits.data(), DType::F32, {rows, classes}),
      t(target.data(), DType::I64, {rows});
  double l0 = naiveLoss(logits, 0, classes, 1);
  double l2 = naiveLoss(logits, 2, classes, 3);

  std::vector<float> each(3);
  crossEntropy(ctx, x, t, Tensor(each.data(), DType::F32, {rows}), ignore,
               Reduction::None);
  CHECK(each[0] == Approx(l0));
  CHECK(each[1] == 0);
  CHECK(each[2] == Approx(l2));
  float total;
  crossEntropy(ctx, x, t, Tensor(&total, DType::F32, {}), ignore,
               Reduction::Sum);
  CHECK(total == Approx(l0 + l2));
  float mean;
  crossEntropy(ctx, x, t, Tensor(&mean, DType::F32, {}), ignore,
               Reduction::Mean);
  CHECK(mean == Approx((l0 + l2) / 2));

  std::vector<int64_t> allIgnored = {ignore, ignore, ignore};
  crossEntropy(ctx, x, Tensor(allIgnored.data(), DType::I64, {rows}),
               Tensor(&mean, DType::F32, {}), ignore, Reduction::Mean);
  CHECK(std::isnan(mean));

  std::vector<int64_t> outOfRange = {0, 4, 1};
  CHECK_THROWS_WITH(
      crossEntropy(ctx, x, Tensor(outOfRange.data(), DType::I64, {rows}),
                   Tensor(&mean, DType::F32, {}), ignore, Reduction::Mean),
      Catch::Contains("4") && Catch::Contains("[0, 4)"));
}

TEST_CASE("cross entropy's gradient is the softmax minus the one-hot row, "
          "weighted") {
  Context ctx(2);
  // Rows long enough to be shared among threads; one ignored target.
  const int64_t rows = 6, classes = 40000, ignore = -100;
  std::vector<float> logits(rows * classes);
  for (size_t i = 0; i < logits.size(); ++i)
    logits[i] = float((i * 7919) % 1000) / 125.0f - 4.0f;
  std::vector<int32_t> target = {3, ignore, 0, 39999, 17, 12345};
  std::vector<float> weight = {0.5f, 0.0f, 1.0f, -2.0f, 0.25f, 1.0f},
                     grad(logits.size());
  crossEntropyGrad(ctx, Tensor(logits.data(), DType::F32, {rows, classes}),
                   Tensor(target.data(), DType::I32, {rows}),
                   Tensor(weight.data(), DType::F32, {rows}),
                   Tensor(grad.data(), DType::F32, {rows, classes}));
  for (int64_t row = 0; row < rows; ++row) {
    std::vector<double> line(logits.begin() + row * classes,
                             logits.begin() + (row + 1) * classes);
    std::vector<double> softmax = naiveSoftmax(line, false);
    for (int64_t c = 0; c < classes; ++c) {
      double expected =
          (softmax[c] - (c == target[row] ? 1.0 : 0.0)) * weight[row];
      INFO("row " << row << " class " << c);
      REQUIRE(grad[row * classes + c] == Approx(expected).margin(1e-9));
    }
  }
}

TEST_CASE("cross entropy's gradient is zeros in an ignored target's row, "
          "whatever its logits and weight") {
  // slapo-fold-logits-slice turns the rows a slice dropped into ignored
  // ones: their gradient must be the zeros the slice's gradient joined.
  const int64_t rows = 3, classes = 5;
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> logits = {1,   2,    3, 4, 5,             //
                               0,   -inf, 7, 8, std::nanf(""), //
                               inf, 1,    1, 1, 1};
  for (DType indexType : {DType::I64, DType::I32}) {
    std::vector<int64_t> target64 = {2, -100, 7};
    std::vector<int32_t> target32 = {2, -100, 7};
    void *target = indexType == DType::I64
                       ? static_cast<void *>(target64.data())
                       : static_cast<void *>(target32.data());
    std::vector<float> weight = {1, 0.5f, 2}, grad(rows * classes, -1);
    Context ctx(2);
    crossEntropyGrad(ctx, Tensor(logits.data(), DType::F32, {rows, classes}),
                     Tensor(target, indexType, {rows}),
                     Tensor(weight.data(), DType::F32, {rows}),
                     Tensor(grad.data(), DType::F32, {rows, classes}));
    for (int64_t row = 1; row < rows; ++row)
      for (int64_t c = 0; c < classes; ++c) {
        INFO("row " << row << " class " << c);
        float value = grad[row * classes + c];
        REQUIRE(value == 0);
        REQUIRE_FALSE(std::signbit(value));
      }
    REQUIRE(grad[2] < 0); // the kept row's target class
  }
}

TEST_CASE("flash attention: keys masked by a -inf bias add nothing, even "
          "whole tiles of them before any other key") {
  // One query against 130 keys (tiles of 64: [0, 64), [64, 128), [128,
  // 130)); every score is 0 but the bias masks keys 0 to 127 with -inf,
  // so the first two tiles hold only -inf scores: the softmax averages
  // the values of keys 128 and 129.
  const int64_t keys = 130;
  std::vector<float> query = {1}, key(keys, 0), value(keys, 100), bias(keys);
  for (int64_t s = 0; s < keys; ++s)
    bias[s] = s < 128 ? -std::numeric_limits<float>::infinity() : 0;
  value[128] = 1;
  value[129] = 3;
  std::vector<float> out(1), logsumexp(1);
  Context ctx(1);
  flashAttention(ctx, Tensor(query.data(), DType::F32, {1, 1, 1, 1}),
                 Tensor(key.data(), DType::F32, {1, 1, keys, 1}),
                 Tensor(value.data(), DType::F32, {1, 1, keys, 1}), Tensor(),
                 Tensor(bias.data(), DType::F32, {1, 1, 1, keys}),
                 Tensor(out.data(), DType::F32, {1, 1, 1, 1}),
                 Tensor(logsumexp.data(), DType::F32, {1, 1, 1}), 1.0, 0.0,
                 AttentionLayout::Bhsd);
  CHECK(out[0] == Approx(2));
  CHECK(logsumexp[0] == Approx(std::log(2.0)));
}

namespace {

/// `count` values drawn uniformly from [-1, 1).
std::vector<float> uniformValues(std::mt19937 &generator, int64_t count) {
  std::uniform_real_distribution<float> uniform(-1, 1);
  std::vector<float> values(count);
  for (float &value : values)
    value = uniform(generator);
  return values;
}

/// Checks a kernel's f32 result against an f64 reference within `margin`.
void checkNear(const char *name, const std::vector<float> &got,
               const std::vector<double> &want, double margin) {
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(name << " element " << i);
    REQUIRE(got[i] == Approx(want[i]).margin(margin));
  }
}

/// Row `row` of hidden [rows, features] x weight [classes, features]^T
/// (+ bias, when not empty), in f64.
std::vector<double> naiveLogitRow(const std::vector<float> &hidden,
                                  const std::vector<float> &weight,
                                  const std::vector<float> &bias,
                                  int64_t features, int64_t row) {
  int64_t classes = int64_t(weight.size()) / features;
  std::vector<double> line(classes);
  for (int64_t c = 0; c < classes; ++c) {
    line[c] = bias.empty() ? 0.0 : bias[c];
    for (int64_t f = 0; f < features; ++f)
      line[c] += double(hidden[row * features + f]) * weight[c * features + f];
  }
  return line;
}

/// A workspace of `bytes` for an LM head kernel, as the memory plan gives
/// it: bytes left by other ops (all ones, NaN as f32 and f64), which the
/// kernel must not read before it writes them.
std::vector<int8_t> usedWorkspace(int64_t bytes) {
  return std::vector<int8_t>(bytes, int8_t(-1));
}

/// `count` uniform values rounded to bf16: as bf16, and as the f32 values
/// they are in `rounded`.
std::vector<BFloat16> bf16Values(std::mt19937 &generator, int64_t count,
                                 std::vector<float> &rounded) {
  std::vector<BFloat16> halves(count);
  rounded = uniformValues(generator, count);
  for (int64_t i = 0; i < count; ++i) {
    halves[i] = BFloat16::fromFloat(rounded[i]);
    rounded[i] = halves[i].toFloat();
  }
  return halves;
}

/// Row `row`'s log-sum-exp (into `logSumExp`) of hidden x weight^T + bias
/// in f64, and its softmax times `rowGrad`: the row of G that
/// linearLogSumExpGrad multiplies.
std::vector<double> naiveScaledSoftmaxRow(const std::vector<float> &hidden,
                                          const std::vector<float> &weight,
                                          const std::vector<float> &bias,
                                          int64_t features, int64_t row,
                                          double rowGrad, double &logSumExp) {
  std::vector<double> line = naiveLogitRow(hidden, weight, bias, features, row);
  double sum = 0;
  for (double logit : line)
    sum += std::exp(logit);
  logSumExp = std::log(sum);
  std::vector<double> scaled = naiveSoftmax(line, false);
  for (double &g : scaled)
    g *= rowGrad;
  return scaled;
}

/// Checks the products of an LM head kernel's bf16-rounded gradient against
/// f64 sums of the same rounded gradient, within 1e-4 of the largest
/// element: the kernel's are f32 sums, and a rounding that the f32 and f64
/// gradients straddle flips rarely and by little.
void checkBf16Products(const char *name, const std::vector<float> &got,
                       const std::vector<double> &wanted) {
  double error = 0, largest = 0;
  for (size_t i = 0; i < wanted.size(); ++i) {
    error = std::max(error, std::abs(got[i] - wanted[i]));
    largest = std::max(largest, std::abs(wanted[i]));
  }
  INFO(name << ": largest error " << error << " of " << largest);
  CHECK(error <= largest * 1e-4);
}

} // namespace

TEST_CASE(
    "an LM head's chunks: Liger's size and at least 2^23 logits in at most "
    "16 chunks") {
  // GPT-2 small at batch 16 x 1024: Liger's 66 chunks of 249 rows, the
  // logits' bound 167 rows; the chunk count's bound decides, 16 of 1024.
  CHECK(getLinearCrossEntropyChunkRows(16384, 768, 50257) == 1024);
  // The CPU bench's head: Liger's 128 rows, 2^23 logits decide: 2 x 1024.
  CHECK(getLinearCrossEntropyChunkRows(2048, 512, 8192) == 1024);
  // Few classes per feature: Liger's 8 chunks decide.
  CHECK(getLinearCrossEntropyChunkRows(1000000, 4096, 32000) == 125000);
  // The rows split evenly: 2^23 logits are 2046 rows, so 2 chunks of 1051.
  CHECK(getLinearCrossEntropyChunkRows(2101, 4, 4100) == 1051);
  CHECK(getLinearCrossEntropyChunkRows(5, 4, 10) == 5);
}

TEST_CASE("linear cross entropy in chunks of rows equals the unfused loss "
          "and gradients") {
  // 2101 rows of 4 features against 4100 classes: more logits than two
  // chunks' least (2^23 each), so two chunks, of 1051 and 1050 rows; the
  // second adds its weight gradient to the first's inside the GEMM.
  const int64_t rows = 2101, features = 4, classes = 4100, ignore = -100;
  std::mt19937 generator(20);
  std::uniform_int_distribution<int64_t> label(0, classes - 1);
  std::vector<float> hidden = uniformValues(generator, rows * features),
                     weight = uniformValues(generator, classes * features),
                     bias = uniformValues(generator, classes);
  std::vector<int32_t> target(rows);
  for (int32_t &t : target)
    t = int32_t(label(generator));
  target[1] = target[20] = ignore;

  for (bool withBias : {true, false})
    for (Reduction reduction : {Reduction::Mean, Reduction::Sum})
      for (int threads : {1, 2}) {
        INFO("bias " << withBias << ", mean " << (reduction == Reduction::Mean)
                     << ", threads " << threads);
        // The unfused computation in f64: logits, softmax, loss, gradient
        // of the logits, then the products.
        std::vector<double> gradLogits(rows * classes);
        double total = 0;
        int counted = 0;
        for (int64_t r = 0; r < rows; ++r)
          counted += target[r] != ignore;
        double scale = reduction == Reduction::Mean ? 1.0 / counted : 1.0;
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<double> line = naiveLogitRow(
              hidden, weight, withBias ? bias : std::vector<float>(), features,
              r);
          std::vector<double> softmax = naiveSoftmax(line, false);
          bool ignored = target[r] == ignore;
          if (!ignored)
            total -= std::log(softmax[target[r]]);
          for (int64_t c = 0; c < classes; ++c)
            gradLogits[r * classes + c] =
                ignored ? 0.0
                        : (softmax[c] - (c == target[r] ? 1.0 : 0.0)) * scale;
        }
        double expectedLoss = total * scale;

        Context ctx(threads);
        float loss = -1;
        std::vector<float> gradHidden(rows * features, -1),
            gradWeight(classes * features, -1), gradBias(classes, -1);
        // The caller's workspace, sized by the layout the compiler plans
        // with: 1051-row chunks of 4100 f32 logits (17236400 bytes,
        // 17236416 with alignment), the bias gradient's f64 sums (32800,
        // 32832 aligned) and 8 bytes for each row and one more (16816,
        // 16832 aligned); one size for any thread count.
        int64_t bytes = getLinearCrossEntropyWorkspace(
                            LinearCrossEntropyKernel::CrossEntropy, rows,
                            features, classes, withBias, 4)
                            .bytes;
        CHECK(bytes ==
              (withBias ? 17236416 + 32832 + 16832 : 17236416 + 16832));
        std::vector<int8_t> workspace = usedWorkspace(bytes);
        linearCrossEntropy(
            ctx, Tensor(hidden.data(), DType::F32, {rows, features}),
            Tensor(weight.data(), DType::F32, {classes, features}),
            Tensor(target.data(), DType::I32, {rows}),
            withBias ? Tensor(bias.data(), DType::F32, {classes}) : Tensor(),
            Tensor(&loss, DType::F32, {}),
            Tensor(gradHidden.data(), DType::F32, {rows, features}),
            Tensor(gradWeight.data(), DType::F32, {classes, features}),
            withBias ? Tensor(gradBias.data(), DType::F32, {classes})
                     : Tensor(),
            Tensor(workspace.data(), DType::I8, {bytes}), ignore, reduction);
        CHECK(loss == Approx(expectedLoss).epsilon(1e-6));
        std::vector<double> wantHidden(rows * features),
            wantWeight(classes * features), wantBias(classes);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < classes; ++c) {
            double g = gradLogits[r * classes + c];
            wantBias[c] += g;
            for (int64_t f = 0; f < features; ++f) {
              wantHidden[r * features + f] += g * weight[c * features + f];
              wantWeight[c * features + f] += g * hidden[r * features + f];
            }
          }
        // Sums of 2101 rows in f32, in another order on each ISA: within a
        // few units in the last place of the gradient's largest element
        // (Sum's gradients are 2099 times Mean's; AVX-512's differ from
        // f64 by up to 2e-6 at 1.3).
        auto checkSums = [](const char *name, const std::vector<float> &got,
                            const std::vector<double> &want) {
          double largest = 0;
          for (double value : want)
            largest = std::max(largest, std::abs(value));
          checkNear(name, got, want, 4e-6 * largest);
        };
        checkSums("grad_hidden", gradHidden, wantHidden);
        checkSums("grad_weight", gradWeight, wantWeight);
        if (withBias)
          checkSums("grad_bias", gradBias, wantBias);
        if (!withBias)
          CHECK(gradBias == std::vector<float>(classes, -1));
      }
}

TEST_CASE("a bf16 linear cross entropy multiplies in bf16 and keeps its "
          "loss and gradients f32") {
  // precision="bf16"'s LM head: bf16 hidden states and weight, two chunks
  // (1051 and 1050 rows of 4100 logits). The logits and loss are f32 sums
  // of exact products; the two gradient products take the logit gradient
  // rounded to bf16, as torch.autocast's backward does.
  const int64_t rows = 2101, features = 4, classes = 4100, ignore = -100;
  std::mt19937 generator(22);
  std::vector<float> hidden, weight, bias = uniformValues(generator, classes);
  std::vector<BFloat16> hidden16 =
                            bf16Values(generator, rows * features, hidden),
                        weight16 =
                            bf16Values(generator, classes * features, weight);
  std::uniform_int_distribution<int64_t> label(0, classes - 1);
  std::vector<int64_t> target(rows);
  for (int64_t &t : target)
    t = label(generator);
  target[7] = ignore;

  int64_t counted = rows - 1;
  double expectedLoss = 0;
  std::vector<double> wantHidden(rows * features),
      wantWeight(classes * features), wantBias(classes);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> softmax =
        naiveSoftmax(naiveLogitRow(hidden, weight, bias, features, r), false);
    bool ignored = target[r] == ignore;
    if (!ignored)
      expectedLoss -= std::log(softmax[target[r]]) / counted;
    for (int64_t c = 0; c < classes; ++c) {
      double g = ignored ? 0.0
                         : (softmax[c] - (c == target[r] ? 1.0 : 0.0)) /
                               double(counted);
      wantBias[c] += g;
      double rounded = BFloat16::fromFloat(float(g)).toFloat();
      for (int64_t f = 0; f < features; ++f) {
        wantHidden[r * features + f] += rounded * weight[c * features + f];
        wantWeight[c * features + f] += rounded * hidden[r * features + f];
      }
    }
  }

  // The workspace adds the bf16 gradient of a chunk (1051 x 4100 x 2
  // bytes, 8618240 aligned) to the f32 one's parts.
  int64_t bytes =
      getLinearCrossEntropyWorkspace(LinearCrossEntropyKernel::CrossEntropy,
                                     rows, features, classes, true, 2)
          .bytes;
  CHECK(bytes == 17236416 + 8618240 + 32832 + 16832);
  std::vector<int8_t> workspace = usedWorkspace(bytes);
  float loss = -1;
  std::vector<float> gradHidden(rows * features, -1),
      gradWeight(classes * features, -1), gradBias(classes, -1);
  Context ctx(2);
  linearCrossEntropy(
      ctx, Tensor(hidden16.data(), DType::BF16, {rows, features}),
      Tensor(weight16.data(), DType::BF16, {classes, features}),
      Tensor(target.data(), DType::I64, {rows}),
      Tensor(bias.data(), DType::F32, {classes}), Tensor(&loss, DType::F32, {}),
      Tensor(gradHidden.data(), DType::F32, {rows, features}),
      Tensor(gradWeight.data(), DType::F32, {classes, features}),
      Tensor(gradBias.data(), DType::F32, {classes}),
      Tensor(workspace.data(), DType::I8, {bytes}), ignore, Reduction::Mean);
  CHECK(loss == Approx(expectedLoss).epsilon(1e-6));
  checkNear("grad_bias", gradBias, wantBias, 1e-6);
  // Without the rounding the label's term alone would be off by up to 2^-9
  // of the largest element.
  checkBf16Products("grad_hidden", gradHidden, wantHidden);
  checkBf16Products("grad_weight", gradWeight, wantWeight);

  // bf16 gradients are refused: the kernel's results are f32.
  std::vector<BFloat16> gradHidden16(rows * features);
  CHECK_THROWS_WITH(
      linearCrossEntropy(
          ctx, Tensor(hidden16.data(), DType::BF16, {rows, features}),
          Tensor(weight16.data(), DType::BF16, {classes, features}),
          Tensor(target.data(), DType::I64, {rows}), Tensor(),
          Tensor(&loss, DType::F32, {}),
          Tensor(gradHidden16.data(), DType::BF16, {rows, features}),
          Tensor(gradWeight.data(), DType::F32, {classes, features}), Tensor(),
          Tensor(workspace.data(), DType::I8, {bytes}), ignore,
          Reduction::Mean),
      Catch::Contains("linearCrossEntropy") && Catch::Contains("BF16"));
}

TEST_CASE("linear log-sum-exp and its gradient in chunks of rows equal the "
          "unfused ones") {
  // linearCrossEntropy's chunks (1051 and 1050 rows of 4100 logits); the
  // gradient of each row's log-sum-exp weighs its softmax by the row's
  // gradient.
  const int64_t rows = 2101, features = 4, classes = 4100;
  std::mt19937 generator(21);
  std::vector<float> hidden = uniformValues(generator, rows * features),
                     weight = uniformValues(generator, classes * features),
                     bias = uniformValues(generator, classes),
                     grad = uniformValues(generator, rows);
  for (bool withBias : {true, false})
    for (int threads : {1, 2}) {
      INFO("bias " << withBias << ", threads " << threads);
      std::vector<double> wantLogSumExp(rows), wantHidden(rows * features),
          wantWeight(classes * features), wantBias(classes);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<double> scaled = naiveScaledSoftmaxRow(
            hidden, weight, withBias ? bias : std::vector<float>(), features, r,
            grad[r], wantLogSumExp[r]);
        for (int64_t c = 0; c < classes; ++c) {
          double g = scaled[c];
          wantBias[c] += g;
          for (int64_t f = 0; f < features; ++f) {
            wantHidden[r * features + f] += g * weight[c * features + f];
            wantWeight[c * features + f] += g * hidden[r * features + f];
          }
        }
      }

      Context ctx(threads);
      Tensor hiddenTensor(hidden.data(), DType::F32, {rows, features});
      Tensor weightTensor(weight.data(), DType::F32, {classes, features});
      Tensor biasTensor =
          withBias ? Tensor(bias.data(), DType::F32, {classes}) : Tensor();
      std::vector<float> logSumExp(rows, -1);
      Tensor logSumExpTensor(logSumExp.data(), DType::F32, {rows});
      // The forward's workspace is a chunk of logits (1051 x 4100 f32,
      // 17236416 bytes aligned); the gradient's adds, with bias, its f64
      // sums (32832 aligned).
      int64_t forwardBytes =
          getLinearCrossEntropyWorkspace(LinearCrossEntropyKernel::LogSumExp,
                                         rows, features, classes, withBias, 4)
              .bytes;
      int64_t backwardBytes = getLinearCrossEntropyWorkspace(
                                  LinearCrossEntropyKernel::LogSumExpGrad, rows,
                                  features, classes, withBias, 4)
                                  .bytes;
      CHECK(forwardBytes == 17236416);
      CHECK(backwardBytes == (withBias ? 17236416 + 32832 : 17236416));
      std::vector<int8_t> forwardWorkspace = usedWorkspace(forwardBytes),
                          backwardWorkspace = usedWorkspace(backwardBytes);
      linearLogSumExp(
          ctx, hiddenTensor, weightTensor, biasTensor, logSumExpTensor,
          Tensor(forwardWorkspace.data(), DType::I8, {forwardBytes}));
      std::vector<float> gradHidden(rows * features, -1),
          gradWeight(classes * features, -1), gradBias(classes, -1);
      linearLogSumExpGrad(
          ctx, hiddenTensor, weightTensor, biasTensor, logSumExpTensor,
          Tensor(grad.data(), DType::F32, {rows}),
          Tensor(gradHidden.data(), DType::F32, {rows, features}),
          Tensor(gradWeight.data(), DType::F32, {classes, features}),
          withBias ? Tensor(gradBias.data(), DType::F32, {classes}) : Tensor(),
          Tensor(backwardWorkspace.data(), DType::I8, {backwardBytes}));
      checkNear("logsumexp", logSumExp, wantLogSumExp, 1e-5);
      checkNear("grad_hidden", gradHidden, wantHidden, 1e-6);
      checkNear("grad_weight", gradWeight, wantWeight, 1e-6);
      if (withBias)
        checkNear("grad_bias", gradBias, wantBias, 1e-6);
      else
        CHECK(gradBias == std::vector<float>(classes, -1));
    }
}

TEST_CASE("a bf16 linear log-sum-exp multiplies in bf16 and its gradient's "
          "products take the scaled softmax rounded to bf16") {
  // The vocabulary-parallel LM head under precision="bf16": bf16 hidden
  // states and weight in linearCrossEntropy's two chunks; the log-sum-exp
  // and the gradients f32. The gradients' products are checked against the
  // f32 kernel's on the same (rounded) values, whose G is not rounded:
  // apart by at most G's rounding (2^-8 of each |G| x |operand| term; the
  // f32 and f64 G straddle roundings too often for a tighter check against
  // f64), and apart somewhere.
  const int64_t rows = 2101, features = 4, classes = 4100;
  std::mt19937 generator(23);
  std::vector<float> hidden, weight, bias = uniformValues(generator, classes),
                                     grad = uniformValues(generator, rows);
  std::vector<BFloat16> hidden16 =
                            bf16Values(generator, rows * features, hidden),
                        weight16 =
                            bf16Values(generator, classes * features, weight);
  std::vector<double> wantLogSumExp(rows), wantBias(classes),
      roundingHidden(rows * features), roundingWeight(classes * features);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> scaled = naiveScaledSoftmaxRow(
        hidden, weight, bias, features, r, grad[r], wantLogSumExp[r]);
    for (int64_t c = 0; c < classes; ++c) {
      double g = scaled[c];
      wantBias[c] += g;
      double rounding = std::abs(g) / 256;
      for (int64_t f = 0; f < features; ++f) {
        roundingHidden[r * features + f] +=
            rounding * std::abs(weight[c * features + f]);
        roundingWeight[c * features + f] +=
            rounding * std::abs(hidden[r * features + f]);
      }
    }
  }

  Context ctx(2);
  Tensor biasTensor(bias.data(), DType::F32, {classes});
  Tensor gradTensor(grad.data(), DType::F32, {rows});
  // dtype's log-sum-exp and gradients of the same values.
  struct Results {
    std::vector<float> logSumExp, gradHidden, gradWeight, gradBias;
  };
  auto run = [&](DType dtype) {
    bool bf16 = dtype == DType::BF16;
    Tensor hiddenTensor(bf16 ? (void *)hidden16.data() : hidden.data(), dtype,
                        {rows, features});
    Tensor weightTensor(bf16 ? (void *)weight16.data() : weight.data(), dtype,
                        {classes, features});
    Results results{std::vector<float>(rows, -1),
                    std::vector<float>(rows * features, -1),
                    std::vector<float>(classes * features, -1),
                    std::vector<float>(classes, -1)};
    Tensor logSumExpTensor(results.logSumExp.data(), DType::F32, {rows});
    int64_t forwardBytes = getLinearCrossEntropyWorkspace(
                               LinearCrossEntropyKernel::LogSumExp, rows,
                               features, classes, true, int64_t(getSize(dtype)))
                               .bytes;
    int64_t backwardBytes =
        getLinearCrossEntropyWorkspace(LinearCrossEntropyKernel::LogSumExpGrad,
                                       rows, features, classes, true,
                                       int64_t(getSize(dtype)))
            .bytes;
    // The bf16 gradient's workspace adds a chunk of bf16 gradient (1051 x
    // 4100 x 2 bytes, 8618240 aligned) to the f32 chunk and the bias's f64
    // sums.
    CHECK(forwardBytes == 17236416);
    CHECK(backwardBytes == 17236416 + (bf16 ? 8618240 : 0) + 32832);
    std::vector<int8_t> forwardWorkspace = usedWorkspace(forwardBytes),
                        backwardWorkspace = usedWorkspace(backwardBytes);
    linearLogSumExp(ctx, hiddenTensor, weightTensor, biasTensor,
                    logSumExpTensor,
                    Tensor(forwardWorkspace.data(), DType::I8, {forwardBytes}));
    linearLogSumExpGrad(
        ctx, hiddenTensor, weightTensor, biasTensor, logSumExpTensor,
        gradTensor,
        Tensor(results.gradHidden.data(), DType::F32, {rows, features}),
        Tensor(results.gradWeight.data(), DType::F32, {classes, features}),
        Tensor(results.gradBias.data(), DType::F32, {classes}),
        Tensor(backwardWorkspace.data(), DType::I8, {backwardBytes}));
    return results;
  };
  Results bf16 = run(DType::BF16), f32 = run(DType::F32);
  checkNear("logsumexp", bf16.logSumExp, wantLogSumExp, 1e-5);
  checkNear("grad_bias", bf16.gradBias, wantBias, 1e-6);
  auto checkRounded = [](const char *name, const std::vector<float> &got,
                         const std::vector<float> &unrounded,
                         const std::vector<double> &rounding) {
    double largest = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      INFO(name << "[" << i << "]: " << got[i] << " vs " << unrounded[i]);
      CHECK(std::abs(got[i] - unrounded[i]) <= rounding[i] * 1.01 + 1e-9);
      largest = std::max(largest, double(std::abs(got[i] - unrounded[i])));
    }
    INFO(name << ": no element differs from the unrounded G's products");
    CHECK(largest > 0);
  };
  checkRounded("grad_hidden", bf16.gradHidden, f32.gradHidden, roundingHidden);
  checkRounded("grad_weight", bf16.gradWeight, f32.gradWeight, roundingWeight);
}

TEST_CASE("linear cross entropy: a target out of range is an error naming "
          "it") {
  Context ctx(1);
  std::vector<float> hidden(2 * 3), weight(4 * 3), gradHidden(6),
      gradWeight(12);
  std::vector<int64_t> target = {0, 4};
  float loss;
  std::vector<int8_t> workspace(4096);
  CHECK_THROWS_WITH(
      linearCrossEntropy(ctx, Tensor(hidden.data(), DType::F32, {2, 3}),
                         Tensor(weight.data(), DType::F32, {4, 3}),
                         Tensor(target.data(), DType::I64, {2}), Tensor(),
                         Tensor(&loss, DType::F32, {}),
                         Tensor(gradHidden.data(), DType::F32, {2, 3}),
                         Tensor(gradWeight.data(), DType::F32, {4, 3}),
                         Tensor(), Tensor(workspace.data(), DType::I8, {4096}),
                         -100, Reduction::Mean),
      Catch::Contains("4") && Catch::Contains("[0, 4)"));
}

TEST_CASE("the LM head kernels refuse a workspace smaller than their "
          "layout's before writing anything") {
  // 2 rows of 4 features against 4 classes: one chunk of 2 x 4 f32 logits
  // (64 bytes aligned) and, for the loss, 8 bytes for each row and one more
  // (64 aligned).
  Context ctx(1);
  std::vector<float> hidden(2 * 4, 0.5f), weight(4 * 4, 0.25f),
      gradHidden(8, -1), gradWeight(16, -1), logSumExp(2, -1), grad(2, 1);
  std::vector<int64_t> target = {0, 3};
  float loss = -1;
  std::vector<int8_t> workspace(127);
  Tensor h(hidden.data(), DType::F32, {2, 4}),
      w(weight.data(), DType::F32, {4, 4}),
      gh(gradHidden.data(), DType::F32, {2, 4}),
      gw(gradWeight.data(), DType::F32, {4, 4}),
      lse(logSumExp.data(), DType::F32, {2});
  CHECK_THROWS_WITH(
      linearCrossEntropy(ctx, h, w, Tensor(target.data(), DType::I64, {2}),
                         Tensor(), Tensor(&loss, DType::F32, {}), gh, gw,
                         Tensor(), Tensor(workspace.data(), DType::I8, {127}),
                         -100, Reduction::Mean),
      Catch::Contains("linearCrossEntropy") &&
          Catch::Contains("needs a workspace of 128 bytes, given 127"));
  CHECK_THROWS_WITH(linearLogSumExp(ctx, h, w, Tensor(), lse, Tensor()),
                    Catch::Contains("linearLogSumExp") &&
                        Catch::Contains("of 64 bytes, given 0"));
  CHECK_THROWS_WITH(
      linearLogSumExpGrad(ctx, h, w, Tensor(), lse,
                          Tensor(grad.data(), DType::F32, {2}), gh, gw,
                          Tensor(), Tensor(workspace.data(), DType::I8, {63})),
      Catch::Contains("linearLogSumExpGrad") &&
          Catch::Contains("of 64 bytes, given 63"));
  CHECK(loss == -1);
  CHECK(gradHidden == std::vector<float>(8, -1));
  CHECK(gradWeight == std::vector<float>(16, -1));
  CHECK(logSumExp == std::vector<float>(2, -1));
}

namespace {

/// An attention with dropout, in f64 from the formulas: the [B, H, T, S]
/// scores and probabilities written out, each element's mask drawn with
/// keepsElement at its index in the whole tensor (batch rows after
/// `dpRank`'s predecessors', heads after `tpRank`'s, the tp ranks holding
/// `heads` each), and the softmax's gradient sum(P * dP) per row.
struct NaiveAttention {
  std::vector<double> out, logsumexp, gradQuery, gradKey, gradValue;
};
NaiveAttention naiveDroppedAttention(
    int64_t batch, int64_t heads, int64_t rows, int64_t keys, int64_t depth,
    int64_t width, const std::vector<float> &q, const std::vector<float> &k,
    const std::vector<float> &v, const std::vector<float> &grad, bool causal,
    const std::vector<float> &padding, double scale, double maskedScore,
    double p, uint64_t key, int64_t dpRank, int64_t tp, int64_t tpRank) {
  NaiveAttention r;
  r.out.assign(batch * heads * rows * width, 0);
  r.logsumexp.assign(batch * heads * rows, 0);
  r.gradQuery.assign(q.size(), 0);
  r.gradKey.assign(k.size(), 0);
  r.gradValue.assign(v.size(), 0);
  uint64_t threshold = dropoutThreshold(p);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      int64_t head = b * heads + h;
      int64_t wholeHead =
          (dpRank * batch + b) * heads * tp + tpRank * heads + h;
      for (int64_t t = 0; t < rows; ++t) {
        std::vector<double> score(keys), prob(keys), factor(keys), dP(keys);
        std::vector<bool> masked(keys);
        for (int64_t s = 0; s < keys; ++s) {
          double dot = 0;
          for (int64_t d = 0; d < depth; ++d)
            dot += double(q[(head * rows + t) * depth + d]) *
                   k[(head * keys + s) * depth + d];
          masked[s] = causal && s > t;
          score[s] = masked[s] ? maskedScore : dot * scale;
          if (!padding.empty())
            score[s] += padding[b * keys + s];
          uint64_t counter = uint64_t((wholeHead * rows + t) * keys + s);
          factor[s] = keepsElement(key, counter, threshold) ? 1 / (1 - p) : 0.0;
        }
        double maximum = *std::max_element(score.begin(), score.end());
        double total = 0;
        for (int64_t s = 0; s < keys; ++s)
          total += std::exp(score[s] - maximum);
        r.logsumexp[head * rows + t] = maximum + std::log(total);
        double rowDot = 0;
        for (int64_t s = 0; s < keys; ++s) {
          prob[s] = std::exp(score[s] - maximum) / total;
          double dDropped = 0;
          for (int64_t e = 0; e < width; ++e) {
            double vse = v[(head * keys + s) * width + e];
            double dO = grad[(head * rows + t) * width + e];
            r.out[(head * rows + t) * width + e] += prob[s] * factor[s] * vse;
            r.gradValue[(head * keys + s) * width + e] +=
                prob[s] * factor[s] * dO;
            dDropped += dO * vse;
          }
          dP[s] = dDropped * factor[s];
          rowDot += prob[s] * dP[s];
        }
        for (int64_t s = 0; s < keys; ++s) {
          double dScore = masked[s] ? 0 : prob[s] * (dP[s] - rowDot) * scale;
          for (int64_t d = 0; d < depth; ++d) {
            r.gradQuery[(head * rows + t) * depth + d] +=
                dScore * k[(head * keys + s) * depth + d];
            r.gradKey[(head * keys + s) * depth + d] +=
                dScore * q[(head * rows + t) * depth + d];
          }
        }
      }
    }
  return r;
}

} // namespace

TEST_CASE("flash attention with dropout draws dropout()'s mask per element "
          "and its gradient draws it again") {
  // Odd sizes over several key tiles (64); a causal keep mask or a padding
  // bias; one rank, or data-parallel rank 1 holding tp rank 1's heads of a
  // split. 1 and 2 threads draw the same.
  struct Case {
    const char *name;
    int64_t batch, heads, rows, keys;
    bool causal, padded;
    DropoutPlacement placement;
  };
  const Case cases[] = {
      {"causal, one rank", 2, 3, 67, 67, true, false, {}},
      {"padding, dp rank 1 of tp rank 1's heads",
       2,
       3,
       19,
       70,
       false,
       true,
       {/*dpRank=*/1, {/*axis=*/1, /*chunks=*/1, /*tp=*/2}, /*tpRank=*/1}},
  };
  const int64_t depth = 5, width = 7;
  const double p = 0.3, maskedScore = -3.4028234663852886e38;
  const DropoutKey dropoutKeyOf = {/*seed=*/11, /*step=*/3, /*stream=*/2,
                                   /*rankStream=*/0};
  for (const Case &c : cases)
    for (int threads : {1, 2}) {
      INFO(c.name << ", " << threads << " threads");
      std::mt19937 generator(5);
      int64_t heads = c.batch * c.heads;
      std::vector<float> q = uniformValues(generator, heads * c.rows * depth);
      std::vector<float> k = uniformValues(generator, heads * c.keys * depth);
      std::vector<float> v = uniformValues(generator, heads * c.keys * width);
      std::vector<float> grad =
          uniformValues(generator, heads * c.rows * width);
      std::vector<float> padding;
      if (c.padded) {
        padding.assign(c.batch * c.keys, 0);
        for (int64_t s = c.keys - 9; s < c.keys; ++s)
          padding[c.keys + s] = float(maskedScore); // batch row 1's last 9
      }
      auto keepData = std::make_unique<bool[]>(c.rows * c.keys);
      for (int64_t i = 0; i < c.rows * c.keys; ++i)
        keepData[i] = i % c.keys <= i / c.keys;
      double scale = 1 / std::sqrt(double(depth));
      AttentionDropout dropout = {p, dropoutKeyOf, c.placement};

      Shape qShape = {c.batch, c.heads, c.rows, depth};
      Shape kShape = {c.batch, c.heads, c.keys, depth};
      Shape vShape = {c.batch, c.heads, c.keys, width};
      Shape oShape = {c.batch, c.heads, c.rows, width};
      Tensor keep =
          c.causal ? Tensor(keepData.get(), DType::Bool, {1, 1, c.rows, c.keys})
                   : Tensor();
      Tensor bias =
          c.padded ? Tensor(padding.data(), DType::F32, {c.batch, 1, 1, c.keys})
                   : Tensor();
      std::vector<float> out(heads * c.rows * width), lse(heads * c.rows);
      std::vector<float> gq(q.size()), gk(k.size()), gv(v.size());
      Context ctx(threads);
      double masked = c.causal ? maskedScore : 0.0;
      flashAttention(ctx, Tensor(q.data(), DType::F32, qShape),
                     Tensor(k.data(), DType::F32, kShape),
                     Tensor(v.data(), DType::F32, vShape), keep, bias,
                     Tensor(out.data(), DType::F32, oShape),
                     Tensor(lse.data(), DType::F32, {c.batch, c.heads, c.rows}),
                     scale, masked, AttentionLayout::Bhsd, dropout);
      flashAttentionGrad(
          ctx, Tensor(q.data(), DType::F32, qShape),
          Tensor(k.data(), DType::F32, kShape),
          Tensor(v.data(), DType::F32, vShape), keep, bias,
          Tensor(out.data(), DType::F32, oShape),
          Tensor(lse.data(), DType::F32, {c.batch, c.heads, c.rows}),
          Tensor(grad.data(), DType::F32, oShape),
          Tensor(gq.data(), DType::F32, qShape),
          Tensor(gk.data(), DType::F32, kShape),
          Tensor(gv.data(), DType::F32, vShape), scale, masked,
          AttentionLayout::Bhsd, dropout);

      const DropoutPlacement &at = c.placement;
      NaiveAttention want = naiveDroppedAttention(
          c.batch, c.heads, c.rows, c.keys, depth, width, q, k, v, grad,
          c.causal, padding, scale, masked, p,
          dropoutKey(dropoutKeyOf.seed, dropoutKeyOf.step, dropoutKeyOf.stream,
                     dropoutKeyOf.rankStream),
          at.dpRank, at.shard.tp, at.tpRank);
      checkNear("out", out, want.out, 1e-5);
      checkNear("logsumexp", lse, want.logsumexp, 1e-5);
      checkNear("grad query", gq, want.gradQuery, 1e-5);
      checkNear("grad key", gk, want.gradKey, 1e-5);
      checkNear("grad value", gv, want.gradValue, 1e-5);
    }
}

TEST_CASE("a bf16 flash attention keeps its log-sum-exp in f32, from which "
          "its gradient recomputes the probabilities") {
  // Scores near 0 over 70 keys (two tiles): log-sum-exps near log(70) =
  // 4.2, which bf16 would round by up to 2^-6, scaling every probability
  // the gradient recomputes from them by up to e^(2^-6) (1.6%). In f32 the
  // log-sum-exp is the f64 one's to f32 precision, and the bf16 result and
  // gradients are off by about their own rounding.
  const int64_t batch = 2, heads = 2, rows = 19, keys = 70, depth = 5,
                width = 7;
  std::mt19937 generator(7);
  auto bf16Values = [&](int64_t count, std::vector<float> &rounded) {
    std::vector<float> values = uniformValues(generator, count);
    std::vector<BFloat16> halves(count);
    rounded.resize(count);
    for (int64_t i = 0; i < count; ++i) {
      halves[i] = BFloat16::fromFloat(values[i]);
      rounded[i] = halves[i].toFloat();
    }
    return halves;
  };
  int64_t count = batch * heads;
  std::vector<float> q, k, v, grad;
  std::vector<BFloat16> q16 = bf16Values(count * rows * depth, q),
                        k16 = bf16Values(count * keys * depth, k),
                        v16 = bf16Values(count * keys * width, v),
                        grad16 = bf16Values(count * rows * width, grad);
  Shape qShape = {batch, heads, rows, depth},
        kShape = {batch, heads, keys, depth};
  Shape vShape = {batch, heads, keys, width},
        oShape = {batch, heads, rows, width};
  Shape lseShape = {batch, heads, rows};
  std::vector<BFloat16> out(count * rows * width), gq(q.size()), gk(k.size()),
      gv(v.size());
  std::vector<float> lse(count * rows);
  double scale = 1 / std::sqrt(double(depth));
  Tensor query(q16.data(), DType::BF16, qShape),
      key(k16.data(), DType::BF16, kShape),
      value(v16.data(), DType::BF16, vShape),
      result(out.data(), DType::BF16, oShape),
      logsumexp(lse.data(), DType::F32, lseShape);
  Context ctx(2);
  flashAttention(ctx, query, key, value, Tensor(), Tensor(), result, logsumexp,
                 scale, 0.0, AttentionLayout::Bhsd);
  flashAttentionGrad(ctx, query, key, value, Tensor(), Tensor(), result,
                     logsumexp, Tensor(grad16.data(), DType::BF16, oShape),
                     Tensor(gq.data(), DType::BF16, qShape),
                     Tensor(gk.data(), DType::BF16, kShape),
                     Tensor(gv.data(), DType::BF16, vShape), scale, 0.0,
                     AttentionLayout::Bhsd);

  // No dropout: p = 0 keeps every element with factor 1.
  NaiveAttention want = naiveDroppedAttention(
      batch, heads, rows, keys, depth, width, q, k, v, grad,
      /*causal=*/false, /*padding=*/{}, scale, 0.0, /*p=*/0, /*key=*/0,
      /*dpRank=*/0, /*tp=*/1, /*tpRank=*/0);
  checkNear("logsumexp", lse, want.logsumexp, 1e-5);
  // Against the largest element, as the gradients' elements cancel: a
  // bf16 rounding (2^-8 of it at most), the backward's row sums reading
  // the rounded result adding less (measured: 2.8e-3 with the f32
  // log-sum-exp, 8e-3 to 1.1e-2 with it rounded to bf16).
  auto checkRounded = [](const char *name, const std::vector<BFloat16> &got,
                         const std::vector<double> &wanted) {
    double error = 0, largest = 0;
    for (size_t i = 0; i < wanted.size(); ++i) {
      error = std::max(error, std::abs(got[i].toFloat() - wanted[i]));
      largest = std::max(largest, std::abs(wanted[i]));
    }
    INFO(name << ": largest error " << error << " of " << largest);
    CHECK(error <= largest / 256);
  };
  checkRounded("out", out, want.out);
  checkRounded("grad query", gq, want.gradQuery);
  checkRounded("grad key", gk, want.gradKey);
  checkRounded("grad value", gv, want.gradValue);

  // A log-sum-exp in the operands' bf16 is refused, by both passes.
  std::vector<BFloat16> lse16(lse.size());
  Tensor rounded(lse16.data(), DType::BF16, lseShape);
  CHECK_THROWS_WITH(flashAttention(ctx, query, key, value, Tensor(), Tensor(),
                                   result, rounded, scale, 0.0,
                                   AttentionLayout::Bhsd),
                    "'flashAttention' keeps the log-sum-exp of BF16 attention "
                    "in F32, not BF16");
  CHECK_THROWS_WITH(
      flashAttentionGrad(ctx, query, key, value, Tensor(), Tensor(), result,
                         rounded, Tensor(grad16.data(), DType::BF16, oShape),
                         Tensor(gq.data(), DType::BF16, qShape),
                         Tensor(gk.data(), DType::BF16, kShape),
                         Tensor(gv.data(), DType::BF16, vShape), scale, 0.0,
                         AttentionLayout::Bhsd),
      Catch::Contains("'flashAttentionGrad' keeps the log-sum-exp"));
}

namespace {

/// `from` [batch, outer, inner, width] of `elementSize`-byte elements with
/// dims 1 and 2 swapped: [batch, inner, outer, width]. [B, H, T, D] to [B,
/// T, H, D] and back.
std::vector<uint8_t> swapMiddleDims(const std::vector<uint8_t> &from,
                                    int64_t batch, int64_t outer, int64_t inner,
                                    int64_t width, size_t elementSize) {
  std::vector<uint8_t> to(from.size());
  size_t row = width * elementSize;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        std::copy_n(from.begin() + ((b * outer + o) * inner + i) * row, row,
                    to.begin() + ((b * inner + i) * outer + o) * row);
  return to;
}

/// `values` rounded to `dtype` (F32 or BF16), as its bytes.
std::vector<uint8_t> toBytes(DType dtype, const std::vector<float> &values) {
  size_t size = getSize(dtype);
  std::vector<uint8_t> bytes(values.size() * size);
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t *at = bytes.data() + i * size;
    BFloat16 rounded = BFloat16::fromFloat(values[i]);
    if (dtype == DType::BF16)
      std::memcpy(at, &rounded.bits, size);
    else
      std::memcpy(at, &values[i], size);
  }
  return bytes;
}

/// An attention's operands and what its forward and backward wrote, as
/// bytes in one layout.
struct AttentionBytes {
  std::vector<uint8_t> query, key, value, grad;
  std::vector<uint8_t> out, logsumexp, gradQuery, gradKey, gradValue;
};

/// `bytes` bytes of `fill`: results filled so that an element left
/// unwritten differs.
std::vector<uint8_t> filledBytes(size_t bytes, uint8_t fill) {
  return std::vector<uint8_t>(bytes, fill);
}

/// The masks of the bit-for-bit attention tests below: a causal keep mask,
/// a padding bias, and a causal mask with dropout.
struct AttentionMasks {
  const char *name;
  bool causal, padded;
  double p;
};
const AttentionMasks kAttentionMasks[] = {
    {"causal", true, false, 0},
    {"padding bias", false, true, 0},
    {"causal with dropout", true, false, 0.25}};

/// What the kernels take of one of kAttentionMasks for `dtype` operands of
/// `batch` x `rows` rows against `keys` keys of head size `depth`: the keep
/// mask [1, 1, T, S], the padding bias [B, 1, 1, S] (masking batch row 1's
/// last 9 keys with bf16's lowest value, Hugging Face's padding score for
/// bf16, which f32 holds exactly: an f32 run on a bf16 attention's values
/// reads the same bias), and the scale, masked score and dropout; it holds
/// the masks' elements.
class AttentionArguments {
public:
  AttentionArguments(const AttentionMasks &masks, DType dtype, int64_t batch,
                     int64_t rows, int64_t keys, int64_t depth)
      : keepData(std::make_unique<bool[]>(rows * keys)) {
    const double kMaskedScore = -3.4028234663852886e38;
    const float kPaddingScore = BFloat16{0xff7f}.toFloat();
    for (int64_t i = 0; i < rows * keys; ++i)
      keepData[i] = i % keys <= i / keys;
    std::vector<float> padding(batch * keys, 0);
    std::fill(padding.end() - 9, padding.end(), kPaddingScore);
    biasBytes = toBytes(dtype, padding);
    if (masks.causal)
      keep = Tensor(keepData.get(), DType::Bool, {1, 1, rows, keys});
    if (masks.padded)
      bias = Tensor(biasBytes.data(), dtype, {batch, 1, 1, keys});
    scale = 1 / std::sqrt(double(depth));
    maskedScore = masks.causal ? kMaskedScore : 0.0;
    dropout = {masks.p,
               {/*seed=*/7, /*step=*/1, /*stream=*/4, /*rankStream=*/0}};
  }

  /// The forward of query, key and value in `layout` into out and
  /// logsumexp.
  void forward(Context &ctx, AttentionLayout layout, const Tensor &query,
               const Tensor &key, const Tensor &value, const Tensor &out,
               const Tensor &logsumexp) const {
    flashAttention(ctx, query, key, value, keep, bias, out, logsumexp, scale,
                   maskedScore, layout, dropout);
  }

  /// The backward of out's gradient `grad` into the gradients.
  void backward(Context &ctx, AttentionLayout layout, const Tensor &query,
                const Tensor &key, const Tensor &value, const Tensor &out,
                const Tensor &logsumexp, const Tensor &grad,
                const Tensor &gradQuery, const Tensor &gradKey,
                const Tensor &gradValue) const {
    flashAttentionGrad(ctx, query, key, value, keep, bias, out, logsumexp, grad,
                       gradQuery, gradKey, gradValue, scale, maskedScore,
                       layout, dropout);
  }

  /// The forward, then the backward.
  void run(Context &ctx, AttentionLayout layout, const Tensor &query,
           const Tensor &key, const Tensor &value, const Tensor &out,
           const Tensor &logsumexp, const Tensor &grad, const Tensor &gradQuery,
           const Tensor &gradKey, const Tensor &gradValue) const {
    forward(ctx, layout, query, key, value, out, logsumexp);
    backward(ctx, layout, query, key, value, out, logsumexp, grad, gradQuery,
             gradKey, gradValue);
  }

private:
  std::unique_ptr<bool[]> keepData;
  std::vector<uint8_t> biasBytes;
  Tensor keep, bias;
  double scale, maskedScore;
  AttentionDropout dropout;
};

/// Copies heads [fromFirst, fromFirst + count) of each of the `tokens`
/// tokens of `from` (`fromHeads` heads of `headBytes` bytes a token) to
/// heads [toFirst, toFirst + count) of `to` (`toHeads` heads a token).
void copyHeads(const std::vector<uint8_t> &from, int64_t fromHeads,
               int64_t fromFirst, std::vector<uint8_t> &to, int64_t toHeads,
               int64_t toFirst, int64_t count, int64_t tokens,
               size_t headBytes) {
  for (int64_t t = 0; t < tokens; ++t)
    std::copy_n(from.begin() + (t * fromHeads + fromFirst) * headBytes,
                count * headBytes,
                to.begin() + (t * toHeads + toFirst) * headBytes);
}

/// An attention's sizes: query [B, H, T, D] and out [B, H, T, E] against
/// key [B, Hk, S, D] and value [B, Hk, S, E], where Hk is H but under
/// grouped-query attention.
struct AttentionSizes {
  int64_t batch, heads, keyHeads, rows, keys, depth, width;
};

/// The shapes of an attention's operands stored in `layout`.
struct AttentionShapes {
  Shape query, key, value, out, logsumexp;
};
AttentionShapes getShapes(AttentionLayout layout, const AttentionSizes &s) {
  auto stored = [&](int64_t heads, int64_t length, int64_t columns) {
    return AttentionGeometry::getStoredShape(layout, s.batch, heads, length,
                                             columns);
  };
  return {stored(s.heads, s.rows, s.depth), stored(s.keyHeads, s.keys, s.depth),
          stored(s.keyHeads, s.keys, s.width), stored(s.heads, s.rows, s.width),
          Shape{s.batch, s.heads, s.rows}};
}

/// The backward of `a`'s `dtype` operands, out and log-sum-exp of `sizes`
/// in `layout` into its gradients, which start unwritten().
void runAttentionGrad(const AttentionArguments &arguments, Context &ctx,
                      AttentionLayout layout, DType dtype,
                      const AttentionSizes &sizes, AttentionBytes &a) {
  AttentionShapes shapes = getShapes(layout, sizes);
  a.gradQuery = unwritten(dtype, shapes.query.getNumElements());
  a.gradKey = unwritten(dtype, shapes.key.getNumElements());
  a.gradValue = unwritten(dtype, shapes.value.getNumElements());
  arguments.backward(
      ctx, layout, view(a.query, dtype, shapes.query),
      view(a.key, dtype, shapes.key), view(a.value, dtype, shapes.value),
      view(a.out, dtype, shapes.out),
      view(a.logsumexp, DType::F32, shapes.logsumexp),
      view(a.grad, dtype, shapes.out), view(a.gradQuery, dtype, shapes.query),
      view(a.gradKey, dtype, shapes.key),
      view(a.gradValue, dtype, shapes.value));
}

/// The forward of `a`'s operands into its out and log-sum-exp, which start
/// unwritten(), then runAttentionGrad.
void runAttention(const AttentionArguments &arguments, Context &ctx,
                  AttentionLayout layout, DType dtype,
                  const AttentionSizes &sizes, AttentionBytes &a) {
  AttentionShapes shapes = getShapes(layout, sizes);
  a.out = unwritten(dtype, shapes.out.getNumElements());
  a.logsumexp = unwritten(DType::F32, shapes.logsumexp.getNumElements());
  arguments.forward(ctx, layout, view(a.query, dtype, shapes.query),
                    view(a.key, dtype, shapes.key),
                    view(a.value, dtype, shapes.value),
                    view(a.out, dtype, shapes.out),
                    view(a.logsumexp, DType::F32, shapes.logsumexp));
  runAttentionGrad(arguments, ctx, layout, dtype, sizes, a);
}

/// A tensor of `sizes`' batch and `heads` heads of `length` rows of
/// `width` elements in `layout`, seen as [units][heads][elements]: Bhsd's
/// [B][H][S * E], Bshd's [B * S][H][E], so that its heads are copied and
/// summed alike in both layouts.
struct HeadUnits {
  int64_t units, elements;
};
HeadUnits getHeadUnits(AttentionLayout layout, const AttentionSizes &sizes,
                       int64_t length, int64_t width) {
  return layout == AttentionLayout::Bhsd
             ? HeadUnits{sizes.batch, length * width}
             : HeadUnits{sizes.batch * length, width};
}

/// A grouped key or value (`sizes`' keyHeads heads of `width` elements of
/// `elementSize` bytes) repeated to its heads as Hugging Face's repeat_kv
/// repeats it: head h is the grouped one's h / (heads / keyHeads).
std::vector<uint8_t> repeatKeyHeads(const std::vector<uint8_t> &grouped,
                                    AttentionLayout layout,
                                    const AttentionSizes &sizes, int64_t width,
                                    size_t elementSize) {
  HeadUnits at = getHeadUnits(layout, sizes, sizes.keys, width);
  int64_t group = sizes.heads / sizes.keyHeads;
  std::vector<uint8_t> repeated(grouped.size() * group);
  for (int64_t h = 0; h < sizes.heads; ++h)
    copyHeads(grouped, sizes.keyHeads, h / group, repeated, sizes.heads, h, 1,
              at.units, at.elements * elementSize);
  return repeated;
}

/// `bytes` of `dtype` (F32 or BF16) as the f32 values they hold.
std::vector<float> toFloats(DType dtype, const std::vector<uint8_t> &bytes) {
  size_t size = getSize(dtype);
  std::vector<float> values(bytes.size() / size);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint8_t *at = bytes.data() + i * size;
    if (dtype == DType::BF16) {
      BFloat16 half;
      std::memcpy(&half.bits, at, size);
      values[i] = half.toFloat();
    } else {
      std::memcpy(&values[i], at, size);
    }
  }
  return values;
}

/// The gradient of a grouped key or value from the f32 gradients
/// `perHead` of its copies repeated to every query head (repeatKeyHeads):
/// each group's summed in f32 in query-head order, then rounded to `dtype`.
std::vector<uint8_t> sumGroups(const std::vector<float> &perHead, DType dtype,
                               AttentionLayout layout,
                               const AttentionSizes &sizes, int64_t width) {
  HeadUnits at = getHeadUnits(layout, sizes, sizes.keys, width);
  int64_t group = sizes.heads / sizes.keyHeads;
  std::vector<float> sums(perHead.size() / group, 0.0f);
  for (int64_t u = 0; u < at.units; ++u)
    for (int64_t h = 0; h < sizes.heads; ++h)
      for (int64_t i = 0; i < at.elements; ++i)
        sums[(u * sizes.keyHeads + h / group) * at.elements + i] +=
            perHead[(u * sizes.heads + h) * at.elements + i];
  return toBytes(dtype, sums);
}

} // namespace

TEST_CASE("flash attention on token-major operands gives the bits of the "
          "head-major one") {
  // The Bhsd operands permuted to [B, T, H, D]: the results and gradients
  // must be the Bhsd ones permuted, bit for bit, and the log-sum-exp the
  // same. 70 rows (partial query blocks of 32 and key tiles of 64), 3
  // heads, head size 20 and value size 72 (whole and partial vectors of the
  // register-blocked sums); each of kAttentionMasks.
  const int64_t batch = 2, heads = 3, rows = 70, depth = 20, width = 72;
  const int64_t count = batch * heads * rows;
  for (DType dtype : {DType::F32, DType::BF16})
    for (const AttentionMasks &masks : kAttentionMasks) {
      INFO(getName(dtype) << " " << masks.name);
      size_t size = getSize(dtype);
      std::mt19937 generator(3);
      AttentionBytes bhsd;
      bhsd.query = toBytes(dtype, uniformValues(generator, count * depth));
      bhsd.key = toBytes(dtype, uniformValues(generator, count * depth));
      bhsd.value = toBytes(dtype, uniformValues(generator, count * width));
      bhsd.grad = toBytes(dtype, uniformValues(generator, count * width));
      AttentionArguments arguments(masks, dtype, batch, rows, rows, depth);
      const AttentionSizes sizes = {batch, heads, heads, rows,
                                    rows,  depth, width};
      Context ctx(2);
      auto toTokens = [&](const std::vector<uint8_t> &bytes, int64_t columns) {
        return swapMiddleDims(bytes, batch, heads, rows, columns, size);
      };
      runAttention(arguments, ctx, AttentionLayout::Bhsd, dtype, sizes, bhsd);
      AttentionBytes bshd;
      bshd.query = toTokens(bhsd.query, depth);
      bshd.key = toTokens(bhsd.key, depth);
      bshd.value = toTokens(bhsd.value, width);
      bshd.grad = toTokens(bhsd.grad, width);
      // The layouts do differ, and so must the results' bytes.
      REQUIRE(bshd.query != bhsd.query);
      REQUIRE(bshd.value != bhsd.value);
      runAttention(arguments, ctx, AttentionLayout::Bshd, dtype, sizes, bshd);
      CHECK(bshd.out != bhsd.out);
      CHECK(bshd.out == toTokens(bhsd.out, width));
      CHECK(bshd.logsumexp == bhsd.logsumexp);
      CHECK(bshd.gradQuery == toTokens(bhsd.gradQuery, depth));
      CHECK(bshd.gradKey == toTokens(bhsd.gradKey, depth));
      CHECK(bshd.gradValue == toTokens(bhsd.gradValue, width));
    }
}

TEST_CASE("flash attention on head windows of one packed tensor gives the "
          "bits of separate operands") {
  // GPT-2's query, key and value as head windows of its packed projection
  // [B, T, Hs, D] (headWindow), and their gradients written as windows of
  // one packed tensor: out, the log-sum-exp and the gradients must be those
  // of separate token-major operands of the same values, bit for bit, and
  // the packed gradient's heads outside the windows keep their fill. The
  // sizes of the token-major test above, one head size for all (one packed
  // tensor); each of kAttentionMasks; the windows as GPT-2's (q, k, v of 3H
  // heads), and after a head outside them in another order.
  const int64_t batch = 2, heads = 3, rows = 70, depth = 20;
  const int64_t tokens = batch * rows, count = tokens * heads;
  struct Packing {
    const char *name;
    int64_t packedHeads, query, key, value; // the windows' first heads
  };
  const Packing packings[] = {
      {"q k v", 3 * heads, 0, heads, 2 * heads},
      {"a head then v q k", 3 * heads + 1, heads + 1, 2 * heads + 1, 1}};
  const Shape shape = {batch, rows, heads, depth};
  for (DType dtype : {DType::F32, DType::BF16})
    for (const AttentionMasks &masks : kAttentionMasks)
      for (const Packing &packing : packings) {
        INFO(getName(dtype) << " " << masks.name << ", " << packing.name);
        size_t size = getSize(dtype), headBytes = depth * size;
        std::mt19937 generator(5);
        AttentionBytes separate;
        separate.query =
            toBytes(dtype, uniformValues(generator, count * depth));
        separate.key = toBytes(dtype, uniformValues(generator, count * depth));
        separate.value =
            toBytes(dtype, uniformValues(generator, count * depth));
        separate.grad = toBytes(dtype, uniformValues(generator, count * depth));
        // A window read in place of another would change the results.
        REQUIRE(separate.query != separate.key);
        REQUIRE(separate.key != separate.value);
        REQUIRE(separate.value != separate.query);
        separate.out = filledBytes(count * depth * size, 0x5a);
        separate.logsumexp = filledBytes(count * sizeof(float), 0x5a);
        separate.gradQuery = filledBytes(count * depth * size, 0x5a);
        separate.gradKey = filledBytes(count * depth * size, 0x5a);
        separate.gradValue = filledBytes(count * depth * size, 0x5a);
        AttentionArguments arguments(masks, dtype, batch, rows, rows, depth);
        Context ctx(2);
        arguments.run(
            ctx, AttentionLayout::Bshd,
            Tensor(separate.query.data(), dtype, shape),
            Tensor(separate.key.data(), dtype, shape),
            Tensor(separate.value.data(), dtype, shape),
            Tensor(separate.out.data(), dtype, shape),
            Tensor(separate.logsumexp.data(), DType::F32, {batch, heads, rows}),
            Tensor(separate.grad.data(), dtype, shape),
            Tensor(separate.gradQuery.data(), dtype, shape),
            Tensor(separate.gradKey.data(), dtype, shape),
            Tensor(separate.gradValue.data(), dtype, shape));

        // The packed operands, the heads outside the windows random as
        // well; the results filled otherwise than the separate ones, so
        // that an element either run leaves unwritten differs.
        Shape packedShape = {batch, rows, packing.packedHeads, depth};
        std::vector<uint8_t> packed = toBytes(
            dtype, uniformValues(generator, packedShape.getNumElements()));
        auto toPacked = [&](const std::vector<uint8_t> &from, int64_t first,
                            std::vector<uint8_t> &to) {
          copyHeads(from, heads, 0, to, packing.packedHeads, first, heads,
                    tokens, headBytes);
        };
        toPacked(separate.query, packing.query, packed);
        toPacked(separate.key, packing.key, packed);
        toPacked(separate.value, packing.value, packed);
        std::vector<uint8_t> out = filledBytes(separate.out.size(), 0xa5),
                             logsumexp =
                                 filledBytes(separate.logsumexp.size(), 0xa5),
                             packedGrads = filledBytes(packed.size(), 0xa5);
        Tensor x(packed.data(), dtype, packedShape),
            gradX(packedGrads.data(), dtype, packedShape);
        arguments.run(
            ctx, AttentionLayout::Bshd, headWindow(x, packing.query),
            headWindow(x, packing.key), headWindow(x, packing.value),
            Tensor(out.data(), dtype, shape),
            Tensor(logsumexp.data(), DType::F32, {batch, heads, rows}),
            Tensor(separate.grad.data(), dtype, shape),
            headWindow(gradX, packing.query), headWindow(gradX, packing.key),
            headWindow(gradX, packing.value));
        CHECK(out == separate.out);
        CHECK(logsumexp == separate.logsumexp);
        // Every head of the windows written, and nothing outside them.
        std::vector<uint8_t> wantGrads = filledBytes(packed.size(), 0xa5);
        toPacked(separate.gradQuery, packing.query, wantGrads);
        toPacked(separate.gradKey, packing.key, wantGrads);
        toPacked(separate.gradValue, packing.value, wantGrads);
        CHECK(packedGrads == wantGrads);
      }
}

TEST_CASE("flash attention on grouped keys and values gives the bits of "
          "them repeated to every query head") {
  // Grouped-query attention: 4 query heads reading 2 key and value heads,
  // or 1, against the same kernels on key and value repeated as repeat_kv
  // repeats them. Out, the log-sum-exp and the query's gradient must be
  // the repeated run's, bit for bit; the key's and value's gradients the
  // repeated run's per-query-head gradients before their rounding (the
  // f32 kernel's on the same values: for bf16, its operands, out and
  // log-sum-exp held exactly in f32) summed in f32 in query-head order,
  // then rounded. 70 rows and keys as in the token-major test, and fewer
  // rows than keys; both layouts; each of kAttentionMasks; 1 thread (its
  // tasks cross batch rows with the same key head) and 2.
  const int64_t batch = 2, heads = 4, depth = 20, width = 72;
  struct Grouping {
    const char *name;
    int64_t keyHeads, rows, keys;
  };
  const Grouping groupings[] = {
      {"2 key heads", 2, 70, 70},
      {"1 key head", 1, 70, 70},
      {"2 key heads, 40 rows of 100 keys", 2, 40, 100}};
  for (DType dtype : {DType::F32, DType::BF16})
    for (const AttentionMasks &masks : kAttentionMasks)
      for (AttentionLayout layout :
           {AttentionLayout::Bhsd, AttentionLayout::Bshd})
        for (const Grouping &grouping : groupings)
          for (int threads : {1, 2}) {
            INFO(getName(dtype)
                 << " " << masks.name << ", "
                 << (layout == AttentionLayout::Bhsd ? "Bhsd" : "Bshd") << ", "
                 << grouping.name << ", " << threads << " threads");
            const AttentionSizes sizes = {
                batch, heads, grouping.keyHeads, grouping.rows, grouping.keys,
                depth, width};
            AttentionSizes repeatedSizes = sizes;
            repeatedSizes.keyHeads = heads;
            std::mt19937 generator(9);
            auto random = [&](const Shape &shape) {
              return toBytes(dtype,
                             uniformValues(generator, shape.getNumElements()));
            };
            AttentionShapes shapes = getShapes(layout, sizes);
            AttentionBytes grouped;
            grouped.query = random(shapes.query);
            grouped.key = random(shapes.key);
            grouped.value = random(shapes.value);
            grouped.grad = random(shapes.out);
            size_t size = getSize(dtype);
            AttentionBytes repeated;
            repeated.query = grouped.query;
            repeated.key =
                repeatKeyHeads(grouped.key, layout, sizes, depth, size);
            repeated.value =
                repeatKeyHeads(grouped.value, layout, sizes, width, size);
            repeated.grad = grouped.grad;
            AttentionArguments arguments(masks, dtype, batch, grouping.rows,
                                         grouping.keys, depth);
            Context ctx(threads);
            runAttention(arguments, ctx, layout, dtype, sizes, grouped);
            runAttention(arguments, ctx, layout, dtype, repeatedSizes,
                         repeated);
            CHECK(grouped.out == repeated.out);
            CHECK(grouped.logsumexp == repeated.logsumexp);
            CHECK(grouped.gradQuery == repeated.gradQuery);

            auto widen = [&](const std::vector<uint8_t> &bytes) {
              return toBytes(DType::F32, toFloats(dtype, bytes));
            };
            AttentionBytes wide;
            wide.query = widen(repeated.query);
            wide.key = widen(repeated.key);
            wide.value = widen(repeated.value);
            wide.grad = widen(repeated.grad);
            wide.out = widen(repeated.out);
            wide.logsumexp = repeated.logsumexp;
            AttentionArguments wideArguments(
                masks, DType::F32, batch, grouping.rows, grouping.keys, depth);
            runAttentionGrad(wideArguments, ctx, layout, DType::F32,
                             repeatedSizes, wide);
            // The premise of the sums below: these f32 gradients are what
            // the repeated run rounded.
            auto narrow = [&](const std::vector<uint8_t> &bytes) {
              return toBytes(dtype, toFloats(DType::F32, bytes));
            };
            REQUIRE(narrow(wide.gradKey) == repeated.gradKey);
            REQUIRE(narrow(wide.gradValue) == repeated.gradValue);
            CHECK(grouped.gradKey ==
                  sumGroups(toFloats(DType::F32, wide.gradKey), dtype, layout,
                            sizes, depth));
            CHECK(grouped.gradValue ==
                  sumGroups(toFloats(DType::F32, wide.gradValue), dtype, layout,
                            sizes, width));
          }
}

TEST_CASE("flash attention refuses operands that out's heads do not address") {
  // Out has 2 heads; under Bhsd a query of 3 heads and a value gradient of
  // 3 (beside a key of 2: not grouped); under Bshd a query window of 1
  // head, a key of 1 head (grouped) with a value of 2, and an out gradient
  // of 3 heads.
  Context ctx(1);
  std::vector<float> data(3 * 3 * 8);
  std::vector<float> logsumexpData(2 * 3);
  Tensor logsumexp(logsumexpData.data(), DType::F32, {1, 2, 3});
  Tensor heads2(data.data(), DType::F32, {1, 2, 3, 8}),
      heads3(data.data(), DType::F32, {1, 3, 3, 8});
  CHECK_THROWS_WITH(
      flashAttention(ctx, heads3, heads2, heads2, Tensor(), Tensor(), heads2,
                     logsumexp, 1.0, 0.0, AttentionLayout::Bhsd),
      "'flashAttention': query [1, 3, 3, 8] has a head dim of 3 and out [1, "
      "2, 3, 8] of 2: under AttentionLayout::Bhsd every operand but a grouped "
      "key and value has out's heads");
  CHECK_THROWS_WITH(
      flashAttentionGrad(ctx, heads2, heads2, heads2, Tensor(), Tensor(),
                         heads2, logsumexp, heads2, heads2, heads2, heads3, 1.0,
                         0.0, AttentionLayout::Bhsd),
      "'flashAttentionGrad': gradValue [1, 3, 3, 8] has a head dim of 3 and "
      "out [1, 2, 3, 8] of 2: under AttentionLayout::Bhsd every operand but a "
      "grouped key and value has out's heads");
  Tensor tokens1(data.data(), DType::F32, {1, 3, 1, 8}),
      tokens2(data.data(), DType::F32, {1, 3, 2, 8}),
      tokens3(data.data(), DType::F32, {1, 3, 3, 8});
  CHECK_THROWS_WITH(
      flashAttention(ctx, tokens1, tokens2, tokens2, Tensor(), Tensor(),
                     tokens2, logsumexp, 1.0, 0.0, AttentionLayout::Bshd),
      "'flashAttention': query [1, 3, 1, 8] has a head dim of 1 and out [1, "
      "3, 2, 8] of 2: a head window holds at least out's heads");
  CHECK_THROWS_WITH(
      flashAttention(ctx, tokens2, tokens1, tokens2, Tensor(), Tensor(),
                     tokens2, logsumexp, 1.0, 0.0, AttentionLayout::Bshd),
      "'flashAttention': value [1, 3, 2, 8] has a head dim of 2 and out [1, "
      "3, 2, 8] of 2: grouped-query attention's key, value and their "
      "gradients have one number of heads, a divisor of out's");
  CHECK_THROWS_WITH(
      flashAttentionGrad(ctx, tokens3, tokens3, tokens3, Tensor(), Tensor(),
                         tokens2, logsumexp, tokens3, tokens3, tokens3, tokens3,
                         1.0, 0.0, AttentionLayout::Bshd),
      "'flashAttentionGrad': grad [1, 3, 3, 8] has a head dim of 3 and out "
      "[1, 3, 2, 8] of 2: out's gradient has out's heads");
}

TEST_CASE("flash attention refuses grouped keys and values that do not "
          "group out's heads") {
  // Out has 4 heads: a key and value of 3 heads (no divisor of 4), a key of
  // 2 heads with a value of 1, and a key and value of 2 heads with a key
  // gradient of out's 4.
  Context ctx(1);
  std::vector<float> data(4 * 3 * 8);
  std::vector<float> logsumexpData(4 * 3);
  Tensor logsumexp(logsumexpData.data(), DType::F32, {1, 4, 3});
  Tensor heads1(data.data(), DType::F32, {1, 1, 3, 8}),
      heads2(data.data(), DType::F32, {1, 2, 3, 8}),
      heads3(data.data(), DType::F32, {1, 3, 3, 8}),
      heads4(data.data(), DType::F32, {1, 4, 3, 8});
  const char *rule = "grouped-query attention's key, value and their "
                     "gradients have one number of heads, a divisor of out's";
  CHECK_THROWS_WITH(
      flashAttention(ctx, heads4, heads3, heads3, Tensor(), Tensor(), heads4,
                     logsumexp, 1.0, 0.0, AttentionLayout::Bhsd),
      std::string("'flashAttention': key [1, 3, 3, 8] has a head dim of 3 and "
                  "out [1, 4, 3, 8] of 4: ") +
          rule);
  CHECK_THROWS_WITH(
      flashAttention(ctx, heads4, heads2, heads1, Tensor(), Tensor(), heads4,
                     logsumexp, 1.0, 0.0, AttentionLayout::Bhsd),
      std::string("'flashAttention': value [1, 1, 3, 8] has a head dim of 1 "
                  "and out [1, 4, 3, 8] of 4: ") +
          rule);
  CHECK_THROWS_WITH(
      flashAttentionGrad(ctx, heads4, heads2, heads2, Tensor(), Tensor(),
                         heads4, logsumexp, heads4, heads4, heads4, heads2, 1.0,
                         0.0, AttentionLayout::Bhsd),
      std::string("'flashAttentionGrad': gradKey [1, 4, 3, 8] has a head dim "
                  "of 4 and out [1, 4, 3, 8] of 4: ") +
          rule);
}

TEST_CASE("a head window starts at a head of a rank-4 tensor") {
  std::vector<float> data(2 * 3 * 4 * 8);
  Tensor packed(data.data(), DType::F32, {2, 3, 4, 8});
  CHECK(headWindow(packed, 3).data == data.data() + 3 * 8);
  CHECK(headWindow(packed, 3).shape == packed.shape);
  std::vector<BFloat16> halves(2 * 3 * 4 * 8);
  CHECK(headWindow(Tensor(halves.data(), DType::BF16, {2, 3, 4, 8}), 2).data ==
        halves.data() + 2 * 8);
  CHECK_THROWS_WITH(headWindow(packed, 4),
                    "no head window at head 4 of a tensor of [2, 3, 4, 8]: a "
                    "head window starts at a head of a [B, T, H, D] tensor");
  CHECK_THROWS_AS(headWindow(packed, -1), Error);
  CHECK_THROWS_AS(headWindow(Tensor(data.data(), DType::F32, {6, 4, 8}), 0),
                  Error);
}
