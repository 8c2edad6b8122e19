//===- RecognizeGelu.cpp - a spelled-out tanh gelu as one slapo.gelu -----===//
//
// Hugging Face's GPT-2 (NewGELUActivation, "gelu_new") writes the tanh
// approximation of gelu with elementwise math, which imports as eight ops
// over the MLP's widest activation, each a pass over memory that autodiff
// doubles and whose intermediates stay alive for the backward. As one
// slapo.gelu its forward is one pass, its gradient slapo.gelu_grad another,
// and only the input is kept.
//
//===----------------------------------------------------------------------===//
#include "slapo/Transforms/Passes.h"

#include "DeadOps.h"

#include "slapo/Dialect/ModulePath.h"
#include "slapo/Dialect/SlapoOps.h"

#include <cmath>

namespace slapo {
#define GEN_PASS_DEF_RECOGNIZEGELU
#include "slapo/Transforms/Passes.h.inc"
} // namespace slapo

using namespace mlir;

namespace slapo {
namespace {

/// Whether `value` is a slapo.constant scalar within a relative 1e-6 of
/// `expected` (the model's constants are f32 roundings of the formula's).
bool isScalar(Value value, double expected) {
  auto constant = value.getDefiningOp<ConstantOp>();
  if (!constant)
    return false;
  auto elements = constant.getValue().dyn_cast<DenseFPElementsAttr>();
  if (!elements || !elements.isSplat() || elements.getNumElements() != 1)
    return false;
  double actual = elements.getSplatValue<APFloat>().convertToDouble();
  return std::fabs(actual - expected) <= 1e-6 * std::fabs(expected);
}

/// When `value` is an OpTy of a scalar constant `scalar` and another
/// operand, that operand; else null.
template <typename OpTy> Value otherThanScalar(Value value, double scalar) {
  auto op = value.getDefiningOp<OpTy>();
  if (!op)
    return nullptr;
  if (isScalar(op.getRhs(), scalar))
    return op.getLhs();
  if (isScalar(op.getLhs(), scalar))
    return op.getRhs();
  return nullptr;
}

/// x when `value` is 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 *
/// x^3))), in any order of each product's and sum's operands, with every
/// value of x's type; else null.
Value matchTanhGelu(MulOp product) {
  const double sqrtTwoOverPi = std::sqrt(2.0 / M_PI);
  for (auto [half, onePlusTanh] :
       {std::pair{product.getLhs(), product.getRhs()},
        std::pair{product.getRhs(), product.getLhs()}}) {
    Value x = otherThanScalar<MulOp>(half, 0.5);
    Value tanhValue = otherThanScalar<AddOp>(onePlusTanh, 1.0);
    auto tanh = tanhValue ? tanhValue.getDefiningOp<TanhOp>() : nullptr;
    if (!x || !tanh)
      continue;
    Value sum = otherThanScalar<MulOp>(tanh.getInput(), sqrtTwoOverPi);
    auto add = sum ? sum.getDefiningOp<AddOp>() : nullptr;
    if (!add)
      continue;
    Value cubic = add.getLhs() == x   ? add.getRhs()
                  : add.getRhs() == x ? add.getLhs()
                                      : Value();
    Value power = cubic ? otherThanScalar<MulOp>(cubic, 0.044715) : Value();
    auto pow = power ? power.getDefiningOp<PowOp>() : nullptr;
    if (!pow || pow.getLhs() != x || !isScalar(pow.getRhs(), 3.0))
      continue;
    Type type = x.getType();
    Value chain[] = {half, onePlusTanh, tanhValue, tanh.getInput(),
                     sum,  cubic,       power,     product};
    if (llvm::all_of(chain, [&](Value v) { return v.getType() == type; }))
      return x;
  }
  return nullptr;
}

struct RecognizeGeluPass : impl::RecognizeGeluBase<RecognizeGeluPass> {
  void runOnOperation() override {
    SmallVector<std::pair<MulOp, Value>> matches;
    getOperation().walk([&](MulOp product) {
      if (Value x = matchTanhGelu(product))
        matches.push_back({product, x});
    });
    for (auto [product, x] : matches) {
      OpBuilder builder(product);
      ModulePathScope inModule(builder, product);
      Value gelu =
          builder.create<GeluOp>(product.getLoc(), x, GeluApproximation::tanh);
      product.getResult().replaceAllUsesWith(gelu);
      eraseDeadChain(product);
    }
  }
};

} // namespace
} // namespace slapo
