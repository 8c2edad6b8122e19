//===- Passes.td - slapo transformation passes --------------*- tablegen -*-===//
#ifndef SLAPO_TRANSFORMS_PASSES
#define SLAPO_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def Autodiff : Pass<"slapo-autodiff", "::mlir::ModuleOp"> {
  let summary = "builds @forward_backward: the loss and its parameter gradients";
  let description = [{
    For `func.func @forward`, whose first result is a 0-d float loss, adds
    `func.func @forward_backward` with the same arguments. It returns the
    loss, then the gradient of the loss with respect to every `slapo.param`
    that is not a buffer and that the loss depends on, in the order the
    params appear in the module; each gradient result carries
    `slapo.grad_of = @param`. A param the loss does not depend on gets no
    result (its gradient would be zero).

    The backward is a reverse sweep over the forward's ops with each op's
    VjpOpInterface rule; gradients of values used several times are summed
    with slapo.add. Only float values on a path from a parameter to the loss
    are differentiated: integer and bool values (indices, masks, targets)
    carry no gradient. An op on such a path without a rule is an error that
    names the op and its module path.
  }];
  let constructor = "::slapo::createAutodiffPass()";
  let dependentDialects = ["::slapo::SlapoDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // SLAPO_TRANSFORMS_PASSES
