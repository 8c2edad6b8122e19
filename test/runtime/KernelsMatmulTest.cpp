// linear and matmul through oneDNN against naive loops, and the primitive
// cache of the CPU context.
#include "Bf16Paths.h"
#include "ContextImpl.h"
#include "Contraction.h"
#include "TestValues.h"

#include "slapo/runtime/Error.h"
#include "slapo/runtime/cpu/Kernels.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

using namespace slapo::rt;
using namespace slapo::rt::cpu;

namespace {

/// input[M, K] * weight[N, K]^T + bias[N] in f64.
std::vector<double> naiveLinear(const std::vector<float> &input,
                                const std::vector<float> &weight,
                                const float *bias, int m, int k, int n) {
  std::vector<double> out(size_t(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = bias ? bias[j] : 0.0;
      for (int l = 0; l < k; ++l)
        sum += double(input[i * k + l]) * weight[j * k + l];
      out[i * n + j] = sum;
    }
  return out;
}

} // namespace

TEST_CASE("linear with and without bias matches a naive loop") {
  Context ctx(2);
  for (auto [m, k, n] : {std::tuple{3, 4, 5}, std::tuple{64, 96, 80}}) {
    INFO("M " << m << " K " << k << " N " << n);
    std::vector<float> input = pattern(m * k, 1), weight = pattern(n * k, 2),
                       bias = pattern(n, 3), out(m * n);
    for (bool withBias : {false, true}) {
      linear(ctx, Tensor(input.data(), DType::F32, {m, k}),
             Tensor(weight.data(), DType::F32, {n, k}),
             withBias ? Tensor(bias.data(), DType::F32, {n}) : Tensor(),
             Tensor(out.data(), DType::F32, {m, n}));
      std::vector<double> expected =
          naiveLinear(input, weight, withBias ? bias.data() : nullptr, m, k, n);
      for (size_t i = 0; i < out.size(); ++i)
        REQUIRE(out[i] == Approx(expected[i]).margin(1e-4));
    }
  }
}

TEST_CASE("linear flattens leading input dims") {
  Context ctx(1);
  std::vector<float> input = pattern(2 * 3 * 4, 4), weight = pattern(5 * 4, 5),
                     bias = pattern(5, 6), out(2 * 3 * 5);
  linear(ctx, Tensor(input.data(), DType::F32, {2, 3, 4}),
         Tensor(weight.data(), DType::F32, {5, 4}),
         Tensor(bias.data(), DType::F32, {5}),
         Tensor(out.data(), DType::F32, {2, 3, 5}));
  std::vector<double> expected =
      naiveLinear(input, weight, bias.data(), 6, 4, 5);
  for (size_t i = 0; i < out.size(); ++i)
    CHECK(out[i] == Approx(expected[i]).margin(1e-5));
}

namespace {

double toDouble(float value) { return value; }
double toDouble(BFloat16 value) { return value.toFloat(); }

} // namespace

TEST_CASE("bf16 linear accumulates in f32 and rounds once") {
  for (CpuPaths paths : getBf16MatmulPaths()) {
    Context ctx(2, paths);
    INFO(ctx.describe());
    const int m = 16, k = 64, n = 24;
    std::vector<float> input = pattern(m * k, 7), weight = pattern(n * k, 8),
                       bias = pattern(n, 9);
    std::vector<BFloat16> inputBf = roundToBf16(input),
                          weightBf = roundToBf16(weight),
                          biasBf = roundToBf16(bias), out(m * n);
    linear(ctx, Tensor(inputBf.data(), DType::BF16, {m, k}),
           Tensor(weightBf.data(), DType::BF16, {n, k}),
           Tensor(biasBf.data(), DType::BF16, {n}),
           Tensor(out.data(), DType::BF16, {m, n}));
    std::vector<double> expected =
        naiveLinear(input, weight, bias.data(), m, k, n);
    for (int i = 0; i < m * n; ++i) {
      // One rounding to bf16: half an ulp of 8 mantissa bits, plus slack
      // for f32 accumulation order.
      double tolerance = std::fabs(expected[i]) / 256 + 1e-3;
      REQUIRE(std::fabs(out[i].toFloat() - expected[i]) <= tolerance);
    }
  }
}

TEST_CASE("bf16 contractions on the f32 fallback match oneDNN's bf16 matmul") {
  const CpuPaths &supported = getSupportedCpuPaths();
  if (supported.bf16Matmul != Bf16Matmul::OneDnn) {
    WARN(describeMissingBf16Matmul());
    return;
  }
  Context oneDnn(2, supported);
  Context fallback(2, {supported.kernels, Bf16Matmul::F32Fallback});
  // Both sum the same exact products in f32, in orders that may differ: f32
  // results agree to f32 rounding, bf16 ones to one bf16 rounding.
  auto compare = [](const auto &expected, const auto &actual,
                    double tolerance) {
    for (size_t i = 0; i < expected.size(); ++i) {
      double a = toDouble(expected[i]), b = toDouble(actual[i]);
      REQUIRE(std::fabs(a - b) <= tolerance * (std::fabs(a) + 1e-2));
    }
  };

  SECTION("linear with a bias, bf16 and f32 results") {
    const int m = 40, k = 96, n = 72;
    std::vector<float> input = pattern(m * k, 16), weight = pattern(n * k, 17),
                       bias = pattern(n, 18);
    std::vector<BFloat16> inputBf = roundToBf16(input),
                          weightBf = roundToBf16(weight),
                          biasBf = roundToBf16(bias);
    Tensor x(inputBf.data(), DType::BF16, {m, k}),
        w(weightBf.data(), DType::BF16, {n, k}),
        b(biasBf.data(), DType::BF16, {n});
    std::vector<BFloat16> bf16Out[2] = {std::vector<BFloat16>(m * n),
                                        std::vector<BFloat16>(m * n)};
    std::vector<float> f32Out[2] = {std::vector<float>(m * n),
                                    std::vector<float>(m * n)};
    Context *contexts[] = {&oneDnn, &fallback};
    for (int c = 0; c < 2; ++c) {
      linear(*contexts[c], x, w, b,
             Tensor(bf16Out[c].data(), DType::BF16, {m, n}));
      linear(*contexts[c], x, w, Tensor(),
             Tensor(f32Out[c].data(), DType::F32, {m, n}));
    }
    compare(bf16Out[0], bf16Out[1], 1.0 / 128);
    compare(f32Out[0], f32Out[1], 1e-5);
  }

  SECTION("matmul through permutations, batch dims broadcast") {
    // Attention's q k^T on [B, S, H, D] tensors, the result as [B, S, H, S].
    Shape lhsShape{2, 5, 3, 8}, rhsShape{2, 6, 3, 8}, outShape{2, 5, 3, 6};
    std::vector<int64_t> lhsOrder{0, 2, 1, 3}, rhsOrder{0, 2, 3, 1},
        resultOrder{0, 2, 1, 3};
    std::vector<float> lhs = pattern(lhsShape.getNumElements(), 19),
                       rhs = pattern(rhsShape.getNumElements(), 20);
    std::vector<BFloat16> lhsBf = roundToBf16(lhs), rhsBf = roundToBf16(rhs);
    std::vector<float> out[2] = {std::vector<float>(outShape.getNumElements()),
                                 std::vector<float>(outShape.getNumElements())};
    Context *contexts[] = {&oneDnn, &fallback};
    for (int c = 0; c < 2; ++c)
      matmul(*contexts[c], Tensor(lhsBf.data(), DType::BF16, lhsShape),
             Tensor(rhsBf.data(), DType::BF16, rhsShape),
             Tensor(out[c].data(), DType::F32, outShape),
             {lhsOrder.data(), rhsOrder.data(), resultOrder.data()});
    compare(out[0], out[1], 1e-5);
  }
}

TEST_CASE("a context takes the paths it is given, never more than the CPU's") {
  const CpuPaths &supported = getSupportedCpuPaths();
  Context detected(1);
  CHECK(detected.getPaths().kernels == supported.kernels);
  CHECK(detected.getPaths().bf16Matmul == supported.bf16Matmul);
  Context fallback(1, {supported.kernels, Bf16Matmul::F32Fallback});
  CHECK(fallback.getPaths().bf16Matmul == Bf16Matmul::F32Fallback);
  CHECK_THAT(fallback.describe(),
             Catch::EndsWith("bf16 matmul: f32 fallback") &&
                 Catch::StartsWith("cpu " + getEffectiveIsaName() +
                                   ", 1 threads, kernels " +
                                   getName(supported.kernels)));
  if (supported.kernels != KernelIsa::Avx512)
    CHECK_THROWS_WITH(Context(1, {KernelIsa::Avx512, Bf16Matmul::F32Fallback}),
                      Catch::Contains("the CPU kernels for avx512 cannot run"));
  if (supported.bf16Matmul != Bf16Matmul::OneDnn)
    CHECK_THROWS_WITH(Context(1, {supported.kernels, Bf16Matmul::OneDnn}),
                      Catch::Contains("oneDNN has no bf16 matmul"));
}

TEST_CASE("SLAPO_CPU_ISA caps the paths (ctest runs these tests under it)") {
  const char *limit = std::getenv("SLAPO_CPU_ISA");
  if (!limit)
    return;
  // Every named ISA is at most the CPU's, and oneDNN makes no bf16 matmul
  // below avx512_core.
  const CpuPaths &supported = getSupportedCpuPaths();
  std::string isa = limit;
  if (isa == "sse41" || isa == "avx") {
    CHECK(supported.kernels == KernelIsa::X86_64);
    CHECK(supported.bf16Matmul == Bf16Matmul::F32Fallback);
  } else if (isa == "avx2" || isa == "avx2_vnni") {
    CHECK(supported.kernels <= KernelIsa::Avx2);
    CHECK(supported.bf16Matmul == Bf16Matmul::F32Fallback);
  }
  CHECK(getEffectiveIsaName().rfind(isa, 0) == 0);
}

TEST_CASE("matmul broadcasts batch dims") {
  Context ctx(2);
  // lhs [2, 3, 4, 5] x rhs [1, 3, 5, 6] -> [2, 3, 4, 6].
  const int b0 = 2, b1 = 3, m = 4, k = 5, n = 6;
  std::vector<float> lhs = pattern(b0 * b1 * m * k, 10),
                     rhs = pattern(b1 * k * n, 11), out(b0 * b1 * m * n);
  matmul(ctx, Tensor(lhs.data(), DType::F32, {b0, b1, m, k}),
         Tensor(rhs.data(), DType::F32, {1, b1, k, n}),
         Tensor(out.data(), DType::F32, {b0, b1, m, n}));
  for (int x = 0; x < b0; ++x)
    for (int y = 0; y < b1; ++y)
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double sum = 0;
          for (int l = 0; l < k; ++l)
            sum += double(lhs[((x * b1 + y) * m + i) * k + l]) *
                   rhs[(y * k + l) * n + j];
          REQUIRE(out[((x * b1 + y) * m + i) * n + j] ==
                  Approx(sum).margin(1e-5));
        }

  // A rank-2 lhs against a batched rhs: the lhs is padded with a batch dim.
  std::vector<float> a = pattern(m * k, 12), c = pattern(b0 * k * n, 13),
                     r(b0 * m * n);
  matmul(ctx, Tensor(a.data(), DType::F32, {m, k}),
         Tensor(c.data(), DType::F32, {b0, k, n}),
         Tensor(r.data(), DType::F32, {b0, m, n}));
  for (int x = 0; x < b0; ++x)
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double sum = 0;
        for (int l = 0; l < k; ++l)
          sum += double(a[i * k + l]) * c[(x * k + l) * n + j];
        REQUIRE(r[(x * m + i) * n + j] == Approx(sum).margin(1e-5));
      }
}

TEST_CASE("matmul reads and writes through permutations without copies") {
  // Each case against permute copies around a plain matmul (both kernels are
  // checked against loops on their own).
  Context ctx(2);
  struct Case {
    const char *name;
    Shape lhs, rhs, out; // as stored
    std::vector<int64_t> lhsOrder, rhsOrder, resultOrder;
  };
  const Case cases[] = {
      // Attention's q k^T on [B, S, H, D] tensors, its result as [B, S, H, S].
      {"heads",
       {2, 5, 3, 4},
       {2, 6, 3, 4},
       {2, 5, 3, 6},
       {0, 2, 1, 3},
       {0, 2, 3, 1},
       {0, 2, 1, 3}},
      // A weight gradient grad^T x: a transposed rank-2 lhs, broadcast.
      {"transposed lhs", {7, 4}, {2, 7, 3}, {2, 4, 3}, {1, 0}, {}, {}},
      // Only the result permuted.
      {"result", {4, 7}, {7, 3}, {3, 4}, {}, {}, {1, 0}},
  };
  for (const Case &c : cases) {
    INFO(c.name);
    auto permuted = [](const Shape &shape, const std::vector<int64_t> &order) {
      Shape result = shape;
      for (size_t d = 0; d < order.size(); ++d)
        result.dims[d] = shape.dims[order[d]];
      return result;
    };
    std::vector<float> lhs = pattern(c.lhs.getNumElements(), 14),
                       rhs = pattern(c.rhs.getNumElements(), 15),
                       out(c.out.getNumElements());
    matmul(ctx, Tensor(lhs.data(), DType::F32, c.lhs),
           Tensor(rhs.data(), DType::F32, c.rhs),
           Tensor(out.data(), DType::F32, c.out),
           {c.lhsOrder.empty() ? nullptr : c.lhsOrder.data(),
            c.rhsOrder.empty() ? nullptr : c.rhsOrder.data(),
            c.resultOrder.empty() ? nullptr : c.resultOrder.data()});

    // The copies: permute each operand, multiply, permute the product.
    auto copyThrough = [&](std::vector<float> &values, Shape &shape,
                           const std::vector<int64_t> &order) {
      if (order.empty())
        return;
      Shape to = permuted(shape, order);
      std::vector<float> copy(values.size());
      permute(ctx, Tensor(values.data(), DType::F32, shape),
              Tensor(copy.data(), DType::F32, to), order.data());
      values = copy;
      shape = to;
    };
    Shape lhsShape = c.lhs, rhsShape = c.rhs;
    copyThrough(lhs, lhsShape, c.lhsOrder);
    copyThrough(rhs, rhsShape, c.rhsOrder);
    // The product's shape: the stored result's, unpermuted.
    Shape productShape = c.out;
    for (size_t d = 0; d < c.resultOrder.size(); ++d)
      productShape.dims[c.resultOrder[d]] = c.out.dims[d];
    std::vector<float> expected(out.size());
    matmul(ctx, Tensor(lhs.data(), DType::F32, lhsShape),
           Tensor(rhs.data(), DType::F32, rhsShape),
           Tensor(expected.data(), DType::F32, productShape));
    copyThrough(expected, productShape, c.resultOrder);
    for (size_t i = 0; i < out.size(); ++i)
      REQUIRE(out[i] == Approx(expected[i]).margin(1e-5));
  }
}

TEST_CASE("addMatmul adds the product to out inside the GEMM") {
  // out [N, F] += lhs^T rhs with lhs [K, N] read transposed, as the LM head
  // kernel adds a chunk's weight gradient, and a batch of heads through
  // permutations; against f64 loops over what out held before.
  struct Case {
    const char *name;
    Shape lhs, rhs, out;
    std::vector<int64_t> lhsOrder, rhsOrder;
  };
  const Case cases[] = {
      {"transposed lhs", {37, 5}, {37, 6}, {5, 6}, {1, 0}, {}},
      {"heads", {2, 5, 3, 4}, {2, 3, 4, 6}, {2, 3, 5, 6}, {0, 2, 1, 3}, {}},
  };
  for (const Case &c : cases)
    for (int threads : {1, 2}) {
      INFO(c.name << ", threads " << threads);
      Context ctx(threads);
      std::vector<float> lhs = pattern(c.lhs.getNumElements(), 16),
                         rhs = pattern(c.rhs.getNumElements(), 17),
                         out = pattern(c.out.getNumElements(), 18);
      std::vector<double> expected(out.begin(), out.end());
      // The logical operands' dims and strides, as slapo.permute reads.
      auto strided = [](const Shape &shape, const std::vector<int64_t> &order,
                        std::vector<int64_t> &dims,
                        std::vector<int64_t> &strides) {
        std::vector<int64_t> stored(shape.rank, 1);
        for (int d = shape.rank - 1; d > 0; --d)
          stored[d - 1] = stored[d] * shape.dims[d];
        dims.assign(shape.dims, shape.dims + shape.rank);
        strides = stored;
        for (size_t d = 0; d < order.size(); ++d) {
          dims[d] = shape.dims[order[d]];
          strides[d] = stored[order[d]];
        }
      };
      std::vector<int64_t> ld, ls, rd, rs;
      strided(c.lhs, c.lhsOrder, ld, ls);
      strided(c.rhs, c.rhsOrder, rd, rs);
      int rank = c.out.rank;
      int64_t m = c.out.dims[rank - 2], n = c.out.dims[rank - 1],
              k = ld[rank - 1];
      int64_t batches = c.out.getNumElements() / (m * n);
      for (int64_t b = 0; b < batches; ++b) {
        // Batch dims are equal here: b's index per dim, outermost first.
        int64_t lOff = 0, rOff = 0, rest = b;
        for (int d = rank - 3; d >= 0; --d) {
          int64_t i = rest % c.out.dims[d];
          rest /= c.out.dims[d];
          lOff += i * ls[d];
          rOff += i * rs[d];
        }
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j)
            for (int64_t l = 0; l < k; ++l)
              expected[(b * m + i) * n + j] +=
                  double(lhs[lOff + i * ls[rank - 2] + l * ls[rank - 1]]) *
                  rhs[rOff + l * rs[rank - 2] + j * rs[rank - 1]];
      }
      addMatmul(ctx, Tensor(lhs.data(), DType::F32, c.lhs),
                Tensor(rhs.data(), DType::F32, c.rhs),
                Tensor(out.data(), DType::F32, c.out),
                {c.lhsOrder.empty() ? nullptr : c.lhsOrder.data(),
                 c.rhsOrder.empty() ? nullptr : c.rhsOrder.data(), nullptr});
      for (size_t i = 0; i < out.size(); ++i)
        REQUIRE(out[i] == Approx(expected[i]).margin(1e-5));
      // The plain matmul of the same shapes still overwrites out: the two
      // are different primitives.
      std::vector<float> overwritten(out.size(), 1e6f);
      matmul(ctx, Tensor(lhs.data(), DType::F32, c.lhs),
             Tensor(rhs.data(), DType::F32, c.rhs),
             Tensor(overwritten.data(), DType::F32, c.out),
             {c.lhsOrder.empty() ? nullptr : c.lhsOrder.data(),
              c.rhsOrder.empty() ? nullptr : c.rhsOrder.data(), nullptr});
      std::vector<float> initial = pattern(out.size(), 18);
      for (size_t i = 0; i < out.size(); ++i)
        REQUIRE(overwritten[i] ==
                Approx(expected[i] - initial[i]).margin(1e-5));
    }
  // The sum is f32's: a bf16 out is refused.
  Context ctx(1);
  std::vector<uint16_t> bf16(4);
  std::vector<float> f32(4);
  CHECK_THROWS_WITH(addMatmul(ctx, Tensor(f32.data(), DType::F32, {2, 2}),
                              Tensor(f32.data(), DType::F32, {2, 2}),
                              Tensor(bf16.data(), DType::BF16, {2, 2}), {}),
                    Catch::Contains("addMatmul") &&
                        Catch::Contains("bf16", Catch::CaseSensitive::No));
}

TEST_CASE("contractions refuse dtypes oneDNN is not asked for") {
  Context ctx(1);
  std::vector<double> a(4), b(4), c(4);
  CHECK_THROWS_AS(matmul(ctx, Tensor(a.data(), DType::F64, {2, 2}),
                         Tensor(b.data(), DType::F64, {2, 2}),
                         Tensor(c.data(), DType::F64, {2, 2})),
                  Error);
}

TEST_CASE("a primitive is created once per shape") {
  Context ctx(1);
  CHECK(getCachedPrimitiveCount(ctx) == 0);
  std::vector<float> input = pattern(6, 1), weight = pattern(12, 2), out(8);
  Tensor x(input.data(), DType::F32, {2, 3}),
      w(weight.data(), DType::F32, {4, 3}), y(out.data(), DType::F32, {2, 4});
  linear(ctx, x, w, Tensor(), y);
  linear(ctx, x, w, Tensor(), y);
  CHECK(getCachedPrimitiveCount(ctx) == 1);
  // Another shape, a bias, a matmul: one primitive each.
  linear(ctx, Tensor(input.data(), DType::F32, {1, 3}), w, Tensor(),
         Tensor(out.data(), DType::F32, {1, 4}));
  std::vector<float> bias(4, 0.5f);
  linear(ctx, x, w, Tensor(bias.data(), DType::F32, {4}), y);
  matmul(ctx, x, Tensor(weight.data(), DType::F32, {3, 4}), y);
  matmul(ctx, x, Tensor(weight.data(), DType::F32, {3, 4}), y);
  CHECK(getCachedPrimitiveCount(ctx) == 4);
}

TEST_CASE("a context with threads <= 0 uses OpenMP's count") {
  Context ctx(0);
  CHECK(ctx.getThreads() >= 1);
  Context three(3);
  CHECK(three.getThreads() == 3);
}
