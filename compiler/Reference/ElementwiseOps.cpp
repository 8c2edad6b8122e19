//===- ElementwiseOps.cpp - unary, binary, compare, where, dropout --------===//
//
// Operands have equal element types (the verifiers check it), so LibTorch's
// type promotion never applies; broadcasting is LibTorch's own.
//
//===----------------------------------------------------------------------===//
#include "OpTable.h"

#include "slapo/Dialect/SlapoOps.h"

namespace slapo::reference::detail {
namespace {

bool isIntegral(const at::Tensor &tensor) {
  return at::isIntegralType(tensor.scalar_type(), /*includeBool=*/true);
}

at::Tensor compare(ComparePredicate predicate, const at::Tensor &lhs,
                   const at::Tensor &rhs) {
  switch (predicate) {
  case ComparePredicate::eq:
    return at::eq(lhs, rhs);
  case ComparePredicate::ne:
    return at::ne(lhs, rhs);
  case ComparePredicate::lt:
    return at::lt(lhs, rhs);
  case ComparePredicate::le:
    return at::le(lhs, rhs);
  case ComparePredicate::gt:
    return at::gt(lhs, rhs);
  case ComparePredicate::ge:
    return at::ge(lhs, rhs);
  }
  fail("unknown comparison predicate");
}

} // namespace

void registerElementwiseOps(OpTable &table) {
  // Unary.
  add<NegOp>(table,
             [](NegOp, Operands x, EvalContext &) { return at::neg(x[0]); });
  add<AbsOp>(table,
             [](AbsOp, Operands x, EvalContext &) { return at::abs(x[0]); });
  add<ExpOp>(table,
             [](ExpOp, Operands x, EvalContext &) { return at::exp(x[0]); });
  add<LogOp>(table,
             [](LogOp, Operands x, EvalContext &) { return at::log(x[0]); });
  add<SqrtOp>(table,
              [](SqrtOp, Operands x, EvalContext &) { return at::sqrt(x[0]); });
  add<RsqrtOp>(table, [](RsqrtOp, Operands x, EvalContext &) {
    return at::rsqrt(x[0]);
  });
  add<TanhOp>(table,
              [](TanhOp, Operands x, EvalContext &) { return at::tanh(x[0]); });
  add<SigmoidOp>(table, [](SigmoidOp, Operands x, EvalContext &) {
    return at::sigmoid(x[0]);
  });
  add<ReluOp>(table,
              [](ReluOp, Operands x, EvalContext &) { return at::relu(x[0]); });
  add<SiluOp>(table,
              [](SiluOp, Operands x, EvalContext &) { return at::silu(x[0]); });
  add<SinOp>(table,
             [](SinOp, Operands x, EvalContext &) { return at::sin(x[0]); });
  add<CosOp>(table,
             [](CosOp, Operands x, EvalContext &) { return at::cos(x[0]); });
  add<GeluOp>(table, [](GeluOp op, Operands x, EvalContext &) {
    bool tanh = op.getApproximation() == GeluApproximation::tanh;
    return at::gelu(x[0], tanh ? "tanh" : "none");
  });
  add<GeluGradOp>(table, [](GeluGradOp op, Operands x, EvalContext &) {
    bool tanh = op.getApproximation() == GeluApproximation::tanh;
    return at::gelu_backward(x[0], x[1], tanh ? "tanh" : "none");
  });
  add<CastOp>(table, [](CastOp op, Operands x, EvalContext &) {
    return x[0].to(scalarTypeOf(op.getType()));
  });

  // Binary, broadcasting.
  add<AddOp>(table, [](AddOp, Operands x, EvalContext &) {
    return at::add(x[0], x[1]);
  });
  add<SubOp>(table, [](SubOp, Operands x, EvalContext &) {
    return at::sub(x[0], x[1]);
  });
  add<MulOp>(table, [](MulOp, Operands x, EvalContext &) {
    return at::mul(x[0], x[1]);
  });
  add<DivOp>(table, [](DivOp, Operands x, EvalContext &) {
    // True division for floats; integers keep their type, so their quotient
    // is rounded toward zero (C semantics, torch.div(rounding_mode="trunc")).
    if (isIntegral(x[0]))
      return at::div(x[0], x[1], "trunc");
    return at::div(x[0], x[1]);
  });
  add<PowOp>(table, [](PowOp, Operands x, EvalContext &) {
    return at::pow(x[0], x[1]);
  });
  add<MaximumOp>(table, [](MaximumOp, Operands x, EvalContext &) {
    return at::maximum(x[0], x[1]);
  });
  add<MinimumOp>(table, [](MinimumOp, Operands x, EvalContext &) {
    return at::minimum(x[0], x[1]);
  });
  add<CompareOp>(table, [](CompareOp op, Operands x, EvalContext &) {
    return compare(op.getPredicate(), x[0], x[1]);
  });
  add<WhereOp>(table, [](WhereOp, Operands x, EvalContext &) {
    return at::where(x[0], x[1], x[2]);
  });

  // Random: the same at:: call TorchScript's aten::dropout makes in training
  // mode, so equal seeds and call order draw equal masks.
  add<DropoutOp>(table, [](DropoutOp op, Operands x, EvalContext &) {
    return at::dropout(x[0], op.getP().convertToDouble(), /*train=*/true);
  });

  add<TriangularOp>(table, [](TriangularOp op, Operands x, EvalContext &) {
    auto diagonal = static_cast<int64_t>(op.getDiagonal());
    return op.getLower() ? at::tril(x[0], diagonal) : at::triu(x[0], diagonal);
  });
}

} // namespace slapo::reference::detail
