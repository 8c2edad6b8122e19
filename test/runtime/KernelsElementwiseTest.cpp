// Generators, elementwise, compare, where and triangular kernels against
// values computed here with the formulas they implement.
#include "slapo/runtime/Error.h"
#include "slapo/runtime/cpu/Kernels.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <vector>

using namespace slapo::rt;
using namespace slapo::rt::cpu;

TEST_CASE("fill converts the value to each dtype") {
  Context ctx(2);
  std::vector<float> f(5);
  fill(ctx, Tensor(f.data(), DType::F32, {5}), 2.5);
  for (float x : f)
    CHECK(x == 2.5f);
  std::vector<int64_t> i(3);
  fill(ctx, Tensor(i.data(), DType::I64, {3}), -7);
  CHECK(i == std::vector<int64_t>{-7, -7, -7});
  std::vector<BFloat16> b(2);
  fill(ctx, Tensor(b.data(), DType::BF16, {2}), 1.5);
  CHECK(b[1].toFloat() == 1.5f);
  bool flags[2] = {false, false};
  fill(ctx, Tensor(flags, DType::Bool, {2}), 3);
  CHECK((flags[0] && flags[1]));
}

TEST_CASE("fill of a large tensor reaches every element") {
  Context ctx(2);
  std::vector<float> f(200000, 0.0f);
  fill(ctx, Tensor(f.data(), DType::F32, {200000}), -1);
  for (float x : f)
    REQUIRE(x == -1.0f);
}

TEST_CASE("arange is start + i * step") {
  Context ctx(2);
  std::vector<float> f(4);
  arange(ctx, Tensor(f.data(), DType::F32, {4}), 1.0, 0.5);
  CHECK(f == std::vector<float>{1.0f, 1.5f, 2.0f, 2.5f});
  std::vector<int64_t> i(3);
  arange(ctx, Tensor(i.data(), DType::I64, {3}), 5, -2);
  CHECK(i == std::vector<int64_t>{5, 3, 1});
}

TEST_CASE("each unary kind matches its formula") {
  Context ctx(2);
  const double pi = std::acos(-1.0);
  struct Case {
    UnaryKind kind;
    std::function<double(double)> formula;
    std::vector<float> inputs;
  };
  std::vector<float> signedValues = {-2.0f, -0.75f, 0.0f, 0.5f, 3.0f};
  std::vector<float> positive = {0.25f, 1.0f, 2.0f, 9.0f};
  std::vector<Case> cases = {
      {UnaryKind::Neg, [](double x) { return -x; }, signedValues},
      {UnaryKind::Abs, [](double x) { return std::fabs(x); }, signedValues},
      {UnaryKind::Exp, [](double x) { return std::exp(x); }, signedValues},
      {UnaryKind::Log, [](double x) { return std::log(x); }, positive},
      {UnaryKind::Sqrt, [](double x) { return std::sqrt(x); }, positive},
      {UnaryKind::Rsqrt, [](double x) { return 1 / std::sqrt(x); }, positive},
      {UnaryKind::Tanh, [](double x) { return std::tanh(x); }, signedValues},
      {UnaryKind::Sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); },
       signedValues},
      {UnaryKind::Relu, [](double x) { return x > 0 ? x : 0; }, signedValues},
      {UnaryKind::Silu, [](double x) { return x / (1 + std::exp(-x)); },
       signedValues},
      {UnaryKind::Sin, [](double x) { return std::sin(x); }, signedValues},
      {UnaryKind::Cos, [](double x) { return std::cos(x); }, signedValues},
      {UnaryKind::GeluErf,
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); },
       signedValues},
      {UnaryKind::GeluTanh,
       [pi](double x) {
         return 0.5 * x *
                (1 + std::tanh(std::sqrt(2 / pi) * (x + 0.044715 * x * x * x)));
       },
       signedValues},
  };
  for (Case &c : cases) {
    INFO("kind " << int(c.kind));
    Shape shape{int64_t(c.inputs.size())};
    std::vector<float> out(c.inputs.size());
    unary(ctx, c.kind, Tensor(c.inputs.data(), DType::F32, shape),
          Tensor(out.data(), DType::F32, shape));
    for (size_t i = 0; i < out.size(); ++i)
      CHECK(out[i] == Approx(c.formula(c.inputs[i])).margin(1e-6));
  }
}

TEST_CASE("gelu kinds differ as erf and tanh do") {
  Context ctx(1);
  float x = 1.0f, erfOut, tanhOut;
  unary(ctx, UnaryKind::GeluErf, Tensor(&x, DType::F32, {}),
        Tensor(&erfOut, DType::F32, {}));
  unary(ctx, UnaryKind::GeluTanh, Tensor(&x, DType::F32, {}),
        Tensor(&tanhOut, DType::F32, {}));
  // gelu(1) = 0.8413447 exactly, 0.8411920 with the tanh approximation.
  CHECK(erfOut == Approx(0.8413447).epsilon(1e-6));
  CHECK(tanhOut == Approx(0.8411920).epsilon(1e-6));
}

TEST_CASE("gelu's gradients are grad times the derivative of each gelu") {
  // Against central differences of the two gelus in f64.
  Context ctx(2);
  const double pi = std::acos(-1.0);
  auto erfGelu = [](double x) {
    return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  };
  auto tanhGelu = [pi](double x) {
    return 0.5 * x *
           (1 + std::tanh(std::sqrt(2 / pi) * (x + 0.044715 * x * x * x)));
  };
  const int64_t count = 100000; // shared among threads
  std::vector<float> x(count), grad(count), out(count);
  for (int64_t i = 0; i < count; ++i) {
    x[i] = -8.0f + 16.0f * float(i) / float(count);
    grad[i] = 1.0f + float(i % 7) / 4.0f;
  }
  for (auto [kind, gelu] : {std::pair{BinaryKind::GeluErfGrad,
                                      std::function<double(double)>(erfGelu)},
                            {BinaryKind::GeluTanhGrad, tanhGelu}}) {
    INFO("kind " << int(kind));
    binary(ctx, kind, Tensor(grad.data(), DType::F32, {count}),
           Tensor(x.data(), DType::F32, {count}),
           Tensor(out.data(), DType::F32, {count}));
    for (int64_t i = 0; i < count; ++i) {
      const double h = 1e-5;
      double slope = (gelu(x[i] + h) - gelu(x[i] - h)) / (2 * h);
      INFO("x = " << x[i]);
      REQUIRE(out[i] == Approx(grad[i] * slope).margin(1e-5));
    }
  }
  std::vector<int32_t> integers(2);
  Tensor ints(integers.data(), DType::I32, {2});
  CHECK_THROWS_AS(binary(ctx, BinaryKind::GeluTanhGrad, ints, ints, ints),
                  Error);
}

TEST_CASE("integer unary: neg and abs, float-only kinds refused") {
  Context ctx(1);
  std::vector<int32_t> in = {-3, 0, 4}, out(3);
  Tensor input(in.data(), DType::I32, {3}), result(out.data(), DType::I32, {3});
  unary(ctx, UnaryKind::Neg, input, result);
  CHECK(out == std::vector<int32_t>{3, 0, -4});
  unary(ctx, UnaryKind::Abs, input, result);
  CHECK(out == std::vector<int32_t>{3, 0, 4});
  CHECK_THROWS_AS(unary(ctx, UnaryKind::Exp, input, result), Error);
}

TEST_CASE("bf16 unary computes in f32 and rounds once") {
  Context ctx(1);
  std::vector<BFloat16> in = {BFloat16::fromFloat(0.5f),
                              BFloat16::fromFloat(-1.0f)};
  std::vector<BFloat16> out(2);
  unary(ctx, UnaryKind::Exp, Tensor(in.data(), DType::BF16, {2}),
        Tensor(out.data(), DType::BF16, {2}));
  CHECK(out[0].bits == BFloat16::fromFloat(std::exp(0.5f)).bits);
  CHECK(out[1].bits == BFloat16::fromFloat(std::exp(-1.0f)).bits);
}

TEST_CASE("binary broadcasts trailing dims") {
  Context ctx(2);
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, row = {10, 20, 30}, out(6);
  binary(ctx, BinaryKind::Add, Tensor(a.data(), DType::F32, {2, 3}),
         Tensor(row.data(), DType::F32, {3}),
         Tensor(out.data(), DType::F32, {2, 3}));
  CHECK(out == std::vector<float>{11, 22, 33, 14, 25, 36});
  // The broadcast operand on the left.
  binary(ctx, BinaryKind::Sub, Tensor(row.data(), DType::F32, {3}),
         Tensor(a.data(), DType::F32, {2, 3}),
         Tensor(out.data(), DType::F32, {2, 3}));
  CHECK(out == std::vector<float>{9, 18, 27, 6, 15, 24});
  // [2, 1] op [1, 3]: an outer product.
  std::vector<float> column = {2, 3};
  binary(ctx, BinaryKind::Mul, Tensor(column.data(), DType::F32, {2, 1}),
         Tensor(row.data(), DType::F32, {1, 3}),
         Tensor(out.data(), DType::F32, {2, 3}));
  CHECK(out == std::vector<float>{20, 40, 60, 30, 60, 90});
  // A 0-d operand.
  float two = 2;
  binary(ctx, BinaryKind::Div, Tensor(a.data(), DType::F32, {2, 3}),
         Tensor(&two, DType::F32, {}), Tensor(out.data(), DType::F32, {2, 3}));
  CHECK(out == std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3});
}

TEST_CASE("binary on large broadcast shapes matches a naive loop") {
  Context ctx(2);
  const int rows = 300, columns = 257;
  std::vector<float> a(rows * columns), b(columns), column(rows),
      out(rows * columns);
  for (int i = 0; i < rows * columns; ++i)
    a[i] = float(i % 97) * 0.25f;
  for (int j = 0; j < columns; ++j)
    b[j] = float(j) - 100;
  for (int i = 0; i < rows; ++i)
    column[i] = float(i);
  binary(ctx, BinaryKind::Maximum,
         Tensor(a.data(), DType::F32, {rows, columns}),
         Tensor(b.data(), DType::F32, {1, columns}),
         Tensor(out.data(), DType::F32, {rows, columns}));
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < columns; ++j)
      REQUIRE(out[i * columns + j] == std::max(a[i * columns + j], b[j]));
  binary(ctx, BinaryKind::Sub, Tensor(column.data(), DType::F32, {rows, 1}),
         Tensor(a.data(), DType::F32, {rows, columns}),
         Tensor(out.data(), DType::F32, {rows, columns}));
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < columns; ++j)
      REQUIRE(out[i * columns + j] == column[i] - a[i * columns + j]);
}

TEST_CASE("binary: integer division truncates, pow, NaN-propagating max") {
  Context ctx(1);
  std::vector<int64_t> a = {7, -7, 5, 2}, b = {2, 2, -3, 10}, out(4);
  Tensor lhs(a.data(), DType::I64, {4}), rhs(b.data(), DType::I64, {4}),
      result(out.data(), DType::I64, {4});
  binary(ctx, BinaryKind::Div, lhs, rhs, result);
  CHECK(out == std::vector<int64_t>{3, -3, -1, 0});
  binary(ctx, BinaryKind::Pow, lhs, rhs, result);
  CHECK(out == std::vector<int64_t>{49, 49, 0, 1024});
  binary(ctx, BinaryKind::Minimum, lhs, rhs, result);
  CHECK(out == std::vector<int64_t>{2, -7, -3, 2});

  float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {nan, 1, 2}, y = {0, nan, 3}, z(3);
  binary(ctx, BinaryKind::Maximum, Tensor(x.data(), DType::F32, {3}),
         Tensor(y.data(), DType::F32, {3}), Tensor(z.data(), DType::F32, {3}));
  CHECK(std::isnan(z[0]));
  CHECK(std::isnan(z[1]));
  CHECK(z[2] == 3);
  std::vector<float> base = {2, 9}, exponent = {3, 0.5f}, power(2);
  binary(ctx, BinaryKind::Pow, Tensor(base.data(), DType::F32, {2}),
         Tensor(exponent.data(), DType::F32, {2}),
         Tensor(power.data(), DType::F32, {2}));
  CHECK(power[0] == Approx(8));
  CHECK(power[1] == Approx(3));
  // Squares and cubes are the products ATen computes for them, bit for bit.
  std::vector<float> v = {1.1f, -0.7f, 3.3f}, squares(3), cubes(3);
  float two = 2, three = 3;
  binary(ctx, BinaryKind::Pow, Tensor(v.data(), DType::F32, {3}),
         Tensor(&two, DType::F32, {}), Tensor(squares.data(), DType::F32, {3}));
  binary(ctx, BinaryKind::Pow, Tensor(v.data(), DType::F32, {3}),
         Tensor(&three, DType::F32, {}), Tensor(cubes.data(), DType::F32, {3}));
  for (int i = 0; i < 3; ++i) {
    CHECK(squares[i] == v[i] * v[i]);
    CHECK(cubes[i] == v[i] * v[i] * v[i]);
  }
}

TEST_CASE("compare gives bools, broadcasting") {
  Context ctx(1);
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {2, 2, 7};
  bool out[6];
  Tensor lhs(a.data(), DType::F32, {2, 3}), rhs(b.data(), DType::F32, {3}),
      result(out, DType::Bool, {2, 3});
  auto check = [&](CompareKind kind, std::vector<int> expected) {
    compare(ctx, kind, lhs, rhs, result);
    for (int i = 0; i < 6; ++i)
      CHECK(out[i] == bool(expected[i]));
  };
  check(CompareKind::Lt, {1, 0, 1, 0, 0, 1});
  check(CompareKind::Le, {1, 1, 1, 0, 0, 1});
  check(CompareKind::Eq, {0, 1, 0, 0, 0, 0});
  check(CompareKind::Ne, {1, 0, 1, 1, 1, 1});
  check(CompareKind::Gt, {0, 0, 0, 1, 1, 0});
  check(CompareKind::Ge, {0, 1, 0, 1, 1, 0});
}

TEST_CASE("where selects with all three operands broadcast") {
  Context ctx(1);
  bool condition[2] = {true, false};
  std::vector<float> onTrue = {1, 2, 3, 4, 5, 6}, out(6);
  float onFalse = -1;
  where(ctx, Tensor(condition, DType::Bool, {2, 1}),
        Tensor(onTrue.data(), DType::F32, {2, 3}),
        Tensor(&onFalse, DType::F32, {}),
        Tensor(out.data(), DType::F32, {2, 3}));
  CHECK(out == std::vector<float>{1, 2, 3, -1, -1, -1});
  bool mask[3] = {false, true, false};
  std::vector<int64_t> a = {1, 2, 3}, b = {10, 20}, r(6);
  where(ctx, Tensor(mask, DType::Bool, {3}), Tensor(a.data(), DType::I64, {3}),
        Tensor(b.data(), DType::I64, {2, 1}),
        Tensor(r.data(), DType::I64, {2, 3}));
  CHECK(r == std::vector<int64_t>{10, 2, 10, 20, 2, 20});
}

TEST_CASE("triangular keeps a triangle of the last two dims") {
  Context ctx(1);
  const int batch = 2, rows = 3, columns = 4;
  std::vector<float> in(batch * rows * columns), out(in.size());
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = float(i + 1);
  Tensor input(in.data(), DType::F32, {batch, rows, columns}),
      result(out.data(), DType::F32, {batch, rows, columns});
  for (bool lower : {true, false})
    for (int64_t diagonal : {-1, 0, 1, 5}) {
      triangular(ctx, input, result, lower, diagonal);
      for (int b = 0; b < batch; ++b)
        for (int i = 0; i < rows; ++i)
          for (int j = 0; j < columns; ++j) {
            bool keep = lower ? j - i <= diagonal : j - i >= diagonal;
            int index = (b * rows + i) * columns + j;
            INFO("lower " << lower << " diagonal " << diagonal << " at "
                          << index);
            CHECK(out[index] == (keep ? in[index] : 0.0f));
          }
    }
}
