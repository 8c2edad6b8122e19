//===- ReferenceTest.cpp - the LibTorch reference interpreter -------------===//
//
// Every op is run through the interpreter on random inputs and compared with
// the same computation written out here by its formula (loops in double),
// not with the at:: call the interpreter makes.
//
//===----------------------------------------------------------------------===//
// LibTorch comes first: c10's glog logging defines CHECK(condition), which
// must not replace Catch's CHECK. It is undefined before Catch defines its own.
#include "slapo/Reference/Interpreter.h"
#include <ATen/ATen.h>
#undef CHECK

#include <catch2/catch.hpp>

#include "slapo/Dialect/SlapoDialect.h"
#include "slapo/Dialect/SlapoOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

namespace ref = slapo::reference;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// A parsed module, its context, and every diagnostic emitted in it.
class Program {
public:
  explicit Program(const std::string &source, bool allowUnregistered = false)
      : handler(&context, [this](mlir::Diagnostic &diagnostic) {
          llvm::raw_string_ostream os(diagnostics);
          os << diagnostic.getLocation() << ": " << diagnostic << "\n";
          return mlir::success();
        }) {
    context.loadDialect<slapo::SlapoDialect, mlir::func::FuncDialect>();
    context.allowUnregisteredDialects(allowUnregistered);
    module = mlir::parseSourceString<mlir::ModuleOp>(
        source, mlir::ParserConfig(&context));
  }

  mlir::func::FuncOp func(const std::string &name = "main") {
    INFO(diagnostics);
    REQUIRE(module);
    auto func = module->lookupSymbol<mlir::func::FuncOp>(name);
    REQUIRE(func);
    return func;
  }

  mlir::FailureOr<std::vector<at::Tensor>>
  run(std::vector<at::Tensor> inputs, const ref::TensorMap &params = {},
      const ref::OpObserver &observer = nullptr) {
    return ref::evaluate(func(), inputs, params, observer);
  }

  /// Runs a func with one result that must evaluate successfully.
  at::Tensor run1(std::vector<at::Tensor> inputs,
                  const ref::TensorMap &params = {}) {
    auto results = run(std::move(inputs), params);
    INFO(diagnostics);
    REQUIRE(mlir::succeeded(results));
    REQUIRE(results->size() == 1);
    return results->front();
  }

  mlir::MLIRContext context;
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

at::Tensor randn(std::vector<int64_t> shape,
                 at::ScalarType dtype = at::kFloat) {
  return at::randn(shape, at::TensorOptions().dtype(at::kFloat)).to(dtype);
}

at::Tensor asDouble(const at::Tensor &tensor) {
  return tensor.detach().to(at::kDouble).contiguous();
}

std::vector<double> valuesOf(const at::Tensor &tensor) {
  at::Tensor d = asDouble(tensor);
  return {d.data_ptr<double>(), d.data_ptr<double>() + d.numel()};
}

at::Tensor doubles(const std::vector<double> &values,
                   std::vector<int64_t> shape) {
  return at::tensor(at::ArrayRef<double>(values),
                    at::TensorOptions().dtype(at::kDouble))
      .reshape(shape);
}

std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t> &shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

/// Offset into a row-major tensor of `shape` that PyTorch broadcasting reads
/// for the result element at `index` (shapes aligned on the right).
int64_t broadcastOffset(const std::vector<int64_t> &index,
                        at::IntArrayRef shape) {
  int64_t offset = 0;
  size_t lead = index.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    offset = offset * shape[d] + (shape[d] == 1 ? 0 : index[lead + d]);
  return offset;
}

/// The elementwise reference: result[i] = fn(operand_0[b(i)], ...), with
/// explicit broadcasting, in double.
at::Tensor
elementwise(const std::vector<at::Tensor> &operands, std::vector<int64_t> shape,
            const std::function<double(const std::vector<double> &)> &fn) {
  std::vector<std::vector<double>> data;
  for (const at::Tensor &operand : operands)
    data.push_back(valuesOf(operand));
  int64_t count = 1;
  for (int64_t size : shape)
    count *= size;
  std::vector<double> result(count);
  std::vector<double> args(operands.size());
  for (int64_t i = 0; i < count; ++i) {
    std::vector<int64_t> index = unravel(i, shape);
    for (size_t k = 0; k < operands.size(); ++k)
      args[k] = data[k][broadcastOffset(index, operands[k].sizes())];
    result[i] = fn(args);
  }
  return doubles(result, shape);
}

/// `actual` has dtype `dtype`, the expected shape, and is within `tolerance`
/// of the double-precision reference.
void checkClose(const at::Tensor &actual, const at::Tensor &expected,
                at::ScalarType dtype = at::kFloat, double tolerance = 1e-5) {
  REQUIRE(actual.scalar_type() == dtype);
  REQUIRE(actual.sizes() == expected.sizes());
  double error = ref::relativeError(asDouble(actual), asDouble(expected));
  INFO("relative error " << error);
  CHECK(error <= tolerance);
}

/// `actual` equals `expected` exactly, in `dtype`.
void checkExact(const at::Tensor &actual, const at::Tensor &expected,
                at::ScalarType dtype) {
  REQUIRE(actual.scalar_type() == dtype);
  REQUIRE(actual.sizes() == expected.sizes());
  CHECK(valuesOf(actual) == valuesOf(expected));
}

std::string unaryFunc(const std::string &op, const std::string &type) {
  return "func.func @main(%x: " + type + ") -> " + type + " {\n  %y = slapo." +
         op + " %x : " + type + "\n  return %y : " + type + "\n}\n";
}

std::string binaryFunc(const std::string &op, const std::string &lhs,
                       const std::string &rhs, const std::string &result) {
  return "func.func @main(%a: " + lhs + ", %b: " + rhs + ") -> " + result +
         " {\n  %y = slapo." + op + " %a, %b : (" + lhs + ", " + rhs + ") -> " +
         result + "\n  return %y : " + result + "\n}\n";
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise ops.
//===----------------------------------------------------------------------===//

TEST_CASE("unary float ops follow their formulas", "[reference][elementwise]") {
  struct Case {
    const char *op;
    double (*fn)(double);
    bool positive;
  };
  const Case cases[] = {
      {"neg", [](double x) { return -x; }, false},
      {"abs", [](double x) { return std::fabs(x); }, false},
      {"exp", [](double x) { return std::exp(x); }, false},
      {"log", [](double x) { return std::log(x); }, true},
      {"sqrt", [](double x) { return std::sqrt(x); }, true},
      {"rsqrt", [](double x) { return 1 / std::sqrt(x); }, true},
      {"tanh", [](double x) { return std::tanh(x); }, false},
      {"sigmoid", [](double x) { return sigmoid(x); }, false},
      {"relu", [](double x) { return x > 0 ? x : 0.0; }, false},
      {"silu", [](double x) { return x * sigmoid(x); }, false},
      {"sin", [](double x) { return std::sin(x); }, false},
      {"cos", [](double x) { return std::cos(x); }, false},
  };
  at::manual_seed(1);
  for (const Case &c : cases) {
    INFO("slapo." << c.op);
    at::Tensor x = randn({3, 4}) * 2;
    if (c.positive)
      x = x.abs() + 0.1;
    Program program(unaryFunc(c.op, "tensor<3x4xf32>"));
    at::Tensor y = program.run1({x});
    checkClose(y,
               elementwise({x}, {3, 4}, [&](auto &v) { return c.fn(v[0]); }));
  }
}

TEST_CASE("neg and abs on integers are exact", "[reference][elementwise]") {
  at::Tensor x =
      at::arange(-6, 6, at::TensorOptions().dtype(at::kInt)).reshape({3, 4});
  Program neg(unaryFunc("neg", "tensor<3x4xi32>"));
  checkExact(neg.run1({x}),
             elementwise({x}, {3, 4}, [](auto &v) { return -v[0]; }), at::kInt);
  Program abs(unaryFunc("abs", "tensor<3x4xi32>"));
  checkExact(abs.run1({x}),
             elementwise({x}, {3, 4}, [](auto &v) { return std::fabs(v[0]); }),
             at::kInt);
}

TEST_CASE("gelu with erf and with the tanh approximation",
          "[reference][elementwise]") {
  at::manual_seed(2);
  at::Tensor x = randn({4, 5}) * 3;
  const char *source = R"mlir(
func.func @main(%x: tensor<4x5xf32>) -> (tensor<4x5xf32>, tensor<4x5xf32>) {
  %e = slapo.gelu %x <erf> : tensor<4x5xf32>
  %t = slapo.gelu %x <tanh> : tensor<4x5xf32>
  return %e, %t : tensor<4x5xf32>, tensor<4x5xf32>
}
)mlir";
  Program program(source);
  auto results = program.run({x});
  INFO(program.diagnostics);
  REQUIRE(mlir::succeeded(results));
  checkClose((*results)[0], elementwise({x}, {4, 5}, [](auto &v) {
               return 0.5 * v[0] * (1 + std::erf(v[0] / std::sqrt(2.0)));
             }));
  checkClose((*results)[1], elementwise({x}, {4, 5}, [](auto &v) {
               double x = v[0];
               return 0.5 * x *
                      (1 + std::tanh(std::sqrt(2 / M_PI) *
                                     (x + 0.044715 * x * x * x)));
             }));
}

TEST_CASE("binary float ops broadcast like PyTorch",
          "[reference][elementwise]") {
  struct Case {
    const char *op;
    double (*fn)(double, double);
  };
  const Case cases[] = {
      {"add", [](double a, double b) { return a + b; }},
      {"sub", [](double a, double b) { return a - b; }},
      {"mul", [](double a, double b) { return a * b; }},
      {"div", [](double a, double b) { return a / b; }},
      {"pow", [](double a, double b) { return std::pow(a, b); }},
      {"maximum", [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](double a, double b) { return std::min(a, b); }},
  };
  at::manual_seed(3);
  for (const Case &c : cases) {
    INFO("slapo." << c.op);
    at::Tensor a = randn({2, 3, 4});
    at::Tensor b = randn({3, 1});
    if (std::string(c.op) == "pow")
      a = a.abs() + 0.1;
    if (std::string(c.op) == "div")
      b = b.abs() + 0.5;
    Program program(binaryFunc(c.op, "tensor<2x3x4xf32>", "tensor<3x1xf32>",
                               "tensor<2x3x4xf32>"));
    at::Tensor y = program.run1({a, b});
    checkClose(y, elementwise({a, b}, {2, 3, 4},
                              [&](auto &v) { return c.fn(v[0], v[1]); }));
  }
}

TEST_CASE("a fusion group evaluates its ops and gives what it yields",
          "[reference][elementwise]") {
  Program program(R"(
    func.func @main(%x: tensor<2x4xf32>, %b: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
      %r:2 = slapo.fused %x, %b : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
      ^bb0(%a0: tensor<2x4xf32>, %a1: tensor<4xf32>):
        %0 = slapo.add %a0, %a1 : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
        %1 = slapo.exp %0 : tensor<2x4xf32>
        slapo.yield %0, %1 : tensor<2x4xf32>, tensor<2x4xf32>
      }
      return %r#0, %r#1 : tensor<2x4xf32>, tensor<2x4xf32>
    })");
  at::manual_seed(4);
  at::Tensor x = randn({2, 4}), b = randn({4});
  auto results = program.run({x, b});
  INFO(program.diagnostics);
  REQUIRE(mlir::succeeded(results));
  REQUIRE(results->size() == 2);
  checkClose((*results)[0],
             elementwise({x, b}, {2, 4}, [](auto &v) { return v[0] + v[1]; }));
  checkClose((*results)[1], elementwise({x, b}, {2, 4}, [](auto &v) {
               return std::exp(v[0] + v[1]);
             }));
}

TEST_CASE("binary integer ops are exact; integer division truncates",
          "[reference][elementwise]") {
  struct Case {
    const char *op;
    double (*fn)(double, double);
  };
  const Case cases[] = {
      {"add", [](double a, double b) { return a + b; }},
      {"sub", [](double a, double b) { return a - b; }},
      {"mul", [](double a, double b) { return a * b; }},
      {"div", [](double a, double b) { return std::trunc(a / b); }},
      {"maximum", [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](double a, double b) { return std::min(a, b); }},
  };
  at::Tensor a =
      at::tensor({-7, -3, 0, 5, 9, 12}, at::kLong).reshape({2, 1, 3});
  at::Tensor b = at::tensor({2, -4, 3, 5}, at::kLong).reshape({4, 1});
  for (const Case &c : cases) {
    INFO("slapo." << c.op);
    Program program(binaryFunc(c.op, "tensor<2x1x3xi64>", "tensor<4x1xi64>",
                               "tensor<2x4x3xi64>"));
    checkExact(program.run1({a, b}),
               elementwise({a, b}, {2, 4, 3},
                           [&](auto &v) { return c.fn(v[0], v[1]); }),
               at::kLong);
  }
}

TEST_CASE("compare predicates give bool tensors", "[reference][elementwise]") {
  struct Case {
    const char *predicate;
    bool (*fn)(double, double);
  };
  const Case cases[] = {
      {"eq", [](double a, double b) { return a == b; }},
      {"ne", [](double a, double b) { return a != b; }},
      {"lt", [](double a, double b) { return a < b; }},
      {"le", [](double a, double b) { return a <= b; }},
      {"gt", [](double a, double b) { return a > b; }},
      {"ge", [](double a, double b) { return a >= b; }},
  };
  at::manual_seed(4);
  // Small integers in float: many ties, so eq/le/ge are exercised.
  at::Tensor a =
      at::randint(-2, 3, {2, 3, 4}, at::TensorOptions().dtype(at::kFloat));
  at::Tensor b =
      at::randint(-2, 3, {3, 1}, at::TensorOptions().dtype(at::kFloat));
  for (const Case &c : cases) {
    INFO("slapo.compare " << c.predicate);
    std::string source =
        "func.func @main(%a: tensor<2x3x4xf32>, %b: tensor<3x1xf32>) -> "
        "tensor<2x3x4xi1> {\n  %y = slapo.compare <" +
        std::string(c.predicate) +
        "> %a, %b : (tensor<2x3x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xi1>\n"
        "  return %y : tensor<2x3x4xi1>\n}\n";
    Program program(source);
    checkExact(
        program.run1({a, b}),
        elementwise({a, b}, {2, 3, 4},
                    [&](auto &v) { return c.fn(v[0], v[1]) ? 1.0 : 0.0; }),
        at::kBool);
  }
}

TEST_CASE("where broadcasts all three operands", "[reference][elementwise]") {
  at::manual_seed(5);
  at::Tensor condition = at::randn({2, 3, 1}) > 0;
  at::Tensor onTrue = randn({3, 4});
  at::Tensor onFalse = randn({1});
  const char *source = R"mlir(
func.func @main(%c: tensor<2x3x1xi1>, %t: tensor<3x4xf32>, %f: tensor<1xf32>) -> tensor<2x3x4xf32> {
  %y = slapo.where %c, %t, %f : (tensor<2x3x1xi1>, tensor<3x4xf32>, tensor<1xf32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}
)mlir";
  Program program(source);
  checkExact(program.run1({condition, onTrue, onFalse}),
             elementwise({condition, onTrue, onFalse}, {2, 3, 4},
                         [](auto &v) { return v[0] != 0 ? v[1] : v[2]; }),
             at::kFloat);
}

TEST_CASE("cast converts element types", "[reference][elementwise]") {
  at::manual_seed(6);
  at::Tensor x = randn({3, 4}) * 5;
  x[0][0] = 0.0f; // a zero for the bool cast
  auto castFunc = [](const std::string &from, const std::string &to) {
    return "func.func @main(%x: tensor<3x4x" + from + ">) -> tensor<3x4x" + to +
           "> {\n  %y = slapo.cast %x : tensor<3x4x" + from +
           "> -> tensor<3x4x" + to + ">\n  return %y : tensor<3x4x" + to +
           ">\n}\n";
  };
  SECTION("f32 -> i32 truncates toward zero") {
    Program program(castFunc("f32", "i32"));
    checkExact(
        program.run1({x}),
        elementwise({x}, {3, 4}, [](auto &v) { return std::trunc(v[0]); }),
        at::kInt);
  }
  SECTION("f32 -> i1 is x != 0") {
    Program program(castFunc("f32", "i1"));
    checkExact(
        program.run1({x}),
        elementwise({x}, {3, 4}, [](auto &v) { return v[0] != 0 ? 1.0 : 0.0; }),
        at::kBool);
  }
  SECTION("i1 -> f32 is 0 or 1") {
    at::Tensor b = x > 0;
    Program program(castFunc("i1", "f32"));
    checkExact(
        program.run1({b}),
        elementwise({b}, {3, 4}, [](auto &v) { return v[0] != 0 ? 1.0 : 0.0; }),
        at::kFloat);
  }
  SECTION("i64 -> f32 and f32 -> f64 keep the values") {
    at::Tensor i =
        at::arange(-5, 7, at::TensorOptions().dtype(at::kLong)).reshape({3, 4});
    Program toF32(castFunc("i64", "f32"));
    checkExact(toF32.run1({i}),
               elementwise({i}, {3, 4}, [](auto &v) { return v[0]; }),
               at::kFloat);
    Program toF64(castFunc("f32", "f64"));
    checkExact(toF64.run1({x}),
               elementwise({x}, {3, 4}, [](auto &v) { return v[0]; }),
               at::kDouble);
  }
  SECTION("f32 -> bf16 rounds to 8 significant bits") {
    Program program(castFunc("f32", "bf16"));
    checkClose(program.run1({x}), asDouble(x), at::kBFloat16,
               /*tolerance=*/1.0 / 256);
  }
}

TEST_CASE("dropout draws the masks at::dropout draws under the same seed",
          "[reference][elementwise]") {
  const char *source = R"mlir(
func.func @main(%x: tensor<50x200xf32>) -> (tensor<50x200xf32>, tensor<50x200xf32>) {
  %a = slapo.dropout %x {p = 3.000000e-01 : f64, stream = 0 : i64} : tensor<50x200xf32>
  %b = slapo.dropout %a {p = 1.000000e-01 : f64, stream = 1 : i64} : tensor<50x200xf32>
  return %a, %b : tensor<50x200xf32>, tensor<50x200xf32>
}
)mlir";
  at::manual_seed(7);
  at::Tensor x = randn({50, 200});
  Program program(source);

  at::manual_seed(1234);
  auto results = program.run({x});
  INFO(program.diagnostics);
  REQUIRE(mlir::succeeded(results));
  at::manual_seed(1234);
  at::Tensor a = at::dropout(x, 0.3, /*train=*/true);
  at::Tensor b = at::dropout(a, 0.1, /*train=*/true);
  CHECK(ref::relativeError((*results)[0], a) == 0);
  CHECK(ref::relativeError((*results)[1], b) == 0);

  // And by its definition: every element is 0 or x / (1 - p), about p zeroed.
  std::vector<double> in = valuesOf(x), out = valuesOf((*results)[0]);
  int64_t zeros = 0;
  bool scaled = true;
  for (size_t i = 0; i < in.size(); ++i) {
    if (out[i] == 0)
      ++zeros;
    else
      scaled &=
          std::fabs(out[i] - in[i] / 0.7) <= 1e-6 * std::fabs(in[i] / 0.7);
  }
  CHECK(scaled);
  CHECK(std::fabs(double(zeros) / in.size() - 0.3) < 0.03);

  // A second evaluation draws a fresh mask.
  auto again = program.run({x});
  REQUIRE(mlir::succeeded(again));
  CHECK(ref::relativeError((*again)[0], (*results)[0]) > 0);
}

TEST_CASE("flash_attention's dropout draws what the dropout it replaced "
          "draws, and its gradient is autograd's under that mask",
          "[reference][nn]") {
  // The unreplaced chain and flash_attention with its dropout, under one
  // seed: the same at::dropout draws of the [B, H, T, S] probabilities.
  const char *source = R"mlir(
func.func @unfused(%q: tensor<2x2x5x3xf32>, %kt: tensor<2x2x3x5xf32>, %v: tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32> {
  %s = slapo.matmul %q, %kt : (tensor<2x2x5x3xf32>, tensor<2x2x3x5xf32>) -> tensor<2x2x5x5xf32>
  %c = slapo.constant dense<5.000000e-01> : tensor<f32>
  %d = slapo.mul %s, %c : (tensor<2x2x5x5xf32>, tensor<f32>) -> tensor<2x2x5x5xf32>
  %p = slapo.softmax %d {dim = 3 : i64} : tensor<2x2x5x5xf32>
  %dp = slapo.dropout %p {p = 3.000000e-01 : f64, stream = 0 : i64} : tensor<2x2x5x5xf32>
  %o = slapo.matmul %dp, %v : (tensor<2x2x5x5xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  return %o : tensor<2x2x5x4xf32>
}
func.func @flash(%q: tensor<2x2x5x3xf32>, %k: tensor<2x2x5x3xf32>, %v: tensor<2x2x5x4xf32>) -> (tensor<2x2x5x4xf32>, tensor<2x2x5xf32>) {
  %o, %lse = slapo.flash_attention %q, %k, %v {dropout_p = 3.000000e-01 : f64, dropout_stream = 0 : i64, masked_score = 0.0 : f64, scale = 5.000000e-01 : f64} : (tensor<2x2x5x3xf32>, tensor<2x2x5x3xf32>, tensor<2x2x5x4xf32>) -> (tensor<2x2x5x4xf32>, tensor<2x2x5xf32>)
  return %o, %lse : tensor<2x2x5x4xf32>, tensor<2x2x5xf32>
}
func.func @grad(%q: tensor<2x2x5x3xf32>, %k: tensor<2x2x5x3xf32>, %v: tensor<2x2x5x4xf32>, %o: tensor<2x2x5x4xf32>, %lse: tensor<2x2x5xf32>, %g: tensor<2x2x5x4xf32>) -> (tensor<2x2x5x3xf32>, tensor<2x2x5x3xf32>, tensor<2x2x5x4xf32>) {
  %gq, %gk, %gv = slapo.flash_attention_grad %q, %k, %v result %o, %lse grad %g {dropout_p = 3.000000e-01 : f64, dropout_stream = 0 : i64, masked_score = 0.0 : f64, scale = 5.000000e-01 : f64} : (tensor<2x2x5x3xf32>, tensor<2x2x5x3xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5xf32>, tensor<2x2x5x4xf32>) -> (tensor<2x2x5x3xf32>, tensor<2x2x5x3xf32>, tensor<2x2x5x4xf32>)
  return %gq, %gk, %gv : tensor<2x2x5x3xf32>, tensor<2x2x5x3xf32>, tensor<2x2x5x4xf32>
}
)mlir";
  Program program(source);
  at::manual_seed(3);
  at::Tensor q = randn({2, 2, 5, 3}), k = randn({2, 2, 5, 3});
  at::Tensor v = randn({2, 2, 5, 4}), g = randn({2, 2, 5, 4});

  at::manual_seed(99);
  auto unfused = ref::evaluate(program.func("unfused"),
                               {q, k.transpose(-1, -2).contiguous(), v}, {});
  at::manual_seed(99);
  auto flash = ref::evaluate(program.func("flash"), {q, k, v}, {});
  INFO(program.diagnostics);
  REQUIRE(mlir::succeeded(unfused));
  REQUIRE(mlir::succeeded(flash));
  CHECK(ref::relativeError((*flash)[0], (*unfused)[0]) < 1e-6);
  // The log-sum-exp is the undropped softmax's.
  CHECK(ref::relativeError(
            (*flash)[1], at::logsumexp(at::matmul(q, k.transpose(-1, -2)) * 0.5,
                                       -1)) < 1e-6);

  // The gradient draws its mask as the forward's dropout's gradient would
  // (the next at::dropout of that shape): autograd of the chain under it.
  at::manual_seed(5);
  at::Tensor mask = at::dropout(at::ones({2, 2, 5, 5}), 0.3, /*train=*/true);
  at::Tensor qd = asDouble(q).requires_grad_(),
             kd = asDouble(k).requires_grad_(),
             vd = asDouble(v).requires_grad_();
  at::Tensor out =
      at::matmul(at::softmax(at::matmul(qd, kd.transpose(-1, -2)) * 0.5, -1) *
                     asDouble(mask),
                 vd);
  out.backward(asDouble(g));
  // The forward's result under this mask: rowsum(grad * result) is the
  // softmax's sum(P * dP).
  at::Tensor result = out.detach().to(at::kFloat);
  at::manual_seed(5);
  auto grads = ref::evaluate(program.func("grad"),
                             {q, k, v, result, (*flash)[1], g}, {});
  REQUIRE(mlir::succeeded(grads));
  CHECK(ref::relativeError((*grads)[0], qd.grad().to(at::kFloat)) < 1e-5);
  CHECK(ref::relativeError((*grads)[1], kd.grad().to(at::kFloat)) < 1e-5);
  CHECK(ref::relativeError((*grads)[2], vd.grad().to(at::kFloat)) < 1e-5);
}

TEST_CASE("a bf16 flash_attention is evaluated in f32: an f32 log-sum-exp, "
          "the result and gradients rounded to bf16 once",
          "[reference][nn]") {
  const char *source = R"mlir(
func.func @flash(%q: tensor<1x2x6x4xbf16>, %k: tensor<1x2x6x4xbf16>, %v: tensor<1x2x6x4xbf16>) -> (tensor<1x2x6x4xbf16>, tensor<1x2x6xf32>) {
  %o, %lse = slapo.flash_attention %q, %k, %v {masked_score = 0.0 : f64, scale = 5.000000e-01 : f64} : (tensor<1x2x6x4xbf16>, tensor<1x2x6x4xbf16>, tensor<1x2x6x4xbf16>) -> (tensor<1x2x6x4xbf16>, tensor<1x2x6xf32>)
  return %o, %lse : tensor<1x2x6x4xbf16>, tensor<1x2x6xf32>
}
func.func @grad(%q: tensor<1x2x6x4xbf16>, %k: tensor<1x2x6x4xbf16>, %v: tensor<1x2x6x4xbf16>, %o: tensor<1x2x6x4xbf16>, %lse: tensor<1x2x6xf32>, %g: tensor<1x2x6x4xbf16>) -> (tensor<1x2x6x4xbf16>, tensor<1x2x6x4xbf16>, tensor<1x2x6x4xbf16>) {
  %gq, %gk, %gv = slapo.flash_attention_grad %q, %k, %v result %o, %lse grad %g {masked_score = 0.0 : f64, scale = 5.000000e-01 : f64} : (tensor<1x2x6x4xbf16>, tensor<1x2x6x4xbf16>, tensor<1x2x6x4xbf16>, tensor<1x2x6x4xbf16>, tensor<1x2x6xf32>, tensor<1x2x6x4xbf16>) -> (tensor<1x2x6x4xbf16>, tensor<1x2x6x4xbf16>, tensor<1x2x6x4xbf16>)
  return %gq, %gk, %gv : tensor<1x2x6x4xbf16>, tensor<1x2x6x4xbf16>, tensor<1x2x6x4xbf16>
}
)mlir";
  Program program(source);
  at::manual_seed(4);
  at::Tensor q = randn({1, 2, 6, 4}).to(at::kBFloat16),
             k = randn({1, 2, 6, 4}).to(at::kBFloat16),
             v = randn({1, 2, 6, 4}).to(at::kBFloat16),
             g = randn({1, 2, 6, 4}).to(at::kBFloat16);
  auto flash = ref::evaluate(program.func("flash"), {q, k, v}, {});
  INFO(program.diagnostics);
  REQUIRE(mlir::succeeded(flash));
  // Autograd in f64 of the bf16 operands' attention.
  at::Tensor qd = asDouble(q).requires_grad_(),
             kd = asDouble(k).requires_grad_(),
             vd = asDouble(v).requires_grad_();
  at::Tensor scores = at::matmul(qd, kd.transpose(-1, -2)) * 0.5;
  at::Tensor out = at::matmul(at::softmax(scores, -1), vd);
  out.backward(asDouble(g));
  REQUIRE((*flash)[1].scalar_type() == at::kFloat);
  CHECK(ref::relativeError((*flash)[1],
                           at::logsumexp(scores.detach(), -1).to(at::kFloat)) <
        1e-6);
  // One rounding to bf16: 2^-8 relative at most.
  CHECK(ref::relativeError(asDouble((*flash)[0]), out.detach()) < 1.0 / 256);
  auto grads = ref::evaluate(program.func("grad"),
                             {q, k, v, (*flash)[0], (*flash)[1], g}, {});
  REQUIRE(mlir::succeeded(grads));
  for (auto [got, want] :
       {std::pair((*grads)[0], qd.grad()), std::pair((*grads)[1], kd.grad()),
        std::pair((*grads)[2], vd.grad())}) {
    CHECK(got.scalar_type() == at::kBFloat16);
    // The backward also reads the bf16 result (rowsum(grad * result)),
    // whose rounding the score gradients' differences may magnify.
    CHECK(ref::relativeError(asDouble(got), want) < 1.0 / 64);
  }
}

TEST_CASE("a bshd flash_attention and its gradient are the heads-major "
          "ones on token-major tensors",
          "[reference][nn]") {
  // B = 2, T = 5, H = 3, D = 4, value width 6, a causal keep mask: the
  // same attention heads-major and token-major.
  const char *source = R"mlir(
func.func @bhsd(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x5x4xf32>, %v: tensor<2x3x5x6xf32>, %m: tensor<1x1x5x5xi1>, %g: tensor<2x3x5x6xf32>) -> (tensor<2x3x5x6xf32>, tensor<2x3x5xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x6xf32>) {
  %o, %lse = slapo.flash_attention %q, %k, %v keep %m {masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x6xf32>, tensor<1x1x5x5xi1>) -> (tensor<2x3x5x6xf32>, tensor<2x3x5xf32>)
  %gq, %gk, %gv = slapo.flash_attention_grad %q, %k, %v keep %m result %o, %lse grad %g {masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x6xf32>, tensor<1x1x5x5xi1>, tensor<2x3x5x6xf32>, tensor<2x3x5xf32>, tensor<2x3x5x6xf32>) -> (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x6xf32>)
  return %o, %lse, %gq, %gk, %gv : tensor<2x3x5x6xf32>, tensor<2x3x5xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x6xf32>
}
func.func @bshd(%q: tensor<2x5x3x4xf32>, %k: tensor<2x5x3x4xf32>, %v: tensor<2x5x3x6xf32>, %m: tensor<1x1x5x5xi1>, %g: tensor<2x5x3x6xf32>) -> (tensor<2x5x3x6xf32>, tensor<2x3x5xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x6xf32>) {
  %o, %lse = slapo.flash_attention %q, %k, %v keep %m {bshd, masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x6xf32>, tensor<1x1x5x5xi1>) -> (tensor<2x5x3x6xf32>, tensor<2x3x5xf32>)
  %gq, %gk, %gv = slapo.flash_attention_grad %q, %k, %v keep %m result %o, %lse grad %g {bshd, masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x6xf32>, tensor<1x1x5x5xi1>, tensor<2x5x3x6xf32>, tensor<2x3x5xf32>, tensor<2x5x3x6xf32>) -> (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x6xf32>)
  return %o, %lse, %gq, %gk, %gv : tensor<2x5x3x6xf32>, tensor<2x3x5xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x6xf32>
}
)mlir";
  Program program(source);
  at::manual_seed(5);
  at::Tensor q = randn({2, 3, 5, 4}), k = randn({2, 3, 5, 4}),
             v = randn({2, 3, 5, 6}), g = randn({2, 3, 5, 6});
  at::Tensor mask = at::ones({1, 1, 5, 5}, at::kBool).tril();
  auto swap = [](const at::Tensor &t) {
    return t.transpose(1, 2).contiguous();
  };
  auto headsMajor = ref::evaluate(program.func("bhsd"), {q, k, v, mask, g}, {});
  auto tokenMajor = ref::evaluate(
      program.func("bshd"), {swap(q), swap(k), swap(v), mask, swap(g)}, {});
  INFO(program.diagnostics);
  REQUIRE(mlir::succeeded(headsMajor));
  REQUIRE(mlir::succeeded(tokenMajor));
  for (size_t i = 0; i < 5; ++i) {
    INFO("result " << i);
    // The log-sum-exp (result 1) is [B, H, T] in both.
    at::Tensor expected = i == 1 ? (*headsMajor)[i] : swap((*headsMajor)[i]);
    REQUIRE((*tokenMajor)[i].sizes() == expected.sizes());
    CHECK(ref::relativeError((*tokenMajor)[i], expected) < 1e-6);
  }
}

TEST_CASE("a packed_qkv flash_attention and its gradient are the bshd ones "
          "on the thirds of its heads",
          "[reference][nn]") {
  // B = 2, T = 5, H = 2, D = 4, a causal keep mask: query, key and value
  // are heads [0, 2), [2, 4) and [4, 6) of one [B, T, 3H, D] tensor.
  const char *source = R"mlir(
func.func @separate(%q: tensor<2x5x2x4xf32>, %k: tensor<2x5x2x4xf32>, %v: tensor<2x5x2x4xf32>, %m: tensor<1x1x5x5xi1>, %g: tensor<2x5x2x4xf32>) -> (tensor<2x5x2x4xf32>, tensor<2x2x5xf32>, tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>) {
  %o, %lse = slapo.flash_attention %q, %k, %v keep %m {bshd, masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>, tensor<1x1x5x5xi1>) -> (tensor<2x5x2x4xf32>, tensor<2x2x5xf32>)
  %gq, %gk, %gv = slapo.flash_attention_grad %q, %k, %v keep %m result %o, %lse grad %g {bshd, masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>, tensor<1x1x5x5xi1>, tensor<2x5x2x4xf32>, tensor<2x2x5xf32>, tensor<2x5x2x4xf32>) -> (tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>)
  return %o, %lse, %gq, %gk, %gv : tensor<2x5x2x4xf32>, tensor<2x2x5xf32>, tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>
}
func.func @packed(%qkv: tensor<2x5x6x4xf32>, %m: tensor<1x1x5x5xi1>, %g: tensor<2x5x2x4xf32>) -> (tensor<2x5x2x4xf32>, tensor<2x2x5xf32>, tensor<2x5x6x4xf32>) {
  %o, %lse = slapo.flash_attention %qkv, %qkv, %qkv keep %m {bshd, packed_qkv, masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x5x6x4xf32>, tensor<2x5x6x4xf32>, tensor<2x5x6x4xf32>, tensor<1x1x5x5xi1>) -> (tensor<2x5x2x4xf32>, tensor<2x2x5xf32>)
  %d = slapo.flash_attention_grad %qkv, %qkv, %qkv keep %m result %o, %lse grad %g {bshd, packed_qkv, masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x5x6x4xf32>, tensor<2x5x6x4xf32>, tensor<2x5x6x4xf32>, tensor<1x1x5x5xi1>, tensor<2x5x2x4xf32>, tensor<2x2x5xf32>, tensor<2x5x2x4xf32>) -> tensor<2x5x6x4xf32>
  return %o, %lse, %d : tensor<2x5x2x4xf32>, tensor<2x2x5xf32>, tensor<2x5x6x4xf32>
}
)mlir";
  Program program(source);
  at::manual_seed(6);
  at::Tensor qkv = randn({2, 5, 6, 4}), g = randn({2, 5, 2, 4});
  at::Tensor mask = at::ones({1, 1, 5, 5}, at::kBool).tril();
  auto third = [&](int64_t part) {
    return qkv.narrow(2, 2 * part, 2).contiguous();
  };
  auto separate = ref::evaluate(program.func("separate"),
                                {third(0), third(1), third(2), mask, g}, {});
  auto packed = ref::evaluate(program.func("packed"), {qkv, mask, g}, {});
  INFO(program.diagnostics);
  REQUIRE(mlir::succeeded(separate));
  REQUIRE(mlir::succeeded(packed));
  REQUIRE(packed->size() == 3);
  CHECK(ref::relativeError((*packed)[0], (*separate)[0]) < 1e-6);
  CHECK(ref::relativeError((*packed)[1], (*separate)[1]) < 1e-6);
  at::Tensor joined =
      at::cat({(*separate)[2], (*separate)[3], (*separate)[4]}, 2);
  REQUIRE((*packed)[2].sizes() == joined.sizes());
  CHECK(ref::relativeError((*packed)[2], joined) < 1e-6);
}

TEST_CASE("a grouped-query flash_attention and its gradient are autograd's "
          "on key and value repeated as repeat_kv repeats them",
          "[reference][nn]") {
  // B = 2, H = 4 query heads sharing Hk = 2 key and value heads (query heads
  // 0 and 1 read key head 0), T = 5, D = 4, a causal keep mask.
  const char *source = R"mlir(
func.func @grouped(%q: tensor<2x4x5x4xf32>, %k: tensor<2x2x5x4xf32>, %v: tensor<2x2x5x4xf32>, %m: tensor<1x1x5x5xi1>, %g: tensor<2x4x5x4xf32>) -> (tensor<2x4x5x4xf32>, tensor<2x4x5xf32>, tensor<2x4x5x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>) {
  %o, %lse = slapo.flash_attention %q, %k, %v keep %m {masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x4x5x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>, tensor<1x1x5x5xi1>) -> (tensor<2x4x5x4xf32>, tensor<2x4x5xf32>)
  %gq, %gk, %gv = slapo.flash_attention_grad %q, %k, %v keep %m result %o, %lse grad %g {masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x4x5x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>, tensor<1x1x5x5xi1>, tensor<2x4x5x4xf32>, tensor<2x4x5xf32>, tensor<2x4x5x4xf32>) -> (tensor<2x4x5x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>)
  return %o, %lse, %gq, %gk, %gv : tensor<2x4x5x4xf32>, tensor<2x4x5xf32>, tensor<2x4x5x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>
}
)mlir";
  Program program(source);
  at::manual_seed(7);
  at::Tensor q = randn({2, 4, 5, 4}), k = randn({2, 2, 5, 4}),
             v = randn({2, 2, 5, 4}), g = randn({2, 4, 5, 4});
  at::Tensor mask = at::ones({1, 1, 5, 5}, at::kBool).tril();
  auto results = ref::evaluate(program.func("grouped"), {q, k, v, mask, g}, {});
  INFO(program.diagnostics);
  REQUIRE(mlir::succeeded(results));
  // Autograd in f64 through Hugging Face's repeat_kv: [B, Hk, 1, T, D]
  // expanded to [B, Hk, 2, T, D], then [B, H, T, D].
  at::Tensor qd = asDouble(q).requires_grad_(),
             kd = asDouble(k).requires_grad_(),
             vd = asDouble(v).requires_grad_();
  auto repeatKv = [](const at::Tensor &x) {
    return x.unsqueeze(2).expand({2, 2, 2, 5, 4}).reshape({2, 4, 5, 4});
  };
  at::Tensor scores =
      at::where(mask, at::matmul(qd, repeatKv(kd).transpose(-1, -2)) * 0.5,
                at::scalar_tensor(-1.0e9, qd.options()));
  at::Tensor out = at::matmul(at::softmax(scores, -1), repeatKv(vd));
  out.backward(asDouble(g));
  std::vector<std::pair<at::Tensor, at::Tensor>> expected = {
      {(*results)[0], out.detach()},
      {(*results)[1], at::logsumexp(scores.detach(), -1)},
      {(*results)[2], qd.grad()},
      {(*results)[3], kd.grad()},
      {(*results)[4], vd.grad()}};
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("result " << i);
    auto &[got, want] = expected[i];
    REQUIRE(got.sizes() == want.sizes());
    CHECK(ref::relativeError(asDouble(got), want) < 1e-6);
  }
}

TEST_CASE("a rotary_embedding is Hugging Face's formula and its transposed "
          "form autograd's gradient of it",
          "[reference][nn]") {
  // [B, H, T, D] = [2, 3, 5, 8] with [1, 1, T, D] angles.
  const char *source = R"mlir(
func.func @rotary(%x: tensor<2x3x5x8xf32>, %c: tensor<1x1x5x8xf32>, %s: tensor<1x1x5x8xf32>, %g: tensor<2x3x5x8xf32>) -> (tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32>) {
  %r = slapo.rotary_embedding %x, %c, %s : (tensor<2x3x5x8xf32>, tensor<1x1x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x3x5x8xf32>
  %d = slapo.rotary_embedding %g, %c, %s {transposed} : (tensor<2x3x5x8xf32>, tensor<1x1x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x3x5x8xf32>
  return %r, %d : tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32>
}
)mlir";
  Program program(source);
  at::manual_seed(9);
  at::Tensor x = randn({2, 3, 5, 8}), c = randn({1, 1, 5, 8}),
             s = randn({1, 1, 5, 8}), g = randn({2, 3, 5, 8});
  auto results = ref::evaluate(program.func("rotary"), {x, c, s, g}, {});
  INFO(program.diagnostics);
  REQUIRE(mlir::succeeded(results));
  // apply_rotary_pos_emb in f64, and autograd through it.
  at::Tensor xd = asDouble(x).requires_grad_();
  at::Tensor rotated = at::cat({-xd.narrow(-1, 4, 4), xd.narrow(-1, 0, 4)}, -1);
  at::Tensor out = xd * asDouble(c) + rotated * asDouble(s);
  out.backward(asDouble(g));
  CHECK(ref::relativeError(asDouble((*results)[0]), out.detach()) < 1e-6);
  CHECK(ref::relativeError(asDouble((*results)[1]), xd.grad()) < 1e-6);
}

TEST_CASE("triangular keeps the lower or upper triangle",
          "[reference][elementwise]") {
  at::manual_seed(8);
  at::Tensor x = randn({2, 4, 5});
  for (bool lower : {true, false}) {
    for (int64_t diagonal : {-1, 0, 2}) {
      INFO("lower=" << lower << " diagonal=" << diagonal);
      std::string source =
          "func.func @main(%x: tensor<2x4x5xf32>) -> tensor<2x4x5xf32> {\n"
          "  %y = slapo.triangular %x {lower = " +
          std::string(lower ? "true" : "false") +
          ", diagonal = " + std::to_string(diagonal) +
          " : i64} : tensor<2x4x5xf32>\n  return %y : tensor<2x4x5xf32>\n}\n";
      Program program(source);
      at::Tensor y = program.run1({x});
      std::vector<double> in = valuesOf(x), expected(in.size());
      for (size_t k = 0; k < in.size(); ++k) {
        std::vector<int64_t> index = unravel(k, {2, 4, 5});
        int64_t i = index[1], j = index[2];
        bool keep = lower ? j - i <= diagonal : j - i >= diagonal;
        expected[k] = keep ? in[k] : 0.0;
      }
      checkExact(y, doubles(expected, {2, 4, 5}), at::kFloat);
    }
  }
}

TEST_CASE("triangular on a bool mask", "[reference][elementwise]") {
  at::Tensor ones = at::ones({1, 3, 3}, at::TensorOptions().dtype(at::kBool));
  const char *source = R"mlir(
func.func @main(%x: tensor<1x3x3xi1>) -> tensor<1x3x3xi1> {
  %y = slapo.triangular %x {lower = true, diagonal = 0 : i64} : tensor<1x3x3xi1>
  return %y : tensor<1x3x3xi1>
}
)mlir";
  Program program(source);
  checkExact(program.run1({ones}),
             doubles({1, 0, 0, 1, 1, 0, 1, 1, 1}, {1, 3, 3}), at::kBool);
}

//===----------------------------------------------------------------------===//
// Constants and arange.
//===----------------------------------------------------------------------===//

TEST_CASE("arange is start + i * step in the result type",
          "[reference][constant]") {
  const char *source = R"mlir(
func.func @main() -> (tensor<7xf32>, tensor<5xi64>, tensor<4xbf16>) {
  %a = slapo.arange {start = 5.000000e-01 : f64, step = 2.500000e-01 : f64} : tensor<7xf32>
  %b = slapo.arange {start = 3.000000e+00 : f64, step = -2.000000e+00 : f64} : tensor<5xi64>
  %c = slapo.arange {start = 0.000000e+00 : f64, step = 1.000000e+00 : f64} : tensor<4xbf16>
  return %a, %b, %c : tensor<7xf32>, tensor<5xi64>, tensor<4xbf16>
}
)mlir";
  Program program(source);
  auto results = program.run({});
  INFO(program.diagnostics);
  REQUIRE(mlir::succeeded(results));
  std::vector<double> a, b;
  for (int i = 0; i < 7; ++i)
    a.push_back(0.5 + i * 0.25);
  for (int i = 0; i < 5; ++i)
    b.push_back(3 - 2 * i);
  checkExact((*results)[0], doubles(a, {7}), at::kFloat);
  checkExact((*results)[1], doubles(b, {5}), at::kLong);
  checkExact((*results)[2], doubles({0, 1, 2, 3}, {4}), at::kBFloat16);
}

TEST_CASE("constants of every element type, splat and not",
          "[reference][constant]") {
  struct Case {
    const char *attr;
    at::ScalarType dtype;
    std::vector<double> values;
    std::vector<int64_t> shape;
  };
  const Case cases[] = {
      {"dense<[[1.5, -2.0, 3.25], [0.0, 1.0e+10, -1.0e-10]]> : tensor<2x3xf32>",
       at::kFloat,
       {1.5, -2.0, 3.25, 0.0, 1e10, double(-1e-10f)},
       {2, 3}},
      {"dense<0.1> : tensor<2x2xf64>",
       at::kDouble,
       {0.1, 0.1, 0.1, 0.1},
       {2, 2}},
      {"dense<[1.5, -2.0, 0.25, 256.0]> : tensor<4xbf16>",
       at::kBFloat16,
       {1.5, -2.0, 0.25, 256.0},
       {4}},
      {"dense<-0.75> : tensor<3xf16>", at::kHalf, {-0.75, -0.75, -0.75}, {3}},
      {"dense<[true, false, false, true, true]> : tensor<5xi1>",
       at::kBool,
       {1, 0, 0, 1, 1},
       {5}},
      {"dense<true> : tensor<2x2xi1>", at::kBool, {1, 1, 1, 1}, {2, 2}},
      {"dense<[-128, 0, 127]> : tensor<3xi8>", at::kChar, {-128, 0, 127}, {3}},
      {"dense<-7> : tensor<2x3xi32>",
       at::kInt,
       {-7, -7, -7, -7, -7, -7},
       {2, 3}},
      {"dense<[[9007199254740993], [-1]]> : tensor<2x1xi64>",
       at::kLong,
       {9007199254740993.0, -1},
       {2, 1}},
      {"dense<4.0> : tensor<f32>", at::kFloat, {4.0}, {}},
      {"dense<> : tensor<0x3xf32>", at::kFloat, {}, {0, 3}},
  };
  for (const Case &c : cases) {
    INFO(c.attr);
    std::string attr = c.attr;
    std::string type = attr.substr(attr.rfind(": ") + 2);
    std::string source = "func.func @main() -> " + type +
                         " {\n  %c = slapo.constant " + attr +
                         "\n  return %c : " + type + "\n}\n";
    Program program(source);
    at::Tensor y = program.run1({});
    REQUIRE(y.scalar_type() == c.dtype);
    REQUIRE(y.sizes().vec() == c.shape);
    if (c.dtype == at::kLong) {
      // Beyond double precision: compare the integers themselves.
      CHECK(y.view({-1})[0].item<int64_t>() == 9007199254740993LL);
      CHECK(y.view({-1})[1].item<int64_t>() == -1);
    } else if (c.dtype == at::kDouble) {
      CHECK(valuesOf(y) == c.values);
    } else {
      // The expected values are exactly representable in the type.
      CHECK(valuesOf(y) == valuesOf(doubles(c.values, c.shape).to(c.dtype)));
    }
  }
}

TEST_CASE("a dense_resource constant", "[reference][constant]") {
  // Blob: 4-byte alignment header, then 1.0f, 2.0f, -0.5f little-endian.
  const char *source = R"mlir(
func.func @main() -> tensor<3xf32> {
  %c = slapo.constant dense_resource<blob> : tensor<3xf32>
  return %c : tensor<3xf32>
}
{-#
  dialect_resources: {
    builtin: {
      blob: "0x040000000000803F00000040000000BF"
    }
  }
#-}
)mlir";
  Program program(source);
  checkExact(program.run1({}), doubles({1.0, 2.0, -0.5}, {3}), at::kFloat);
}

//===----------------------------------------------------------------------===//
// Contractions and neural-network ops.
//===----------------------------------------------------------------------===//

namespace {
/// y[r, n] = sum_k x[r, k] * w[n, k] + b[n], x flattened to rows.
at::Tensor linearReference(const at::Tensor &x, const at::Tensor &w,
                           const at::Tensor &bias) {
  int64_t n = w.size(0), k = w.size(1), rows = x.numel() / k;
  std::vector<double> in = valuesOf(x), weight = valuesOf(w), out(rows * n);
  std::vector<double> b =
      bias.defined() ? valuesOf(bias) : std::vector<double>(n, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double sum = b[j];
      for (int64_t i = 0; i < k; ++i)
        sum += in[r * k + i] * weight[j * k + i];
      out[r * n + j] = sum;
    }
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = n;
  return doubles(out, shape);
}
} // namespace

TEST_CASE("linear with and without bias", "[reference][nn]") {
  at::manual_seed(9);
  at::Tensor x = randn({2, 3, 16}), w = randn({8, 16}), b = randn({8});
  const char *source = R"mlir(
func.func @main(%x: tensor<2x3x16xf32>, %w: tensor<8x16xf32>, %b: tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %y = slapo.linear %x, %w, %b : (tensor<2x3x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %z = slapo.linear %x, %w : (tensor<2x3x16xf32>, tensor<8x16xf32>) -> tensor<2x3x8xf32>
  return %y, %z : tensor<2x3x8xf32>, tensor<2x3x8xf32>
}
)mlir";
  Program program(source);
  auto results = program.run({x, w, b});
  INFO(program.diagnostics);
  REQUIRE(mlir::succeeded(results));
  checkClose((*results)[0], linearReference(x, w, b));
  checkClose((*results)[1], linearReference(x, w, at::Tensor()));
}

TEST_CASE("matmul broadcasts batch dims", "[reference][nn]") {
  at::manual_seed(10);
  at::Tensor a = randn({2, 1, 3, 4}), b = randn({5, 4, 6});
  const char *source = R"mlir(
func.func @main(%a: tensor<2x1x3x4xf32>, %b: tensor<5x4x6xf32>) -> tensor<2x5x3x6xf32> {
  %y = slapo.matmul %a, %b : (tensor<2x1x3x4xf32>, tensor<5x4x6xf32>) -> tensor<2x5x3x6xf32>
  return %y : tensor<2x5x3x6xf32>
}
)mlir";
  Program program(source);
  at::Tensor y = program.run1({a, b});
  std::vector<double> lhs = valuesOf(a), rhs = valuesOf(b), out(2 * 5 * 3 * 6);
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t q = 0; q < 5; ++q)
      for (int64_t m = 0; m < 3; ++m)
        for (int64_t n = 0; n < 6; ++n) {
          double sum = 0;
          for (int64_t k = 0; k < 4; ++k)
            sum += lhs[(p * 3 + m) * 4 + k] * rhs[(q * 4 + k) * 6 + n];
          out[((p * 5 + q) * 3 + m) * 6 + n] = sum;
        }
  checkClose(y, doubles(out, {2, 5, 3, 6}));
}

TEST_CASE("embedding gathers rows by i64 and i32 indices", "[reference][nn]") {
  at::manual_seed(11);
  at::Tensor w = randn({10, 4});
  at::Tensor indices =
      at::tensor({3, 0, 9, 3, 7, 1}, at::kLong).reshape({2, 3});
  for (const char *indexType : {"i64", "i32"}) {
    INFO(indexType);
    std::string it = std::string("tensor<2x3x") + indexType + ">";
    std::string source = "func.func @main(%w: tensor<10x4xf32>, %i: " + it +
                         ") -> tensor<2x3x4xf32> {\n  %y = slapo.embedding %w, "
                         "%i {padding_idx = 0 : i64} "
                         ": (tensor<10x4xf32>, " +
                         it +
                         ") -> tensor<2x3x4xf32>\n"
                         "  return %y : tensor<2x3x4xf32>\n}\n";
    Program program(source);
    at::Tensor idx =
        std::string(indexType) == "i32" ? indices.to(at::kInt) : indices;
    at::Tensor y = program.run1({w, idx});
    std::vector<double> table = valuesOf(w), rows = valuesOf(indices), expected;
    for (double row : rows)
      for (int64_t d = 0; d < 4; ++d)
        expected.push_back(table[int64_t(row) * 4 + d]);
    checkExact(y, doubles(expected, {2, 3, 4}), at::kFloat);
  }
}

namespace {
/// Layer norm over the trailing `normalized` elements of each row, by the
/// mean / biased-variance formula.
at::Tensor layerNormReference(const at::Tensor &x, int64_t normalized,
                              double eps, const at::Tensor &weight,
                              const at::Tensor &bias) {
  std::vector<double> in = valuesOf(x), out(in.size());
  std::vector<double> w = weight.defined()
                              ? valuesOf(weight)
                              : std::vector<double>(normalized, 1.0);
  std::vector<double> b =
      bias.defined() ? valuesOf(bias) : std::vector<double>(normalized, 0.0);
  for (size_t row = 0; row < in.size() / normalized; ++row) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < normalized; ++i)
      mean += in[row * normalized + i];
    mean /= normalized;
    for (int64_t i = 0; i < normalized; ++i)
      var += std::pow(in[row * normalized + i] - mean, 2);
    var /= normalized;
    for (int64_t i = 0; i < normalized; ++i)
      out[row * normalized + i] =
          (in[row * normalized + i] - mean) / std::sqrt(var + eps) * w[i] +
          b[i];
  }
  return doubles(out, x.sizes().vec());
}
} // namespace

TEST_CASE("layer_norm over the trailing normalized_rank dims",
          "[reference][nn]") {
  at::manual_seed(12);
  at::Tensor x = randn({2, 3, 8}) * 3 + 1;
  at::Tensor w = randn({8}), b = randn({8});
  at::Tensor w2 = randn({3, 8}), b2 = randn({3, 8});
  const char *source = R"mlir(
func.func @main(%x: tensor<2x3x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>, %w2: tensor<3x8xf32>, %b2: tensor<3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %a = slapo.layer_norm %x weight %w bias %b {normalized_rank = 1 : i64, eps = 1.000000e-05 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %n = slapo.layer_norm %x {normalized_rank = 2 : i64, eps = 1.000000e-01 : f64} : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %c = slapo.layer_norm %x weight %w2 bias %b2 {normalized_rank = 2 : i64, eps = 1.000000e-05 : f64} : (tensor<2x3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<2x3x8xf32>
  %d = slapo.layer_norm %x weight %w {normalized_rank = 1 : i64, eps = 1.000000e-05 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  return %a, %n, %c, %d : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>
}
)mlir";
  Program program(source);
  auto results = program.run({x, w, b, w2, b2});
  INFO(program.diagnostics);
  REQUIRE(mlir::succeeded(results));
  checkClose((*results)[0], layerNormReference(x, 8, 1e-5, w, b));
  checkClose((*results)[1],
             layerNormReference(x, 24, 1e-1, at::Tensor(), at::Tensor()));
  checkClose((*results)[2], layerNormReference(x, 24, 1e-5, w2, b2));
  checkClose((*results)[3], layerNormReference(x, 8, 1e-5, w, at::Tensor()));
}

TEST_CASE("bf16 linear and layer_norm run on the CPU", "[reference][nn]") {
  at::manual_seed(20);
  at::Tensor x = randn({3, 8}, at::kBFloat16), w = randn({4, 8}, at::kBFloat16);
  const char *source = R"mlir(
func.func @main(%x: tensor<3x8xbf16>, %w: tensor<4x8xbf16>) -> (tensor<3x4xbf16>, tensor<3x8xbf16>) {
  %y = slapo.linear %x, %w : (tensor<3x8xbf16>, tensor<4x8xbf16>) -> tensor<3x4xbf16>
  %n = slapo.layer_norm %x {normalized_rank = 1 : i64, eps = 1.000000e-05 : f64} : (tensor<3x8xbf16>) -> tensor<3x8xbf16>
  return %y, %n : tensor<3x4xbf16>, tensor<3x8xbf16>
}
)mlir";
  Program program(source);
  auto results = program.run({x, w});
  INFO(program.diagnostics);
  REQUIRE(mlir::succeeded(results));
  // bf16 keeps 8 significant bits.
  checkClose((*results)[0], linearReference(x, w, at::Tensor()), at::kBFloat16,
             2e-2);
  checkClose((*results)[1],
             layerNormReference(x, 8, 1e-5, at::Tensor(), at::Tensor()),
             at::kBFloat16, 2e-2);
}

TEST_CASE("softmax and log_softmax along a dim", "[reference][nn]") {
  at::manual_seed(13);
  at::Tensor x = randn({3, 4, 5}) * 4;
  for (int64_t dim : {0, 1, 2}) {
    INFO("dim " << dim);
    std::string source =
        "func.func @main(%x: tensor<3x4x5xf32>) -> (tensor<3x4x5xf32>, "
        "tensor<3x4x5xf32>) {\n"
        "  %s = slapo.softmax %x {dim = " +
        std::to_string(dim) +
        " : i64} : tensor<3x4x5xf32>\n"
        "  %l = slapo.log_softmax %x {dim = " +
        std::to_string(dim) +
        " : i64} : tensor<3x4x5xf32>\n"
        "  return %s, %l : tensor<3x4x5xf32>, tensor<3x4x5xf32>\n}\n";
    Program program(source);
    auto results = program.run({x});
    INFO(program.diagnostics);
    REQUIRE(mlir::succeeded(results));
    std::vector<int64_t> shape = {3, 4, 5};
    std::vector<double> in = valuesOf(x), soft(in.size()), logSoft(in.size());
    for (size_t k = 0; k < in.size(); ++k) {
      std::vector<int64_t> index = unravel(k, shape);
      double denominator = 0;
      for (int64_t j = 0; j < shape[dim]; ++j) {
        std::vector<int64_t> other = index;
        other[dim] = j;
        denominator += std::exp(in[(other[0] * 4 + other[1]) * 5 + other[2]]);
      }
      soft[k] = std::exp(in[k]) / denominator;
      logSoft[k] = in[k] - std::log(denominator);
    }
    checkClose((*results)[0], doubles(soft, shape));
    checkClose((*results)[1], doubles(logSoft, shape));
  }
}

TEST_CASE("cross_entropy with ignore_index and each reduction",
          "[reference][nn]") {
  at::manual_seed(14);
  at::Tensor logits = randn({5, 4}) * 3;
  // Row 2 and 4 are ignored.
  std::vector<int64_t> targets = {0, 3, -100, 1, -100};
  std::vector<double> in = valuesOf(logits), perRow(5, 0.0);
  double sum = 0;
  for (int64_t r = 0; r < 5; ++r) {
    if (targets[r] == -100)
      continue;
    double lse = 0;
    for (int64_t c = 0; c < 4; ++c)
      lse += std::exp(in[r * 4 + c]);
    perRow[r] = std::log(lse) - in[r * 4 + targets[r]];
    sum += perRow[r];
  }
  struct Case {
    const char *reduction;
    const char *type;
    at::Tensor expected;
  };
  const Case cases[] = {
      {"mean", "tensor<f32>", doubles({sum / 3}, {})},
      {"sum", "tensor<f32>", doubles({sum}, {})},
      {"none", "tensor<5xf32>", doubles(perRow, {5})},
  };
  for (const char *targetType : {"i64", "i32"}) {
    for (const Case &c : cases) {
      INFO(c.reduction << " with " << targetType << " targets");
      std::string tt = std::string("tensor<5x") + targetType + ">";
      std::string source =
          "func.func @main(%l: tensor<5x4xf32>, %t: " + tt + ") -> " + c.type +
          " {\n  %y = slapo.cross_entropy %l, %t {ignore_index = -100 : i64, "
          "reduction = #slapo<reduction<" +
          c.reduction + ">>} : (tensor<5x4xf32>, " + tt + ") -> " + c.type +
          "\n  return %y : " + c.type + "\n}\n";
      Program program(source);
      at::Tensor target = at::tensor(targets, at::kLong);
      if (std::string(targetType) == "i32")
        target = target.to(at::kInt);
      checkClose(program.run1({logits, target}), c.expected);
    }
  }
}

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

TEST_CASE("sum, mean and max over dims, with and without keepdim",
          "[reference][reduce]") {
  at::manual_seed(15);
  at::Tensor x = randn({2, 3, 4});
  std::vector<double> in = valuesOf(x);
  // Reduce dims 0 and 2: one value per index of dim 1.
  std::vector<double> sums(3, 0.0), maxima(3, -kInf);
  for (size_t k = 0; k < in.size(); ++k) {
    int64_t j = unravel(k, {2, 3, 4})[1];
    sums[j] += in[k];
    maxima[j] = std::max(maxima[j], in[k]);
  }
  std::vector<double> means = sums;
  for (double &m : means)
    m /= 8;
  const char *source = R"mlir(
func.func @main(%x: tensor<2x3x4xf32>) -> (tensor<3xf32>, tensor<1x3x1xf32>, tensor<3xf32>, tensor<1x3x1xf32>, tensor<3xf32>, tensor<2x3x4xf32>) {
  %s = slapo.sum %x {dims = array<i64: 0, 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<3xf32>
  %sk = slapo.sum %x {dims = array<i64: 2, 0>, keepdim = true} : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
  %m = slapo.mean %x {dims = array<i64: 0, 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<3xf32>
  %mk = slapo.mean %x {dims = array<i64: 0, 2>, keepdim = true} : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
  %x1 = slapo.max %x {dims = array<i64: 0, 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<3xf32>
  %id = slapo.sum %x {dims = array<i64>, keepdim = false} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %s, %sk, %m, %mk, %x1, %id : tensor<3xf32>, tensor<1x3x1xf32>, tensor<3xf32>, tensor<1x3x1xf32>, tensor<3xf32>, tensor<2x3x4xf32>
}
)mlir";
  Program program(source);
  auto results = program.run({x});
  INFO(program.diagnostics);
  REQUIRE(mlir::succeeded(results));
  checkClose((*results)[0], doubles(sums, {3}));
  checkClose((*results)[1], doubles(sums, {1, 3, 1}));
  checkClose((*results)[2], doubles(means, {3}));
  checkClose((*results)[3], doubles(means, {1, 3, 1}));
  checkExact((*results)[4], doubles(maxima, {3}), at::kFloat);
  checkExact((*results)[5], x, at::kFloat);
}

TEST_CASE("integer sum keeps the element type", "[reference][reduce]") {
  at::Tensor x =
      at::arange(12, at::TensorOptions().dtype(at::kInt)).reshape({3, 4});
  const char *source = R"mlir(
func.func @main(%x: tensor<3x4xi32>) -> (tensor<3xi32>, tensor<4xi32>) {
  %s = slapo.sum %x {dims = array<i64: 1>, keepdim = false} : tensor<3x4xi32> -> tensor<3xi32>
  %m = slapo.max %x {dims = array<i64: 0>, keepdim = false} : tensor<3x4xi32> -> tensor<4xi32>
  return %s, %m : tensor<3xi32>, tensor<4xi32>
}
)mlir";
  Program program(source);
  auto results = program.run({x});
  INFO(program.diagnostics);
  REQUIRE(mlir::succeeded(results));
  checkExact((*results)[0],
             doubles({0 + 1 + 2 + 3, 4 + 5 + 6 + 7, 8 + 9 + 10 + 11}, {3}),
             at::kInt);
  checkExact((*results)[1], doubles({8, 9, 10, 11}, {4}), at::kInt);
}

TEST_CASE("cumsum runs along a dim, forward or from the end, in the element "
          "type",
          "[reference][reduce]") {
  at::Tensor x =
      at::arange(6, at::TensorOptions().dtype(at::kInt)).reshape({2, 3});
  const char *source = R"mlir(
func.func @main(%x: tensor<2x3xi32>) -> (tensor<2x3xi32>, tensor<2x3xi32>, tensor<2x3xi32>) {
  %rows = slapo.cumsum %x {dim = 1 : i64} : tensor<2x3xi32>
  %back = slapo.cumsum %x {dim = 1 : i64, reverse} : tensor<2x3xi32>
  %down = slapo.cumsum %x {dim = 0 : i64} : tensor<2x3xi32>
  return %rows, %back, %down : tensor<2x3xi32>, tensor<2x3xi32>, tensor<2x3xi32>
}
)mlir";
  Program program(source);
  auto results = program.run({x});
  INFO(program.diagnostics);
  REQUIRE(mlir::succeeded(results));
  checkExact((*results)[0], doubles({0, 1, 3, 3, 7, 12}, {2, 3}), at::kInt);
  checkExact((*results)[1], doubles({3, 3, 2, 12, 9, 5}, {2, 3}), at::kInt);
  checkExact((*results)[2], doubles({0, 1, 2, 3, 5, 7}, {2, 3}), at::kInt);
}

//===----------------------------------------------------------------------===//
// Shape and data movement.
//===----------------------------------------------------------------------===//

TEST_CASE("reshape, permute, slice, concat and broadcast move data",
          "[reference][shape]") {
  at::manual_seed(16);
  at::Tensor x = randn({2, 3, 4});
  std::vector<double> in = valuesOf(x);

  SECTION("reshape keeps row-major order") {
    Program program(R"mlir(
func.func @main(%x: tensor<2x3x4xf32>) -> tensor<4x6xf32> {
  %y = slapo.reshape %x : tensor<2x3x4xf32> -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}
)mlir");
    checkExact(program.run1({x}), doubles(in, {4, 6}), at::kFloat);
  }
  SECTION("permute: result dim i is input dim permutation[i]") {
    Program program(R"mlir(
func.func @main(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %y = slapo.permute %x {permutation = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  return %y : tensor<4x2x3xf32>
}
)mlir");
    std::vector<double> expected;
    for (int64_t k = 0; k < 4; ++k)
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 3; ++j)
          expected.push_back(in[(i * 3 + j) * 4 + k]);
    checkExact(program.run1({x}), doubles(expected, {4, 2, 3}), at::kFloat);
  }
  SECTION("slice with a step") {
    at::Tensor s = randn({3, 7});
    Program program(R"mlir(
func.func @main(%x: tensor<3x7xf32>) -> tensor<3x3xf32> {
  %y = slapo.slice %x {dim = 1 : i64, start = 1 : i64, end = 6 : i64, step = 2 : i64} : tensor<3x7xf32> -> tensor<3x3xf32>
  return %y : tensor<3x3xf32>
}
)mlir");
    std::vector<double> values = valuesOf(s), expected;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j : {1, 3, 5})
        expected.push_back(values[i * 7 + j]);
    checkExact(program.run1({s}), doubles(expected, {3, 3}), at::kFloat);
  }
  SECTION("concat of three along dim 1") {
    at::Tensor a = randn({2, 1}), b = randn({2, 3}), c = randn({2, 2});
    Program program(R"mlir(
func.func @main(%a: tensor<2x1xf32>, %b: tensor<2x3xf32>, %c: tensor<2x2xf32>) -> tensor<2x6xf32> {
  %y = slapo.concat %a, %b, %c {dim = 1 : i64} : (tensor<2x1xf32>, tensor<2x3xf32>, tensor<2x2xf32>) -> tensor<2x6xf32>
  return %y : tensor<2x6xf32>
}
)mlir");
    std::vector<double> va = valuesOf(a), vb = valuesOf(b), vc = valuesOf(c),
                        expected;
    for (int64_t i = 0; i < 2; ++i) {
      expected.push_back(va[i]);
      for (int64_t j = 0; j < 3; ++j)
        expected.push_back(vb[i * 3 + j]);
      for (int64_t j = 0; j < 2; ++j)
        expected.push_back(vc[i * 2 + j]);
    }
    checkExact(program.run1({a, b, c}), doubles(expected, {2, 6}), at::kFloat);
  }
  SECTION("broadcast expands size-1 and leading dims") {
    at::Tensor s = randn({3, 1});
    Program program(R"mlir(
func.func @main(%x: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
  %y = slapo.broadcast %x : tensor<3x1xf32> -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}
)mlir");
    checkExact(program.run1({s}),
               elementwise({s}, {2, 3, 4}, [](auto &v) { return v[0]; }),
               at::kFloat);
  }
}

//===----------------------------------------------------------------------===//
// Parameters, errors and structure.
//===----------------------------------------------------------------------===//

namespace {
const char *kParamModule = R"mlir(
slapo.param @"wte.weight" : tensor<5x4xf32> {aliases = ["lm_head.weight"]}
slapo.param buffer @"attn.bias" : tensor<4xf32>
func.func @main(%x: tensor<2x4xf32>) -> tensor<2x5xf32> {
  %w = slapo.get_param @"wte.weight" : tensor<5x4xf32>
  %b = slapo.get_param @"attn.bias" : tensor<4xf32>
  %xb = slapo.add %x, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %y = slapo.linear %xb, %w : (tensor<2x4xf32>, tensor<5x4xf32>) -> tensor<2x5xf32>
  return %y : tensor<2x5xf32>
}
)mlir";
} // namespace

TEST_CASE("get_param reads params by name or by alias", "[reference][param]") {
  at::manual_seed(17);
  at::Tensor x = randn({2, 4}), w = randn({5, 4}), bias = randn({4});
  at::Tensor expected = linearReference(
      elementwise({x, bias}, {2, 4}, [](auto &v) { return v[0] + v[1]; }), w,
      at::Tensor());
  SECTION("by the symbol's name") {
    Program program(kParamModule);
    checkClose(program.run1({x}, {{"wte.weight", w}, {"attn.bias", bias}}),
               expected);
  }
  SECTION("by an alias of a tied parameter") {
    Program program(kParamModule);
    checkClose(program.run1({x}, {{"lm_head.weight", w}, {"attn.bias", bias}}),
               expected);
  }
  SECTION("the symbol's name wins over an alias") {
    Program program(kParamModule);
    checkClose(program.run1({x}, {{"wte.weight", w},
                                  {"lm_head.weight", at::zeros_like(w)},
                                  {"attn.bias", bias}}),
               expected);
  }
}

TEST_CASE("a missing parameter is an error at its get_param",
          "[reference][param][error]") {
  Program program(kParamModule);
  auto results = program.run({randn({2, 4})}, {{"attn.bias", randn({4})}});
  CHECK(mlir::failed(results));
  INFO(program.diagnostics);
  CHECK_THAT(program.diagnostics,
             Catch::Contains("parameter 'wte.weight' is missing") &&
                 Catch::Contains("'lm_head.weight'"));
  CHECK_THAT(program.diagnostics,
             Catch::Contains(":5:")); // the get_param's line
}

TEST_CASE("a parameter of the wrong shape or dtype is an error",
          "[reference][param][error]") {
  Program program(kParamModule);
  auto results = program.run({randn({2, 4})}, {{"wte.weight", randn({4, 5})},
                                               {"attn.bias", randn({4})}});
  CHECK(mlir::failed(results));
  INFO(program.diagnostics);
  CHECK_THAT(
      program.diagnostics,
      Catch::Contains("result #0 of 'slapo.get_param' is tensor<4x5xf32> "
                      "but the IR type is tensor<5x4xf32>"));
  Program again(kParamModule);
  CHECK(mlir::failed(
      again.run({randn({2, 4})}, {{"wte.weight", randn({5, 4}, at::kDouble)},
                                  {"attn.bias", randn({4})}})));
  CHECK_THAT(again.diagnostics, Catch::Contains("tensor<5x4xf64>"));
}

TEST_CASE("bad inputs are errors at the func", "[reference][error]") {
  Program program(unaryFunc("exp", "tensor<3x4xf32>"));
  CHECK(mlir::failed(program.run({})));
  CHECK_THAT(program.diagnostics, Catch::Contains("takes 1 inputs, got 0"));
  program.diagnostics.clear();
  CHECK(mlir::failed(program.run({randn({4, 3})})));
  CHECK_THAT(
      program.diagnostics,
      Catch::Contains("input #0 of @main is tensor<4x3xf32> but the IR type is "
                      "tensor<3x4xf32>"));
  program.diagnostics.clear();
  CHECK(mlir::failed(program.run({randn({3, 4}, at::kDouble)})));
  CHECK_THAT(program.diagnostics, Catch::Contains("input #0"));
}

TEST_CASE("every slapo op has an evaluator", "[reference][coverage]") {
  mlir::MLIRContext context;
  context.loadDialect<slapo::SlapoDialect>();
  int count = 0;
  for (mlir::RegisteredOperationName name : context.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "slapo")
      continue;
    ++count;
    // Declarations of module-level state are never evaluated, and the
    // optimizer's ops act on that state, not on values: the end-to-end tests
    // check them against torch.optim. Collectives, and a pipeline stage's
    // sends and receives, need several ranks: the end-to-end tests run
    // them under mpirun.
    if (name.hasTrait<slapo::OpTrait::Collective>() ||
        name.getStringRef() == slapo::StageSendOp::getOperationName() ||
        name.getStringRef() == slapo::StageRecvOp::getOperationName() ||
        name.getStringRef() == slapo::ParamOp::getOperationName() ||
        name.getStringRef() == slapo::OptimizerStateOp::getOperationName() ||
        name.getStringRef() == slapo::ParamGradOp::getOperationName() ||
        name.getStringRef() == slapo::SgdUpdateOp::getOperationName() ||
        name.getStringRef() == slapo::AdamwUpdateOp::getOperationName())
      continue;
    INFO(name.getStringRef().str());
    CHECK(ref::hasEvaluator(name.getStringRef()));
  }
  CHECK(count >= 44);
  CHECK(ref::hasEvaluator("func.call"));
  CHECK_FALSE(ref::hasEvaluator("slapo.no_such_op"));
}

TEST_CASE("IR that does not verify is refused", "[reference][error]") {
  Program program(R"mlir(
func.func @main(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %y = slapo.softmax %x {dim = 1 : i64} : tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}
)mlir");
  mlir::func::FuncOp func = program.func();
  mlir::Operation *softmax = &func.getBody().front().front();
  softmax->setAttr("dim", mlir::IntegerAttr::get(
                              mlir::IntegerType::get(&program.context, 64), 7));
  CHECK(mlir::failed(ref::evaluate(func, {randn({3, 4})}, {})));
  CHECK_THAT(program.diagnostics, Catch::Contains("@main does not verify"));
}

TEST_CASE("an op without an evaluator is an error at the op",
          "[reference][error]") {
  const char *source = R"mlir(
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %y = "test.mystery"(%x) : (tensor<3xf32>) -> tensor<3xf32>
  return %y : tensor<3xf32>
}
)mlir";
  Program program(source, /*allowUnregistered=*/true);
  CHECK(mlir::failed(program.run({randn({3})})));
  CHECK_THAT(program.diagnostics,
             Catch::Contains("no evaluator for 'test.mystery'"));
  CHECK_THAT(program.diagnostics, Catch::Contains(":3:"));
}

TEST_CASE("a LibTorch failure is an error at the op, not an exception",
          "[reference][error]") {
  const char *source = R"mlir(
func.func @main(%w: tensor<4x2xf32>, %i: tensor<3xi64>) -> tensor<3x2xf32> {
  %y = slapo.embedding %w, %i : (tensor<4x2xf32>, tensor<3xi64>) -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}
)mlir";
  Program program(source);
  mlir::FailureOr<std::vector<at::Tensor>> results = mlir::failure();
  CHECK_NOTHROW(
      results = program.run({randn({4, 2}), at::tensor({0, 7, 1}, at::kLong)}));
  CHECK(mlir::failed(results));
  CHECK_THAT(program.diagnostics,
             Catch::Contains("LibTorch failed on 'slapo.embedding'") &&
                 Catch::Contains("index out of range"));
}

TEST_CASE("func.call evaluates the callee; the observer sees every op",
          "[reference][structure]") {
  const char *source = R"mlir(
func.func private @square_plus(%a: tensor<3xf32>, %b: tensor<3xf32>) -> tensor<3xf32> {
  %m = slapo.mul %a, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %s = slapo.add %m, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %s : tensor<3xf32>
}
func.func @main(%x: tensor<3xf32>, %y: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %r = func.call @square_plus(%x, %y) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %n = slapo.neg %r : tensor<3xf32>
  return %r, %n : tensor<3xf32>, tensor<3xf32>
}
)mlir";
  at::manual_seed(18);
  at::Tensor x = randn({3}), y = randn({3});
  Program program(source);
  std::vector<std::string> seen;
  auto results = program.run(
      {x, y}, {}, [&](mlir::Operation *op, llvm::ArrayRef<at::Tensor> values) {
        seen.push_back(op->getName().getStringRef().str());
        CHECK(values.size() == op->getNumResults());
      });
  INFO(program.diagnostics);
  REQUIRE(mlir::succeeded(results));
  at::Tensor expected =
      elementwise({x, y}, {3}, [](auto &v) { return v[0] * v[0] + v[1]; });
  checkClose((*results)[0], expected);
  checkClose((*results)[1], -expected);
  CHECK(seen == std::vector<std::string>{"slapo.mul", "slapo.add", "func.call",
                                         "slapo.neg"});
}

TEST_CASE("gradients flow through the evaluation", "[reference][structure]") {
  // d/dx sum(linear(x, w)) = ones[2, 5] x w = column sums of w, per row.
  at::manual_seed(19);
  at::Tensor x = randn({2, 4}).requires_grad_(true), w = randn({5, 4});
  const char *source = R"mlir(
func.func @main(%x: tensor<2x4xf32>, %w: tensor<5x4xf32>) -> tensor<f32> {
  %y = slapo.linear %x, %w : (tensor<2x4xf32>, tensor<5x4xf32>) -> tensor<2x5xf32>
  %s = slapo.sum %y {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x5xf32> -> tensor<f32>
  return %s : tensor<f32>
}
)mlir";
  Program program(source);
  program.run1({x, w}).backward();
  REQUIRE(x.grad().defined());
  std::vector<double> weight = valuesOf(w), expected;
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t k = 0; k < 4; ++k) {
      double sum = 0;
      for (int64_t n = 0; n < 5; ++n)
        sum += weight[n * 4 + k];
      expected.push_back(sum);
    }
  checkClose(x.grad(), doubles(expected, {2, 4}));
}

//===----------------------------------------------------------------------===//
// relativeError.
//===----------------------------------------------------------------------===//

TEST_CASE("relativeError", "[reference][error-metric]") {
  at::Tensor e = at::tensor({1.0f, -4.0f, 2.0f});
  CHECK(ref::relativeError(e, e) == 0);
  // max |diff| = 0.5, max |expected| = 4.
  CHECK(ref::relativeError(at::tensor({1.5f, -4.0f, 2.25f}), e) ==
        Approx(0.125).epsilon(1e-6));
  CHECK(ref::relativeError(e.reshape({3, 1}), e) == kInf);
  CHECK(ref::relativeError(e.to(at::kDouble), e) == kInf);
  // Expected all zero: the scale floor is 1e-30.
  CHECK(ref::relativeError(at::tensor({1e-31}), at::tensor({0.0})) ==
        Approx(0.1));
  CHECK(ref::relativeError(at::zeros({0, 3}), at::zeros({0, 3})) == 0);
  // Integers and bools compare exactly.
  at::Tensor i = at::tensor({1, 2, 3}, at::kLong);
  CHECK(ref::relativeError(i, i.clone()) == 0);
  CHECK(ref::relativeError(at::tensor({1, 2, 4}, at::kLong), i) == kInf);
  at::Tensor b = at::tensor({1, 0, 1}, at::kLong).to(at::kBool);
  CHECK(ref::relativeError(b, b.clone()) == 0);
  CHECK(ref::relativeError(b.logical_not(), b) == kInf);
  // NaN matches NaN at the same place only; equal infinities match.
  float nan = std::numeric_limits<float>::quiet_NaN(),
        inf = std::numeric_limits<float>::infinity();
  CHECK(ref::relativeError(at::tensor({nan, 1.0f}), at::tensor({nan, 1.0f})) ==
        0);
  CHECK(ref::relativeError(at::tensor({nan, 1.0f}), at::tensor({1.0f, 1.0f})) ==
        kInf);
  CHECK(ref::relativeError(at::tensor({1.0f, 1.0f}), at::tensor({nan, 1.0f})) ==
        kInf);
  CHECK(ref::relativeError(at::tensor({inf, 1.0f}), at::tensor({inf, 1.0f})) ==
        0);
  CHECK(ref::relativeError(at::tensor({-inf, 1.0f}), at::tensor({inf, 1.0f})) ==
        kInf);
  // Non-contiguous and bf16 inputs work.
  at::Tensor m =
      at::arange(6, at::TensorOptions().dtype(at::kFloat)).reshape({2, 3});
  CHECK(ref::relativeError(m.t(), m.t().contiguous()) == 0);
  CHECK(ref::relativeError(m.to(at::kBFloat16), m.to(at::kBFloat16)) == 0);
}

//===----------------------------------------------------------------------===//
// loadTorchScriptState.
//===----------------------------------------------------------------------===//

namespace {
/// A fresh temporary directory, removed at scope exit.
struct TempDir {
  TempDir() {
    llvm::SmallString<128> dir;
    REQUIRE(!llvm::sys::fs::createUniqueDirectory("slapo-reference-test", dir));
    path = std::string(dir);
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string path;
};

std::vector<std::string> lines(const std::string &file) {
  std::ifstream in(file);
  std::vector<std::string> result;
  for (std::string line; std::getline(in, line);)
    result.push_back(line);
  return result;
}

std::vector<double> numbers(const std::string &line) {
  std::istringstream in(line);
  std::vector<double> result;
  for (double value; in >> value;)
    result.push_back(value);
  return result;
}
} // namespace

TEST_CASE("loadTorchScriptState reads parameters and buffers by dotted name",
          "[reference][torchscript]") {
  TempDir dir;
  {
    std::ofstream script(dir.path + "/export.py");
    script << R"py(
import sys, torch
d = sys.argv[1]
torch.manual_seed(0)
lin = torch.jit.script(torch.nn.Linear(2, 3))
lin.save(d + "/linear.pt")
x = torch.tensor([[1.0, 2.0], [3.0, -1.0], [0.5, 0.25]])
with open(d + "/linear.txt", "w") as f:
    for t in (lin.weight, lin.bias, lin(x)):
        f.write(" ".join(repr(v) for v in t.detach().flatten().tolist()) + "\n")
seq = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3))
seq[1].running_mean.fill_(0.5)
seq = torch.jit.script(seq)
seq.save(d + "/seq.pt")
names = [n for n, _ in seq.named_parameters()] + [n for n, _ in seq.named_buffers()]
with open(d + "/seq.txt", "w") as f:
    f.write(" ".join(sorted(names)) + "\n")
drop = torch.jit.script(torch.nn.Sequential(torch.nn.Dropout(0.3), torch.nn.Dropout(0.1)))
drop.train()
x = torch.randn(4, 50)
torch.manual_seed(123)
y = drop(x)
with open(d + "/dropout.txt", "w") as f:
    for t in (x, y):
        f.write(" ".join(repr(v) for v in t.flatten().tolist()) + "\n")
)py";
  }
  std::string command =
      "/usr/bin/python3 " + dir.path + "/export.py " + dir.path;
  REQUIRE(std::system(command.c_str()) == 0);

  SECTION("Linear(2, 3): weight and bias, and forward via the IR") {
    llvm::Expected<ref::TensorMap> state =
        ref::loadTorchScriptState(dir.path + "/linear.pt");
    REQUIRE(static_cast<bool>(state));
    std::vector<std::string> text = lines(dir.path + "/linear.txt");
    REQUIRE(text.size() == 3);
    REQUIRE(state->size() == 2);
    REQUIRE(state->count("weight") == 1);
    REQUIRE(state->count("bias") == 1);
    checkExact(state->at("weight"), doubles(numbers(text[0]), {3, 2}),
               at::kFloat);
    checkExact(state->at("bias"), doubles(numbers(text[1]), {3}), at::kFloat);
    CHECK_FALSE(state->at("weight").requires_grad());

    // The IR an importer would produce, run on the loaded state, matches the
    // TorchScript forward.
    Program program(R"mlir(
slapo.param @weight : tensor<3x2xf32>
slapo.param @bias : tensor<3xf32>
func.func @main(%x: tensor<3x2xf32>) -> tensor<3x3xf32> {
  %w = slapo.get_param @weight : tensor<3x2xf32>
  %b = slapo.get_param @bias : tensor<3xf32>
  %y = slapo.linear %x, %w, %b : (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3xf32>) -> tensor<3x3xf32>
  return %y : tensor<3x3xf32>
}
)mlir");
    at::Tensor x =
        doubles({1.0, 2.0, 3.0, -1.0, 0.5, 0.25}, {3, 2}).to(at::kFloat);
    at::Tensor y = program.run1({x}, *state);
    CHECK(ref::relativeError(
              y, doubles(numbers(text[2]), {3, 3}).to(at::kFloat)) <= 1e-6);
  }
  SECTION("dropout draws the masks the TorchScript forward draws") {
    std::vector<std::string> text = lines(dir.path + "/dropout.txt");
    REQUIRE(text.size() == 2);
    at::Tensor x = doubles(numbers(text[0]), {4, 50}).to(at::kFloat);
    at::Tensor expected = doubles(numbers(text[1]), {4, 50}).to(at::kFloat);
    Program program(R"mlir(
func.func @main(%x: tensor<4x50xf32>) -> tensor<4x50xf32> {
  %a = slapo.dropout %x {p = 3.000000e-01 : f64, stream = 0 : i64} : tensor<4x50xf32>
  %b = slapo.dropout %a {p = 1.000000e-01 : f64, stream = 1 : i64} : tensor<4x50xf32>
  return %b : tensor<4x50xf32>
}
)mlir");
    at::manual_seed(123);
    at::Tensor y = program.run1({x});
    CHECK(ref::relativeError(y, expected) == 0);
    CHECK(at::eq(y, 0).any().item<bool>()); // it did drop something
  }
  SECTION("nested modules: full dotted names, buffers included") {
    llvm::Expected<ref::TensorMap> state =
        ref::loadTorchScriptState(dir.path + "/seq.pt");
    REQUIRE(static_cast<bool>(state));
    std::string names;
    for (const auto &[name, tensor] : *state)
      names += (names.empty() ? "" : " ") + name;
    std::vector<std::string> text = lines(dir.path + "/seq.txt");
    REQUIRE(text.size() == 1);
    CHECK(names == text[0]);
    CHECK(names ==
          "0.bias 0.weight 1.bias 1.num_batches_tracked 1.running_mean "
          "1.running_var 1.weight");
    checkExact(state->at("1.running_mean"), doubles({0.5, 0.5, 0.5}, {3}),
               at::kFloat);
    CHECK(state->at("1.num_batches_tracked").scalar_type() == at::kLong);
  }
}

TEST_CASE("loadTorchScriptState reports missing and corrupt files",
          "[reference][torchscript][error]") {
  TempDir dir;
  auto expectError = [](const std::string &path, const std::string &reason) {
    llvm::Expected<ref::TensorMap> state = ref::TensorMap();
    CHECK_NOTHROW(state = ref::loadTorchScriptState(path));
    REQUIRE_FALSE(static_cast<bool>(state));
    std::string message = llvm::toString(state.takeError());
    INFO(message);
    CHECK_THAT(message,
               Catch::Contains("'" + path + "'") && Catch::Contains(reason));
    CHECK(message.find('\n') == std::string::npos);
  };
  expectError(dir.path + "/absent.pt", "no such file");
  expectError(dir.path, "is a directory");
  {
    std::ofstream corrupt(dir.path + "/corrupt.pt");
    corrupt << "this is not a zip archive\n";
  }
  expectError(dir.path + "/corrupt.pt", "cannot load TorchScript model");
}
