// rotaryEmbedding against Hugging Face's apply_rotary_pos_emb spelled out
// here op by op (each op a tensor of its own, rotate_half's slices,
// negation and concat by index), bit for bit in f32 and f64; the transposed
// map against the forward map's adjoint; bf16 against the f32 kernel
// rounded once; a narrower input or out than cos and sin (mixed
// precision's casts folded in) against the kernel on the widened input
// rounded once, and the dtypes refused. Every case runs on each kernel
// build this CPU runs and on several thread counts.
#include "Bf16Paths.h"

#include "slapo/runtime/Error.h"
#include "slapo/runtime/cpu/Kernels.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
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

/// The DType of element type T.
template <typename T> constexpr DType kDType = DType::F32;
template <> constexpr DType kDType<double> = DType::F64;
template <> constexpr DType kDType<BFloat16> = DType::BF16;

/// `value` as a To, as the runtime's cast rounds it: a 16-bit float through
/// f32.
template <typename To, typename From> To convert(From value) {
  if constexpr (std::is_same_v<From, BFloat16>)
    return convert<To>(value.toFloat());
  else if constexpr (std::is_same_v<To, BFloat16>)
    return BFloat16::fromFloat(float(value));
  else
    return To(value);
}

template <typename To, typename From>
std::vector<To> convertAll(const std::vector<From> &values) {
  std::vector<To> converted;
  for (const From &value : values)
    converted.push_back(convert<To>(value));
  return converted;
}

/// The kernel on an input of type In, cos and sin of type C, into an out of
/// type Out.
template <typename Out, typename In, typename C>
std::vector<Out> runMixed(Context &ctx, std::vector<In> x, std::vector<C> cos,
                          std::vector<C> sin, const RotaryShapes &shapes,
                          bool transposed) {
  std::vector<Out> out(x.size());
  rotaryEmbedding(ctx, Tensor(x.data(), kDType<In>, shapes.input),
                  Tensor(cos.data(), kDType<C>, shapes.cos),
                  Tensor(sin.data(), kDType<C>, shapes.sin),
                  Tensor(out.data(), kDType<Out>, shapes.input), transposed);
  return out;
}

/// The kernel with input In, angles C and out Out against the all-C kernel
/// on the input widened to C, its result rounded to Out, and against the
/// spelled-out ops on it (which the all-C kernel is, bit for bit): the same
/// bits, on every context, forward and transposed.
template <typename In, typename C, typename Out>
void checkMixed(const RotaryShapes &shapes,
                std::initializer_list<int> threads) {
  std::vector<In> x = convertAll<In>(randomValues<C>(shapes.input, 11));
  std::vector<C> cos = randomValues<C>(shapes.cos, 12);
  std::vector<C> sin = randomValues<C>(shapes.sin, 13);
  std::vector<C> widened = convertAll<C>(x);
  for (bool transposed : {false, true}) {
    std::vector<Out> spelledOut =
        convertAll<Out>(spellOut(widened, cos, sin, shapes, transposed));
    for (const auto &ctx : getContexts(threads)) {
      INFO(getName(kDType<In>)
           << " input, " << getName(kDType<C>) << " angles, "
           << getName(kDType<Out>) << " out, " << describe(shapes, *ctx)
           << (transposed ? ", transposed" : ""));
      std::vector<Out> mixed =
          runMixed<Out>(*ctx, x, cos, sin, shapes, transposed);
      CHECK(countBitMismatches(
                mixed, convertAll<Out>(runMixed<C>(*ctx, widened, cos, sin,
                                                   shapes, transposed))) == 0);
      CHECK(countBitMismatches(mixed, spelledOut) == 0);
    }
  }
}

/// The message of the Error that rotaryEmbedding throws on tensors of
/// these dtypes (of element size at most 8), or "no error".
std::string getRefusal(DType input, DType cos, DType sin, DType out) {
  Shape shape{2, 4};
  std::vector<double> x(8), c(8), s(8), y(8);
  Context ctx(1);
  try {
    rotaryEmbedding(ctx, Tensor(x.data(), input, shape),
                    Tensor(c.data(), cos, shape), Tensor(s.data(), sin, shape),
                    Tensor(y.data(), out, shape), false);
  } catch (const Error &error) {
    return error.what();
  }
  return "no error";
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

TEST_CASE("rotaryEmbedding with a narrower input or out is the kernel on the "
          "widened input rounded once") {
  for (const RotaryShapes &shapes : kShapes) {
    // Mixed precision's forward (an f32 input into a bf16 out), its
    // transposed map (a bf16 gradient into f32), both narrow at once.
    checkMixed<float, float, BFloat16>(shapes, {1, 2});
    checkMixed<BFloat16, float, float>(shapes, {1, 2});
    checkMixed<BFloat16, float, BFloat16>(shapes, {1, 2});
    // Under f64 angles.
    checkMixed<float, double, float>(shapes, {1, 2});
    checkMixed<BFloat16, double, double>(shapes, {1, 2});
  }
  // Threaded, with the tasks' bounds inside the rows' halves.
  RotaryShapes large = {{2, 5, 170, 40}, {1, 1, 170, 40}, {1, 1, 170, 40}};
  checkMixed<float, float, BFloat16>(large, {1, 2, 3});
  checkMixed<BFloat16, float, float>(large, {1, 2, 3});
}

TEST_CASE("rotaryEmbedding refuses an input or out wider than cos and sin "
          "and cos and sin of different dtypes") {
  CHECK(getRefusal(DType::F32, DType::BF16, DType::BF16, DType::BF16) ==
        "the CPU kernel 'rotaryEmbedding' does not support input F32 with "
        "cos and sin BF16 (input must be the cos and sin's dtype or a "
        "narrower float)");
  CHECK(getRefusal(DType::F32, DType::F32, DType::BF16, DType::F32) ==
        "the CPU kernel 'rotaryEmbedding' does not support sin BF16 with cos "
        "F32 (cos and sin must share one dtype)");
  CHECK(getRefusal(DType::F32, DType::F32, DType::F32, DType::F64) ==
        "the CPU kernel 'rotaryEmbedding' does not support out F64 with cos "
        "and sin F32 (out must be the cos and sin's dtype or a narrower "
        "float)");
  // Neither of f16 and bf16 holds the other's values exactly.
  CHECK(getRefusal(DType::F16, DType::BF16, DType::BF16, DType::BF16) ==
        "the CPU kernel 'rotaryEmbedding' does not support input F16 with "
        "cos and sin BF16 (input must be the cos and sin's dtype or a "
        "narrower float)");
  CHECK(getRefusal(DType::F32, DType::F32, DType::F32, DType::I32) ==
        "the CPU kernel 'rotaryEmbedding' does not support out I32 with cos "
        "and sin F32 (out must be the cos and sin's dtype or a narrower "
        "float)");
}
