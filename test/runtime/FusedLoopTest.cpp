// A fused loop as slapoc writes one (the C++ emitter's form: runs in which
// the bias row is contiguous and the column one value, ElementMath.h's math
// in registers) gives the bits of the kernels it replaces, on every
// instruction set the CPU has, for special values (NaN, infinities, -0,
// subnormals) too. Built with -ffp-contract=off, as rank programs are.
#include "slapo/runtime/cpu/FusedLoop.h"
#include "slapo/runtime/cpu/Kernels.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
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

/// Attention's scores as a row group: divided by a scalar, the [131, 131]
/// causal mask's where (-inf where it is false), the softmax along the rows
/// of 131 keys (not a multiple of any vector width).
constexpr int64_t kHeads = 6, kKeys = 131;

SLAPO_VECTOR_INLINE void attentionRowsBody(void *const *data, int64_t begin,
                                           int64_t end) {
  const float *__restrict in0 = static_cast<const float *>(data[0]);
  const float *__restrict in1 = static_cast<const float *>(data[1]);
  const bool *__restrict in2 = static_cast<const bool *>(data[2]);
  const float *__restrict in3 = static_cast<const float *>(data[3]);
  float *__restrict out0 = static_cast<float *>(data[4]);
  const float a1 = in1[0];
  const float a3 = in3[0];
  std::vector<float> scratch2(131);
  float *__restrict s2 = scratch2.data();
  for (int64_t row = begin; row < end; ++row) {
    const float *__restrict row0 = in0 + row * 131;
    const bool *__restrict row2 = in2 + row * 131 % 17161;
#pragma omp simd
    for (int64_t j = 0; j < 131; ++j) {
      const float a0 = row0[j];
      const bool a2 = row2[j];
      const float v0 = cpu::applyBinary<BinaryKind::Div>(a0, a1);
      const float v1 = a2 ? v0 : a3;
      s2[j] = v1;
    }
    float max2 = -INFINITY;
    for (int64_t j = 0; j < 131; ++j)
      max2 = cpu::maxPropagatingNaN(s2[j], max2);
#pragma omp simd
    for (int64_t j = 0; j < 131; ++j) {
      s2[j] = cpu::applyUnary<UnaryKind::Exp>(s2[j] - max2);
    }
    double sum2 = 0;
    for (int64_t j = 0; j < 131; ++j)
      sum2 += s2[j];
    const float scale2 = float(1.0 / sum2);
#pragma omp simd
    for (int64_t j = 0; j < 131; ++j) {
      const float v2 = s2[j] * scale2;
      out0[(row * 131 + j)] = v2;
    }
  }
}
SLAPO_CPU_FUSED_LOOP(kAttentionRows, attentionRowsBody)

/// The softmax's gradient as a row group: y * (g - sum(g * y)) along the
/// rows, the row sum in the middle.
SLAPO_VECTOR_INLINE void softmaxGradRowsBody(void *const *data, int64_t begin,
                                             int64_t end) {
  const float *__restrict in0 = static_cast<const float *>(data[0]);
  const float *__restrict in1 = static_cast<const float *>(data[1]);
  float *__restrict out0 = static_cast<float *>(data[2]);
  std::vector<float> scratch1(131);
  float *__restrict s1 = scratch1.data();
  for (int64_t row = begin; row < end; ++row) {
    const float *__restrict row0 = in0 + row * 131;
    const float *__restrict row1 = in1 + row * 131;
#pragma omp simd
    for (int64_t j = 0; j < 131; ++j) {
      const float a0 = row0[j];
      const float a1 = row1[j];
      const float v0 = cpu::applyBinary<BinaryKind::Mul>(a0, a1);
      s1[j] = v0;
    }
    double acc1 = 0;
    for (int64_t j = 0; j < 131; ++j)
      acc1 += s1[j];
    const float v1 = float(acc1);
#pragma omp simd
    for (int64_t j = 0; j < 131; ++j) {
      const float a0 = row0[j];
      const float a1 = row1[j];
      const float v2 = cpu::applyBinary<BinaryKind::Sub>(a0, v1);
      const float v3 = cpu::applyBinary<BinaryKind::Mul>(a1, v2);
      out0[(row * 131 + j)] = v3;
    }
  }
}
SLAPO_CPU_FUSED_LOOP(kSoftmaxGradRows, softmaxGradRowsBody)

/// Equal bits, or both NaN (whose payload no kernel promises).
bool sameValues(const std::vector<float> &a, const std::vector<float> &b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::isnan(a[i]) && std::isnan(b[i])) &&
        std::memcmp(&a[i], &b[i], sizeof(float)) != 0)
      return false;
  return true;
}

/// A gelu gradient's group with its column sums (a bias gradient), as the
/// emitter writes it: [3, 173] rows of 531 columns (three column blocks, the
/// last one partial), the f32 gradient and its bf16 cast written, the sums
/// of both (the bf16 one into f32, a widening sum) over the rows.
constexpr int64_t kSumRows = 3 * 173, kSumColumns = 531;

SLAPO_VECTOR_INLINE void geluGradColumnsBody(void *const *data, int64_t begin,
                                             int64_t end) {
  const float *__restrict in0 = static_cast<const float *>(data[0]);
  const float *__restrict in1 = static_cast<const float *>(data[1]);
  float *__restrict out0 = static_cast<float *>(data[2]);
  BFloat16 *__restrict out1 = static_cast<BFloat16 *>(data[3]);
  float *__restrict out2 = static_cast<float *>(data[4]);
  float *__restrict out3 = static_cast<float *>(data[5]);
  for (int64_t block = begin; block < end; ++block) {
    const cpu::ColumnBlock columns = cpu::getColumnBlock(block, kSumColumns);
    const int64_t first = columns.first;
    const int64_t stop = first + columns.width;
    double acc2[cpu::kColumnBlock] = {};
    double acc3[cpu::kColumnBlock] = {};
    for (int64_t row = 0; row < kSumRows; ++row) {
      const float *__restrict row0 = in0 + row * kSumColumns;
      const float *__restrict row1 = in1 + row * kSumColumns;
#pragma omp simd
      for (int64_t j = first; j < stop; ++j) {
        const float a0 = row0[j];
        const float a1 = row1[j];
        const float v0 = cpu::applyBinary<BinaryKind::GeluTanhGrad>(a0, a1);
        const float v1 = BFloat16::fromFloat(v0).toFloat();
        out0[(row * kSumColumns + j)] = v0;
        out1[(row * kSumColumns + j)] = BFloat16::fromFloat(v1);
        acc2[j - first] += double(v0);
        acc3[j - first] += double(v1);
      }
    }
    for (int64_t j = first; j < stop; ++j)
      out2[j] = float(acc2[j - first]);
    for (int64_t j = first; j < stop; ++j)
      out3[j] = float(acc3[j - first]);
  }
}
SLAPO_CPU_FUSED_LOOP(kGeluGradColumns, geluGradColumnsBody)

/// Normal values with a special one every 97 elements, unless `withSpecials` is
/// false.
std::vector<float> randomValues(size_t count, unsigned seed,
                                bool withSpecials = true) {
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
  for (size_t i = 0; withSpecials && i < count; i += 97)
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

TEST_CASE("a row group gives the bits of the kernels on every ISA") {
  const int64_t rows = kHeads * kKeys, n = rows * kKeys;
  // Finite scores: the rows that give NaN are the masked ones.
  std::vector<float> scores = randomValues(n, 4, false), scale = {8.0f},
                     low = {-std::numeric_limits<float>::infinity()};
  // Causal, and rows 7 and 100 of the mask all false: the softmax kernel
  // gives those rows NaN (e^(-inf - -inf)), and so must the group.
  std::unique_ptr<bool[]> mask(new bool[kKeys * kKeys]);
  for (int64_t i = 0; i < kKeys; ++i)
    for (int64_t j = 0; j < kKeys; ++j)
      mask[i * kKeys + j] = j <= i && i != 7 && i != 100;
  std::vector<float> grad = randomValues(n, 5, false);
  const CpuPaths &supported = getSupportedCpuPaths();
  for (int isa = 0; isa <= static_cast<int>(supported.kernels); ++isa) {
    auto kernels = static_cast<KernelIsa>(isa);
    INFO("kernels: " << getName(kernels));
    Context ctx(2, {kernels, supported.bf16Matmul});
    Shape shape{kHeads, kKeys, kKeys};
    std::vector<float> scaled(n), masked(n), probs(n);
    binary(ctx, BinaryKind::Div, Tensor(scores.data(), DType::F32, shape),
           Tensor(scale.data(), DType::F32, {}),
           Tensor(scaled.data(), DType::F32, shape));
    where(ctx, Tensor(mask.get(), DType::Bool, {kKeys, kKeys}),
          Tensor(scaled.data(), DType::F32, shape),
          Tensor(low.data(), DType::F32, {}),
          Tensor(masked.data(), DType::F32, shape));
    softmax(ctx, Tensor(masked.data(), DType::F32, shape),
            Tensor(probs.data(), DType::F32, shape), 2);
    CHECK(std::isnan(probs[7 * kKeys]));
    CHECK(std::isnan(probs[(kKeys + 100) * kKeys + 5]));

    std::vector<float> fused(n);
    void *data[] = {scores.data(), scale.data(), mask.get(), low.data(),
                    fused.data()};
    runFusedRows(ctx, kAttentionRows, data, rows, kKeys);
    CHECK(sameValues(fused, probs));

    // The gradient, of probabilities without NaN rows.
    std::vector<float> y(n), products(n), dots(rows), differences(n),
        expected(n);
    softmax(ctx, Tensor(scores.data(), DType::F32, shape),
            Tensor(y.data(), DType::F32, shape), 2);
    binary(ctx, BinaryKind::Mul, Tensor(grad.data(), DType::F32, shape),
           Tensor(y.data(), DType::F32, shape),
           Tensor(products.data(), DType::F32, shape));
    reduce(ctx, ReduceKind::Sum, Tensor(products.data(), DType::F32, shape),
           Tensor(dots.data(), DType::F32, {kHeads, kKeys, 1}), 1u << 2);
    binary(ctx, BinaryKind::Sub, Tensor(grad.data(), DType::F32, shape),
           Tensor(dots.data(), DType::F32, {kHeads, kKeys, 1}),
           Tensor(differences.data(), DType::F32, shape));
    binary(ctx, BinaryKind::Mul, Tensor(y.data(), DType::F32, shape),
           Tensor(differences.data(), DType::F32, shape),
           Tensor(expected.data(), DType::F32, shape));
    std::vector<float> fusedGrad(n);
    void *gradData[] = {grad.data(), y.data(), fusedGrad.data()};
    runFusedRows(ctx, kSoftmaxGradRows, gradData, rows, kKeys);
    CHECK(sameValues(fusedGrad, expected));
  }
}

TEST_CASE("a group's column sums give the bits of the reduce kernel") {
  const int64_t n = kSumRows * kSumColumns;
  std::vector<float> grad = randomValues(n, 6, false),
                     x = randomValues(n, 7, false);
  const Shape shape{3, kSumRows / 3, kSumColumns};
  const CpuPaths &supported = getSupportedCpuPaths();
  for (int isa = 0; isa <= static_cast<int>(supported.kernels); ++isa)
    for (int threads : {1, 2, 3}) {
      auto kernels = static_cast<KernelIsa>(isa);
      INFO("kernels: " << getName(kernels) << ", threads: " << threads);
      Context ctx(threads, {kernels, supported.bf16Matmul});
      std::vector<float> values(n), sums(kSumColumns), bf16Sums(kSumColumns);
      std::vector<BFloat16> rounded(n);
      binary(ctx, BinaryKind::GeluTanhGrad,
             Tensor(grad.data(), DType::F32, shape),
             Tensor(x.data(), DType::F32, shape),
             Tensor(values.data(), DType::F32, shape));
      cast(ctx, Tensor(values.data(), DType::F32, shape),
           Tensor(rounded.data(), DType::BF16, shape));
      reduce(ctx, ReduceKind::Sum, Tensor(values.data(), DType::F32, shape),
             Tensor(sums.data(), DType::F32, {kSumColumns}), 0b011u);
      reduce(ctx, ReduceKind::Sum, Tensor(rounded.data(), DType::BF16, shape),
             Tensor(bf16Sums.data(), DType::F32, {kSumColumns}), 0b011u);

      std::vector<float> fused(n), fusedSums(kSumColumns),
          fusedBf16Sums(kSumColumns);
      std::vector<BFloat16> fusedRounded(n);
      void *data[] = {grad.data(),      x.data(),
                      fused.data(),     fusedRounded.data(),
                      fusedSums.data(), fusedBf16Sums.data()};
      runFusedColumns(ctx, kGeluGradColumns, data, kSumRows, kSumColumns);
      CHECK(sameValues(fused, values));
      CHECK(std::memcmp(fusedRounded.data(), rounded.data(),
                        n * sizeof(BFloat16)) == 0);
      CHECK(sameValues(fusedSums, sums));
      CHECK(sameValues(fusedBf16Sums, bf16Sums));
    }
}
