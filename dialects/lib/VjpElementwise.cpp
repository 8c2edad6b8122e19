//===- VjpElementwise.cpp - gradient rules of the elementwise ops ---------===//
//
// Each rule follows the formula PyTorch's autograd uses for the same ATen op
// (tools/autograd/derivatives.yaml and the CPU backward kernels), so that the
// gradients agree to rounding. Broadcast operands get their gradient summed
// back to their own shape with TensorBuilder::sumToShape.
//
//===----------------------------------------------------------------------===//
#include "slapo/Dialect/TensorBuilder.h"

#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace slapo {

namespace {

/// Appends the gradients of a broadcasting binary op's operands, given in the
/// result's shape.
LogicalResult appendBinaryGrads(TensorBuilder &g, Operation *op, Value lhsGrad,
                                Value rhsGrad,
                                SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(g.sumToShape(lhsGrad, tensorType(op->getOperand(0))));
  operandGrads.push_back(g.sumToShape(rhsGrad, tensorType(op->getOperand(1))));
  return success();
}

/// Whether `value` is a constant with no zero element.
bool isNonZeroConstant(Value value) {
  DenseElementsAttr attr;
  if (!matchPattern(value, m_Constant(&attr)) ||
      !attr.getElementType().isa<FloatType>())
    return false;
  return llvm::none_of(attr.getValues<APFloat>(),
                       [](const APFloat &element) { return element.isZero(); });
}

/// maximum and minimum: the gradient goes to the operand that was chosen and
/// is split evenly between equal operands, as in PyTorch.
LogicalResult extremumVjp(Operation *op, OpBuilder &builder, Value grad,
                          ComparePredicate lhsLoses,
                          SmallVectorImpl<Value> &operandGrads) {
  TensorBuilder g(builder, op->getLoc());
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  Value zero = g.scalarLike(0, grad);
  Value tie = g.compare(ComparePredicate::eq, lhs, rhs);
  Value shared = g.where(tie, g.scale(grad, 0.5), grad);
  ComparePredicate rhsLoses = lhsLoses == ComparePredicate::lt
                                  ? ComparePredicate::gt
                                  : ComparePredicate::lt;
  Value lhsGrad = g.where(g.compare(lhsLoses, lhs, rhs), zero, shared);
  Value rhsGrad = g.where(g.compare(rhsLoses, lhs, rhs), zero, shared);
  return appendBinaryGrads(g, op, lhsGrad, rhsGrad, operandGrads);
}

} // namespace

//===----------------------------------------------------------------------===//
// Unary ops.
//===----------------------------------------------------------------------===//

LogicalResult NegOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  TensorBuilder g(builder, getLoc());
  operandGrads.push_back(g.neg(singleResultGrad(resultGrads)));
  return success();
}

LogicalResult AbsOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  // grad * sign(x), with sign(0) = 0.
  TensorBuilder g(builder, getLoc());
  Value grad = singleResultGrad(resultGrads), x = getInput();
  Value zero = g.scalarLike(0, x);
  Value isNegative = g.compare(ComparePredicate::lt, x, zero);
  Value negative = g.where(isNegative, g.neg(grad), zero);
  operandGrads.push_back(
      g.where(g.compare(ComparePredicate::gt, x, zero), grad, negative));
  return success();
}

LogicalResult ExpOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  TensorBuilder g(builder, getLoc());
  operandGrads.push_back(g.mul(singleResultGrad(resultGrads), getResult()));
  return success();
}

LogicalResult LogOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  TensorBuilder g(builder, getLoc());
  operandGrads.push_back(g.div(singleResultGrad(resultGrads), getInput()));
  return success();
}

LogicalResult SqrtOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  // grad / (2 * sqrt(x)).
  TensorBuilder g(builder, getLoc());
  operandGrads.push_back(
      g.div(singleResultGrad(resultGrads), g.scale(getResult(), 2)));
  return success();
}

LogicalResult RsqrtOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  // -0.5 * grad * rsqrt(x)^3.
  TensorBuilder g(builder, getLoc());
  Value y = getResult();
  Value cube = g.pow(y, g.scalarLike(3, y));
  operandGrads.push_back(
      g.mul(g.scale(singleResultGrad(resultGrads), -0.5), cube));
  return success();
}

LogicalResult TanhOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  // grad * (1 - tanh(x)^2).
  TensorBuilder g(builder, getLoc());
  Value y = getResult();
  Value one = g.scalarLike(1, y);
  Value slope = g.sub(one, g.mul(y, y));
  operandGrads.push_back(g.mul(singleResultGrad(resultGrads), slope));
  return success();
}

LogicalResult SigmoidOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  // grad * (1 - s) * s.
  TensorBuilder g(builder, getLoc());
  Value y = getResult();
  Value oneMinus = g.sub(g.scalarLike(1, y), y);
  operandGrads.push_back(
      g.mul(g.mul(singleResultGrad(resultGrads), oneMinus), y));
  return success();
}

LogicalResult ReluOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  // The gradient passes where the output is positive (PyTorch's
  // threshold_backward on the result).
  TensorBuilder g(builder, getLoc());
  Value y = getResult(), zero = g.scalarLike(0, y);
  operandGrads.push_back(g.where(g.compare(ComparePredicate::gt, y, zero),
                                 singleResultGrad(resultGrads), zero));
  return success();
}

LogicalResult SiluOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  // grad * s * (1 + x * (1 - s)) with s = sigmoid(x).
  TensorBuilder g(builder, getLoc());
  Value x = getInput(), one = g.scalarLike(1, x);
  Value s = g.unary<SigmoidOp>(x);
  Value slope = g.mul(s, g.add(one, g.mul(x, g.sub(one, s))));
  operandGrads.push_back(g.mul(singleResultGrad(resultGrads), slope));
  return success();
}

LogicalResult SinOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  TensorBuilder g(builder, getLoc());
  operandGrads.push_back(
      g.mul(singleResultGrad(resultGrads), g.unary<CosOp>(getInput())));
  return success();
}

LogicalResult CosOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  TensorBuilder g(builder, getLoc());
  operandGrads.push_back(
      g.mul(singleResultGrad(resultGrads), g.neg(g.unary<SinOp>(getInput()))));
  return success();
}

LogicalResult GeluOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  operandGrads.push_back(
      builder.create<GeluGradOp>(getLoc(), singleResultGrad(resultGrads),
                                 getInput(), getApproximationAttr()));
  return success();
}

LogicalResult CastOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  // Only a float-to-float cast carries a gradient: back in the input type.
  Type inputType = tensorType(getInput()).getElementType();
  Value grad = resultGrads[0];
  if (!grad || !inputType.isa<FloatType>()) {
    operandGrads.push_back(nullptr);
    return success();
  }
  TensorBuilder g(builder, getLoc());
  operandGrads.push_back(g.cast(grad, inputType));
  return success();
}

//===----------------------------------------------------------------------===//
// Binary ops, broadcasting.
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  TensorBuilder g(builder, getLoc());
  Value grad = singleResultGrad(resultGrads);
  return appendBinaryGrads(g, *this, grad, grad, operandGrads);
}

LogicalResult SubOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  TensorBuilder g(builder, getLoc());
  Value grad = singleResultGrad(resultGrads);
  return appendBinaryGrads(g, *this, grad, g.neg(grad), operandGrads);
}

LogicalResult MulOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  TensorBuilder g(builder, getLoc());
  Value grad = singleResultGrad(resultGrads);
  Value lhsGrad = g.mul(grad, getRhs());
  Value rhsGrad = g.mul(grad, getLhs());
  return appendBinaryGrads(g, *this, lhsGrad, rhsGrad, operandGrads);
}

LogicalResult DivOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  // d/drhs (lhs / rhs) = -grad * ((lhs / rhs) / rhs), reusing the quotient.
  TensorBuilder g(builder, getLoc());
  Value grad = singleResultGrad(resultGrads), rhs = getRhs();
  Value lhsGrad = g.div(grad, rhs);
  Value rhsGrad = g.neg(g.mul(grad, g.div(getResult(), rhs)));
  return appendBinaryGrads(g, *this, lhsGrad, rhsGrad, operandGrads);
}

LogicalResult PowOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  TensorBuilder g(builder, getLoc());
  Value grad = singleResultGrad(resultGrads), base = getLhs(),
        exponent = getRhs();
  Value zero = g.scalarLike(0, grad);
  // Base: grad * e * x^(e - 1), and 0 where e == 0 (x^-1 would give inf * 0
  // at x == 0). A constant exponent without zeros needs no mask.
  Value exponentMinusOne = g.sub(exponent, g.scalarLike(1, exponent));
  Value baseGrad = g.mul(grad, g.mul(exponent, g.pow(base, exponentMinusOne)));
  if (!isNonZeroConstant(exponent))
    baseGrad = g.where(g.compare(ComparePredicate::eq, exponent, zero), zero,
                       baseGrad);
  // Exponent: grad * x^e * log(x), and 0 where x == 0 and e >= 0.
  Value logTerm = g.mul(getResult(), g.unary<LogOp>(base));
  Value zeroBase = g.compare(ComparePredicate::eq, base, zero);
  Value nonNegativeExponent = g.compare(ComparePredicate::ge, exponent, zero);
  Value exponentGrad =
      g.mul(grad, g.where(zeroBase, g.where(nonNegativeExponent, zero, logTerm),
                          logTerm));
  return appendBinaryGrads(g, *this, baseGrad, exponentGrad, operandGrads);
}

LogicalResult MaximumOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  return extremumVjp(*this, builder, singleResultGrad(resultGrads),
                     ComparePredicate::lt, operandGrads);
}

LogicalResult MinimumOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  return extremumVjp(*this, builder, singleResultGrad(resultGrads),
                     ComparePredicate::gt, operandGrads);
}

LogicalResult WhereOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  TensorBuilder g(builder, getLoc());
  Value grad = singleResultGrad(resultGrads), condition = getCondition();
  Value zero = g.scalarLike(0, grad);
  operandGrads.push_back(nullptr);
  operandGrads.push_back(
      g.sumToShape(g.where(condition, grad, zero), tensorType(getOnTrue())));
  operandGrads.push_back(
      g.sumToShape(g.where(condition, zero, grad), tensorType(getOnFalse())));
  return success();
}

//===----------------------------------------------------------------------===//
// Dropout and masks.
//===----------------------------------------------------------------------===//

LogicalResult DropoutOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  // For a fixed mask dropout is linear in its input, and a dropout of the
  // same stream and step draws the same mask: the gradient is this dropout
  // of the result's gradient, its mask recomputed rather than kept.
  Operation *backward = builder.clone(*getOperation());
  backward->setOperand(0, singleResultGrad(resultGrads));
  operandGrads.push_back(backward->getResult(0));
  if (getStep())
    operandGrads.push_back(nullptr);
  return success();
}

LogicalResult TriangularOp::buildVjp(OpBuilder &builder, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  // A mask that does not depend on the values: the same mask applies.
  operandGrads.push_back(
      builder.create<TriangularOp>(getLoc(), singleResultGrad(resultGrads),
                                   getLowerAttr(), getDiagonalAttr()));
  return success();
}

} // namespace slapo
