// A fused loop as slapoc writes one (the C++ emitter's form: runs in which
// the bias row is contiguous and the column one value, ElementMath.h's math
// in registers) gives the bits of the kernels it replaces, on every
// instruction set the CPU has, for special values (NaN, infinities, -0,
// subnormals) too. Built with -ffp-contract=off, as rank programs are.
#include "slapo/runtime/cpu/FusedLoop.h"
#include "slapo/runtime/cpu/Kernels.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace slapo::rt;
using namespace slapo::rt::cpu;

namespace {

constexpr int64_t kRows = 307, kColumns = 131;

/// gelu_tanh(x + bias) * column / scalar, and exp of the sum: two results.
SLAPO_VECTOR_INLINE void biasGeluBody(void *const *data, int64_t begin,
                                      int64_t end) {
  const float *__restrict in0 = static_cast<const float *>(data[0]);
  const float *__restrict in1 = static_cast<const float *>(data[1]);
  const float *__restrict in2 = static_cast<const float *>(data[2]);
  const float *__restrict in3 = static_cast<const float *>(data[3]);
  float *__restrict out0 = static_cast<float *>(data[4]);
  float *__restrict out1 = static_cast<float *>(data[5]);
  const float a3 = in3[0];
  for (int64_t start = begin, stop; start < end; start = stop) {
    stop = std::min<int64_t>(end, (start / kColumns + 1) * kColumns);
    const int64_t at1 = start % kColumns - start;
    const float a2 = in2[start / kColumns % kRows];
#pragma omp simd
    for (int64_t i = start; i < stop; ++i) {
      const float a0 = in0[i];
      const float a1 = in1[at1 + i];
      const float v0 = cpu::applyBinary<BinaryKind::Add>(a0, a1);
      const float v1 = cpu::applyUnary<UnaryKind::GeluTanh>(v0);
      const float v2 = cpu::applyBinary<BinaryKind::Mul>(v1, a2);
      const float v3 = cpu::applyBinary<BinaryKind::Div>(v2, a3);
      const float v4 = cpu::applyUnary<UnaryKind::Exp>(v0);
      out0[i] = v3;
      out1[i] = v4;
    }
  }
}
SLAPO_CPU_FUSED_LOOP(kBiasGelu, biasGeluBody)

std::vector<float> randomValues(size_t count, unsigned seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> values(count);
  for (float &value : values)
    value = normal(generator);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            -0.0f,
                            std::numeric_limits<float>::denorm_min(),
                            1e-40f,
                            88.5f,
                            -104.5f};
  for (size_t i = 0; i < count; i += 97)
    values[i] = specials[(i / 97) % std::size(specials)];
  return values;
}

} // namespace

TEST_CASE("a fused loop gives the bits of the kernels on every ISA") {
  const int64_t n = kRows * kColumns; // over kGrain: both threads run
  std::vector<float> x = randomValues(n, 1), bias = randomValues(kColumns, 2),
                     column = randomValues(kRows, 3), scalar = {0.75f};
  const CpuPaths &supported = getSupportedCpuPaths();
  for (int isa = 0; isa <= static_cast<int>(supported.kernels); ++isa) {
    auto kernels = static_cast<KernelIsa>(isa);
    INFO("kernels: " << getName(kernels));
    Context ctx(2, {kernels, supported.bf16Matmul});
    Tensor input(x.data(), DType::F32, {kRows, kColumns});
    std::vector<float> sum(n), gelu(n), scaled(n), expected(n), expectedExp(n);
    Tensor sumT(sum.data(), DType::F32, {kRows, kColumns});
    Tensor geluT(gelu.data(), DType::F32, {kRows, kColumns});
    Tensor scaledT(scaled.data(), DType::F32, {kRows, kColumns});
    binary(ctx, BinaryKind::Add, input,
           Tensor(bias.data(), DType::F32, {kColumns}), sumT);
    unary(ctx, UnaryKind::GeluTanh, sumT, geluT);
    binary(ctx, BinaryKind::Mul, geluT,
           Tensor(column.data(), DType::F32, {kRows, 1}), scaledT);
    binary(ctx, BinaryKind::Div, scaledT, Tensor(scalar.data(), DType::F32, {}),
           Tensor(expected.data(), DType::F32, {kRows, kColumns}));
    unary(ctx, UnaryKind::Exp, sumT,
          Tensor(expectedExp.data(), DType::F32, {kRows, kColumns}));

    std::vector<float> fused(n), fusedExp(n);
    void *data[] = {x.data(),      bias.data(),  column.data(),
                    scalar.data(), fused.data(), fusedExp.data()};
    runFusedLoop(ctx, kBiasGelu, data, n);
    CHECK(std::memcmp(fused.data(), expected.data(), n * sizeof(float)) == 0);
    CHECK(std::memcmp(fusedExp.data(), expectedExp.data(), n * sizeof(float)) ==
          0);
  }
}
