//===- AutodiffTest.cpp - the autodiff pass against LibTorch autograd -----===//
//
// Every gradient rule is checked on a tiny function: the reference
// interpreter evaluates @forward_backward, and LibTorch autograd
// differentiates the interpreter's evaluation of @forward. Then the test
// models are differentiated whole and compared with autograd on the
// TorchScript module itself.
//
//===----------------------------------------------------------------------===//
// LibTorch comes first: c10's glog logging defines CHECK(condition), which
// must not replace Catch's CHECK. It is undefined before Catch defines its own.
#include "slapo/Reference/Interpreter.h"
#include <ATen/ATen.h>
#include <torch/script.h>
#undef CHECK

#include <catch2/catch.hpp>

#include "slapo/Dialect/SlapoDialect.h"
#include "slapo/Dialect/SlapoOps.h"
#include "slapo/Frontend/InputSpec.h"
#include "slapo/Frontend/TorchScriptImporter.h"
#include "slapo/Transforms/Passes.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

namespace ref = slapo::reference;

namespace {

constexpr double kTolerance = 1e-5;

/// A context for slapo IR that collects every diagnostic.
struct DiagnosedContext {
  DiagnosedContext() {
    context.loadDialect<slapo::SlapoDialect, mlir::func::FuncDialect>();
  }
  mlir::MLIRContext context;
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler{
      &context, [this](mlir::Diagnostic &diagnostic) {
        llvm::raw_string_ostream os(diagnostics);
        os << diagnostic.getLocation() << ": " << diagnostic << "\n";
        return mlir::success();
      }};
};

mlir::LogicalResult runAutodiff(mlir::ModuleOp module) {
  mlir::PassManager pm(module.getContext());
  pm.addPass(slapo::createAutodiffPass());
  return pm.run(module);
}

std::vector<int64_t> shapeOf(mlir::Type type) {
  auto shape = type.cast<mlir::RankedTensorType>().getShape();
  return {shape.begin(), shape.end()};
}

at::ScalarType dtypeOf(mlir::Type type) {
  auto dtype =
      ref::toScalarType(type.cast<mlir::RankedTensorType>().getElementType());
  REQUIRE(dtype);
  return *dtype;
}

/// The gradients @forward_backward returned, by the parameter they belong to.
std::map<std::string, at::Tensor>
gradsBySymbol(mlir::func::FuncOp forwardBackward,
              const std::vector<at::Tensor> &results) {
  std::map<std::string, at::Tensor> grads;
  for (unsigned i = 1; i < forwardBackward.getNumResults(); ++i) {
    auto symbol = forwardBackward.getResultAttrOfType<mlir::FlatSymbolRefAttr>(
        i, slapo::kGradOfAttrName);
    REQUIRE(symbol);
    grads[symbol.getValue().str()] = results[i];
  }
  return grads;
}

double maxAbs(const at::Tensor &tensor) {
  return tensor.detach().abs().max().to(at::kDouble).item<double>();
}

/// Compares every computed gradient with the expected one (by symbol); the
/// worst is reported by name on failure. Parameters with a non-zero expected
/// gradient must all have a computed one.
///
/// Errors are relative to the expected gradient's largest entry, but not to
/// less than kZeroFloor of the largest entry of any expected gradient: some
/// gradients are zero but for rounding (an attention key bias shifts every
/// score of a query alike, which softmax ignores), and their relative error
/// would compare two rounding noises.
void checkGradients(const std::map<std::string, at::Tensor> &actual,
                    const std::map<std::string, at::Tensor> &expected) {
  constexpr double kZeroFloor = 1e-3;
  double largest = 0;
  for (const auto &[name, grad] : expected)
    if (grad.defined())
      largest = std::max(largest, maxAbs(grad));
  double worstError = 0;
  std::string worst = "(none)";
  for (const auto &[name, grad] : actual) {
    auto it = expected.find(name);
    INFO("@forward_backward returns a gradient of " << name);
    REQUIRE(it != expected.end());
    REQUIRE(it->second.defined());
    double floor = kZeroFloor * largest;
    double error =
        maxAbs(it->second) >= floor
            ? ref::relativeError(grad, it->second)
            : maxAbs(grad.to(at::kDouble) - it->second.to(at::kDouble)) / floor;
    if (error > worstError || worst == "(none)") {
      worstError = error;
      worst = name;
    }
  }
  INFO("worst parameter " << worst << ": relative error " << worstError);
  CHECK(worstError <= kTolerance);
  for (const auto &[name, grad] : expected) {
    if (!grad.defined() || actual.count(name))
      continue;
    INFO("autograd gives " << name
                           << " a gradient, @forward_backward does not");
    CHECK(at::all(grad == 0).item<bool>());
  }
}

//===----------------------------------------------------------------------===//
// One rule at a time.
//===----------------------------------------------------------------------===//

using ParamMaker = std::function<at::Tensor(std::vector<int64_t> shape)>;

at::Tensor normal(std::vector<int64_t> shape) { return at::randn(shape); }
at::Tensor positive(std::vector<int64_t> shape) {
  return at::rand(shape) + 0.5;
}
/// Small integers as floats: many equal values, to exercise ties.
at::Tensor withTies(std::vector<int64_t> shape) {
  return at::randint(0, 3, shape).to(at::kFloat);
}

/// A function of parameters whose gradient the pass must get right. The
/// loss is sum(y * upstream) for a random `upstream` input, so that the rule
/// of the op making %y sees a general incoming gradient, not ones.
struct RuleCase {
  std::string name;
  /// Parameters (read into %<name> before `body`) and their types.
  std::vector<std::pair<std::string, std::string>> params;
  /// Ops computing %y from the parameters.
  std::string body;
  std::string resultType;
  /// How each parameter is drawn (by name; default: standard normal).
  std::map<std::string, ParamMaker> makers = {};

  std::string source(mlir::MLIRContext &context) const {
    auto type =
        mlir::parseType(resultType, &context).cast<mlir::RankedTensorType>();
    std::string loss;
    llvm::raw_string_ostream lossType(loss);
    lossType << mlir::RankedTensorType::get({}, type.getElementType());
    std::string dims;
    for (int64_t dim = 0; dim < type.getRank(); ++dim)
      dims += (dim ? ", " : ": ") + std::to_string(dim);

    std::ostringstream os;
    os << "module {\n";
    for (const auto &[param, paramType] : params)
      os << "  slapo.param @" << param << " : " << paramType << "\n";
    os << "  func.func @forward(%upstream: " << resultType << ") -> "
       << lossType.str() << " {\n";
    for (const auto &[param, paramType] : params)
      os << "    %" << param << " = slapo.get_param @" << param << " : "
         << paramType << "\n";
    os << "    " << body << "\n"
       << "    %weighted = slapo.mul %y, %upstream : (" << resultType << ", "
       << resultType << ") -> " << resultType << "\n"
       << "    %loss = slapo.sum %weighted {dims = array<i64" << dims
       << ">, keepdim = false} : " << resultType << " -> " << lossType.str()
       << "\n"
       << "    return %loss : " << lossType.str() << "\n  }\n}\n";
    return os.str();
  }
};

/// y = op(a) for an elementwise unary op on [3, 4].
RuleCase unary(const std::string &op, ParamMaker maker = normal,
               const std::string &suffix = "") {
  return {op + suffix,
          {{"a", "tensor<3x4xf32>"}},
          "%y = slapo." + op + " %a : tensor<3x4xf32>",
          "tensor<3x4xf32>",
          {{"a", maker}}};
}

/// y = op(a, b), broadcasting [2, 1, 4] with [3, 1] to [2, 3, 4].
RuleCase binary(const std::string &op, ParamMaker lhs = normal,
                ParamMaker rhs = normal) {
  return {op,
          {{"a", "tensor<2x1x4xf32>"}, {"b", "tensor<3x1xf32>"}},
          "%y = slapo." + op +
              " %a, %b : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> "
              "tensor<2x3x4xf32>",
          "tensor<2x3x4xf32>",
          {{"a", lhs}, {"b", rhs}}};
}

std::vector<RuleCase> ruleCases() {
  const std::string t34 = "tensor<3x4xf32>";
  return {
      // Unary.
      unary("neg"),
      unary("abs"),
      unary("exp"),
      unary("log", positive),
      unary("sqrt", positive),
      unary("rsqrt", positive),
      unary("tanh"),
      unary("sigmoid"),
      unary("relu"),
      unary("silu"),
      unary("sin"),
      unary("cos"),
      {"gelu erf",
       {{"a", t34}},
       "%y = slapo.gelu %a <erf> : tensor<3x4xf32>",
       t34},
      {"gelu erf at and near 0",
       {{"a", "tensor<8xf32>"}},
       "%y = slapo.gelu %a <erf> : tensor<8xf32>",
       "tensor<8xf32>",
       {{"a",
         [](std::vector<int64_t>) {
           return at::tensor(
               {0.0f, 1e-7f, -1e-7f, 1e-3f, -3.0f, 3.0f, 12.0f, -12.0f});
         }}}},
      {"gelu tanh",
       {{"a", t34}},
       "%y = slapo.gelu %a <tanh> : tensor<3x4xf32>",
       t34},
      {"cast f32 to f64",
       {{"a", t34}},
       "%y = slapo.cast %a : tensor<3x4xf32> -> tensor<3x4xf64>",
       "tensor<3x4xf64>"},
      {"cast f64 to f32",
       {{"a", "tensor<3x4xf64>"}},
       "%y = slapo.cast %a : tensor<3x4xf64> -> tensor<3x4xf32>",
       t34},
      {"triangular lower",
       {{"a", "tensor<2x4x4xf32>"}},
       "%y = slapo.triangular %a {diagonal = 0 : i64, lower = true} : "
       "tensor<2x4x4xf32>",
       "tensor<2x4x4xf32>"},
      {"triangular upper below the diagonal",
       {{"a", "tensor<3x5xf32>"}},
       "%y = slapo.triangular %a {diagonal = -1 : i64, lower = false} : "
       "tensor<3x5xf32>",
       "tensor<3x5xf32>"},

      // Binary, broadcasting.
      binary("add"),
      binary("sub"),
      binary("mul"),
      binary("div", normal, positive),
      binary("pow", positive, normal),
      binary("maximum", withTies, withTies),
      binary("minimum", withTies, withTies),
      {"add of a bias",
       {{"a", "tensor<2x3x4xf32>"}, {"b", "tensor<4xf32>"}},
       "%y = slapo.add %b, %a : (tensor<4xf32>, tensor<2x3x4xf32>) -> "
       "tensor<2x3x4xf32>",
       "tensor<2x3x4xf32>"},
      {"pow with a constant exponent",
       {{"a", t34}},
       "%e = slapo.constant dense<3.0> : tensor<f32>\n"
       "%y = slapo.pow %a, %e : (tensor<3x4xf32>, tensor<f32>) -> "
       "tensor<3x4xf32>",
       t34},
      {"pow with a constant exponent that has a zero",
       {{"a", t34}},
       "%e = slapo.constant dense<[0.0, 2.0, 0.5, -1.0]> : tensor<4xf32>\n"
       "%y = slapo.pow %a, %e : (tensor<3x4xf32>, tensor<4xf32>) -> "
       "tensor<3x4xf32>",
       t34,
       {{"a", positive}}},
      {"where",
       {{"a", t34}, {"b", "tensor<4xf32>"}},
       "%c = slapo.constant dense<[[true, false, true, false]]> : "
       "tensor<1x4xi1>\n"
       "%y = slapo.where %c, %a, %b : (tensor<1x4xi1>, tensor<3x4xf32>, "
       "tensor<4xf32>) -> tensor<3x4xf32>",
       t34},

      // Contractions and neural-network ops.
      {"linear with bias",
       {{"x", "tensor<2x3x4xf32>"},
        {"w", "tensor<5x4xf32>"},
        {"b", "tensor<5xf32>"}},
       "%y = slapo.linear %x, %w, %b : (tensor<2x3x4xf32>, tensor<5x4xf32>, "
       "tensor<5xf32>) -> tensor<2x3x5xf32>",
       "tensor<2x3x5xf32>"},
      {"linear of a vector without bias",
       {{"x", "tensor<4xf32>"}, {"w", "tensor<5x4xf32>"}},
       "%y = slapo.linear %x, %w : (tensor<4xf32>, tensor<5x4xf32>) -> "
       "tensor<5xf32>",
       "tensor<5xf32>"},
      {"matmul",
       {{"a", "tensor<3x4xf32>"}, {"b", "tensor<4x5xf32>"}},
       "%y = slapo.matmul %a, %b : (tensor<3x4xf32>, tensor<4x5xf32>) -> "
       "tensor<3x5xf32>",
       "tensor<3x5xf32>"},
      {"matmul broadcasting batch dims",
       {{"a", "tensor<2x1x3x4xf32>"}, {"b", "tensor<5x4x2xf32>"}},
       "%y = slapo.matmul %a, %b : (tensor<2x1x3x4xf32>, tensor<5x4x2xf32>) "
       "-> tensor<2x5x3x2xf32>",
       "tensor<2x5x3x2xf32>"},
      {"embedding with repeated indices",
       {{"w", "tensor<6x3xf32>"}},
       "%i = slapo.constant dense<[[0, 2, 2], [5, 0, 1]]> : tensor<2x3xi64>\n"
       "%y = slapo.embedding %w, %i : (tensor<6x3xf32>, tensor<2x3xi64>) -> "
       "tensor<2x3x3xf32>",
       "tensor<2x3x3xf32>"},
      {"embedding with padding_idx and i32 indices",
       {{"w", "tensor<6x3xf32>"}},
       "%i = slapo.constant dense<[0, 2, 2, 4]> : tensor<4xi32>\n"
       "%y = slapo.embedding %w, %i {padding_idx = 2 : i64} : "
       "(tensor<6x3xf32>, tensor<4xi32>) -> tensor<4x3xf32>",
       "tensor<4x3xf32>"},
      {"layer_norm with weight and bias",
       {{"x", "tensor<2x3x8xf32>"},
        {"w", "tensor<8xf32>"},
        {"b", "tensor<8xf32>"}},
       "%y = slapo.layer_norm %x weight %w bias %b {eps = 1.0e-05 : f64, "
       "normalized_rank = 1 : i64} : (tensor<2x3x8xf32>, tensor<8xf32>, "
       "tensor<8xf32>) -> tensor<2x3x8xf32>",
       "tensor<2x3x8xf32>"},
      {"layer_norm over two dims without affine",
       {{"x", "tensor<2x3x4xf32>"}},
       "%y = slapo.layer_norm %x {eps = 1.0e-05 : f64, normalized_rank = 2 : "
       "i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>",
       "tensor<2x3x4xf32>"},
      {"rms_norm with weight",
       {{"x", "tensor<2x3x8xf32>"}, {"w", "tensor<8xf32>"}},
       "%y = slapo.rms_norm %x weight %w {eps = 1.0e-06 : f64} : "
       "(tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>",
       "tensor<2x3x8xf32>"},
      // Angles of unequal halves (Hugging Face's repeat them): the
      // transposed map reads each element's partner's sine.
      {"rotary_embedding of [B, H, T, D] with [T, D] angles",
       {{"x", "tensor<2x2x3x4xf32>"}},
       "%c = slapo.constant dense<[[0.5, -1.0, 2.0, 0.25], [1.5, 0.75, -0.5, "
       "1.0], [-2.0, 0.5, 1.0, -1.5]]> : tensor<3x4xf32>\n"
       "%s = slapo.constant dense<[[1.0, 0.5, -0.25, 2.0], [-1.0, 1.25, 0.5, "
       "-0.75], [0.25, -2.0, 1.5, 0.5]]> : tensor<3x4xf32>\n"
       "%y = slapo.rotary_embedding %x, %c, %s : (tensor<2x2x3x4xf32>, "
       "tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<2x2x3x4xf32>",
       "tensor<2x2x3x4xf32>"},
      {"flash_attention with a causal mask",
       {{"q", "tensor<2x2x5x3xf32>"},
        {"k", "tensor<2x2x5x3xf32>"},
        {"v", "tensor<2x2x5x4xf32>"}},
       "%m = slapo.constant dense<[[[[true, false, false, false, false], "
       "[true, true, false, false, false], [true, true, true, false, false], "
       "[true, true, true, true, false], [true, true, true, true, true]]]]> : "
       "tensor<1x1x5x5xi1>\n"
       "%y, %lse = slapo.flash_attention %q, %k, %v keep %m "
       "{masked_score = -3.4028234663852886E+38 : f64, scale = 0.5 : f64} : "
       "(tensor<2x2x5x3xf32>, tensor<2x2x5x3xf32>, tensor<2x2x5x4xf32>, "
       "tensor<1x1x5x5xi1>) -> (tensor<2x2x5x4xf32>, tensor<2x2x5xf32>)",
       "tensor<2x2x5x4xf32>"},
      {"flash_attention with an additive padding mask",
       {{"q", "tensor<2x2x5x3xf32>"},
        {"k", "tensor<2x2x5x3xf32>"},
        {"v", "tensor<2x2x5x3xf32>"}},
       "%b = slapo.constant dense<[[[[0.0, 0.0, 0.0, -1.0e4, -1.0e4]]], "
       "[[[0.0, 0.0, 0.0, 0.0, -1.0e4]]]]> : tensor<2x1x1x5xf32>\n"
       "%y, %lse = slapo.flash_attention %q, %k, %v bias %b "
       "{masked_score = 0.0 : f64, scale = 0.57735026918962584 : f64} : "
       "(tensor<2x2x5x3xf32>, tensor<2x2x5x3xf32>, tensor<2x2x5x3xf32>, "
       "tensor<2x1x1x5xf32>) -> (tensor<2x2x5x3xf32>, tensor<2x2x5xf32>)",
       "tensor<2x2x5x3xf32>"},
      {"conv2d with bias, stride, padding, dilation and groups",
       {{"x", "tensor<2x4x7x6xf32>"},
        {"w", "tensor<6x2x3x3xf32>"},
        {"b", "tensor<6xf32>"}},
       "%y = slapo.conv2d %x, %w, %b {dilation = array<i64: 2, 1>, groups = "
       "2 : i64, padding = array<i64: 1, 2>, stride = array<i64: 2, 1>} : "
       "(tensor<2x4x7x6xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> "
       "tensor<2x6x3x8xf32>",
       "tensor<2x6x3x8xf32>"},
      {"conv2d without bias",
       {{"x", "tensor<2x3x5x5xf32>"}, {"w", "tensor<4x3x1x1xf32>"}},
       "%y = slapo.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : "
       "i64, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : "
       "(tensor<2x3x5x5xf32>, tensor<4x3x1x1xf32>) -> tensor<2x4x3x3xf32>",
       "tensor<2x4x3x3xf32>"},
      {"max_pool2d with padding and dilation",
       {{"x", "tensor<2x3x6x6xf32>"}},
       "%y = slapo.max_pool2d %x {dilation = array<i64: 1, 2>, kernel_size = "
       "array<i64: 3, 2>, padding = array<i64: 1, 1>, stride = array<i64: 1, "
       "2>} : tensor<2x3x6x6xf32> -> tensor<2x3x6x3xf32>",
       "tensor<2x3x6x3xf32>"},
      {"max_pool2d with ceil_mode's last window cut at the edge",
       {{"x", "tensor<1x2x4x5xf32>"}},
       "%y = slapo.max_pool2d %x {dilation = array<i64: 1, 1>, kernel_size = "
       "array<i64: 3, 3>, padding = array<i64: 0, 0>, stride = array<i64: 2, "
       "2>} : tensor<1x2x4x5xf32> -> tensor<1x2x2x2xf32>",
       "tensor<1x2x2x2xf32>"},
      {"softmax",
       {{"a", "tensor<2x3x4xf32>"}},
       "%y = slapo.softmax %a {dim = 1 : i64} : tensor<2x3x4xf32>",
       "tensor<2x3x4xf32>"},
      {"log_softmax",
       {{"a", "tensor<2x3x4xf32>"}},
       "%y = slapo.log_softmax %a {dim = 2 : i64} : tensor<2x3x4xf32>",
       "tensor<2x3x4xf32>"},
      {"cross_entropy mean with an ignored target",
       {{"a", "tensor<4x5xf32>"}},
       "%t = slapo.constant dense<[1, -100, 4, 1]> : tensor<4xi64>\n"
       "%y = slapo.cross_entropy %a, %t {ignore_index = -100 : i64, "
       "reduction = #slapo.reduction<mean>} : (tensor<4x5xf32>, "
       "tensor<4xi64>) -> tensor<f32>",
       "tensor<f32>"},
      {"cross_entropy sum",
       {{"a", "tensor<4x5xf32>"}},
       "%t = slapo.constant dense<[1, 3, 4, 1]> : tensor<4xi32>\n"
       "%y = slapo.cross_entropy %a, %t {ignore_index = 3 : i64, "
       "reduction = #slapo.reduction<sum>} : (tensor<4x5xf32>, "
       "tensor<4xi32>) -> tensor<f32>",
       "tensor<f32>"},
      {"cross_entropy none",
       {{"a", "tensor<4x5xf32>"}},
       "%t = slapo.constant dense<[1, 0, 4, -100]> : tensor<4xi64>\n"
       "%y = slapo.cross_entropy %a, %t {ignore_index = -100 : i64, "
       "reduction = #slapo.reduction<none>} : (tensor<4x5xf32>, "
       "tensor<4xi64>) -> tensor<4xf32>",
       "tensor<4xf32>"},
      {"linear_cross_entropy mean with a bias and an ignored target",
       {{"h", "tensor<5x3xf32>"},
        {"w", "tensor<4x3xf32>"},
        {"b", "tensor<4xf32>"}},
       "%t = slapo.constant dense<[1, -100, 3, 0, 1]> : tensor<5xi64>\n"
       "%y, %dh, %dw, %db = slapo.linear_cross_entropy %h, %w, %t bias %b "
       "{ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : "
       "(tensor<5x3xf32>, tensor<4x3xf32>, tensor<5xi64>, tensor<4xf32>) -> "
       "(tensor<f32>, tensor<5x3xf32>, tensor<4x3xf32>, tensor<4xf32>)",
       "tensor<f32>"},
      {"linear_cross_entropy sum",
       {{"h", "tensor<5x3xf32>"}, {"w", "tensor<4x3xf32>"}},
       "%t = slapo.constant dense<[1, 2, 3, 0, 2]> : tensor<5xi32>\n"
       "%y, %dh, %dw = slapo.linear_cross_entropy %h, %w, %t "
       "{ignore_index = 2 : i64, reduction = #slapo.reduction<sum>} : "
       "(tensor<5x3xf32>, tensor<4x3xf32>, tensor<5xi32>) -> "
       "(tensor<f32>, tensor<5x3xf32>, tensor<4x3xf32>)",
       "tensor<f32>"},
      {"linear_log_sum_exp with a bias",
       {{"h", "tensor<5x3xf32>"},
        {"w", "tensor<4x3xf32>"},
        {"b", "tensor<4xf32>"}},
       "%y = slapo.linear_log_sum_exp %h, %w bias %b : (tensor<5x3xf32>, "
       "tensor<4x3xf32>, tensor<4xf32>) -> tensor<5xf32>",
       "tensor<5xf32>"},
      {"linear_log_sum_exp",
       {{"h", "tensor<5x3xf32>"}, {"w", "tensor<4x3xf32>"}},
       "%y = slapo.linear_log_sum_exp %h, %w : (tensor<5x3xf32>, "
       "tensor<4x3xf32>) -> tensor<5xf32>",
       "tensor<5xf32>"},

      // Reductions.
      {"sum",
       {{"a", "tensor<2x3x4xf32>"}},
       "%y = slapo.sum %a {dims = array<i64: 0, 2>, keepdim = false} : "
       "tensor<2x3x4xf32> -> tensor<3xf32>",
       "tensor<3xf32>"},
      {"sum into a type that holds the input's (f32 into f64)",
       {{"a", "tensor<2x3x4xf32>"}},
       "%y = slapo.sum %a {dims = array<i64: 0, 2>, keepdim = false} : "
       "tensor<2x3x4xf32> -> tensor<3xf64>",
       "tensor<3xf64>"},
      {"sum keepdim",
       {{"a", "tensor<2x3x4xf32>"}},
       "%y = slapo.sum %a {dims = array<i64: 1>, keepdim = true} : "
       "tensor<2x3x4xf32> -> tensor<2x1x4xf32>",
       "tensor<2x1x4xf32>"},
      {"mean",
       {{"a", "tensor<2x3x4xf32>"}},
       "%y = slapo.mean %a {dims = array<i64: 1, 2>, keepdim = false} : "
       "tensor<2x3x4xf32> -> tensor<2xf32>",
       "tensor<2xf32>"},
      {"mean keepdim",
       {{"a", "tensor<2x3x4xf32>"}},
       "%y = slapo.mean %a {dims = array<i64: 0>, keepdim = true} : "
       "tensor<2x3x4xf32> -> tensor<1x3x4xf32>",
       "tensor<1x3x4xf32>"},
      {"max with ties",
       {{"a", "tensor<2x3x4xf32>"}},
       "%y = slapo.max %a {dims = array<i64: 1>, keepdim = false} : "
       "tensor<2x3x4xf32> -> tensor<2x4xf32>",
       "tensor<2x4xf32>",
       {{"a", withTies}}},
      {"cumsum",
       {{"a", "tensor<2x3x4xf32>"}},
       "%y = slapo.cumsum %a {dim = 1 : i64} : tensor<2x3x4xf32>",
       "tensor<2x3x4xf32>"},
      {"cumsum from the end",
       {{"a", "tensor<2x3x4xf32>"}},
       "%y = slapo.cumsum %a {dim = 2 : i64, reverse} : tensor<2x3x4xf32>",
       "tensor<2x3x4xf32>"},
      {"max keepdim over two dims",
       {{"a", "tensor<2x3x4xf32>"}},
       "%y = slapo.max %a {dims = array<i64: 0, 2>, keepdim = true} : "
       "tensor<2x3x4xf32> -> tensor<1x3x1xf32>",
       "tensor<1x3x1xf32>",
       {{"a", withTies}}},

      // Shape and data movement.
      {"reshape",
       {{"a", "tensor<2x3x4xf32>"}},
       "%y = slapo.reshape %a : tensor<2x3x4xf32> -> tensor<6x4xf32>",
       "tensor<6x4xf32>"},
      {"stage boundary",
       {{"a", "tensor<2x3xf32>"}},
       "%y = slapo.stage_boundary %a from 0 to 1 : tensor<2x3xf32>",
       "tensor<2x3xf32>"},
      {"permute",
       {{"a", "tensor<2x3x4xf32>"}},
       "%y = slapo.permute %a {permutation = array<i64: 2, 0, 1>} : "
       "tensor<2x3x4xf32> -> tensor<4x2x3xf32>",
       "tensor<4x2x3xf32>"},
      {"slice",
       {{"a", "tensor<2x7xf32>"}},
       "%y = slapo.slice %a {dim = 1 : i64, start = 2 : i64, end = 5 : i64, "
       "step = 1 : i64} : tensor<2x7xf32> -> tensor<2x3xf32>",
       "tensor<2x3xf32>"},
      {"slice with a step, ending at the last element",
       {{"a", "tensor<7x2xf32>"}},
       "%y = slapo.slice %a {dim = 0 : i64, start = 1 : i64, end = 7 : i64, "
       "step = 2 : i64} : tensor<7x2xf32> -> tensor<3x2xf32>",
       "tensor<3x2xf32>"},
      {"slice with a step that overruns the end",
       {{"a", "tensor<2x8xf32>"}},
       "%y = slapo.slice %a {dim = 1 : i64, start = 0 : i64, end = 7 : i64, "
       "step = 3 : i64} : tensor<2x8xf32> -> tensor<2x3xf32>",
       "tensor<2x3xf32>"},
      {"slice with a step, stopping early",
       {{"a", "tensor<2x8xf32>"}},
       "%y = slapo.slice %a {dim = 1 : i64, start = 1 : i64, end = 4 : i64, "
       "step = 2 : i64} : tensor<2x8xf32> -> tensor<2x2xf32>",
       "tensor<2x2xf32>"},
      {"concat",
       {{"a", "tensor<2x1xf32>"},
        {"b", "tensor<2x3xf32>"},
        {"c", "tensor<2x2xf32>"}},
       "%y = slapo.concat %a, %b, %c {dim = 1 : i64} : (tensor<2x1xf32>, "
       "tensor<2x3xf32>, tensor<2x2xf32>) -> tensor<2x6xf32>",
       "tensor<2x6xf32>"},
      {"broadcast",
       {{"a", "tensor<3x1xf32>"}},
       "%y = slapo.broadcast %a : tensor<3x1xf32> -> tensor<2x3x4xf32>",
       "tensor<2x3x4xf32>"},

      // The sweep itself: a value used twice, a parameter read twice, a
      // non-differentiable branch (integer arithmetic on a mask).
      {"a value used twice",
       {{"a", t34}},
       "%s = slapo.mul %a, %a : (tensor<3x4xf32>, tensor<3x4xf32>) -> "
       "tensor<3x4xf32>\n"
       "%y = slapo.add %s, %a : (tensor<3x4xf32>, tensor<3x4xf32>) -> "
       "tensor<3x4xf32>",
       t34},
      {"a parameter read twice",
       {{"a", t34}},
       "%again = slapo.get_param @a : tensor<3x4xf32>\n"
       "%y = slapo.mul %a, %again : (tensor<3x4xf32>, tensor<3x4xf32>) -> "
       "tensor<3x4xf32>",
       t34},
      {"a mask computed from a parameter",
       {{"a", t34}},
       "%zero = slapo.constant dense<0.0> : tensor<f32>\n"
       "%positive = slapo.compare <gt> %a, %zero : (tensor<3x4xf32>, "
       "tensor<f32>) -> tensor<3x4xi1>\n"
       "%count = slapo.cast %positive : tensor<3x4xi1> -> tensor<3x4xf32>\n"
       "%y = slapo.mul %a, %count : (tensor<3x4xf32>, tensor<3x4xf32>) -> "
       "tensor<3x4xf32>",
       t34},
  };
}

void checkRule(const RuleCase &rule) {
  DiagnosedContext diagnosed;
  std::string source = rule.source(diagnosed.context);
  INFO(source);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(
      source, mlir::ParserConfig(&diagnosed.context));
  INFO(diagnosed.diagnostics);
  REQUIRE(module);
  REQUIRE(mlir::succeeded(runAutodiff(*module)));
  auto forward = module->lookupSymbol<mlir::func::FuncOp>("forward");
  auto forwardBackward =
      module->lookupSymbol<mlir::func::FuncOp>(slapo::kForwardBackwardName);
  REQUIRE(forwardBackward);

  at::manual_seed(0);
  ref::TensorMap params;
  for (auto param : module->getOps<slapo::ParamOp>()) {
    std::string name = param.getSymName().str();
    auto maker = rule.makers.find(name);
    at::Tensor value = (maker != rule.makers.end() ? maker->second : normal)(
        shapeOf(param.getType()));
    params[name] = value.to(dtypeOf(param.getType())).requires_grad_(true);
  }
  std::vector<at::Tensor> inputs;
  for (mlir::Type type : forward.getArgumentTypes())
    inputs.push_back(at::randn(shapeOf(type)).to(dtypeOf(type)));

  auto loss = ref::evaluate(forward, inputs, params);
  REQUIRE(mlir::succeeded(loss));
  (*loss)[0].backward();
  std::map<std::string, at::Tensor> expected;
  for (const auto &[name, value] : params)
    expected[name] = value.grad();

  at::NoGradGuard noGrad;
  auto results = ref::evaluate(forwardBackward, inputs, params);
  REQUIRE(mlir::succeeded(results));
  CHECK(ref::relativeError((*results)[0], (*loss)[0].detach()) == 0);
  auto actual = gradsBySymbol(forwardBackward, *results);
  CHECK(actual.size() == params.size());
  checkGradients(actual, expected);
}

TEST_CASE("every gradient rule matches LibTorch autograd", "[autodiff]") {
  for (const RuleCase &rule : ruleCases()) {
    DYNAMIC_SECTION(rule.name) { checkRule(rule); }
  }
}

TEST_CASE("every op with a gradient rule has a gradient check", "[autodiff]") {
  DiagnosedContext diagnosed;
  llvm::StringSet<> checked;
  for (const RuleCase &rule : ruleCases()) {
    auto module = mlir::parseSourceString<mlir::ModuleOp>(
        rule.source(diagnosed.context), mlir::ParserConfig(&diagnosed.context));
    REQUIRE(module);
    module->walk([&](slapo::VjpOpInterface op) {
      checked.insert(op->getName().getStringRef());
    });
  }
  // The interpreter draws dropout masks as PyTorch does, afresh for each
  // op, so it cannot replay the forward's mask in the backward: dropout's
  // rule (the same dropout of the gradient) is checked by the lit test
  // autodiff-dropout.mlir and the runtime's KernelsDropoutTest.
  checked.insert(slapo::DropoutOp::getOperationName());
  for (mlir::RegisteredOperationName name :
       diagnosed.context.getRegisteredOperations()) {
    // Collectives' rules need several ranks: the tensor-parallel end-to-end
    // tests check the gradients they give against autograd under mpirun.
    if (!name.hasInterface<slapo::VjpOpInterface>() ||
        name.hasTrait<slapo::OpTrait::Collective>())
      continue;
    INFO(name.getStringRef().str() << " has a rule but no gradient check");
    CHECK(checked.contains(name.getStringRef()));
  }
}

//===----------------------------------------------------------------------===//
// The test models, whole.
//===----------------------------------------------------------------------===//

/// Exports a test model in eval mode and returns its forward inputs.
std::vector<slapo::InputSpec> exportModel(const std::string &name,
                                          const std::string &path) {
  std::string command = "/usr/bin/python3 " SLAPO_SOURCE_DIR
                        "/test/models/export.py --model " +
                        name + " --mode script --out " + path;
  FILE *pipe = popen(command.c_str(), "r");
  REQUIRE(pipe);
  std::string line;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe))
    line += buffer;
  REQUIRE(pclose(pipe) == 0);
  // "--input x=f32[4,16] --input target=i64[4]"
  std::vector<slapo::InputSpec> specs;
  std::istringstream words(line);
  for (std::string word; words >> word;) {
    if (word == "--input")
      continue;
    auto spec = slapo::parseInputSpec(word);
    REQUIRE(bool(spec));
    specs.push_back(*spec);
  }
  return specs;
}

void checkModel(const std::string &name) {
  llvm::SmallString<128> path;
  REQUIRE(!llvm::sys::fs::createTemporaryFile("slapo-autodiff", "pt", path));
  auto removeFile = llvm::make_scope_exit([&] { llvm::sys::fs::remove(path); });
  std::vector<slapo::InputSpec> specs = exportModel(name, path.str().str());

  DiagnosedContext diagnosed;
  auto model = slapo::TorchScriptModel::load(path);
  REQUIRE(bool(model));
  mlir::OwningOpRef<mlir::ModuleOp> module =
      slapo::importTorchScript(diagnosed.context, **model, specs);
  INFO(diagnosed.diagnostics);
  REQUIRE(module);
  REQUIRE(mlir::succeeded(runAutodiff(*module)));
  auto forward = module->lookupSymbol<mlir::func::FuncOp>("forward");
  auto forwardBackward =
      module->lookupSymbol<mlir::func::FuncOp>(slapo::kForwardBackwardName);

  at::manual_seed(0);
  std::vector<at::Tensor> inputs = slapo::reference::randomInputs(forward);

  // Autograd on the TorchScript module itself.
  torch::jit::Module scripted = torch::jit::load(path.str().str());
  c10::IValue output =
      scripted.forward(std::vector<c10::IValue>(inputs.begin(), inputs.end()));
  at::Tensor loss = output.isTuple()
                        ? output.toTupleRef().elements()[0].toTensor()
                        : output.toTensor();
  loss.backward();
  std::map<std::string, at::Tensor> byStateName;
  for (const auto &param : scripted.named_parameters(/*recurse=*/true))
    byStateName[param.name] = param.value.grad();

  at::NoGradGuard noGrad;
  auto state = ref::loadTorchScriptState(path.str().str());
  REQUIRE(bool(state));
  auto results = ref::evaluate(forwardBackward, inputs, *state);
  REQUIRE(mlir::succeeded(results));
  double lossError = ref::relativeError((*results)[0], loss.detach());
  INFO("loss relative error " << lossError);
  CHECK(lossError <= kTolerance);

  // A symbol's gradient is the gradient of its tensor under any of its
  // names (tied weights share one tensor, hence one gradient).
  std::map<std::string, at::Tensor> expected;
  for (auto param : module->getOps<slapo::ParamOp>()) {
    if (param.getBuffer())
      continue;
    std::vector<std::string> names{param.getSymName().str()};
    if (auto aliases = param.getAliases())
      for (mlir::Attribute alias : *aliases)
        names.push_back(alias.cast<mlir::StringAttr>().str());
    for (const std::string &stateName : names) {
      auto it = byStateName.find(stateName);
      if (it != byStateName.end()) {
        expected[names.front()] = it->second;
        byStateName.erase(it);
      }
    }
  }
  for (const auto &[stateName, grad] : byStateName) {
    INFO("parameter " << stateName << " has no slapo.param");
    CHECK(!grad.defined());
  }
  checkGradients(gradsBySymbol(forwardBackward, *results), expected);
}

TEST_CASE("autodiff of the test models matches TorchScript autograd",
          "[autodiff][models]") {
  for (const char *name : {"mlp_loss", "gpt2", "bert", "llama"}) {
    DYNAMIC_SECTION(name) { checkModel(name); }
  }
}

} // namespace
