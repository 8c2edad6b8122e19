// rotaryEmbedding against Hugging Face's apply_rotary_pos_emb spelled out
// here op by op (each op a tensor of its own, rotate_half's slices,
// negation and concat by index), bit for bit in f32 and f64; the transposed
// map against the forward map's adjoint; bf16 against the f32 kernel
// rounded once. Every case runs on each kernel build this CPU runs and on
// several thread counts.
#include "Bf16Paths.h"

#include "slapo/runtime/cpu/Kernels.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace slapo::rt;
using namespace slapo::rt::cpu;

namespace {

/// One context per kernel build this CPU runs (SLAPO_CPU_ISA caps them)
/// and per count in `threads`.
std::vector<std::unique_ptr<Context>>
getContexts(std::initializer_list<int> threads) {
  CpuPaths supported = getSupportedCpuPaths();
  std::vector<std::unique_ptr<Context>> contexts;
  for (KernelIsa isa : {KernelIsa::X86_64, KernelIsa::Avx2, KernelIsa::Avx512})
    if (isa <= supported.kernels)
      for (int count : threads)
        contexts.push_back(std::make_unique<Context>(
            count, CpuPaths{isa, supported.bf16Matmul}));
  return contexts;
}

/// Uniform values in [-1, 1).
template <typename T>
std::vector<T> randomValues(const Shape &shape, uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<T> uniform(-1, 1);
  std::vector<T> values(shape.getNumElements());
  for (T &value : values)
    value = uniform(engine);
  return values;
}

/// The input's shape and those of cos and sin, which broadcast to it.
struct RotaryShapes {
  Shape input, cos, sin;
};

/// LLaMA's [B, H, T, D] queries with the angles of every sequence alike
/// and of each sequence its own; an odd-sized [N, T, D] with angles of
/// lower rank, and with cos and sin of different shapes.
const RotaryShapes kShapes[] = {
    {{2, 3, 5, 8}, {1, 1, 5, 8}, {1, 1, 5, 8}},
    {{2, 3, 5, 8}, {2, 1, 5, 8}, {2, 1, 5, 8}},
    {{3, 7, 22}, {7, 22}, {7, 22}},
    {{3, 7, 22}, {1, 7, 22}, {1, 7, 22}},
    {{3, 7, 22}, {7, 22}, {1, 7, 22}},
};

/// "[3, 7, 22] cos [7, 22] sin [1, 7, 22] on the avx2 build, 2 threads".
std::string describe(const RotaryShapes &shapes, const Context &ctx) {
  return shapes.input.str() + " cos " + shapes.cos.str() + " sin " +
         shapes.sin.str() + " on the " + getName(ctx.getPaths().kernels) +
         " build, " + std::to_string(ctx.getThreads()) + " threads";
}

/// Element `i` of a tensor of shape `from` broadcast to `shape`.
int64_t getBroadcastIndex(const Shape &from, const Shape &shape, int64_t i) {
  int64_t index = 0, stride = 1;
  for (int d = shape.rank - 1, f = from.rank - 1; f >= 0; --d, --f) {
    int64_t coordinate = i % shape.dims[d];
    i /= shape.dims[d];
    if (from.dims[f] != 1)
      index += coordinate * stride;
    stride *= from.dims[f];
  }
  return index;
}

template <typename T>
std::vector<T> broadcast(const std::vector<T> &values, const Shape &from,
                         const Shape &shape) {
  std::vector<T> result(shape.getNumElements());
  for (size_t i = 0; i < result.size(); ++i)
    result[i] = values[getBroadcastIndex(from, shape, int64_t(i))];
  return result;
}

template <typename T>
std::vector<T> multiply(const std::vector<T> &a, const std::vector<T> &b) {
  std::vector<T> product(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    product[i] = a[i] * b[i];
  return product;
}

template <typename T>
std::vector<T> add(const std::vector<T> &a, const std::vector<T> &b) {
  std::vector<T> sum(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    sum[i] = a[i] + b[i];
  return sum;
}

/// rotate_half over rows of `size`, concat(-y[..., size/2:], y[..., :size/2]),
/// or its transpose, concat(y[..., size/2:], -y[..., :size/2]).
template <typename T>
std::vector<T> rotateHalf(const std::vector<T> &y, int64_t size,
                          bool transposed) {
  int64_t half = size / 2;
  std::vector<T> rotated(y.size());
  for (size_t i = 0; i < y.size(); ++i) {
    bool lower = int64_t(i) % size < half;
    T partner = lower ? y[i + half] : y[i - half];
    rotated[i] = lower != transposed ? -partner : partner;
  }
  return rotated;
}

/// x * cos + rotate_half(x) * sin, or x * cos + rotate_half^T(x * sin).
template <typename T>
std::vector<T> spellOut(const std::vector<T> &x, const std::vector<T> &cos,
                        const std::vector<T> &sin, const RotaryShapes &shapes,
                        bool transposed) {
  const Shape &shape = shapes.input;
  int64_t size = shape.dims[shape.rank - 1];
  std::vector<T> broadcastSin = broadcast(sin, shapes.sin, shape);
  std::vector<T> rotated =
      transposed ? rotateHalf(multiply(x, broadcastSin), size, true)
                 : multiply(rotateHalf(x, size, false), broadcastSin);
  return add(multiply(x, broadcast(cos, shapes.cos, shape)), rotated);
}

template <typename T>
std::vector<T> runRotary(Context &ctx, DType dtype, std::vector<T> x,
                         std::vector<T> cos, std::vector<T> sin,
                         const RotaryShapes &shapes, bool transposed) {
  std::vector<T> out(x.size());
  rotaryEmbedding(ctx, Tensor(x.data(), dtype, shapes.input),
                  Tensor(cos.data(), dtype, shapes.cos),
                  Tensor(sin.data(), dtype, shapes.sin),
                  Tensor(out.data(), dtype, shapes.input), transposed);
  return out;
}

/// How many elements of `a` and `b` differ in their bits.
template <typename T>
int64_t countBitMismatches(const std::vector<T> &a, const std::vector<T> &b) {
  int64_t count = 0;
  for (size_t i = 0; i < a.size(); ++i)
    count += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  return count;
}

/// The kernel in dtype `dtype` (element type T) against spellOut on every
/// context, forward and transposed.
template <typename T>
void checkAgainstSpelledOut(DType dtype, const RotaryShapes &shapes,
                            std::initializer_list<int> threads) {
  std::vector<T> x = randomValues<T>(shapes.input, 1);
  std::vector<T> cos = randomValues<T>(shapes.cos, 2);
  std::vector<T> sin = randomValues<T>(shapes.sin, 3);
  for (bool transposed : {false, true}) {
    std::vector<T> expected = spellOut(x, cos, sin, shapes, transposed);
    for (const auto &ctx : getContexts(threads)) {
      INFO(getName(dtype) << " " << describe(shapes, *ctx)
                          << (transposed ? ", transposed" : ""));
      CHECK(countBitMismatches(
                runRotary(*ctx, dtype, x, cos, sin, shapes, transposed),
                expected) == 0);
    }
  }
}

double dot(const std::vector<float> &a, const std::vector<float> &b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i)
    sum += double(a[i]) * b[i];
  return sum;
}

} // namespace

TEST_CASE("rotaryEmbedding is the spelled-out ops bit for bit in f32 and "
          "f64") {
  for (const RotaryShapes &shapes : kShapes) {
    checkAgainstSpelledOut<float>(DType::F32, shapes, {1, 2});
    checkAgainstSpelledOut<double>(DType::F64, shapes, {1, 2});
  }
}

TEST_CASE("rotaryEmbedding transposed is the adjoint of the forward map") {
  for (const RotaryShapes &shapes : kShapes) {
    std::vector<float> x = randomValues<float>(shapes.input, 4);
    std::vector<float> y = randomValues<float>(shapes.input, 5);
    std::vector<float> cos = randomValues<float>(shapes.cos, 6);
    std::vector<float> sin = randomValues<float>(shapes.sin, 7);
    for (const auto &ctx : getContexts({1, 2})) {
      INFO(describe(shapes, *ctx));
      // <R x, y> = <x, R^T y>, each map's result rounded to f32.
      double forward =
          dot(runRotary(*ctx, DType::F32, x, cos, sin, shapes, false), y);
      double adjoint =
          dot(x, runRotary(*ctx, DType::F32, y, cos, sin, shapes, true));
      CHECK(adjoint == Approx(forward).epsilon(1e-5));
    }
  }
}

TEST_CASE("rotaryEmbedding in bf16 is the f32 kernel rounded once") {
  for (const RotaryShapes &shapes : kShapes) {
    std::vector<float> x = randomValues<float>(shapes.input, 8);
    std::vector<float> cos = randomValues<float>(shapes.cos, 9);
    std::vector<float> sin = randomValues<float>(shapes.sin, 10);
    // The f32 kernel sees the values bf16 holds.
    std::vector<BFloat16> narrowX = roundToBf16(x);
    std::vector<BFloat16> narrowCos = roundToBf16(cos);
    std::vector<BFloat16> narrowSin = roundToBf16(sin);
    for (bool transposed : {false, true})
      for (const auto &ctx : getContexts({1, 2})) {
        INFO(describe(shapes, *ctx) << (transposed ? ", transposed" : ""));
        std::vector<float> wide =
            runRotary(*ctx, DType::F32, x, cos, sin, shapes, transposed);
        CHECK(
            countBitMismatches(runRotary(*ctx, DType::BF16, narrowX, narrowCos,
                                         narrowSin, shapes, transposed),
                               roundToBf16(wide)) == 0);
      }
  }
}

TEST_CASE("rotaryEmbedding threaded over rows is the spelled-out ops bit for "
          "bit") {
  // 68000 elements: two and three tasks of the kernels' grain. Three split
  // rows inside their halves (at elements 22666 and 45333 of rows of 40).
  for (const Shape &angles : {Shape{1, 1, 170, 40}, Shape{2, 1, 170, 40}})
    checkAgainstSpelledOut<float>(DType::F32, {{2, 5, 170, 40}, angles, angles},
                                  {1, 2, 3});
}
