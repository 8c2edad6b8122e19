// The kernel conformance list: one list of cases, each a function generic
// over a backend's Context that uploads host inputs (random, from fixed
// seeds), runs kernels and downloads their outputs. Every case runs on the
// CPU backend, the reference, and on the CUDA backend, and the outputs must
// agree: exactly for integers, booleans, data movement, conversions and
// dropout masks; within a few f32 ulps (relative 1e-5) for f32 math; within
// one rounding (relative 2^-7 for bf16, 2^-10 for f16) where both backends
// compute in f32 and round once; looser where the backends accumulate in
// different orders or precisions (sums, products, embedding gradients),
// as each case says. Kernels that reject their input (a bad embedding index
// or cross-entropy target) must throw the same Error on both; the CUDA
// backend throws when the stream synchronizes.
//
// Without a CUDA device the program says so and exits with kSkipped, which
// ctest reports as a skipped test: on a machine without a GPU it shows that
// the CUDA backend compiles and links.
#define CATCH_CONFIG_RUNNER

#include "CudnnAttention.h"
#include "slapo/runtime/AttentionGeometry.h"
#include "slapo/runtime/Error.h"
#include "slapo/runtime/LinearCrossEntropyWorkspace.h"
#include "slapo/runtime/cpu/Context.h"
#include "slapo/runtime/cpu/Kernels.h"
#include "slapo/runtime/cuda/Context.h"
#include "slapo/runtime/cuda/Kernels.h"

#include <catch2/catch.hpp>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace slapo::rt;

namespace {

/// The exit status ctest reads as "skipped" (SKIP_RETURN_CODE in
/// CMakeLists.txt).
constexpr int kSkipped = 77;

//===----------------------------------------------------------------------===//
// Host tensors.
//===----------------------------------------------------------------------===//

bool isFloat(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::BF16 ||
         dtype == DType::F16;
}

/// A tensor's bytes in host memory, with element access through double.
struct HostTensor {
  DType dtype;
  Shape shape;
  std::vector<uint8_t> bytes;

  HostTensor(DType dtype, Shape shape)
      : dtype(dtype), shape(shape),
        bytes(shape.getNumElements() * getSize(dtype)) {}

  int64_t getCount() const { return shape.getNumElements(); }

  double get(int64_t i) const {
    const uint8_t *at = bytes.data() + i * getSize(dtype);
    switch (dtype) {
    case DType::F32:
      return read<float>(at);
    case DType::F64:
      return read<double>(at);
    case DType::BF16:
      return BFloat16{read<uint16_t>(at)}.toFloat();
    case DType::F16:
      return __half2float(read<__half>(at));
    case DType::I8:
      return read<int8_t>(at);
    case DType::I32:
      return read<int32_t>(at);
    case DType::I64:
      return static_cast<double>(read<int64_t>(at));
    case DType::Bool:
      return read<uint8_t>(at) != 0;
    }
    return 0;
  }

  /// Element i = value, rounded as the kernels round (16-bit floats through
  /// f32).
  void set(int64_t i, double value) {
    uint8_t *at = bytes.data() + i * getSize(dtype);
    switch (dtype) {
    case DType::F32:
      return write(at, static_cast<float>(value));
    case DType::F64:
      return write(at, value);
    case DType::BF16:
      return write(at, BFloat16::fromFloat(static_cast<float>(value)).bits);
    case DType::F16:
      return write(at, __float2half_rn(static_cast<float>(value)));
    case DType::I8:
      return write(at, static_cast<int8_t>(value));
    case DType::I32:
      return write(at, static_cast<int32_t>(value));
    case DType::I64:
      return write(at, static_cast<int64_t>(value));
    case DType::Bool:
      return write(at, static_cast<uint8_t>(value != 0));
    }
  }

private:
  template <typename T> static T read(const uint8_t *at) {
    T value;
    std::memcpy(&value, at, sizeof value);
    return value;
  }
  template <typename T> static void write(uint8_t *at, T value) {
    std::memcpy(at, &value, sizeof value);
  }
};

/// Uniform values in [low, high) (integers: [low, high]; Bool: either).
HostTensor random(DType dtype, Shape shape, uint32_t seed, double low = -1,
                  double high = 1) {
  HostTensor tensor(dtype, shape);
  std::mt19937 engine(seed);
  std::uniform_real_distribution<double> real(low, high);
  std::uniform_int_distribution<int64_t> integer(std::llround(low),
                                                 std::llround(high));
  for (int64_t i = 0; i < tensor.getCount(); ++i)
    tensor.set(i, isFloat(dtype)         ? real(engine)
                  : dtype == DType::Bool ? double(engine() & 1)
                                         : double(integer(engine)));
  return tensor;
}

HostTensor literal(DType dtype, Shape shape, std::vector<double> values) {
  HostTensor tensor(dtype, shape);
  for (int64_t i = 0; i < tensor.getCount(); ++i)
    tensor.set(i, values[i]);
  return tensor;
}

/// A 0-d F64 tensor: the optimizers' learning rate.
HostTensor scalar(double value) {
  return literal(DType::F64, Shape(), {value});
}

/// A 0-d I64 tensor: how many elements of `a` and `b` differ in their bits.
/// For a fused kernel against the kernels it fuses, which must agree
/// exactly on each backend: 0 on both.
HostTensor countMismatches(const HostTensor &a, const HostTensor &b) {
  size_t size = getSize(a.dtype);
  int64_t count = 0;
  for (int64_t i = 0; i < a.getCount(); ++i)
    count += std::memcmp(a.bytes.data() + i * size, b.bytes.data() + i * size,
                         size) != 0;
  return literal(DType::I64, Shape(), {double(count)});
}

//===----------------------------------------------------------------------===//
// Running a case on a backend.
//===----------------------------------------------------------------------===//

/// The tensors one run of a case allocates in a backend's memory, freed at
/// its end.
template <typename Ctx> class Session {
public:
  explicit Session(Ctx &ctx) : ctx(ctx) {}
  ~Session() {
    for (void *data : buffers)
      ctx.release(data);
  }
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  Tensor upload(const HostTensor &host) {
    Tensor tensor = allocate(host.dtype, host.shape);
    ctx.copyToDevice(tensor.data, host.bytes.data(), host.bytes.size());
    return tensor;
  }
  /// An output, filled with a pattern that no kernel writes, so that an
  /// element one backend leaves unwritten differs.
  Tensor output(DType dtype, Shape shape) {
    HostTensor pattern(dtype, shape);
    std::fill(pattern.bytes.begin(), pattern.bytes.end(), uint8_t(0x5a));
    return upload(pattern);
  }
  HostTensor download(const Tensor &tensor) {
    HostTensor host(tensor.dtype, tensor.shape);
    ctx.copyToHost(host.bytes.data(), tensor.data, host.bytes.size());
    return host;
  }

  Ctx &ctx;

private:
  Tensor allocate(DType dtype, Shape shape) {
    size_t bytes = shape.getNumElements() * getSize(dtype);
    buffers.push_back(ctx.allocate(std::max<size_t>(bytes, 1)));
    return Tensor(buffers.back(), dtype, shape);
  }

  std::vector<void *> buffers;
};

using Outputs = std::vector<HostTensor>;

/// |got - want| <= absolute + relative * |want|; NaN matches NaN.
struct Tolerance {
  double relative = 0, absolute = 0;
};

/// A few ulps of f32 and f64 math, one rounding of 16-bit floats; exact for
/// the rest.
Tolerance getDefaultTolerance(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return {1e-5, 1e-6};
  case DType::F64:
    return {1e-12, 1e-14};
  case DType::BF16:
    return {8e-3, 1e-6}; // 2^-7 (one bf16 rounding), and a little
  case DType::F16:
    return {1.5e-3, 1e-6}; // 2^-10, and a little
  default:
    return {};
  }
}

Tolerance getExact(DType) { return {}; }

/// The default tolerances, with an absolute tolerance of at least
/// `absolute` for floats: for sums whose terms cancel.
std::function<Tolerance(DType)> withAbsolute(double absolute) {
  return [absolute](DType dtype) {
    Tolerance tolerance = getDefaultTolerance(dtype);
    if (isFloat(dtype))
      tolerance.absolute = std::max(tolerance.absolute, absolute);
    return tolerance;
  };
}

/// For results that span orders of magnitude (probabilities): relative
/// alone, but for f16's subnormal spacing (2^-24).
Tolerance getRelative(DType dtype) {
  Tolerance tolerance = getDefaultTolerance(dtype);
  tolerance.absolute = dtype == DType::F16 ? 0x1.0p-24 : 0;
  return tolerance;
}

struct Case {
  std::string name;
  std::function<Outputs(Session<cpu::Context> &)> onCpu;
  std::function<Outputs(Session<cuda::Context> &)> onCuda;
  std::function<Tolerance(DType)> tolerance = getDefaultTolerance;
  /// Whether both backends must throw (the same Error).
  bool throws = false;
};

class CaseList {
public:
  /// Adds a case; `body(session)` runs it on either backend.
  template <typename F>
  void add(std::string name, F body,
           std::function<Tolerance(DType)> tolerance = getDefaultTolerance,
           bool throws = false) {
    cases.push_back(
        {std::move(name), body, body, std::move(tolerance), throws});
  }

  /// Adds a case that runs `run(ctx, inputs, out)` on `inputs` uploaded
  /// and one output of `dtype` and `shape`.
  template <typename F>
  void
  addKernel(std::string name, std::vector<HostTensor> inputs, DType dtype,
            Shape shape, F run,
            std::function<Tolerance(DType)> tolerance = getDefaultTolerance) {
    add(
        std::move(name),
        [=](auto &session) -> Outputs {
          std::vector<Tensor> in;
          for (const HostTensor &input : inputs)
            in.push_back(session.upload(input));
          Tensor out = session.output(dtype, shape);
          run(session.ctx, in, out);
          return {session.download(out)};
        },
        std::move(tolerance));
  }

  const std::vector<Case> &get() const { return cases; }

private:
  std::vector<Case> cases;
};

std::string describe(DType dtype, const Shape &shape) {
  return std::string(getName(dtype)) + " " + shape.str();
}

//===----------------------------------------------------------------------===//
// The cases.
//===----------------------------------------------------------------------===//

const DType kAllTypes[] = {DType::F32, DType::F64, DType::BF16, DType::F16,
                           DType::I8,  DType::I32, DType::I64,  DType::Bool};
const DType kFloatTypes[] = {DType::F32, DType::F64, DType::BF16, DType::F16};
const DType kIntegerTypes[] = {DType::I8, DType::I32, DType::I64};
/// One dtype of each element width, for the kernels that only move data.
const DType kWidthTypes[] = {DType::Bool, DType::BF16, DType::F32, DType::I64};

void addGenerators(CaseList &cases) {
  for (DType dtype : kAllTypes) {
    for (double value : {3.0, -0.0, 0.0}) {
      cases.addKernel(
          "fill " + describe(dtype, {37, 5}) + " with " + std::to_string(value),
          {}, dtype, {37, 5},
          [value](auto &ctx, auto &, const Tensor &out) {
            fill(ctx, out, value);
          },
          getExact);
    }
    cases.add(
        std::string("copyFrom ") + getName(dtype),
        [dtype](auto &session) -> Outputs {
          HostTensor values = random(dtype, {1001}, 3, -50, 50);
          Tensor out = session.output(dtype, {1001});
          copyFrom(session.ctx, out, values.bytes.data());
          return {session.download(out)};
        },
        getExact);
  }
  for (DType dtype : {DType::F32, DType::F64, DType::BF16, DType::F16,
                      DType::I8, DType::I32, DType::I64}) {
    bool integer = !isFloat(dtype);
    double start = integer ? -5 : 1.5, step = integer ? 1 : 0.1;
    int64_t count = dtype == DType::I8 ? 100 : 1000;
    cases.addKernel(
        "arange " + describe(dtype, {count}), {}, dtype, {count},
        [=](auto &ctx, auto &, const Tensor &out) {
          arange(ctx, out, start, step);
        },
        getExact);
  }
}

void addUnary(CaseList &cases) {
  const std::pair<UnaryKind, const char *> kinds[] = {
      {UnaryKind::Neg, "Neg"},         {UnaryKind::Abs, "Abs"},
      {UnaryKind::Exp, "Exp"},         {UnaryKind::Log, "Log"},
      {UnaryKind::Sqrt, "Sqrt"},       {UnaryKind::Rsqrt, "Rsqrt"},
      {UnaryKind::Tanh, "Tanh"},       {UnaryKind::Sigmoid, "Sigmoid"},
      {UnaryKind::Relu, "Relu"},       {UnaryKind::Silu, "Silu"},
      {UnaryKind::Sin, "Sin"},         {UnaryKind::Cos, "Cos"},
      {UnaryKind::GeluErf, "GeluErf"}, {UnaryKind::GeluTanh, "GeluTanh"}};
  const Shape shape = {3, 333};
  for (auto [kind, name] : kinds) {
    bool positive = kind == UnaryKind::Log || kind == UnaryKind::Sqrt ||
                    kind == UnaryKind::Rsqrt;
    for (DType dtype : kFloatTypes)
      cases.addKernel(
          std::string("unary ") + name + " " + describe(dtype, shape),
          {random(dtype, shape, 10 + int(kind), positive ? 0.05 : -4, 4)},
          dtype, shape, [kind = kind](auto &ctx, auto &in, const Tensor &out) {
            unary(ctx, kind, in[0], out);
          });
    if (kind == UnaryKind::Neg || kind == UnaryKind::Abs ||
        kind == UnaryKind::Relu)
      for (DType dtype : kIntegerTypes)
        cases.addKernel(std::string("unary ") + name + " " +
                            describe(dtype, shape),
                        {random(dtype, shape, 20, -100, 100)}, dtype, shape,
                        [kind = kind](auto &ctx, auto &in, const Tensor &out) {
                          unary(ctx, kind, in[0], out);
                        });
  }
}

void addCasts(CaseList &cases) {
  const Shape shape = {5, 67};
  for (DType from : kAllTypes)
    for (DType to : kAllTypes)
      // Values every dtype holds; floats with fractions, which truncate.
      cases.addKernel(
          "cast " + describe(from, shape) + " to " + getName(to),
          {random(from, shape, 30, -100, 100)}, to, shape,
          [](auto &ctx, auto &in, const Tensor &out) { cast(ctx, in[0], out); },
          getExact);
}

/// The operand shapes of binary-shaped ops: equal shapes (the contiguous
/// kernel) and broadcasts of several kinds (the strided one).
struct BinaryShapes {
  const char *name;
  Shape lhs, rhs, out;
};
const BinaryShapes kBinaryShapes[] = {
    {"equal", {4, 131}, {4, 131}, {4, 131}},
    {"row", {6, 7, 130}, {130}, {6, 7, 130}},
    {"outer", {4, 1, 33}, {3, 1}, {4, 3, 33}},
    {"scalar", {}, {7, 9}, {7, 9}},
};

void addBinary(CaseList &cases) {
  const std::pair<BinaryKind, const char *> kinds[] = {
      {BinaryKind::Add, "Add"},
      {BinaryKind::Sub, "Sub"},
      {BinaryKind::Mul, "Mul"},
      {BinaryKind::Div, "Div"},
      {BinaryKind::Pow, "Pow"},
      {BinaryKind::Maximum, "Maximum"},
      {BinaryKind::Minimum, "Minimum"},
      {BinaryKind::GeluErfGrad, "GeluErfGrad"},
      {BinaryKind::GeluTanhGrad, "GeluTanhGrad"}};
  for (auto [kind, name] : kinds) {
    bool gelu =
        kind == BinaryKind::GeluErfGrad || kind == BinaryKind::GeluTanhGrad;
    for (DType dtype : kAllTypes) {
      if (gelu && !isFloat(dtype))
        continue;
      for (const BinaryShapes &shapes : kBinaryShapes) {
        // Every dtype on equal shapes, f32 and i32 on every broadcast.
        if (shapes.lhs != shapes.rhs && dtype != DType::F32 &&
            dtype != DType::I32)
          continue;
        HostTensor lhs = random(dtype, shapes.lhs, 40, -3, 3);
        HostTensor rhs = random(dtype, shapes.rhs, 41, -3, 3);
        if (kind == BinaryKind::Pow && isFloat(dtype)) {
          // Positive bases; exponents with the exact squares and cubes.
          lhs = random(dtype, shapes.lhs, 42, 0.25, 2);
          for (int64_t i = 0; i < rhs.getCount(); ++i)
            rhs.set(i, i % 3 == 0 ? 2 : i % 3 == 1 ? 3 : rhs.get(i));
        } else if (kind == BinaryKind::Pow) {
          rhs = random(dtype, shapes.rhs, 43, -1, 5);
        } else if (kind == BinaryKind::Div && isFloat(dtype)) {
          rhs = random(dtype, shapes.rhs, 44, 0.5, 3); // no division by 0
        }
        cases.addKernel(std::string("binary ") + name + " " +
                            describe(dtype, shapes.out) + " " + shapes.name,
                        {lhs, rhs}, dtype, shapes.out,
                        [kind = kind](auto &ctx, auto &in, const Tensor &out) {
                          binary(ctx, kind, in[0], in[1], out);
                        });
      }
    }
  }
  // In place, as the collectives divide a bucket by the group size.
  for (DType dtype : {DType::F32, DType::BF16})
    cases.add("binary Div " + describe(dtype, {1000}) + " in place",
              [dtype](auto &session) -> Outputs {
                Tensor data = session.upload(random(dtype, {1000}, 45));
                Tensor divisor = session.upload(literal(dtype, Shape(), {4}));
                binary(session.ctx, BinaryKind::Div, data, divisor, data);
                return {session.download(data)};
              });
}

void addCompareAndWhere(CaseList &cases) {
  const std::pair<CompareKind, const char *> kinds[] = {
      {CompareKind::Eq, "Eq"}, {CompareKind::Ne, "Ne"},
      {CompareKind::Lt, "Lt"}, {CompareKind::Le, "Le"},
      {CompareKind::Gt, "Gt"}, {CompareKind::Ge, "Ge"}};
  for (auto [kind, name] : kinds)
    for (DType dtype : kAllTypes)
      for (const BinaryShapes &shapes : kBinaryShapes) {
        if (shapes.lhs != shapes.rhs && dtype != DType::F32)
          continue;
        // Small integers, so that equal elements are common.
        HostTensor lhs = random(dtype, shapes.lhs, 50, -2, 2);
        HostTensor rhs = random(dtype, shapes.rhs, 51, -2, 2);
        for (HostTensor *operand : {&lhs, &rhs})
          for (int64_t i = 0; isFloat(dtype) && i < operand->getCount(); ++i)
            operand->set(i, std::round(operand->get(i)));
        cases.addKernel(std::string("compare ") + name + " " +
                            describe(dtype, shapes.out) + " " + shapes.name,
                        {lhs, rhs}, DType::Bool, shapes.out,
                        [kind = kind](auto &ctx, auto &in, const Tensor &out) {
                          compare(ctx, kind, in[0], in[1], out);
                        });
      }
  for (DType dtype : kWidthTypes) {
    cases.addKernel(
        "where " + describe(dtype, {5, 7}) + " broadcast",
        {random(DType::Bool, {5, 1}, 60), random(dtype, {1, 7}, 61),
         random(dtype, {5, 7}, 62)},
        dtype, {5, 7},
        [](auto &ctx, auto &in, const Tensor &out) {
          where(ctx, in[0], in[1], in[2], out);
        },
        getExact);
    cases.addKernel(
        "where " + describe(dtype, {3, 1001}) + " equal",
        {random(DType::Bool, {3, 1001}, 63), random(dtype, {3, 1001}, 64),
         random(dtype, {3, 1001}, 65)},
        dtype, {3, 1001},
        [](auto &ctx, auto &in, const Tensor &out) {
          where(ctx, in[0], in[1], in[2], out);
        },
        getExact);
  }
}

void addTriangularAndDropout(CaseList &cases) {
  for (DType dtype : kWidthTypes)
    for (bool lower : {true, false})
      for (int64_t diagonal : {-2, 0, 3}) {
        Shape shape = {3, 5, 7};
        cases.addKernel(
            std::string("triangular ") + (lower ? "lower " : "upper ") +
                std::to_string(diagonal) + " " + describe(dtype, shape),
            {random(dtype, shape, 70, -9, 9)}, dtype, shape,
            [=](auto &ctx, auto &in, const Tensor &out) {
              triangular(ctx, in[0], out, lower, diagonal);
            },
            getExact);
      }

  DropoutKey key{/*seed=*/1234, /*step=*/3, /*stream=*/5, /*rankStream=*/1};
  for (DType dtype : kFloatTypes)
    for (double p : {0.1, 0.5}) {
      Shape shape = {4, 33, 65};
      cases.addKernel(
          "dropout " + std::to_string(p) + " " + describe(dtype, shape),
          {random(dtype, shape, 80)}, dtype, shape,
          [=](auto &ctx, auto &in, const Tensor &out) {
            dropout(ctx, in[0], out, p, key, DropoutPlacement());
          },
          getExact);
    }
  // A data- and tensor-parallel rank's part of the whole tensor's mask.
  DropoutPlacement placement;
  placement.dpRank = 1;
  placement.shard.axis = 1;
  placement.shard.chunks = 3;
  placement.shard.tp = 2;
  placement.tpRank = 1;
  for (DType dtype : {DType::F32, DType::BF16})
    cases.addKernel(
        "dropout 0.3 tp split " + describe(dtype, {4, 6, 11}),
        {random(dtype, {4, 6, 11}, 81)}, dtype, {4, 6, 11},
        [=](auto &ctx, auto &in, const Tensor &out) {
          dropout(ctx, in[0], out, 0.3, key, placement);
        },
        getExact);
}

void addContractions(CaseList &cases) {
  // Sums of up to 100 products of values in [-1, 1] accumulate in
  // different orders: an absolute tolerance.
  auto products = withAbsolute(1e-4);
  struct LinearCase {
    DType input, out, bias;
    bool hasBias;
    Shape inputShape;
    int64_t n;
  };
  const LinearCase linearCases[] = {
      {DType::F32, DType::F32, DType::F32, false, {37, 70}, 45},
      {DType::F32, DType::F32, DType::F32, true, {37, 70}, 45},
      {DType::F32, DType::F32, DType::F32, true, {3, 5, 64}, 96},
      {DType::BF16, DType::BF16, DType::BF16, true, {37, 70}, 45},
      {DType::BF16, DType::BF16, DType::BF16, false, {2, 64, 128}, 256},
      {DType::BF16, DType::F32, DType::F32, true, {37, 70}, 45},
      {DType::BF16, DType::F32, DType::BF16, true, {37, 70}, 45},
      {DType::F32, DType::F32, DType::F32, true, {4, 0}, 5},
  };
  for (const LinearCase &c : linearCases) {
    int64_t k = c.inputShape.dims[c.inputShape.rank - 1];
    Shape outShape = c.inputShape;
    outShape.dims[outShape.rank - 1] = c.n;
    std::vector<HostTensor> inputs = {random(c.input, c.inputShape, 90),
                                      random(c.input, {c.n, k}, 91)};
    if (c.hasBias)
      inputs.push_back(random(c.bias, {c.n}, 92));
    cases.addKernel(
        "linear " + describe(c.input, c.inputShape) + " by " +
            std::to_string(c.n) + " into " + getName(c.out) +
            (c.hasBias ? std::string(" + bias ") + getName(c.bias) : ""),
        inputs, c.out, outShape,
        [hasBias = c.hasBias](auto &ctx, auto &in, const Tensor &out) {
          linear(ctx, in[0], in[1], hasBias ? in[2] : Tensor(), out);
        },
        products);
  }

  // Each operand stored as `lhs`/`rhs` and read through its permutation;
  // the product written to `out` through `result`.
  struct MatmulCase {
    const char *name;
    DType input, out;
    Shape lhs, rhs, out_;
    std::vector<int64_t> lhsPermutation, rhsPermutation, resultPermutation;
  };
  const MatmulCase matmulCases[] = {
      {"batched",
       DType::F32,
       DType::F32,
       {5, 37, 19},
       {5, 19, 23},
       {5, 37, 23},
       {},
       {},
       {}},
      {"broadcast batch",
       DType::F32,
       DType::F32,
       {2, 1, 9, 16},
       {3, 16, 11},
       {2, 3, 9, 11},
       {},
       {},
       {}},
      {"shared rhs",
       DType::F32,
       DType::F32,
       {4, 33, 16},
       {16, 24},
       {4, 33, 24},
       {},
       {},
       {}},
      {"shared lhs",
       DType::F32,
       DType::F32,
       {9, 16},
       {4, 16, 11},
       {4, 9, 11},
       {},
       {},
       {}},
      {"lhs transposed",
       DType::F32,
       DType::F32,
       {3, 19, 37},
       {3, 19, 23},
       {3, 37, 23},
       {0, 2, 1},
       {},
       {}},
      {"rhs transposed",
       DType::F32,
       DType::F32,
       {3, 37, 19},
       {3, 23, 19},
       {3, 37, 23},
       {},
       {0, 2, 1},
       {}},
      {"result transposed",
       DType::F32,
       DType::F32,
       {3, 37, 19},
       {3, 19, 23},
       {3, 23, 37},
       {},
       {},
       {0, 2, 1}},
      // Attention's heads: [B, T, H, D] read as [B, H, T, D], the product
      // written back as [B, T, H, D].
      {"heads",
       DType::F32,
       DType::F32,
       {2, 17, 3, 8},
       {2, 3, 8, 17},
       {2, 17, 3, 17},
       {0, 2, 1, 3},
       {},
       {0, 2, 1, 3}},
      {"q by k transposed",
       DType::F32,
       DType::F32,
       {2, 17, 3, 8},
       {2, 17, 3, 8},
       {2, 3, 17, 17},
       {0, 2, 1, 3},
       {0, 2, 3, 1},
       {}},
      // Neither matrix dim of lhs nor of the result has stride 1: both go
      // through contiguous scratch.
      {"unaddressable",
       DType::F32,
       DType::F32,
       {9, 16, 2},
       {2, 16, 5},
       {9, 5, 2},
       {2, 0, 1},
       {},
       {1, 2, 0}},
      {"bf16",
       DType::BF16,
       DType::BF16,
       {4, 64, 96},
       {4, 96, 80},
       {4, 64, 80},
       {},
       {},
       {}},
      {"bf16 into f32",
       DType::BF16,
       DType::F32,
       {4, 64, 96},
       {4, 96, 80},
       {4, 64, 80},
       {},
       {},
       {}},
      {"bf16 heads",
       DType::BF16,
       DType::BF16,
       {2, 17, 3, 8},
       {2, 17, 3, 8},
       {2, 3, 17, 17},
       {0, 2, 1, 3},
       {0, 2, 3, 1},
       {}},
      {"bf16 into f32 transposed",
       DType::BF16,
       DType::F32,
       {3, 19, 37},
       {3, 23, 19},
       {3, 23, 37},
       {0, 2, 1},
       {0, 2, 1},
       {0, 2, 1}},
      {"empty sum",
       DType::F32,
       DType::F32,
       {2, 3, 0},
       {2, 0, 4},
       {2, 3, 4},
       {},
       {},
       {}},
  };
  for (const MatmulCase &c : matmulCases) {
    cases.addKernel(
        std::string("matmul ") + c.name + " " + describe(c.input, c.lhs) +
            " by " + c.rhs.str() + " into " + describe(c.out, c.out_),
        {random(c.input, c.lhs, 100), random(c.input, c.rhs, 101)}, c.out,
        c.out_,
        [c](auto &ctx, auto &in, const Tensor &out) {
          auto orNull = [](const std::vector<int64_t> &permutation) {
            return permutation.empty() ? nullptr : permutation.data();
          };
          MatmulPermutations permutations;
          permutations.lhs = orNull(c.lhsPermutation);
          permutations.rhs = orNull(c.rhsPermutation);
          permutations.result = orNull(c.resultPermutation);
          matmul(ctx, in[0], in[1], out, permutations);
        },
        products);
  }
}

void addNN(CaseList &cases) {
  for (DType dtype : {DType::F32, DType::BF16, DType::F64})
    for (DType indexType : {DType::I64, DType::I32})
      for (int64_t width : {33, 64}) {
        HostTensor indices = random(indexType, {4, 7}, 110, 0, 49);
        cases.addKernel(
            "embedding " + describe(dtype, {50, width}) + " at " +
                describe(indexType, {4, 7}),
            {random(dtype, {50, width}, 111), indices}, dtype, {4, 7, width},
            [](auto &ctx, auto &in, const Tensor &out) {
              embedding(ctx, in[0], in[1], out);
            },
            getExact);
      }
  cases.add(
      "embedding with an index out of range",
      [](auto &session) -> Outputs {
        Tensor weight = session.upload(random(DType::F32, {50, 8}, 112));
        Tensor indices =
            session.upload(literal(DType::I64, {5}, {1, 2, 49, 50, 0}));
        Tensor out = session.output(DType::F32, {5, 8});
        embedding(session.ctx, weight, indices, out);
        return {session.download(out)};
      },
      getExact, /*throws=*/true);

  // Repeated indices (12 rows, 28 lookups) and the padding row.
  for (DType dtype : kFloatTypes)
    for (int64_t padding : {int64_t(-1), int64_t(3)}) {
      // The CPU adds in the element type, rounding 16-bit sums at every
      // step (a few lookups per row); the GPU adds in f32 and rounds once.
      std::function<Tolerance(DType)> tolerance = withAbsolute(1e-6);
      if (dtype == DType::BF16)
        tolerance = [](DType) { return Tolerance{3e-2, 3e-2}; };
      else if (dtype == DType::F16)
        tolerance = [](DType) { return Tolerance{4e-3, 4e-3}; };
      cases.addKernel(
          "embeddingGrad " + describe(dtype, {12, 33}) + " padding " +
              std::to_string(padding),
          {random(dtype, {4, 7, 33}, 120),
           random(DType::I64, {4, 7}, 121, 0, 11)},
          dtype, {12, 33},
          [padding](auto &ctx, auto &in, const Tensor &out) {
            embeddingGrad(ctx, in[0], in[1], out, padding);
          },
          tolerance);
    }
  cases.addKernel(
      "embeddingGrad F32 [500, 64] at I32 [16, 64]",
      {random(DType::F32, {16, 64, 64}, 122),
       random(DType::I32, {16, 64}, 123, 0, 499)},
      DType::F32, {500, 64},
      [](auto &ctx, auto &in, const Tensor &out) {
        embeddingGrad(ctx, in[0], in[1], out, -1);
      },
      withAbsolute(1e-6));

  struct NormCase {
    Shape shape;
    int64_t normalizedRank;
    bool affine;

    /// The weight's and the bias's shape: the normalized dims.
    Shape getParameterShape() const {
      Shape parameterShape;
      for (int d = shape.rank - int(normalizedRank); d < shape.rank; ++d)
        parameterShape.dims[parameterShape.rank++] = shape.dims[d];
      return parameterShape;
    }
  };
  for (DType dtype : kFloatTypes)
    for (const NormCase &c :
         {NormCase{{6, 77}, 1, true}, NormCase{{3, 5, 24}, 2, true},
          NormCase{{4, 768}, 1, false}, NormCase{{2, 4099}, 1, true}}) {
      Shape parameterShape = c.getParameterShape();
      cases.addKernel(
          "layerNorm " + describe(dtype, c.shape) + " over " +
              std::to_string(c.normalizedRank) +
              (c.affine ? " dims, affine" : " dims"),
          {random(dtype, c.shape, 130, -2, 3),
           random(dtype, parameterShape, 131, 0.5, 1.5),
           random(dtype, parameterShape, 132)},
          dtype, c.shape,
          [c](auto &ctx, auto &in, const Tensor &out) {
            layerNorm(ctx, in[0], c.affine ? in[1] : Tensor(),
                      c.affine ? in[2] : Tensor(), out, c.normalizedRank, 1e-5);
          },
          withAbsolute(1e-5));
    }

  // Layer norm's gradients: the input's row by row, the weight's and the
  // bias's summed over the rows (in another order on each backend).
  for (DType dtype : kFloatTypes)
    for (const NormCase &c :
         {NormCase{{6, 77}, 1, true}, NormCase{{3, 5, 24}, 2, false},
          NormCase{{300, 64}, 1, true}, NormCase{{2, 4099}, 1, true}}) {
      Shape parameterShape = c.getParameterShape();
      std::vector<HostTensor> inputs = {
          random(dtype, c.shape, 135), random(dtype, c.shape, 136, -2, 3),
          random(dtype, parameterShape, 137, 0.5, 1.5)};
      cases.add(
          "layerNormGrad " + describe(dtype, c.shape) + " over " +
              std::to_string(c.normalizedRank) +
              (c.affine ? " dims, affine" : " dims"),
          [=](auto &session) -> Outputs {
            std::vector<Tensor> in;
            for (const HostTensor &input : inputs)
              in.push_back(session.upload(input));
            Tensor gradInput = session.output(dtype, c.shape);
            Tensor gradWeight = session.output(dtype, parameterShape);
            Tensor gradBias = session.output(dtype, parameterShape);
            layerNormGrad(session.ctx, in[0], in[1],
                          c.affine ? in[2] : Tensor(), Tensor(), gradInput,
                          gradWeight, gradBias, c.normalizedRank, 1e-5);
            return {session.download(gradInput), session.download(gradWeight),
                    session.download(gradBias)};
          },
          withAbsolute(1e-4));
    }

  // RMS norm over the last dim, with and without its weight.
  for (DType dtype : kFloatTypes)
    for (const NormCase &c :
         {NormCase{{6, 77}, 1, true}, NormCase{{3, 5, 24}, 1, false},
          NormCase{{2, 4099}, 1, true}}) {
      cases.addKernel(
          "rmsNorm " + describe(dtype, c.shape) +
              (c.affine ? " with weight" : ""),
          {random(dtype, c.shape, 133, -2, 3),
           random(dtype, {c.shape.dims[c.shape.rank - 1]}, 134, 0.5, 1.5)},
          dtype, c.shape,
          [c](auto &ctx, auto &in, const Tensor &out) {
            rmsNorm(ctx, in[0], c.affine ? in[1] : Tensor(), out, 1e-6);
          },
          withAbsolute(1e-5));
    }

  // RMS norm's gradients: the input's row by row, the weight's summed over
  // the rows (in another order on each backend).
  for (DType dtype : kFloatTypes)
    for (const NormCase &c :
         {NormCase{{6, 77}, 1, true}, NormCase{{3, 5, 24}, 1, false},
          NormCase{{300, 64}, 1, true}, NormCase{{2, 4099}, 1, true}}) {
      Shape weightShape = c.getParameterShape();
      std::vector<HostTensor> inputs = {
          random(dtype, c.shape, 138), random(dtype, c.shape, 139, -2, 3),
          random(dtype, weightShape, 140, 0.5, 1.5)};
      cases.add(
          "rmsNormGrad " + describe(dtype, c.shape) +
              (c.affine ? " with weight" : ""),
          [=](auto &session) -> Outputs {
            std::vector<Tensor> in;
            for (const HostTensor &input : inputs)
              in.push_back(session.upload(input));
            Tensor gradInput = session.output(dtype, c.shape);
            Tensor gradWeight = session.output(dtype, weightShape);
            rmsNormGrad(session.ctx, in[0], in[1], c.affine ? in[2] : Tensor(),
                        Tensor(), gradInput, gradWeight, 1e-6);
            return {session.download(gradInput), session.download(gradWeight)};
          },
          withAbsolute(1e-4));
    }

  // The norms with a cast folded in (mixed precision): the result rounded
  // into a narrower out, a narrower grad widened as it is read. Each backend
  // must give its own bits of the norm and then the cast (of the cast and
  // then the gradients): an I64 output after the results counts the
  // elements of each that differ, 0 on both.
  const std::pair<DType, DType> narrowings[] = {{DType::F32, DType::BF16},
                                                {DType::F32, DType::F16},
                                                {DType::F64, DType::F32}};
  for (auto [dtype, narrow] : narrowings)
    for (const NormCase &c :
         {NormCase{{6, 77}, 1, true}, NormCase{{2, 4099}, 1, true}})
      for (bool rms : {false, true}) {
        Shape parameterShape = c.getParameterShape();
        HostTensor input = random(dtype, c.shape, 141, -2, 3);
        HostTensor weight = random(dtype, parameterShape, 142, 0.5, 1.5);
        HostTensor bias = random(dtype, parameterShape, 143);
        cases.add(
            std::string(rms ? "rmsNorm " : "layerNorm ") +
                describe(dtype, c.shape) + " into " + getName(narrow),
            [=, narrow = narrow](auto &session) -> Outputs {
              Tensor x = session.upload(input), w = session.upload(weight);
              Tensor b = session.upload(bias);
              auto norm = [&](const Tensor &out) {
                if (rms)
                  rmsNorm(session.ctx, x, w, out, 1e-6);
                else
                  layerNorm(session.ctx, x, w, b, out, 1, 1e-5);
              };
              Tensor out = session.output(narrow, c.shape);
              Tensor wide = session.output(x.dtype, c.shape);
              Tensor rounded = session.output(narrow, c.shape);
              norm(out);
              norm(wide);
              cast(session.ctx, wide, rounded);
              HostTensor result = session.download(out);
              return {result,
                      countMismatches(result, session.download(rounded))};
            },
            withAbsolute(1e-5));

        HostTensor grad = random(narrow, c.shape, 144);
        cases.add(
            std::string(rms ? "rmsNormGrad " : "layerNormGrad ") +
                describe(dtype, c.shape) + " of " + getName(narrow) + " grad",
            [=](auto &session) -> Outputs {
              Tensor x = session.upload(input), w = session.upload(weight);
              Tensor g = session.upload(grad);
              Tensor widened = session.output(x.dtype, c.shape);
              cast(session.ctx, g, widened);
              auto gradients = [&](const Tensor &dy) {
                Tensor gradInput = session.output(x.dtype, c.shape);
                Tensor gradWeight = session.output(x.dtype, parameterShape);
                Tensor gradBias = session.output(x.dtype, parameterShape);
                if (rms) {
                  rmsNormGrad(session.ctx, dy, x, w, Tensor(), gradInput,
                              gradWeight, 1e-6);
                  return Outputs{session.download(gradInput),
                                 session.download(gradWeight)};
                }
                layerNormGrad(session.ctx, dy, x, w, Tensor(), gradInput,
                              gradWeight, gradBias, 1, 1e-5);
                return Outputs{session.download(gradInput),
                               session.download(gradWeight),
                               session.download(gradBias)};
              };
              Outputs outputs = gradients(g), unfused = gradients(widened);
              for (size_t i = 0, n = outputs.size(); i < n; ++i)
                outputs.push_back(countMismatches(outputs[i], unfused[i]));
              return outputs;
            },
            withAbsolute(1e-4));
      }

  // The norms' gradients plus an addend (a residual stream's gradient sum
  // folded in), of a grad of the input's dtype or a narrower one: each
  // backend must give its own bits of the gradients and then binary Add,
  // with the addend apart and in place (the addend gradInput itself), and
  // the weight's and the bias's gradients without it. I64 outputs after the
  // results count the elements that differ, 0 on both.
  const std::pair<DType, DType> addendGrads[] = {{DType::F32, DType::F32},
                                                 {DType::F64, DType::F64},
                                                 {DType::BF16, DType::BF16},
                                                 {DType::F16, DType::F16},
                                                 {DType::F32, DType::BF16}};
  for (auto [dtype, gradType] : addendGrads)
    for (const NormCase &c :
         {NormCase{{6, 77}, 1, true}, NormCase{{3, 5, 24}, 1, false},
          NormCase{{2, 4099}, 1, true}})
      for (bool rms : {false, true}) {
        Shape parameterShape = c.getParameterShape();
        HostTensor grad = random(gradType, c.shape, 145);
        HostTensor input = random(dtype, c.shape, 146, -2, 3);
        HostTensor weight = random(dtype, parameterShape, 147, 0.5, 1.5);
        HostTensor addend = random(dtype, c.shape, 148, -4, 4);
        cases.add(
            std::string(rms ? "rmsNormGrad " : "layerNormGrad ") +
                describe(dtype, c.shape) + " of " + getName(gradType) +
                " grad" + (c.affine ? " with weight" : "") + " plus an addend",
            [=, dtype = dtype](auto &session) -> Outputs {
              Tensor g = session.upload(grad), x = session.upload(input);
              Tensor w = c.affine ? session.upload(weight) : Tensor();
              Tensor a = session.upload(addend);
              auto gradients = [&](const Tensor &plus,
                                   const Tensor &gradInput) {
                Tensor gradWeight = session.output(dtype, parameterShape);
                Tensor gradBias = session.output(dtype, parameterShape);
                if (rms) {
                  rmsNormGrad(session.ctx, g, x, w, plus, gradInput, gradWeight,
                              1e-6);
                  return Outputs{session.download(gradInput),
                                 session.download(gradWeight)};
                }
                layerNormGrad(session.ctx, g, x, w, plus, gradInput, gradWeight,
                              gradBias, 1, 1e-5);
                return Outputs{session.download(gradInput),
                               session.download(gradWeight),
                               session.download(gradBias)};
              };
              Outputs unfused =
                  gradients(Tensor(), session.output(dtype, c.shape));
              Tensor sum = session.output(dtype, c.shape);
              binary(session.ctx, BinaryKind::Add, session.upload(unfused[0]),
                     a, sum);
              Outputs outputs = gradients(a, session.output(dtype, c.shape));
              Tensor inPlace = session.upload(addend);
              HostTensor inPlaceResult = gradients(inPlace, inPlace)[0];
              HostTensor want = session.download(sum);
              outputs.push_back(countMismatches(outputs[0], want));
              outputs.push_back(countMismatches(inPlaceResult, want));
              for (size_t i = 1, n = unfused.size(); i < n; ++i)
                outputs.push_back(countMismatches(outputs[i], unfused[i]));
              return outputs;
            },
            withAbsolute(1e-4));
      }

  struct SoftmaxCase {
    Shape shape;
    int64_t dim;
  };
  for (DType dtype : kFloatTypes)
    for (const SoftmaxCase &c :
         {SoftmaxCase{{7, 33}, -1}, SoftmaxCase{{3, 17, 5}, 1},
          SoftmaxCase{{6, 4}, 0}, SoftmaxCase{{2, 50257}, 1}})
      for (bool log : {false, true}) {
        HostTensor input = random(dtype, c.shape, 140, -8, 8);
        if (c.dim == -1) {
          // Masked scores: row 1 partly and row 2 wholly -inf (NaN out).
          for (int64_t i = 0; i < 33; ++i) {
            if (i % 3 == 0)
              input.set(33 + i, -INFINITY);
            input.set(66 + i, -INFINITY);
          }
        }
        cases.addKernel(
            std::string(log ? "logSoftmax " : "softmax ") +
                describe(dtype, c.shape) + " along " + std::to_string(c.dim),
            {input}, dtype, c.shape,
            [c, log](auto &ctx, auto &in, const Tensor &out) {
              if (log)
                logSoftmax(ctx, in[0], out, c.dim);
              else
                softmax(ctx, in[0], out, c.dim);
            },
            log ? getDefaultTolerance : getRelative);
      }

  const std::pair<Reduction, const char *> reductions[] = {
      {Reduction::None, "None"},
      {Reduction::Sum, "Sum"},
      {Reduction::Mean, "Mean"}};
  for (DType dtype : kFloatTypes)
    for (DType indexType : {DType::I64, DType::I32})
      for (auto [reduction, name] : reductions)
        for (Shape shape : {Shape{37, 1000}, Shape{3, 50257}}) {
          int64_t rows = shape.dims[0], classes = shape.dims[1];
          HostTensor target =
              random(indexType, {rows}, 150, 0, double(classes - 1));
          target.set(1, -100); // ignored
          cases.addKernel(
              std::string("crossEntropy ") + name + " " +
                  describe(dtype, shape) + " at " + getName(indexType),
              {random(dtype, shape, 151, -6, 6), target}, dtype,
              reduction == Reduction::None ? Shape{rows} : Shape(),
              [reduction = reduction](auto &ctx, auto &in, const Tensor &out) {
                crossEntropy(ctx, in[0], in[1], out, -100, reduction);
              },
              withAbsolute(1e-5));
        }
  cases.addKernel("crossEntropy Mean with every target ignored",
                  {random(DType::F32, {3, 10}, 152),
                   literal(DType::I64, {3}, {-100, -100, -100})},
                  DType::F32, Shape(),
                  [](auto &ctx, auto &in, const Tensor &out) {
                    crossEntropy(ctx, in[0], in[1], out, -100, Reduction::Mean);
                  });
  cases.add(
      "crossEntropy with a target out of range",
      [](auto &session) -> Outputs {
        Tensor logits = session.upload(random(DType::F32, {4, 10}, 153));
        Tensor target =
            session.upload(literal(DType::I64, {4}, {0, -100, 10, 9}));
        Tensor out = session.output(DType::F32, Shape());
        crossEntropy(session.ctx, logits, target, out, -100, Reduction::Mean);
        return {session.download(out)};
      },
      getDefaultTolerance, /*throws=*/true);

  for (DType dtype : kFloatTypes)
    for (DType indexType : {DType::I64, DType::I32})
      for (Shape shape : {Shape{37, 1000}, Shape{3, 50257}}) {
        int64_t rows = shape.dims[0], classes = shape.dims[1];
        HostTensor target =
            random(indexType, {rows}, 160, 0, double(classes - 1));
        target.set(1, -100); // matches no class
        cases.addKernel(
            "crossEntropyGrad " + describe(dtype, shape) + " at " +
                getName(indexType),
            {random(dtype, shape, 161, -6, 6), target,
             random(dtype, {rows}, 162, 0, 1)},
            dtype, shape,
            [](auto &ctx, auto &in, const Tensor &out) {
              crossEntropyGrad(ctx, in[0], in[1], in[2], out);
            },
            getRelative);
      }
}

void addRotaryEmbedding(CaseList &cases) {
  // LLaMA's queries [B, H, T, D] with the angles of every sequence alike
  // and of each its own, and an odd-sized [N, T, D] with angles [T, D].
  const std::pair<Shape, Shape> shapes[] = {
      {{2, 4, 33, 64}, {1, 1, 33, 64}},
      {{2, 4, 33, 64}, {2, 1, 33, 64}},
      {{3, 7, 22}, {7, 22}},
  };
  for (DType dtype : kFloatTypes)
    for (auto [input, angles] : shapes)
      for (bool transposed : {false, true})
        // Both backends form the same two products and their sum in the
        // compute type, unfused, and round once: the same bits.
        cases.addKernel(
            "rotaryEmbedding " + describe(dtype, input) + " angles " +
                angles.str() + (transposed ? " transposed" : ""),
            {random(dtype, input, 145), random(dtype, angles, 146),
             random(dtype, angles, 147)},
            dtype, input,
            [transposed](auto &ctx, auto &in, const Tensor &out) {
              rotaryEmbedding(ctx, in[0], in[1], in[2], out, transposed);
            },
            getExact);

  // With mixed precision's casts folded in: its forward (an f32 input into
  // a bf16 out), its transposed map (a bf16 gradient into f32), and both
  // narrow at once, under f32 angles. Each backend must give its own bits
  // of the input widened by cast, the f32 kernel and the cast to the out's
  // dtype: an I64 output after the result counts the elements that differ,
  // 0 on both.
  struct Mixed {
    DType input, out;
    bool transposed;
  };
  for (Mixed m : {Mixed{DType::F32, DType::BF16, false},
                  Mixed{DType::BF16, DType::F32, true},
                  Mixed{DType::BF16, DType::BF16, false},
                  Mixed{DType::BF16, DType::BF16, true}})
    for (const auto &shape : shapes) {
      Shape input = shape.first, angles = shape.second;
      HostTensor x = random(m.input, input, 148);
      HostTensor cos = random(DType::F32, angles, 146);
      HostTensor sin = random(DType::F32, angles, 147);
      cases.add(
          "rotaryEmbedding " + describe(m.input, input) + " angles " +
              describe(DType::F32, angles) + " into " + getName(m.out) +
              (m.transposed ? " transposed" : ""),
          [=](auto &session) -> Outputs {
            Tensor in = session.upload(x), c = session.upload(cos);
            Tensor s = session.upload(sin);
            Tensor out = session.output(m.out, input);
            rotaryEmbedding(session.ctx, in, c, s, out, m.transposed);
            Tensor widened = session.output(DType::F32, input);
            Tensor wide = session.output(DType::F32, input);
            Tensor rounded = session.output(m.out, input);
            cast(session.ctx, in, widened);
            rotaryEmbedding(session.ctx, widened, c, s, wide, m.transposed);
            cast(session.ctx, wide, rounded);
            HostTensor result = session.download(out);
            return {result, countMismatches(result, session.download(rounded))};
          },
          getExact);
    }
}

/// Throws unless the forward and the backward of the attention that ran
/// after `before` cuDNN attention runs both ran through cuDNN (on the CUDA
/// backend; the CPU has none).
void expectCudnnAttention(cpu::Context &, int64_t) {}
void expectCudnnAttention(cuda::Context &ctx, int64_t before) {
  if (cuda::getCudnnAttentionRuns(ctx) != before + 2)
    throw Error("the attention did not run through cuDNN's fused attention "
                "forward and backward (stderr says why)");
}
int64_t countCudnnAttentionRuns(cpu::Context &) { return 0; }
int64_t countCudnnAttentionRuns(cuda::Context &ctx) {
  return cuda::getCudnnAttentionRuns(ctx);
}

/// `parts` [B, T, H, D] side by side along the heads: [B, T, parts * H,
/// D], as GPT-2's packed projection holds its query, key and value.
HostTensor packHeads(std::initializer_list<const HostTensor *> parts) {
  const HostTensor &first = **parts.begin();
  const Shape &shape = first.shape;
  int64_t count = int64_t(parts.size());
  HostTensor packed(first.dtype,
                    {shape[0], shape[1], count * shape[2], shape[3]});
  size_t tokenBytes = shape[2] * shape[3] * getSize(first.dtype);
  int64_t i = 0;
  for (const HostTensor *part : parts) {
    for (int64_t t = 0; t < shape[0] * shape[1]; ++t)
      std::copy_n(part->bytes.begin() + t * tokenBytes, tokenBytes,
                  packed.bytes.begin() + (t * count + i) * tokenBytes);
    ++i;
  }
  return packed;
}

/// Query, key and value, or their gradients, as head windows 0, H and 2H of
/// `packed` [B, T, 3H, D] (`heads` H).
std::array<Tensor, 3> getWindows(const Tensor &packed, int64_t heads) {
  return {headWindow(packed, 0), headWindow(packed, heads),
          headWindow(packed, 2 * heads)};
}

/// Flash attention, forward and backward: the output, the log-sum-exp and
/// the three gradients (the backward from each backend's own forward). Sizes
/// that are not multiples of the kernels' tiles, more keys than queries,
/// and the masks the compiler passes: a causal keep mask, an additive
/// padding bias, both at full shape, or none; and attention dropout, whose
/// masks both draw alike (on one rank, and on a data- and tensor-parallel
/// rank of split heads). The CUDA backend runs 16-bit attentions without
/// dropout through cuDNN's fused attention where cuDNN takes them, the rest
/// on its own kernels; the "cuDNN" cases (odd lengths, the head sizes of
/// GPT-2 and larger models, each mask) fail unless cuDNN ran them. The
/// "token-major" cases store the operands [B, T, H, D]
/// (AttentionLayout::Bshd), on both paths; the "packed heads" cases
/// (token-major too) read query, key and value as head windows of one
/// packed [B, T, 3H, D] tensor and write their gradients as windows of
/// another, which is compared whole. The "grouped" cases are grouped-query
/// attention (LLaMA's): 4 query heads on 2 or 1 key and value heads, whose
/// gradients sum their group's query heads; on both paths, in both layouts,
/// with dropout and with masks that vary along the (query) heads.
void addAttention(CaseList &cases) {
  struct AttentionCase {
    const char *name;
    /// keyHeads: key and value's, `heads` or a divisor of it.
    int64_t batch, heads, keyHeads, rows, keys, headSize, valueSize;
    Shape keepShape, biasShape; // rank 0: none
    AttentionDropout dropout = {};
    /// Run in bf16 and f16 only, and on the CUDA backend through cuDNN.
    bool cudnn = false;
    AttentionLayout layout = AttentionLayout::Bhsd;
    /// Query, key and value head windows of one packed tensor (token-major,
    /// as many keys as rows and key heads as heads, the value size the head
    /// size).
    bool packed = false;
  };
  const AttentionCase kCases[] = {
      {"causal", 2, 3, 3, 37, 37, 24, 24, {1, 1, 37, 37}, {}},
      {"padding bias", 2, 2, 2, 19, 45, 16, 40, {}, {2, 1, 1, 45}},
      {"no mask", 1, 2, 2, 33, 70, 64, 64, {}, {}},
      {"full masks", 1, 2, 2, 17, 17, 8, 12, {1, 2, 17, 17}, {1, 2, 17, 17}},
      {"causal dropout",
       2,
       3,
       3,
       37,
       37,
       24,
       24,
       {1, 1, 37, 37},
       {},
       {0.1, {/*seed=*/5, /*step=*/2, /*stream=*/1, /*rankStream=*/0}}},
      {"padding bias dropout, dp rank 1 and tp rank 1 of split heads",
       2,
       2,
       2,
       19,
       45,
       16,
       40,
       {},
       {2, 1, 1, 45},
       {0.2,
        {/*seed=*/5, /*step=*/4, /*stream=*/3, /*rankStream=*/1},
        {/*dpRank=*/1, {/*axis=*/1, /*chunks=*/1, /*tp=*/2}, /*tpRank=*/1}}},
      {"cuDNN causal", 2, 3, 3, 37, 37, 64, 64, {1, 1, 37, 37}, {}, {}, true},
      {"cuDNN padding bias",
       2,
       2,
       2,
       19,
       45,
       64,
       64,
       {},
       {2, 1, 1, 45},
       {},
       true},
      {"cuDNN causal and padding bias",
       2,
       2,
       2,
       45,
       45,
       64,
       64,
       {1, 1, 45, 45},
       {2, 1, 1, 45},
       {},
       true},
      {"cuDNN full keep mask",
       1,
       2,
       2,
       17,
       17,
       64,
       64,
       {1, 2, 17, 17},
       {},
       {},
       true},
      {"cuDNN causal head size 128",
       1,
       2,
       2,
       129,
       129,
       128,
       128,
       {1, 1, 129, 129},
       {},
       {},
       true},
      {"causal token-major",
       2,
       3,
       3,
       37,
       37,
       24,
       24,
       {1, 1, 37, 37},
       {},
       {},
       false,
       AttentionLayout::Bshd},
      {"padding bias dropout token-major",
       2,
       2,
       2,
       19,
       45,
       16,
       40,
       {},
       {2, 1, 1, 45},
       {0.2, {/*seed=*/5, /*step=*/4, /*stream=*/3, /*rankStream=*/1}},
       false,
       AttentionLayout::Bshd},
      {"cuDNN causal and padding bias token-major",
       2,
       2,
       2,
       45,
       45,
       64,
       64,
       {1, 1, 45, 45},
       {2, 1, 1, 45},
       {},
       true,
       AttentionLayout::Bshd},
      {"causal packed heads",
       2,
       3,
       3,
       37,
       37,
       24,
       24,
       {1, 1, 37, 37},
       {},
       {},
       false,
       AttentionLayout::Bshd,
       true},
      {"causal dropout packed heads",
       2,
       3,
       3,
       37,
       37,
       24,
       24,
       {1, 1, 37, 37},
       {},
       {0.1, {/*seed=*/5, /*step=*/2, /*stream=*/1, /*rankStream=*/0}},
       false,
       AttentionLayout::Bshd,
       true},
      {"cuDNN causal packed heads",
       2,
       3,
       3,
       37,
       37,
       64,
       64,
       {1, 1, 37, 37},
       {},
       {},
       true,
       AttentionLayout::Bshd,
       true},
      {"grouped causal", 2, 4, 2, 37, 37, 24, 24, {1, 1, 37, 37}, {}},
      {"grouped full masks",
       1,
       4,
       2,
       17,
       17,
       8,
       12,
       {1, 4, 17, 17},
       {1, 4, 17, 17}},
      {"grouped causal dropout",
       2,
       4,
       1,
       37,
       37,
       24,
       24,
       {1, 1, 37, 37},
       {},
       {0.1, {/*seed=*/5, /*step=*/2, /*stream=*/1, /*rankStream=*/0}}},
      {"grouped causal token-major",
       2,
       4,
       1,
       37,
       37,
       24,
       24,
       {1, 1, 37, 37},
       {},
       {},
       false,
       AttentionLayout::Bshd},
      {"grouped causal dropout token-major",
       2,
       4,
       2,
       37,
       37,
       24,
       24,
       {1, 1, 37, 37},
       {},
       {0.1, {/*seed=*/5, /*step=*/2, /*stream=*/1, /*rankStream=*/0}},
       false,
       AttentionLayout::Bshd},
      {"cuDNN grouped causal",
       2,
       4,
       2,
       37,
       37,
       64,
       64,
       {1, 1, 37, 37},
       {},
       {},
       true},
      {"cuDNN grouped full keep mask",
       1,
       4,
       1,
       17,
       17,
       64,
       64,
       {1, 4, 17, 17},
       {},
       {},
       true},
      {"cuDNN grouped causal token-major",
       2,
       4,
       1,
       37,
       37,
       64,
       64,
       {1, 1, 37, 37},
       {},
       {},
       true,
       AttentionLayout::Bshd},
      {"cuDNN grouped causal and padding bias token-major",
       2,
       4,
       2,
       45,
       45,
       64,
       64,
       {1, 1, 45, 45},
       {2, 1, 1, 45},
       {},
       true,
       AttentionLayout::Bshd},
  };
  // torch.finfo(torch.float32).min, the masked score and padding bias the
  // modules use.
  const double kMaskedScore = -3.4028234663852886e38;
  for (const AttentionCase &c : kCases)
    for (DType dtype : kFloatTypes) {
      // Every case in f32 and bf16 (the 16-bit inputs the kernels widen to
      // f32), the causal one in every float dtype, cuDNN's in its dtypes.
      bool halfWidth = dtype == DType::BF16 || dtype == DType::F16;
      if (c.cudnn ? !halfWidth
                  : dtype != DType::F32 && dtype != DType::BF16 &&
                        std::string(c.name) != "causal")
        continue;
      auto stored = [&](int64_t heads, int64_t length, int64_t width) {
        return AttentionGeometry::getStoredShape(c.layout, c.batch, heads,
                                                 length, width);
      };
      Shape queryShape = stored(c.heads, c.rows, c.headSize);
      Shape keyShape = stored(c.keyHeads, c.keys, c.headSize);
      Shape valueShape = stored(c.keyHeads, c.keys, c.valueSize);
      Shape outShape = stored(c.heads, c.rows, c.valueSize);
      HostTensor query = random(dtype, queryShape, 170, -2, 2);
      HostTensor key = random(dtype, keyShape, 171, -2, 2);
      HostTensor value = random(dtype, valueShape, 172);
      HostTensor grad = random(dtype, outShape, 173);
      std::optional<HostTensor> packed;
      if (c.packed)
        packed = packHeads({&query, &key, &value});
      std::optional<HostTensor> keep, bias;
      if (c.keepShape.rank) {
        keep = random(DType::Bool, c.keepShape, 174);
        int64_t rows = c.keepShape.dims[2], keys = c.keepShape.dims[3];
        // Causal where the mask is one [T, S] plane; random (but never a
        // whole row masked) where it is full.
        for (int64_t i = 0; i < keep->getCount(); ++i) {
          int64_t t = i / keys % rows, s = i % keys;
          keep->set(i, keep->getCount() == rows * keys
                           ? s <= t
                           : s == t || keep->get(i));
        }
      }
      if (c.biasShape.rank) {
        bias = random(dtype, c.biasShape, 175);
        int64_t keys = c.biasShape.dims[3];
        // Padding where the bias is per key: the last 20 keys of batch 1,
        // so that whole tiles of keys are masked (by -inf in bf16, where
        // the f32 minimum rounds to it).
        for (int64_t i = 0; i < bias->getCount(); ++i)
          if (bias->getCount() == c.batch * keys)
            bias->set(i, i / keys == 1 && i % keys >= keys - 20 ? kMaskedScore
                                                                : 0.0);
      }
      double scale = 1 / std::sqrt(double(c.headSize));
      double maskedScore = keep ? kMaskedScore : 0;
      std::string name = std::string("flashAttention ") + c.name + " " +
                         describe(dtype, queryShape) + " keys " +
                         std::to_string(c.keys) + " value size " +
                         std::to_string(c.valueSize);
      cases.add(
          name,
          [=](auto &session) -> Outputs {
            // Query, key and value and their gradients: separate tensors,
            // or head windows of the packed operands and of `packedGrads`.
            std::array<Tensor, 3> operands, grads;
            Tensor packedGrads;
            if (packed) {
              operands = getWindows(session.upload(*packed), c.heads);
              packedGrads = session.output(dtype, packed->shape);
              grads = getWindows(packedGrads, c.heads);
            } else {
              operands = {session.upload(query), session.upload(key),
                          session.upload(value)};
              grads = {session.output(dtype, queryShape),
                       session.output(dtype, keyShape),
                       session.output(dtype, valueShape)};
            }
            auto [q, k, v] = operands;
            Tensor g = session.upload(grad);
            Tensor keepMask = keep ? session.upload(*keep) : Tensor();
            Tensor biasMask = bias ? session.upload(*bias) : Tensor();
            Tensor out = session.output(dtype, outShape);
            // In the compute type: f32 for 16-bit operands.
            Tensor logsumexp =
                session.output(dtype == DType::F64 ? DType::F64 : DType::F32,
                               {c.batch, c.heads, c.rows});
            int64_t cudnnRuns = countCudnnAttentionRuns(session.ctx);
            flashAttention(session.ctx, q, k, v, keepMask, biasMask, out,
                           logsumexp, scale, maskedScore, c.layout, c.dropout);
            flashAttentionGrad(session.ctx, q, k, v, keepMask, biasMask, out,
                               logsumexp, g, grads[0], grads[1], grads[2],
                               scale, maskedScore, c.layout, c.dropout);
            if (c.cudnn)
              expectCudnnAttention(session.ctx, cudnnRuns);
            Outputs outputs = {session.download(out),
                               session.download(logsumexp)};
            if (packed)
              outputs.push_back(session.download(packedGrads));
            else
              for (const Tensor &gradient : grads)
                outputs.push_back(session.download(gradient));
            return outputs;
          },
          // Sums of up to 148 terms (the key gradients of 4 grouped heads
          // of 37 rows) in another order, whose gradients cancel. The
          // log-sum-exp is f32 for 16-bit operands (its tolerance is f32's:
          // cuDNN's f32 stats as well). 16-bit results
          // may round one way on one backend and the other way on the
          // other, twice (the result, which the backward's row sums read,
          // then the gradients). Where cuDNN may run the attention (16-bit,
          // no dropout), cuDNN also rounds the probabilities and the score
          // gradients to 16 bits before their products on the tensor cores,
          // where the CPU kernel keeps them in f32: one more rounding of
          // each (bf16: 2^-8, f16: 2^-11) on top of the two (bounds
          // estimated so, not yet measured on a GPU; a rounded log-sum-exp,
          // whose ulp scaled whole rows by 3.2% in bf16, no longer adds).
          [viaCudnn = !(c.dropout.p > 0)](DType dtype) {
            if (dtype == DType::BF16)
              return viaCudnn ? Tolerance{2.4e-2, 2e-3}
                              : Tolerance{1.6e-2, 2e-3};
            if (dtype == DType::F16)
              return viaCudnn ? Tolerance{4e-3, 5e-4} : Tolerance{3e-3, 2e-4};
            return withAbsolute(1e-5)(dtype);
          });
    }
}

/// replace("cross_entropy")'s LM head and loss in chunks of rows: the loss
/// and the hidden, weight and bias gradients, with an ignored target; one
/// chunk and, past kMinChunkLogits (2^23), two (200 rows of GPT-2's 50257
/// classes: 100 rows each, the second's weight gradient added inside the
/// GEMM), sum and mean, with and without bias, every target ignored (a
/// mean of 0 / 0), and bf16 hidden states and weight (precision="bf16").
void addLinearCrossEntropy(CaseList &cases) {
  struct LinearCrossEntropyCase {
    const char *name;
    int64_t rows, features, classes;
    bool hasBias, allIgnored;
    Reduction reduction;
    DType operands;
  };
  const LinearCrossEntropyCase kCases[] = {
      {"bias", 37, 24, 100, true, false, Reduction::Mean, DType::F32},
      {"sum", 37, 24, 100, false, false, Reduction::Sum, DType::F32},
      {"small", 9, 64, 50, false, false, Reduction::Mean, DType::F32},
      {"GPT-2 vocabulary", 20, 64, 50257, false, false, Reduction::Mean,
       DType::F32},
      {"two chunks", 200, 64, 50257, true, false, Reduction::Mean,
       DType::F32},
      {"every target ignored", 5, 8, 16, true, true, Reduction::Mean,
       DType::F32},
      {"bias", 37, 24, 100, true, false, Reduction::Mean, DType::BF16},
      {"two chunks", 200, 64, 50257, false, false, Reduction::Mean,
       DType::BF16},
  };
  for (const LinearCrossEntropyCase &c : kCases)
    for (DType indexType : {DType::I64, DType::I32}) {
      HostTensor hidden = random(c.operands, {c.rows, c.features}, 180, -1, 1);
      HostTensor weight =
          random(c.operands, {c.classes, c.features}, 181, -1, 1);
      HostTensor bias = random(DType::F32, {c.classes}, 182, -1, 1);
      HostTensor target =
          random(indexType, {c.rows}, 183, 0, double(c.classes - 1));
      for (int64_t row = 0; row < c.rows; ++row)
        if (c.allIgnored || row == 1)
          target.set(row, -100);
      cases.add(
          std::string("linearCrossEntropy ") + c.name + " " +
              describe(c.operands, {c.rows, c.features}) + " classes " +
              std::to_string(c.classes) + " at " + getName(indexType),
          [=](auto &session) -> Outputs {
            Tensor h = session.upload(hidden), w = session.upload(weight),
                   t = session.upload(target);
            Tensor b = c.hasBias ? session.upload(bias) : Tensor();
            Tensor loss = session.output(DType::F32, Shape());
            Tensor gh = session.output(DType::F32, {c.rows, c.features});
            Tensor gw = session.output(DType::F32, {c.classes, c.features});
            Tensor gb =
                c.hasBias ? session.output(DType::F32, {c.classes}) : Tensor();
            // The workspace starts as a pattern the kernels must not read.
            Tensor workspace = session.output(
                DType::I8,
                {getLinearCrossEntropyWorkspace(
                     LinearCrossEntropyKernel::CrossEntropy, c.rows, c.features,
                     c.classes, c.hasBias, int64_t(getSize(c.operands)))
                     .bytes});
            linearCrossEntropy(session.ctx, h, w, t, b, loss, gh, gw, gb,
                               workspace, -100, c.reduction);
            Outputs outputs = {session.download(loss), session.download(gh),
                               session.download(gw)};
            if (c.hasBias)
              outputs.push_back(session.download(gb));
            return outputs;
          },
          // Sums over the classes and rows in other orders (oneDNN's and
          // cuBLASLt's), whose gradient terms cancel; with bf16 operands a
          // logit gradient the backends' exponentials round to bf16 on
          // either side of a boundary moves a term by 2^-8 of it (a
          // label's, up to 1 / 36 here).
          withAbsolute(c.operands == DType::F32 ? 1e-5 : 2e-4));
    }
}

/// The vocabulary-parallel LM head's kernels: each row's log-sum-exp, then
/// the gradients from it and a gradient per row; one chunk and two (400
/// rows of half GPT-2's classes, 200 each), with and without bias, and bf16
/// hidden states and weight (precision="bf16").
void addLinearLogSumExp(CaseList &cases) {
  struct LinearLogSumExpCase {
    const char *name;
    int64_t rows, features, classes;
    bool hasBias;
    DType operands;
  };
  const LinearLogSumExpCase kCases[] = {
      {"bias", 37, 24, 100, true, DType::F32},
      {"small", 9, 64, 50, false, DType::F32},
      {"GPT-2 half vocabulary", 20, 64, 25128, false, DType::F32},
      {"two chunks", 400, 64, 25128, true, DType::F32},
      {"bias", 37, 24, 100, true, DType::BF16},
      {"two chunks", 400, 64, 25128, false, DType::BF16},
  };
  for (const LinearLogSumExpCase &c : kCases) {
    HostTensor hidden = random(c.operands, {c.rows, c.features}, 190, -1, 1);
    HostTensor weight = random(c.operands, {c.classes, c.features}, 191, -1, 1);
    HostTensor bias = random(DType::F32, {c.classes}, 192, -1, 1);
    HostTensor grad = random(DType::F32, {c.rows}, 193, -1, 1);
    cases.add(
        std::string("linearLogSumExp and its gradient ") + c.name + " " +
            describe(c.operands, {c.rows, c.features}) + " classes " +
            std::to_string(c.classes),
        [=](auto &session) -> Outputs {
          Tensor h = session.upload(hidden), w = session.upload(weight),
                 g = session.upload(grad);
          Tensor b = c.hasBias ? session.upload(bias) : Tensor();
          Tensor lse = session.output(DType::F32, {c.rows});
          Tensor gh = session.output(DType::F32, {c.rows, c.features});
          Tensor gw = session.output(DType::F32, {c.classes, c.features});
          Tensor gb =
              c.hasBias ? session.output(DType::F32, {c.classes}) : Tensor();
          auto workspaceFor = [&](LinearCrossEntropyKernel kernel) {
            return session.output(DType::I8,
                                  {getLinearCrossEntropyWorkspace(
                                       kernel, c.rows, c.features, c.classes,
                                       c.hasBias, int64_t(getSize(c.operands)))
                                       .bytes});
          };
          linearLogSumExp(session.ctx, h, w, b, lse,
                          workspaceFor(LinearCrossEntropyKernel::LogSumExp));
          linearLogSumExpGrad(
              session.ctx, h, w, b, lse, g, gh, gw, gb,
              workspaceFor(LinearCrossEntropyKernel::LogSumExpGrad));
          Outputs outputs = {session.download(lse), session.download(gh),
                             session.download(gw)};
          if (c.hasBias)
            outputs.push_back(session.download(gb));
          return outputs;
        },
        // With bf16 operands a term of G the backends' exponentials round
        // to bf16 on either side of a boundary moves a product by 2^-8 of
        // it, as in linearCrossEntropy's cases; G's terms here are up to a
        // row's gradient (1) times its operand (1).
        withAbsolute(c.operands == DType::F32 ? 1e-5 : 4e-3));
  }
}

void addConvolutionsAndPooling(CaseList &cases) {
  // Sums of up to 3 * 3 * 8 products of values in [-1, 1] accumulate in
  // different orders (cuDNN's algorithms, oneDNN's): an absolute tolerance.
  auto products = withAbsolute(1e-4);
  struct ConvCase {
    const char *name;
    DType operands, out;
    bool hasBias;
    Shape input, weight, output;
    Window2d window;
    int64_t groups;
  };
  const ConvCase convCases[] = {
      {"3x3 padded",
       DType::F32,
       DType::F32,
       false,
       {2, 8, 9, 7},
       {6, 8, 3, 3},
       {2, 6, 9, 7},
       {{3, 3}, {1, 1}, {1, 1}, {1, 1}},
       1},
      {"strided, dilated, two groups, bias",
       DType::F32,
       DType::F32,
       true,
       {2, 6, 11, 10},
       {8, 3, 3, 2},
       {2, 8, 5, 11},
       {{3, 2}, {2, 1}, {1, 1}, {2, 1}},
       2},
      {"1x1 strided",
       DType::F32,
       DType::F32,
       false,
       {3, 5, 8, 8},
       {7, 5, 1, 1},
       {3, 7, 4, 4},
       {{1, 1}, {2, 2}, {0, 0}, {1, 1}},
       1},
      // Mixed precision: bf16 operands, an f32 forward, bf16 gradients.
      {"mixed precision 3x3",
       DType::BF16,
       DType::F32,
       false,
       {2, 8, 9, 7},
       {16, 8, 3, 3},
       {2, 16, 9, 7},
       {{3, 3}, {1, 1}, {1, 1}, {1, 1}},
       1},
      {"bf16 strided, two groups",
       DType::BF16,
       DType::BF16,
       false,
       {2, 8, 10, 10},
       {8, 4, 3, 3},
       {2, 8, 5, 5},
       {{3, 3}, {2, 2}, {1, 1}, {1, 1}},
       2},
  };
  for (const ConvCase &c : convCases) {
    std::string what = std::string(c.name) + " " +
                       describe(c.operands, c.input) + " by " + c.weight.str() +
                       " into " + getName(c.out);
    HostTensor input = random(c.operands, c.input, 130);
    HostTensor weight = random(c.operands, c.weight, 131);
    HostTensor grad = random(c.operands, c.output, 132);
    std::vector<HostTensor> forwardInputs = {input, weight};
    if (c.hasBias)
      forwardInputs.push_back(random(c.out, {c.weight.dims[0]}, 133));
    cases.addKernel(
        "conv2d " + what, forwardInputs, c.out, c.output,
        [c](auto &ctx, auto &in, const Tensor &out) {
          conv2d(ctx, in[0], in[1], c.hasBias ? in[2] : Tensor(), out, c.window,
                 c.groups);
        },
        products);
    // The gradients of the mixed-precision forward are bf16, as autodiff
    // builds them.
    DType gradType = c.operands;
    cases.addKernel(
        "conv2dGradInput " + what, {grad, weight}, gradType, c.input,
        [c](auto &ctx, auto &in, const Tensor &out) {
          conv2dGradInput(ctx, in[0], in[1], out, c.window, c.groups);
        },
        products);
    cases.addKernel(
        "conv2dGradWeight " + what, {grad, input}, gradType, c.weight,
        [c](auto &ctx, auto &in, const Tensor &out) {
          conv2dGradWeight(ctx, in[0], in[1], out, c.window, c.groups);
        },
        products);
  }

  // Max pooling: overlapping windows with padding, dilation, and ceil_mode's
  // windows cut at the edge; values from a few levels so that windows hold
  // equal maxima (the first is taken, on both backends).
  struct PoolCase {
    const char *name;
    Shape input, output;
    Window2d window;
  };
  const PoolCase poolCases[] = {
      {"3x3 stride 1 padded",
       {2, 3, 8, 8},
       {2, 3, 8, 8},
       {{3, 3}, {1, 1}, {1, 1}, {1, 1}}},
      {"2x2 ceil_mode",
       {2, 2, 7, 9},
       {2, 2, 4, 5},
       {{2, 2}, {2, 2}, {0, 0}, {1, 1}}},
      {"dilated",
       {1, 4, 9, 10},
       {1, 4, 9, 5},
       {{3, 2}, {1, 2}, {1, 1}, {1, 2}}},
  };
  for (DType dtype : {DType::F32, DType::BF16})
    for (const PoolCase &c : poolCases) {
      HostTensor input = random(dtype, c.input, 140, -3, 3);
      for (int64_t i = 0; i < input.getCount(); ++i)
        input.set(i, std::round(input.get(i)));
      std::string what = std::string(c.name) + " " + describe(dtype, c.input);
      cases.addKernel(
          "maxPool2d " + what, {input}, dtype, c.output,
          [c](auto &ctx, auto &in, const Tensor &out) {
            maxPool2d(ctx, in[0], out, c.window);
          },
          getExact);
      // The same sums in the same order on both backends.
      cases.addKernel(
          "maxPool2dGrad " + what, {random(dtype, c.output, 141), input}, dtype,
          c.input,
          [c](auto &ctx, auto &in, const Tensor &out) {
            maxPool2dGrad(ctx, in[0], in[1], out, c.window);
          },
          getExact);
    }
}

void addReductions(CaseList &cases) {
  const std::pair<ReduceKind, const char *> kinds[] = {
      {ReduceKind::Sum, "Sum"},
      {ReduceKind::Mean, "Mean"},
      {ReduceKind::Max, "Max"}};
  struct ReduceCase {
    const char *name;
    Shape shape;
    uint32_t mask;
  };
  const ReduceCase shapes[] = {
      {"rows", {129, 257}, 0b10},
      {"long rows", {3, 5000}, 0b10},
      {"columns", {1000, 67}, 0b01},
      {"middle", {7, 300, 33}, 0b010},
      {"two groups", {6, 5, 4, 3}, 0b0101},
      {"everything", {(1 << 20) + 3}, 0b1},
      {"size-1 dims only", {5, 1, 7}, 0b010},
  };
  for (auto [kind, name] : kinds)
    for (DType dtype : kAllTypes)
      for (const ReduceCase &c : shapes) {
        // The large reduction in f32, the others in every dtype.
        if (c.shape.rank == 1 && dtype != DType::F32 && dtype != DType::I64)
          continue;
        Shape outShape;
        for (int d = 0; d < c.shape.rank; ++d)
          if (!(c.mask >> d & 1u))
            outShape.dims[outShape.rank++] = c.shape.dims[d];
        // Sums of up to a million terms in [-1, 1]: the GPU's f32 partial
        // sums against the CPU's f64, each rounded once.
        cases.addKernel(
            std::string("reduce ") + name + " " + describe(dtype, c.shape) +
                " " + c.name,
            {random(dtype, c.shape, 170, -1, 1)}, dtype, outShape,
            [kind = kind, mask = c.mask](auto &ctx, auto &in,
                                         const Tensor &out) {
              reduce(ctx, kind, in[0], out, mask);
            },
            withAbsolute(c.shape.rank == 1 ? 1e-2 : 1e-4));
      }
  // Sums into a type that holds the input's (slapo-propagate-casts' bias
  // gradients: bf16 rows summed into f32), in both kernels' layouts.
  const std::pair<DType, DType> widenings[] = {{DType::BF16, DType::F32},
                                               {DType::F16, DType::F32},
                                               {DType::F32, DType::F64}};
  for (auto [from, to] : widenings)
    for (const ReduceCase &c : {shapes[0], shapes[2], shapes[3]}) {
      Shape outShape;
      for (int d = 0; d < c.shape.rank; ++d)
        if (!(c.mask >> d & 1u))
          outShape.dims[outShape.rank++] = c.shape.dims[d];
      cases.addKernel(
          std::string("reduce Sum ") + describe(from, c.shape) + " into " +
              getName(to) + " " + c.name,
          {random(from, c.shape, 171, -1, 1)}, to, outShape,
          [mask = c.mask](auto &ctx, auto &in, const Tensor &out) {
            reduce(ctx, ReduceKind::Sum, in[0], out, mask);
          },
          withAbsolute(1e-4));
    }
}

void addRunningSums(CaseList &cases) {
  struct CumsumCase {
    Shape shape;
    int64_t dim;
  };
  for (DType dtype : kAllTypes)
    for (const CumsumCase &c :
         {CumsumCase{{2, 16}, 1}, CumsumCase{{5, 300, 7}, 1},
          CumsumCase{{1000, 3}, 0}})
      for (bool reverse : {false, true}) {
        // PyTorch sums bools as int64: the importer casts them first.
        if (dtype == DType::Bool)
          continue;
        // Running sums of up to a thousand terms in [-1, 1]: the GPU's f32
        // accumulator against the CPU's f64, which drift apart by up to a
        // rounding of each partial sum.
        cases.addKernel(
            std::string(reverse ? "cumsum from the end " : "cumsum ") +
                describe(dtype, c.shape) + " along " + std::to_string(c.dim),
            {random(dtype, c.shape, 175, -1, 1)}, dtype, c.shape,
            [c, reverse](auto &ctx, auto &in, const Tensor &out) {
              cumsum(ctx, in[0], out, c.dim, reverse);
            },
            withAbsolute(1e-3));
      }
}

void addDataMovement(CaseList &cases) {
  struct PermuteCase {
    Shape shape;
    std::vector<int64_t> permutation;
  };
  for (DType dtype : kWidthTypes) {
    for (const PermuteCase &c :
         {PermuteCase{{3, 5, 7}, {2, 0, 1}},
          PermuteCase{{2, 9, 3, 16}, {0, 2, 1, 3}},
          PermuteCase{{4, 6, 8}, {0, 1, 2}}, PermuteCase{{}, {}}}) {
      Shape outShape = c.shape;
      for (int d = 0; d < c.shape.rank; ++d)
        outShape.dims[d] = c.shape.dims[c.permutation[d]];
      cases.addKernel(
          "permute " + describe(dtype, c.shape) + " to " + outShape.str(),
          {random(dtype, c.shape, 180, -9, 9)}, dtype, outShape,
          [c](auto &ctx, auto &in, const Tensor &out) {
            permute(ctx, in[0], out, c.permutation.data());
          },
          getExact);
    }
    cases.addKernel(
        "slice " + describe(dtype, {4, 20, 6}) + " dim 1 2:20:3",
        {random(dtype, {4, 20, 6}, 181, -9, 9)}, dtype, {4, 6, 6},
        [](auto &ctx, auto &in, const Tensor &out) {
          slice(ctx, in[0], out, 1, 2, 3);
        },
        getExact);
    cases.addKernel(
        "slice " + describe(dtype, {4, 64}) + " dim -1 8:40",
        {random(dtype, {4, 64}, 182, -9, 9)}, dtype, {4, 32},
        [](auto &ctx, auto &in, const Tensor &out) {
          slice(ctx, in[0], out, -1, 8, 1);
        },
        getExact);
    for (int64_t dim : {0, 1, -1}) {
      Shape a = {2, 3, 8}, b = {2, 3, 8}, c = {2, 3, 8};
      int d = dim < 0 ? 2 : int(dim);
      b.dims[d] = 5;
      c.dims[d] = 1;
      Shape out = a;
      out.dims[d] = a.dims[d] + b.dims[d] + c.dims[d];
      cases.addKernel(
          "concat " + describe(dtype, out) + " along " + std::to_string(dim),
          {random(dtype, a, 183, -9, 9), random(dtype, b, 184, -9, 9),
           random(dtype, c, 185, -9, 9)},
          dtype, out,
          [dim](auto &ctx, auto &in, const Tensor &out) {
            concat(ctx, in.data(), int(in.size()), out, dim);
          },
          getExact);
    }
    for (auto [from, to] :
         {std::pair{Shape{3, 1, 5}, Shape{2, 3, 4, 5}},
          std::pair{Shape(), Shape{7}}, std::pair{Shape{64}, Shape{5, 64}}})
      cases.addKernel(
          "broadcast " + describe(dtype, from) + " to " + to.str(),
          {random(dtype, from, 186, -9, 9)}, dtype, to,
          [](auto &ctx, auto &in, const Tensor &out) {
            broadcast(ctx, in[0], out);
          },
          getExact);
    cases.addKernel(
        "copy " + describe(dtype, {3, 333}),
        {random(dtype, {3, 333}, 187, -9, 9)}, dtype, {3, 333},
        [](auto &ctx, auto &in, const Tensor &out) { copy(ctx, in[0], out); },
        getExact);
  }
}

void addOptimizers(CaseList &cases) {
  // The gradient in the parameter's dtype, and an f32 parameter's in bf16
  // (mixed precision's weight gradients, widened by the update); read as it
  // is, and scaled by a clipping coefficient (momentum's and step 7's cases).
  std::vector<std::pair<DType, DType>> pairs = {{DType::F32, DType::F32},
                                                {DType::F32, DType::BF16},
                                                {DType::BF16, DType::BF16},
                                                {DType::F64, DType::F64}};
  for (auto [dtype, gradDtype] : pairs) {
    Shape shape = {1000, 3};
    std::string gradName =
        gradDtype == dtype
            ? ""
            : std::string(" with a ") + getName(gradDtype) + " gradient";
    HostTensor scale = literal(dtype, Shape(), {0.37});
    for (bool momentum : {false, true})
      cases.add("sgdUpdate " + describe(dtype, shape) + gradName +
                    (momentum ? " with momentum, scaled" : ""),
                [=](auto &session) -> Outputs {
                  Tensor param = session.upload(random(dtype, shape, 190));
                  Tensor grad = session.upload(random(gradDtype, shape, 191));
                  Tensor buffer =
                      momentum ? session.upload(random(dtype, shape, 192))
                               : Tensor();
                  Tensor gradScale =
                      momentum ? session.upload(scale) : Tensor();
                  Tensor lr = session.upload(scalar(0.05));
                  sgdUpdate(session.ctx, param, grad, gradScale, buffer, lr,
                            momentum ? 0.9 : 0, 0.01);
                  Outputs outputs = {session.download(param)};
                  if (momentum)
                    outputs.push_back(session.download(buffer));
                  return outputs;
                });
    for (int64_t step : {1, 7})
      cases.add("adamwUpdate " + describe(dtype, shape) + gradName + " step " +
                    std::to_string(step) + (step == 7 ? ", scaled" : ""),
                [=](auto &session) -> Outputs {
                  Tensor param = session.upload(random(dtype, shape, 193));
                  Tensor grad = session.upload(random(gradDtype, shape, 194));
                  Tensor gradScale =
                      step == 7 ? session.upload(scale) : Tensor();
                  Tensor expAvg =
                      session.upload(random(dtype, shape, 195, -0.1, 0.1));
                  Tensor expAvgSq =
                      session.upload(random(dtype, shape, 196, 0, 0.01));
                  Tensor lr = session.upload(scalar(1e-3));
                  adamwUpdate(session.ctx, param, grad, gradScale, expAvg,
                              expAvgSq, lr, step, 0.9, 0.999, 1e-8, 0.01);
                  return {session.download(param), session.download(expAvg),
                          session.download(expAvgSq)};
                });
  }
}

const std::vector<Case> &getCases() {
  static const std::vector<Case> cases = [] {
    CaseList list;
    addGenerators(list);
    addUnary(list);
    addCasts(list);
    addBinary(list);
    addCompareAndWhere(list);
    addTriangularAndDropout(list);
    addContractions(list);
    addNN(list);
    addRotaryEmbedding(list);
    addAttention(list);
    addLinearCrossEntropy(list);
    addLinearLogSumExp(list);
    addConvolutionsAndPooling(list);
    addReductions(list);
    addRunningSums(list);
    addDataMovement(list);
    addOptimizers(list);
    return list.get();
  }();
  return cases;
}

//===----------------------------------------------------------------------===//
// The runner.
//===----------------------------------------------------------------------===//

/// The backends, made once in main() after a CUDA device was found.
std::unique_ptr<cpu::Context> cpuContext;
std::unique_ptr<cuda::Context> cudaContext;

struct Outcome {
  Outputs outputs;
  std::optional<std::string> error;
};

template <typename Ctx>
Outcome runOn(Ctx &ctx, const std::function<Outputs(Session<Ctx> &)> &body) {
  Outcome outcome;
  try {
    Session<Ctx> session(ctx);
    outcome.outputs = body(session);
  } catch (const Error &error) {
    outcome.error = error.what();
  }
  return outcome;
}

/// Checks `got` (CUDA) against `want` (CPU) and describes the worst
/// mismatches.
void compareOutput(const HostTensor &got, const HostTensor &want,
                   Tolerance tolerance, size_t index) {
  INFO("output " << index << ": " << describe(want.dtype, want.shape)
                 << ", tolerance relative " << tolerance.relative
                 << " absolute " << tolerance.absolute);
  REQUIRE(got.dtype == want.dtype);
  REQUIRE(got.shape == want.shape);
  int64_t mismatches = 0, worst = -1;
  double worstExcess = 0;
  for (int64_t i = 0; i < want.getCount(); ++i) {
    double g = got.get(i), w = want.get(i);
    bool matches = std::isnan(w)   ? std::isnan(g)
                   : std::isinf(w) ? g == w
                                   : std::fabs(g - w) <=
                                         tolerance.absolute +
                                             tolerance.relative * std::fabs(w);
    if (matches)
      continue;
    ++mismatches;
    double excess = std::isfinite(g - w) ? std::fabs(g - w) : INFINITY;
    if (worst < 0 || excess > worstExcess) {
      worst = i;
      worstExcess = excess;
    }
  }
  if (mismatches) {
    std::ostringstream message;
    message.precision(9);
    message << mismatches << " of " << want.getCount()
            << " elements differ; the worst at element " << worst << ": CUDA "
            << got.get(worst) << ", CPU " << want.get(worst);
    FAIL_CHECK(message.str());
  }
}

void runCase(const Case &c) {
  Outcome want = runOn(*cpuContext, c.onCpu);
  Outcome got = runOn(*cudaContext, c.onCuda);
  INFO("CPU: " << want.error.value_or("no error")
               << "; CUDA: " << got.error.value_or("no error"));
  CHECK(want.error.has_value() == c.throws);
  if (want.error || got.error) {
    CHECK(got.error == want.error);
    return;
  }
  REQUIRE(got.outputs.size() == want.outputs.size());
  for (size_t i = 0; i < want.outputs.size(); ++i)
    compareOutput(got.outputs[i], want.outputs[i],
                  c.tolerance(want.outputs[i].dtype), i);
}

} // namespace

TEST_CASE("every kernel agrees with the CPU backend", "[conformance]") {
  for (const Case &c : getCases())
    DYNAMIC_SECTION(c.name) { runCase(c); }
}

TEST_CASE("the conformance cases have distinct names", "[conformance]") {
  // Catch runs one of several sections of one name.
  std::set<std::string> names;
  for (const Case &c : getCases()) {
    INFO(c.name);
    CHECK(names.insert(c.name).second);
  }
}

int main(int argc, char **argv) {
  int devices = 0;
  cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::cout << "skipped: no CUDA device (cudaGetDeviceCount: "
              << (status == cudaSuccess ? "0 devices"
                                        : cudaGetErrorString(status))
              << ")\n";
    return kSkipped;
  }
  cpuContext = std::make_unique<cpu::Context>();
  cudaContext = std::make_unique<cuda::Context>(0);
  int result = Catch::Session().run(argc, argv);
  cudaContext.reset();
  cpuContext.reset();
  return result;
}
