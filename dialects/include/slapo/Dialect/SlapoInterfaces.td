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

def Slapo_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::slapo";
  let description = [{
    An op that tensor parallelism can run on split values: it knows what
    one rank's results are (replicated, split along a dim, a partial sum)
    given what its operands are. slapo-propagate-sharding calls it once per
    op of @forward in program order, and gives every value its shape on one
    rank only if every op's rule holds; an op without a rule is an error
    there ("has no sharding rule yet").

    A rule refuses every combination that would compute a wrong value on
    some rank, with an error at the op that names the fix (a sync to add, a
    parameter to shard), and registers with the ShardingContext what the
    rewrite must change on one rank besides the types (a slice's bounds, a
    bias moved after the all_reduce that completes its sum).
  }];
  let methods = [
    InterfaceMethod<[{
        Sets the sharding of this op's results from its operands'
        (`context.getSharding`) with `context.setResult` or one of its
        variants, or emits an error at the op and fails.
      }],
      "::mlir::LogicalResult", "propagateSharding",
      (ins "::slapo::ShardingContext &":$context)>,
    InterfaceMethod<[{
        Whether this op may take a partial sum whose biases are still to be
        added (ShardingContext::getPendingBiases): only ops that keep it a
        sum with the same trailing dims (more terms, reshapes, the
        all_reduce that completes it) do; every other op would see the
        value without its bias, and the analysis refuses it before the
        rule runs.
      }],
      "bool", "takesPendingBiases", (ins), "", "return false;">,
  ];
}

def Slapo_FlopCountOpInterface : OpInterface<"FlopCountOpInterface"> {
  let cppNamespace = "::slapo";
  let description = [{
    An op that contracts tensors (a matmul, a linear layer, a convolution,
    attention): the floating-point operations it and its gradient rule
    perform, 2 per multiply-add, for the compiler's cost estimates
    (slapo-cut-pipeline-stage's balance of the stages, slapo-checkpoint's
    recomputation). Other ops count as free: elementwise ops, reductions
    and copies are bound by memory, not by arithmetic, and are a small part
    of a transformer's FLOPs.
  }];
  let methods = [
    InterfaceMethod<[{
        The FLOPs this op performs where it runs.
      }],
      "int64_t", "getForwardFlops", (ins)>,
    InterfaceMethod<[{
        The FLOPs of the contractions its gradient rule (VjpOpInterface)
        builds when the operands for which `operandHasGradient` (one entry
        per operand, in order) is true get a gradient.
      }],
      "int64_t", "getBackwardFlops",
      (ins "::llvm::ArrayRef<bool>":$operandHasGradient)>,
  ];
}

def Slapo_WorkspaceOpInterface : OpInterface<"WorkspaceOpInterface"> {
  let cppNamespace = "::slapo";
  let description = [{
    An op whose kernel computes in bytes of its own besides its results
    (the LM head kernels' chunk of logits and partial sums):
    slapo-plan-memory gives it a workspace buffer of that size in the arena,
    live during the op only (other buffers reuse its bytes before and
    after), counted in the plan as the workspaces at the peak, and the C++
    emitter passes it to the kernel, which allocates nothing. The size is
    decided at compile time from the operand types and the compile-time
    choices of the kernel (its chunk size), the same for every backend and
    thread count.

    The CUDA backend's cuBLASLt and cuDNN workspaces are still the
    context's scratch: they could be declared here too.
  }];
  let methods = [
    InterfaceMethod<[{
        The bytes of the workspace the op's kernel needs, 0 for none.
      }],
      "int64_t", "getWorkspaceBytes", (ins)>,
  ];
}

def Slapo_FusibleRowOpInterface : OpInterface<"FusibleRowOpInterface"> {
  let cppNamespace = "::slapo";
  let description = [{
    An op that a fusion group's loop can compute row by row: a reduction
    (sum, mean, max) or a softmax whose result at a row depends only on that
    row of its input, the row being the input's last dim. In a group whose
    loop is [rows, C] such an op is one stage of each row's loop: first the
    row's values, then the elements that read them (slapo.fused).
  }];
  let methods = [
    InterfaceMethod<[{
        Whether the op works along its input's last dim alone (a reduction
        over that dim only, keeping it as size 1; a softmax along it), on a
        last dim longer than 1: only then may a fusion group hold it.
      }],
      "bool", "isAlongLastDim", (ins)>,
  ];
}

def Slapo_AddendOpInterface : OpInterface<"AddendOpInterface"> {
  let cppNamespace = "::slapo";
  let description = [{
    An op that can add a tensor to one of its results as it writes it. Where
    a value has several readers, autodiff sums their gradients with
    slapo.add: a residual stream's gradient is a norm's input gradient plus
    the branch's. slapo-fold-addends gives the other term to the op that
    computes one of them, so that the sum is no pass over memory of its own:
    the result is then the op's value rounded to the result's type, plus the
    addend, rounded once more (the bits of the slapo.add it replaces).
  }];
  let methods = [
    InterfaceMethod<[{
        The result that the addend is added to.
      }],
      "::mlir::Value", "getAddendTarget", (ins), [{
        return $_op.getGradInput();
      }]>,
    InterfaceMethod<[{
        The addend (null: none yet), of the target's type.
      }],
      "::mlir::Value", "getAddend", (ins), [{
        return $_op.getAddend();
      }]>,
    InterfaceMethod<[{
        Makes `addend` (of the target's type) the addend.
      }],
      "void", "setAddend", (ins "::mlir::Value":$addend), [{
        $_op.getAddendMutable().assign(addend);
      }]>,
  ];
}

#endif // SLAPO_INTERFACES
