//===- SlapoInterfaces.td - slapo op interfaces -------------*- tablegen -*-===//
//
// Interfaces that passes query instead of switching on op names, so that each
// op family keeps its own rules next to its other code.
//
//===----------------------------------------------------------------------===//

#ifndef SLAPO_INTERFACES
#define SLAPO_INTERFACES

include "mlir/IR/OpBase.td"

def Slapo_VjpOpInterface : OpInterface<"VjpOpInterface"> {
  let cppNamespace = "::slapo";
  let description = [{
    A differentiable op: it knows its vector-Jacobian product, the gradient
    of its operands given the gradients of its results. The autodiff pass
    calls it once per op on the path from the parameters to the loss, in
    reverse program order, and sums the gradients of values used several
    times.

    Ops that compute integers or booleans (compare, arange, a cast to an
    integer type) and ops without operands (constant, get_param) have no
    rule: no gradient flows through them.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds, at `builder`'s insertion point and at this op's location, the
        gradient of every operand from `resultGrads` (one per result, each of
        its result's type, or null for a result that receives no gradient; at
        least one is not null). Appends exactly one value per operand to
        `operandGrads`, of the operand's type, or null where the operand is
        not differentiable (integer indices, bool masks, targets). May return
        failure after emitting an error at the op, for ops that cannot be
        differentiated yet.
      }],
      "::mlir::LogicalResult", "buildVjp",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

#endif // SLAPO_INTERFACES
