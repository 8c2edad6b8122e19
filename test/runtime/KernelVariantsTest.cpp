// The runtime's kernel builds (x86-64, AVX2, AVX-512) compute alike: each
// build this CPU runs against the x86-64 one, on the kernels of a training
// step. The other tests check the formulas on whichever build a context
// takes (ctest runs them under each SLAPO_CPU_ISA too).
#include "TestValues.h"

#include "slapo/runtime/cpu/Kernels.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

using namespace slapo::rt;
using namespace slapo::rt::cpu;

namespace {

/// Values in [-4, 4), hardly repeating within the tests' tensors.
std::vector<float> values(size_t count, int seed) {
  return pattern(count, seed, 4, 8009);
}

/// A kernel run on `ctx` into `out` (its inputs captured).
using Run = std::function<void(Context &ctx, std::vector<float> &out)>;

} // namespace

TEST_CASE("every kernel build this CPU runs computes as the x86-64 build") {
  KernelIsa widest = getSupportedCpuPaths().kernels;
  if (widest == KernelIsa::X86_64) {
    const char *limit = std::getenv("SLAPO_CPU_ISA");
    WARN((limit ? std::string("skipped: SLAPO_CPU_ISA=") + limit +
                      " rules out the AVX2 and AVX-512 builds"
                : std::string("skipped: CPU lacks avx2 (x86-64-v3): only the "
                              "x86-64 build runs here")));
    return;
  }
  const int rows = 37, columns = 301;
  const Shape matrix{rows, columns};
  std::vector<float> x = values(rows * columns, 1),
                     y = values(rows * columns, 2), gamma = values(columns, 3),
                     beta = values(columns, 4);
  Tensor xs(x.data(), DType::F32, matrix), ys(y.data(), DType::F32, matrix);
  auto into = [&](std::vector<float> &out) {
    out.resize(rows * columns);
    return Tensor(out.data(), DType::F32, matrix);
  };
  struct Case {
    const char *name;
    Run run;
  };
  const Case cases[] = {
      {"gelu (tanh)",
       [&](Context &ctx, auto &out) {
         unary(ctx, UnaryKind::GeluTanh, xs, into(out));
       }},
      {"exp", [&](Context &ctx,
                  auto &out) { unary(ctx, UnaryKind::Exp, xs, into(out)); }},
      {"gelu's gradient",
       [&](Context &ctx, auto &out) {
         binary(ctx, BinaryKind::GeluTanhGrad, ys, xs, into(out));
       }},
      {"softmax",
       [&](Context &ctx, auto &out) { softmax(ctx, xs, into(out), 1); }},
      {"layer norm",
       [&](Context &ctx, auto &out) {
         layerNorm(ctx, xs, Tensor(gamma.data(), DType::F32, {columns}),
                   Tensor(beta.data(), DType::F32, {columns}), into(out), 1,
                   1e-5);
       }},
      {"sum over rows",
       [&](Context &ctx, auto &out) {
         out.resize(columns);
         reduce(ctx, ReduceKind::Sum, xs,
                Tensor(out.data(), DType::F32, {columns}), 1u);
       }},
      {"cumsum along rows",
       [&](Context &ctx, auto &out) { cumsum(ctx, xs, into(out), 1, false); }},
      {"AdamW",
       [&](Context &ctx, auto &out) {
         out = x;
         std::vector<float> m = values(x.size(), 5), v(x.size(), 0.25f);
         double lr = 1e-2;
         adamwUpdate(ctx, into(out), ys, Tensor(),
                     Tensor(m.data(), DType::F32, matrix),
                     Tensor(v.data(), DType::F32, matrix),
                     Tensor(&lr, DType::F64, {}), 3, 0.9, 0.999, 1e-8, 0.1);
       }},
  };
  Context baseline(2, {KernelIsa::X86_64, getSupportedCpuPaths().bf16Matmul});
  for (KernelIsa isa : {KernelIsa::Avx2, KernelIsa::Avx512}) {
    if (isa > widest)
      continue;
    Context wide(2, {isa, getSupportedCpuPaths().bf16Matmul});
    for (const Case &c : cases) {
      INFO(getName(isa) << " build, " << c.name);
      std::vector<float> expected, actual;
      c.run(baseline, expected);
      c.run(wide, actual);
      // The wider builds contract products and sums into FMAs: a rounding
      // or two apart.
      for (size_t i = 0; i < expected.size(); ++i)
        REQUIRE(actual[i] == Approx(expected[i]).epsilon(1e-5).margin(1e-6));
    }
  }
}
