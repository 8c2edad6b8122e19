//===- SlapoOps.td - slapo dialect operations ---------------*- tablegen -*-===//
//
// Ops mirror ATen semantics with static shapes. Dimensions stored in attributes
// are always non-negative (the frontend normalizes PyTorch's negative dims).
// Elementwise ops broadcast like PyTorch but require equal element types: type
// promotion is made explicit with slapo.cast at import.
//
//===----------------------------------------------------------------------===//

#ifndef SLAPO_OPS
#define SLAPO_OPS

include "slapo/Dialect/SlapoDialect.td"
include "slapo/Dialect/SlapoInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

// An op with a vector-Jacobian rule (in dialects/lib/Vjp*.cpp, by op family).
def Slapo_Differentiable : DeclareOpInterfaceMethods<Slapo_VjpOpInterface>;

// An op with a sharding rule (in dialects/lib/Sharding*.cpp, by op family),
// and one whose rule also takes partial sums whose biases wait.
def Slapo_Shardable : DeclareOpInterfaceMethods<Slapo_ShardingRuleOpInterface>;
def Slapo_ShardableTakingPendingBiases
    : DeclareOpInterfaceMethods<Slapo_ShardingRuleOpInterface,
                                ["takesPendingBiases"]>;

// An op whose FLOPs the cost estimates count (in dialects/lib/Flops.cpp).
def Slapo_Contraction : DeclareOpInterfaceMethods<Slapo_FlopCountOpInterface>;

// An op whose kernel computes in a workspace the memory plan gives it
// (dialects/lib/Workspace.cpp).
def Slapo_WithWorkspace : DeclareOpInterfaceMethods<Slapo_WorkspaceOpInterface>;

// Marks the ops whose result element i is a function of the elements their
// operands broadcast to i, with scalar math in the runtime's ElementMath.h
// (and of i itself for slapo.dropout, whose mask is drawn for its index;
// slapo.cast converts as the cast kernels do; slapo.where selects by its
// bool condition):
// slapo-fuse-elementwise groups chains of them into slapo.fused, and the C++
// emitter writes each group as one loop.
def Slapo_FusibleElementwise : NativeOpTrait<"FusibleElementwise"> {
  let cppNamespace = "::slapo::OpTrait";
}

// A reduction or softmax that a fusion group may hold along its loop's last
// dim (FusibleRowOpInterface, in dialects/lib/SlapoOps.cpp).
def Slapo_FusibleRow : DeclareOpInterfaceMethods<Slapo_FusibleRowOpInterface>;

// Tensors of the element types with arithmetic: every type but i1. PyTorch
// rejects neg, abs and sub on bool tensors and never sums them as bool.
def Slapo_NumericTensor : StaticShapeTensorOf<[F16, BF16, F32, F64, I8, I32, I64]>;

// The scalar operands of updates and dropout (the step's learning rate and
// number), implied by the assembly format.
def Slapo_F64Scalar : 0DTensorOf<[F64]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getF64Type())";
}
def Slapo_F32Scalar : 0DTensorOf<[F32]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getF32Type())";
}
def Slapo_I64Scalar : 0DTensorOf<[I64]> {
  let builderCall =
      "::mlir::RankedTensorType::get({}, $_builder.getIntegerType(64))";
}

// A TypeAttr holding a type of `ty`. MLIR 16's TypeAttrOf checks only the C++
// class (TensorType), so it would accept unranked tensors and any element type.
class Slapo_TypeAttrOf<Type ty> : TypeAttrOf<ty> {
  let predicate = And<[
      CPred<"$_self.isa<::mlir::TypeAttr>()">,
      SubstLeaves<"$_self", "$_self.cast<::mlir::TypeAttr>().getValue()",
                  ty.predicate>]>;
}

//===----------------------------------------------------------------------===//
// Parameters, buffers and constants.
//===----------------------------------------------------------------------===//

def Slapo_ParamOp : Slapo_Op<"param",
    [Symbol, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a parameter or buffer of the model";
  let description = [{
    Declares one tensor of the model's state by its full dotted PyTorch path.
    Its data is not in the IR: it is read from the model file named by the
    module's `slapo.weights` attribute. Tied parameters are one symbol whose
    `aliases` list the other state_dict names of the same tensor. Names and
    aliases are not empty, and no alias repeats or names another symbol.

    A tensor-parallel shard (`shard_axis`, set by slapo-shard) is this
    rank's part of the model's tensor: the tensor's dim `shard_axis` is
    `shard_chunks` (default 1) equal chunks, each split evenly over the tp
    ranks, and tp rank r holds the r-th part of every chunk, in chunk order.
    `type` is the model's shape until slapo-propagate-sharding gives the
    rank's (dim `shard_axis` divided by tp).

    ```mlir
    slapo.param @"transformer.wte.weight" : tensor<128x32xf32> {aliases = ["lm_head.weight"]}
    slapo.param buffer @"attn.bias" : tensor<1x1x16x16xi1>
    slapo.param @"h.0.attn.c_attn.weight" : tensor<32x48xf32> {shard_axis = 1 : i64, shard_chunks = 3 : i64}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       Slapo_TypeAttrOf<Slapo_Tensor>:$type,
                       UnitAttr:$buffer,
                       OptionalAttr<StrArrayAttr>:$aliases,
                       OptionalAttr<I64Attr>:$shard_axis,
                       OptionalAttr<I64Attr>:$shard_chunks);
  let assemblyFormat = "(`buffer` $buffer^)? $sym_name `:` $type attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return getType().cast<::mlir::RankedTensorType>();
    }
  }];
}

def Slapo_GetParamOp : Slapo_Op<"get_param",
    [Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads a parameter or buffer";
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs Slapo_Tensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Slapo_ConstantOp : Slapo_Op<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>,
     Slapo_Shardable]> {
  let summary = "a constant tensor";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Slapo_Tensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasFolder = 1;
}

def Slapo_ArangeOp : Slapo_Op<"arange", [Pure, Slapo_Shardable]> {
  let summary = "start + i * step for i in [0, N)";
  let arguments = (ins F64Attr:$start, F64Attr:$step);
  let results = (outs StaticShapeTensorOf<[F32, F64, BF16, F16, I32, I64]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise ops.
//===----------------------------------------------------------------------===//

class Slapo_UnaryOp<string mnemonic, Type tensor = Slapo_FloatTensor,
                    list<Trait> traits = []>
    : Slapo_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultType,
                                      Slapo_Differentiable, Slapo_Shardable,
                                      Slapo_FusibleElementwise],
                                     traits)> {
  let arguments = (ins tensor:$input);
  let results = (outs tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Slapo_NegOp : Slapo_UnaryOp<"neg", Slapo_NumericTensor> {
  let summary = "-x";
}
def Slapo_AbsOp : Slapo_UnaryOp<"abs", Slapo_NumericTensor> {
  let summary = "|x|";
}
def Slapo_ExpOp : Slapo_UnaryOp<"exp"> { let summary = "e^x"; }
def Slapo_LogOp : Slapo_UnaryOp<"log"> { let summary = "natural log"; }
def Slapo_SqrtOp : Slapo_UnaryOp<"sqrt"> { let summary = "square root"; }
def Slapo_RsqrtOp : Slapo_UnaryOp<"rsqrt"> { let summary = "1 / sqrt(x)"; }
def Slapo_TanhOp : Slapo_UnaryOp<"tanh"> { let summary = "tanh"; }
def Slapo_SigmoidOp : Slapo_UnaryOp<"sigmoid"> { let summary = "1 / (1 + e^-x)"; }
def Slapo_ReluOp : Slapo_UnaryOp<"relu"> { let summary = "max(x, 0)"; }
def Slapo_SiluOp : Slapo_UnaryOp<"silu"> { let summary = "x * sigmoid(x)"; }
def Slapo_SinOp : Slapo_UnaryOp<"sin"> { let summary = "sine"; }
def Slapo_CosOp : Slapo_UnaryOp<"cos"> { let summary = "cosine"; }

def Slapo_GeluOp : Slapo_Op<"gelu", [Pure, SameOperandsAndResultType,
                                    Slapo_Differentiable, Slapo_Shardable,
                                    Slapo_FusibleElementwise]> {
  let summary = "gelu, exact (erf) or with the tanh approximation";
  let arguments = (ins Slapo_FloatTensor:$input,
                       Slapo_GeluApproximationAttr:$approximation);
  let results = (outs Slapo_FloatTensor:$result);
  let assemblyFormat = "$input $approximation attr-dict `:` type($result)";
}

def Slapo_GeluGradOp : Slapo_Op<"gelu_grad", [Pure, SameOperandsAndResultType,
                                             Slapo_FusibleElementwise]> {
  let summary = "grad * gelu'(input): slapo.gelu's gradient, one pass";
  let description = [{
    The derivative of the approximation given, as PyTorch's GeluBackward
    computes it: what slapo.gelu's gradient rule builds, in place of the
    dozen elementwise ops that spell the derivative out.
  }];
  let arguments = (ins Slapo_FloatTensor:$grad, Slapo_FloatTensor:$input,
                       Slapo_GeluApproximationAttr:$approximation);
  let results = (outs Slapo_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input $approximation attr-dict `:` "
                       "type($result)";
}

def Slapo_CastOp : Slapo_Op<"cast", [Pure, Slapo_Differentiable,
                                    Slapo_Shardable,
                                    Slapo_FusibleElementwise]> {
  let summary = "converts the element type, keeping the shape";
  let arguments = (ins Slapo_Tensor:$input);
  let results = (outs Slapo_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether the result's float type holds every value of the input's
    /// (holdsExactly): an exact widening, as bf16 to f32.
    bool isWidening();
    /// Whether the input's float type holds every value of the result's:
    /// the narrowing that such a widening undoes, as f32 to bf16.
    bool isNarrowing();
  }];
}

class Slapo_BinaryOp<string mnemonic, Type tensor = Slapo_Tensor,
                     Trait shardingRule = Slapo_Shardable>
    : Slapo_Op<mnemonic, [Pure, Slapo_Differentiable, shardingRule,
                          Slapo_FusibleElementwise]> {
  let arguments = (ins tensor:$lhs, tensor:$rhs);
  let results = (outs tensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_AddOp : Slapo_BinaryOp<"add", Slapo_Tensor,
                                 Slapo_ShardableTakingPendingBiases> {
  let summary = "lhs + rhs, broadcasting";
}
def Slapo_SubOp : Slapo_BinaryOp<"sub", Slapo_NumericTensor> {
  let summary = "lhs - rhs, broadcasting";
}
def Slapo_MulOp : Slapo_BinaryOp<"mul"> { let summary = "lhs * rhs, broadcasting"; }
def Slapo_DivOp : Slapo_BinaryOp<"div"> {
  let summary = "lhs / rhs, broadcasting (true division for floats)";
}
def Slapo_PowOp : Slapo_BinaryOp<"pow", Slapo_FloatTensor> {
  let summary = "lhs ^ rhs, broadcasting";
}
def Slapo_MaximumOp : Slapo_BinaryOp<"maximum"> { let summary = "max(lhs, rhs)"; }
def Slapo_MinimumOp : Slapo_BinaryOp<"minimum"> { let summary = "min(lhs, rhs)"; }

def Slapo_CompareOp : Slapo_Op<"compare", [Pure, Slapo_Shardable]> {
  let summary = "elementwise comparison giving a bool tensor, broadcasting";
  let arguments = (ins Slapo_ComparePredicateAttr:$predicate,
                       Slapo_Tensor:$lhs, Slapo_Tensor:$rhs);
  let results = (outs Slapo_BoolTensor:$result);
  let assemblyFormat = "$predicate $lhs `,` $rhs attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_WhereOp : Slapo_Op<"where", [Pure, Slapo_Differentiable,
                                      Slapo_Shardable,
                                      Slapo_FusibleElementwise]> {
  let summary = "condition ? on_true : on_false, broadcasting all three";
  let arguments = (ins Slapo_BoolTensor:$condition, Slapo_Tensor:$on_true,
                       Slapo_Tensor:$on_false);
  let results = (outs Slapo_Tensor:$result);
  let assemblyFormat = "$condition `,` $on_true `,` $on_false attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_DropoutOp : Slapo_Op<"dropout", [AllTypesMatch<["input", "result"]>,
                                          Slapo_Differentiable,
                                          Slapo_Shardable,
                                          Slapo_FusibleElementwise]> {
  let summary = "training-mode dropout: zeroes with probability p, scales by 1/(1-p)";
  let description = [{
    Only training-mode dropout with p > 0 is represented; in eval mode the
    frontend imports dropout as the identity.

    Masks are counter-based, recomputed rather than stored: element e of
    the whole tensor is kept iff `uniform01(randomBits(seed,
    dropoutStream(step, stream, rankStream), e)) >= p`
    (runtime/include/slapo/runtime/Random.h), where `seed` is train(seed=),
    `step` the 1-based step number and `stream` the op's own number, which
    the importer gives the model's dropouts in program order. Dropouts of
    one stream and step draw one mask: the gradient of a dropout is the
    same dropout of its result's gradient (for a fixed mask it is linear),
    and a step resumed from a checkpoint draws what it drew before.

    The whole tensor is the value one device computes for the global batch,
    so that meshes train alike: on a data-parallel rank the operand is
    block dp-rank of it along dim 0 (the batch), and a tensor-parallel split
    operand (`shard_axis`, `shard_chunks`: the layout of slapo.param's,
    set by slapo-propagate-sharding) is the tp rank's part of that dim. So
    tp ranks draw one mask for a replicated value, and dp ranks draw
    disjoint parts (the one device's mask where dim 0 is the batch, as for
    every activation of the test models). Inside the modules of
    fork_rng() (`fork_rng`, set by slapo-fork-rng) `rankStream` is the tp
    rank instead of 0: every rank draws its own masks.

    `step` is absent in the imported @forward: the reference interpreter
    draws those masks from PyTorch's generator in program order, as
    TorchScript does (so the op is not Pure: dropping or merging one would
    shift the draws of the others). slapo-optimizer gives every dropout of
    @train_step the step's %step.

    ```mlir
    %y = slapo.dropout %x {p = 1.000000e-01 : f64, stream = 0 : i64} : tensor<2x16x32xf32>
    %z = slapo.dropout %w step %step {fork_rng, p = 1.000000e-01 : f64, shard_axis = 1 : i64, stream = 1 : i64} : tensor<2x1x16x16xf32>
    ```
  }];
  let arguments = (ins Slapo_FloatTensor:$input,
                       Optional<Slapo_I64Scalar>:$step, F64Attr:$p,
                       I64Attr:$stream, UnitAttr:$fork_rng,
                       OptionalAttr<I64Attr>:$shard_axis,
                       OptionalAttr<I64Attr>:$shard_chunks);
  let results = (outs Slapo_FloatTensor:$result);
  let assemblyFormat = "$input (`step` $step^)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Slapo_TriangularOp : Slapo_Op<"triangular", [Pure, SameOperandsAndResultType,
                                                Slapo_Differentiable,
                                                Slapo_Shardable]> {
  let summary = "tril / triu: keeps the lower or upper triangle of the last two dims";
  let arguments = (ins Slapo_Tensor:$input, BoolAttr:$lower, I64Attr:$diagonal);
  let results = (outs Slapo_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fusion groups (built by slapo-fuse-elementwise).
//===----------------------------------------------------------------------===//

def Slapo_FusedOp : Slapo_Op<"fused", [IsolatedFromAbove,
                                      RecursiveMemoryEffects]> {
  let summary = "elementwise ops (and row reductions or column sums) computed as one loop";
  let description = [{
    The region's ops run on the block's arguments, which are the operands;
    `slapo.yield` names the values the group gives to ops outside it, the
    results. The loop's shape is the largest shape of the region's values.
    Each op of the region is FusibleElementwise and has the loop's shape,
    or is a row op:

    - a FusibleRowOpInterface op along the loop's last dim (isAlongLastDim):
      slapo.sum, slapo.mean or slapo.max of a value of the loop's shape over
      its last dim with keepdim, giving a row value of the loop's shape with
      the last dim 1; slapo.softmax or slapo.log_softmax along the last dim,
      of the loop's shape;
    - a FusibleElementwise op of the row shape (on row values and operands);
    - a column sum (isColumnSum): slapo.sum of a value of the loop's shape
      over all its dims but the last, giving the [C] sums of its columns (a
      bias gradient), in the input's type or a float type that holds it
      exactly; only the yield reads it. A group holds row ops or column
      sums, not both.

    Elementwise ops of the loop's shape may read row values (broadcast along
    the row). A group with row ops is computed row by row: each reduction
    is a stage of the row (a pass over its elements, the elementwise values
    it needs computed again from the operands), then one pass writes the
    results; a result is of the loop's shape or of the row shape. A group
    with column sums is computed by blocks of adjacent columns, each taking
    the rows in order and adding each row's values to its columns' sums as
    it computes them (the order of the reduce kernel's sum over the leading
    dims, so the sums keep their bits); a column sum's [C] is a result, and
    the value it sums need not be one. An operand
    has the shape of the op that reads it, or broadcasts to it. Values of the
    region that are not results are never in memory: the emitted loop keeps
    them in registers (a row's scratch for a reduction's inputs), so the
    memory plan gives them no bytes. `kind` names the schedule's fusion kind
    whose pattern the group was matched to (fuse("bias_gelu")), if any.

    ```mlir
    %r = slapo.fused %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
    ^bb0(%a0: tensor<4x8xf32>, %a1: tensor<8xf32>):
      %0 = slapo.add %a0, %a1 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      %1 = slapo.gelu %0 <tanh> : tensor<4x8xf32>
      slapo.yield %1 : tensor<4x8xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<Slapo_Tensor>:$inputs,
                       OptionalAttr<StrAttr>:$kind);
  let results = (outs Variadic<Slapo_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, "
                       "results) $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The shape the group's loop runs over: the largest of its values'.
    ::llvm::SmallVector<int64_t> getLoopShape();
    /// Whether the group holds row ops (FusibleRowOpInterface), and so runs
    /// row by row over the loop's last dim.
    bool hasRowOps();
    /// Whether the group holds column sums (isColumnSum), and so runs over
    /// blocks of the loop's columns, each taking the rows in order.
    bool hasColumnSums();
  }];
}

def Slapo_YieldOp : Slapo_Op<"yield", [Pure, Terminator, ReturnLike,
                                      HasParent<"FusedOp">]> {
  let summary = "the values of a fusion group that are its results";
  let arguments = (ins Variadic<Slapo_Tensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

//===----------------------------------------------------------------------===//
// Contractions and neural-network ops.
//===----------------------------------------------------------------------===//

def Slapo_LinearOp : Slapo_Op<"linear", [Pure, Slapo_Differentiable,
                                         Slapo_Shardable, Slapo_Contraction]> {
  let summary = "input[..., K] x weight[N, K]^T + bias[N]";
  let arguments = (ins Slapo_FloatTensor:$input, Slapo_FloatTensor:$weight,
                       Optional<Slapo_FloatTensor>:$bias);
  let results = (outs Slapo_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_MatmulOp : Slapo_Op<"matmul", [Pure, Slapo_Differentiable,
                                         Slapo_Shardable, Slapo_Contraction]> {
  let summary = "batched lhs[..., M, K] x rhs[..., K, N], batch dims broadcast";
  let description = [{
    Each of `lhs_permutation`, `rhs_permutation` and `result_permutation`
    stands for a slapo.permute around the product that slapo-fold-permutes
    removed (absent: none), so that the contraction reads and writes the
    tensors where they are instead of a permuted copy:

      result = permute(matmul(permute(lhs, lhs_permutation),
                              permute(rhs, rhs_permutation)),
                       result_permutation)

    The shapes in the summary are those of the permuted operands and the
    unpermuted product. Ops with permutations have no
    gradient rule: the fold runs after slapo-autodiff.
  }];
  let arguments = (ins Slapo_FloatTensor:$lhs, Slapo_FloatTensor:$rhs,
                       OptionalAttr<DenseI64ArrayAttr>:$lhs_permutation,
                       OptionalAttr<DenseI64ArrayAttr>:$rhs_permutation,
                       OptionalAttr<DenseI64ArrayAttr>:$result_permutation);
  let results = (outs Slapo_FloatTensor:$result);
  let builders = [
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$lhs,
                   "::mlir::Value":$rhs), [{
      build($_builder, $_state, result, lhs, rhs, nullptr, nullptr, nullptr);
    }]>
  ];
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_EmbeddingOp : Slapo_Op<"embedding", [Pure, Slapo_Differentiable,
                                               Slapo_Shardable]> {
  let summary = "rows of weight[V, D] gathered by indices[...] giving [..., D]";
  let arguments = (ins Slapo_FloatTensor:$weight, Slapo_IndexTensor:$indices,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs Slapo_FloatTensor:$result);
  let assemblyFormat = "$weight `,` $indices attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_EmbeddingGradOp : Slapo_Op<"embedding_grad", [Pure]> {
  let summary = "the gradient of an embedding's weight: grad rows summed by index";
  let description = [{
    Result row v is the sum of the rows of grad[..., D] whose index is v
    (zero for indices that occur nowhere, and for `padding_idx`): what
    slapo.embedding's gradient rule builds, a scatter-add instead of a
    one-hot matrix product.
  }];
  let arguments = (ins Slapo_FloatTensor:$grad, Slapo_IndexTensor:$indices,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs Slapo_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $indices attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_LayerNormOp : Slapo_Op<"layer_norm", [Pure, AttrSizedOperandSegments,
                                              Slapo_Differentiable,
                                              Slapo_Shardable]> {
  let summary = "layer norm over the trailing `normalized_rank` dims";
  let arguments = (ins Slapo_FloatTensor:$input,
                       Optional<Slapo_FloatTensor>:$weight,
                       Optional<Slapo_FloatTensor>:$bias,
                       I64Attr:$normalized_rank, F64Attr:$eps);
  let results = (outs Slapo_FloatTensor:$result);
  let assemblyFormat = "$input (`weight` $weight^)? (`bias` $bias^)? attr-dict "
                       "`:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_LayerNormGradOp : Slapo_Op<"layer_norm_grad",
    [Pure, AttrSizedOperandSegments, Slapo_AddendOpInterface]> {
  let summary = "the gradients of layer_norm's input, weight and bias";
  let description = [{
    With each row's mean and rstd = rsqrt(variance + eps) over the trailing
    `normalized_rank` dims of `input` (recomputed as slapo.layer_norm
    computes them), xhat = (x - mean) * rstd and d = grad * weight (grad
    without a weight): grad_input = rstd * (d - mean(d) - xhat *
    mean(d * xhat)) row by row, grad_weight = sum(grad * xhat) and
    grad_bias = sum(grad) over the rows (shape: the normalized dims; read
    only where the norm has a weight, a bias). What slapo.layer_norm's
    gradient rule builds: one pass per row and one reduction over the rows,
    where the rule's formulas are a dozen ops as large as the input. With
    an `addend` (of the input's type: slapo-fold-addends), grad_input is
    that gradient rounded to the input's type plus the addend.
  }];
  let arguments = (ins Slapo_FloatTensor:$grad, Slapo_FloatTensor:$input,
                       Optional<Slapo_FloatTensor>:$weight,
                       Optional<Slapo_FloatTensor>:$addend,
                       I64Attr:$normalized_rank, F64Attr:$eps);
  let results = (outs Slapo_FloatTensor:$grad_input,
                      Slapo_FloatTensor:$grad_weight,
                      Slapo_FloatTensor:$grad_bias);
  let assemblyFormat = "$grad `,` $input (`weight` $weight^)? "
                       "(`addend` $addend^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_RotaryEmbeddingOp : Slapo_Op<"rotary_embedding",
    [Pure, Slapo_Differentiable, Slapo_Shardable]> {
  let summary = "input * cos + rotate_half(input) * sin over the last dim";
  let description = [{
    The rotary position embedding as Hugging Face's LLaMA writes it
    (apply_rotary_pos_emb), over the last dim of size D (even):
    rotate_half(x) = concat(-x[..., D/2:], x[..., :D/2]) and result =
    input * cos + rotate_half(input) * sin, cos and sin (last dim D)
    broadcast to input's shape. With `transposed`, the transposed map (the
    gradient): result = input * cos + rotate_half^T(input * sin), where
    rotate_half^T(y) = concat(y[..., D/2:], -y[..., :D/2]). What
    slapo-recognize-rotary makes of the ops that spell it out (two slices, a
    negation, a concat, two products and a sum, each a pass over the
    query or key): one pass, the same products and sum.
  }];
  let arguments = (ins Slapo_FloatTensor:$input, Slapo_FloatTensor:$cos,
                       Slapo_FloatTensor:$sin, UnitAttr:$transposed);
  let results = (outs Slapo_FloatTensor:$result);
  let assemblyFormat = "$input `,` $cos `,` $sin attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_RmsNormOp : Slapo_Op<"rms_norm", [Pure, Slapo_Differentiable,
                                            Slapo_Shardable]> {
  let summary = "RMS norm over the last dim: weight * (x * rsqrt(mean(x^2) + eps))";
  let description = [{
    What slapo-replace makes of LLaMA's RMSNorm under
    replace("fused_rmsnorm"): one pass over each row instead of a square,
    a mean, an add, an rsqrt and two products, each as large as the input
    but the mean. The products are in the module's order: the row scaled
    by rsqrt first, then by `weight` (shape: the last dim).
  }];
  let arguments = (ins Slapo_FloatTensor:$input,
                       Optional<Slapo_FloatTensor>:$weight, F64Attr:$eps);
  let results = (outs Slapo_FloatTensor:$result);
  let assemblyFormat = "$input (`weight` $weight^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_RmsNormGradOp : Slapo_Op<"rms_norm_grad",
    [Pure, AttrSizedOperandSegments, Slapo_AddendOpInterface]> {
  let summary = "the gradients of rms_norm's input and weight";
  let description = [{
    With each row's rstd = rsqrt(mean(x^2) + eps) over the last dim of
    `input` (recomputed as slapo.rms_norm computes it), xhat = x * rstd and
    d = grad * weight (grad without a weight): grad_input = rstd * (d - xhat
    * mean(d * xhat)) row by row, grad_weight = sum(grad * xhat) over the
    rows (shape: the last dim; read only where the norm has a weight).
    What slapo.rms_norm's gradient rule builds: one pass per row and one
    reduction over the rows, where the formulas are ten ops as large as the
    input. With an `addend`, as slapo.layer_norm_grad's.
  }];
  let arguments = (ins Slapo_FloatTensor:$grad, Slapo_FloatTensor:$input,
                       Optional<Slapo_FloatTensor>:$weight,
                       Optional<Slapo_FloatTensor>:$addend, F64Attr:$eps);
  let results = (outs Slapo_FloatTensor:$grad_input,
                      Slapo_FloatTensor:$grad_weight);
  let assemblyFormat = "$grad `,` $input (`weight` $weight^)? "
                       "(`addend` $addend^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

class Slapo_SoftmaxLikeOp<string mnemonic>
    : Slapo_Op<mnemonic, [Pure, SameOperandsAndResultType,
                          Slapo_Differentiable, Slapo_Shardable,
                          Slapo_FusibleRow]> {
  let arguments = (ins Slapo_FloatTensor:$input, I64Attr:$dim);
  let results = (outs Slapo_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}
def Slapo_SoftmaxOp : Slapo_SoftmaxLikeOp<"softmax"> {
  let summary = "softmax along dim";
}
def Slapo_LogSoftmaxOp : Slapo_SoftmaxLikeOp<"log_softmax"> {
  let summary = "log of softmax along dim";
}

def Slapo_CrossEntropyOp : Slapo_Op<"cross_entropy",
    [Pure, Slapo_Differentiable, Slapo_Shardable]> {
  let summary = "cross entropy of logits[N, C] against class indices target[N]";
  let description = [{
    Targets equal to `ignore_index` contribute nothing; with reduction `mean`
    the sum is divided by the number of targets not ignored, as in PyTorch.
  }];
  let arguments = (ins Slapo_FloatTensor:$logits, Slapo_IndexTensor:$target,
                       I64Attr:$ignore_index, Slapo_ReductionAttr:$reduction);
  let results = (outs Slapo_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $target attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_CrossEntropyGradOp : Slapo_Op<"cross_entropy_grad", [Pure]> {
  let summary = "the gradient of cross_entropy's logits[N, C]";
  let description = [{
    Row n of the result is (softmax(logits[n]) - one_hot(target[n])) *
    row_weight[n], and zeros for a target outside [0, C) (an ignored one,
    whose weight is 0, whatever its logits): what slapo.cross_entropy's
    gradient rule builds, one pass over the logits instead of a softmax, a
    one-hot matrix, a difference and a product, each as large as the
    logits.
  }];
  let arguments = (ins Slapo_FloatTensor:$logits, Slapo_IndexTensor:$target,
                       Slapo_FloatTensor:$row_weight);
  let results = (outs Slapo_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $target `,` $row_weight attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_LinearCrossEntropyOp : Slapo_Op<"linear_cross_entropy",
    [Pure, Slapo_Differentiable, Slapo_Shardable, Slapo_Contraction,
     Slapo_WithWorkspace]> {
  let summary = "cross entropy of hidden[N, H] x weight[V, H]^T (+ bias) "
                "without the [N, V] logits";
  let description = [{
    What slapo-replace makes of an LM head and its loss under
    replace("cross_entropy"): with logits = hidden x weight^T + bias
    [N, V], `loss` is slapo.cross_entropy(logits, target) (ignore_index,
    reduction mean or sum). The kernel walks the rows in chunks: a chunk's
    logits, their log-sum-exp and loss, and, since the loss ends the
    forward, their gradient (softmax - one_hot) * row weight, at once
    turned into the chunk's rows of `grad_hidden` and its share of
    `grad_weight` and `grad_bias` (present with `bias`). Those are the
    gradients for a loss gradient of 1; the gradient rule scales them by
    the loss's gradient. Neither the logits nor their gradient exist whole.
    The results and the bias are f32; hidden and weight are f32, or bf16
    under precision="bf16" (slapo-mixed-precision), where the products sum
    in f32 and take the logits' gradient rounded to bf16.

    ```mlir
    %loss, %dh, %dw = slapo.linear_cross_entropy %h, %w, %t {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<62x32xf32>, tensor<128x32xf32>, tensor<62xi64>) -> (tensor<f32>, tensor<62x32xf32>, tensor<128x32xf32>)
    ```
  }];
  let arguments = (ins Slapo_FloatTensor:$hidden, Slapo_FloatTensor:$weight,
                       Slapo_IndexTensor:$target,
                       Optional<Slapo_FloatTensor>:$bias,
                       I64Attr:$ignore_index, Slapo_ReductionAttr:$reduction);
  let results = (outs Slapo_FloatTensor:$loss,
                      Slapo_FloatTensor:$grad_hidden,
                      Slapo_FloatTensor:$grad_weight,
                      Optional<Slapo_FloatTensor>:$grad_bias);
  let assemblyFormat = "$hidden `,` $weight `,` $target (`bias` $bias^)? "
                       "attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_LinearLogSumExpOp : Slapo_Op<"linear_log_sum_exp",
    [Pure, Slapo_Differentiable, Slapo_WithWorkspace]> {
  let summary = "each row's log-sum-exp of hidden[N, H] x weight[V, H]^T "
                "(+ bias) without the [N, V] logits";
  let description = [{
    What a vocabulary-parallel slapo.linear_cross_entropy becomes on each
    rank (slapo-propagate-sharding): `logsumexp`[n] = log(sum_v
    exp(logits[n, v])) with logits = hidden x weight^T + bias, the rank's
    block of the classes. The kernel walks the rows in chunks as
    linear_cross_entropy's does; the ranks' log-sum-exps are combined by
    collectives in the IR. Its gradient (slapo.linear_log_sum_exp_grad)
    recomputes the chunks' logits from `logsumexp`. The log-sum-exp and the
    bias are f32; hidden and weight are f32, or bf16 under
    precision="bf16" (slapo-mixed-precision), where the products sum in f32,
    as linear_cross_entropy's.

    ```mlir
    %lse = slapo.linear_log_sum_exp %h, %w : (tensor<62x32xf32>, tensor<64x32xf32>) -> tensor<62xf32>
    ```
  }];
  let arguments = (ins Slapo_FloatTensor:$hidden, Slapo_FloatTensor:$weight,
                       Optional<Slapo_FloatTensor>:$bias);
  let results = (outs Slapo_FloatTensor:$logsumexp);
  let assemblyFormat = "$hidden `,` $weight (`bias` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_LinearLogSumExpGradOp : Slapo_Op<"linear_log_sum_exp_grad",
    [Pure, Slapo_WithWorkspace]> {
  let summary = "the gradients of linear_log_sum_exp's hidden, weight and "
                "bias";
  let description = [{
    With each chunk's logits recomputed and G = exp(logits - logsumexp) *
    grad (the softmax scaled by each row's gradient): grad_hidden = G x
    weight, grad_weight = G^T x hidden, grad_bias = the column sums of G
    (present with `bias`). What slapo.linear_log_sum_exp's gradient rule
    builds; only a chunk of G exists at a time. The gradients are f32; with
    bf16 hidden and weight the two products take G rounded to bf16, as
    linear_cross_entropy's take the logits' gradient.
  }];
  let arguments = (ins Slapo_FloatTensor:$hidden, Slapo_FloatTensor:$weight,
                       Optional<Slapo_FloatTensor>:$bias,
                       Slapo_FloatTensor:$logsumexp, Slapo_FloatTensor:$grad);
  let results = (outs Slapo_FloatTensor:$grad_hidden,
                      Slapo_FloatTensor:$grad_weight,
                      Optional<Slapo_FloatTensor>:$grad_bias);
  let assemblyFormat = "$hidden `,` $weight (`bias` $bias^)? `logsumexp` "
                       "$logsumexp `grad` $grad attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

// The dropout flash_attention applies to its probabilities, as the
// slapo.dropout it replaced: `dropout_p` is that op's `p` and
// `dropout_stream` its `stream`; the rest have that op's names. All absent:
// no dropout.
def Slapo_AttentionDropout {
  dag args = (ins Optional<Slapo_I64Scalar>:$step,
                  OptionalAttr<F64Attr>:$dropout_p,
                  OptionalAttr<I64Attr>:$dropout_stream, UnitAttr:$fork_rng,
                  OptionalAttr<I64Attr>:$shard_axis,
                  OptionalAttr<I64Attr>:$shard_chunks);
}

def Slapo_FlashAttentionOp : Slapo_Op<"flash_attention",
    [Pure, AttrSizedOperandSegments, Slapo_Differentiable, Slapo_Shardable,
     Slapo_Contraction]> {
  let summary = "softmax(masked q k^T scale) v without the [T, S] probabilities";
  let description = [{
    What slapo-replace makes of an attention module under
    replace("flash_attention"): with query [B, H, T, D], key [B, H, S, D]
    and value [B, H, S, E],

      scores = (query x key^T) * scale                      [B, H, T, S]
      scores = keep ? scores : masked_score   (when `keep` is given)
      scores = scores + bias                  (when `bias` is given)
      result = softmax(scores, last dim) x value            [B, H, T, E]
      logsumexp = log(sum(exp(scores), last dim))           [B, H, T]

    `keep` (bool) and `bias` broadcast to [B, H, T, S]: the causal mask
    sliced from GPT-2's buffer, BERT's additive padding mask. The
    probabilities are never stored: the kernel walks the keys in tiles with
    a running maximum and sum (FlashAttention-2), and the gradient
    (slapo.flash_attention_grad) recomputes them from `logsumexp`, which is
    all the forward keeps besides its result. `logsumexp` is in the compute
    type (getLogSumExpElementType: f32 for bf16, f16 and f32 operands, f64
    for f64), as PyTorch, cuDNN and FlashAttention keep it: in bf16, an LSE
    of 5 to 10 would be rounded by up to 0.03, and every probability the
    gradient recomputes from it would be off by up to 3%.

    With `dropout_p` (an attention dropout in train mode, GPT-2's
    attn_dropout), the probabilities are dropped before the product with
    the values, element (b, h, t, s) of the whole [B, H, T, S] tensor
    drawing what the slapo.dropout it replaces would draw: the attributes
    `dropout_stream` (that dropout's `stream`), `fork_rng`, `shard_axis`
    and `shard_chunks` and the `step` operand are that op's, with its
    meaning (masks counter-based, recomputed by the gradient rather than
    stored). `logsumexp` is the undropped softmax's.

    With `bshd`, query, key, value and the result are stored token-major,
    [B, T, H, D] (key and value [B, S, H, *], the result [B, T, H, E]), as
    the projections write them and read the merged heads back: what
    slapo-fold-permutes makes of the permutes that split and merge heads
    around the op, which would copy each tensor. The masks, `logsumexp` and
    the dropout's elements keep the [B, H, T, S] order of the scores.

    With `packed_qkv` (and `bshd`), query, key and value are one tensor
    [B, T, 3H, D] given three times: heads [0, H) are the queries, [H, 2H)
    the keys, [2H, 3H) the values (self-attention: S = T, E = D). It is
    GPT-2's fused projection [B, T, 3C] viewed by heads, which
    slapo-pack-qkv gives the op in place of the three slices that would
    copy it.

    ```mlir
    %o, %lse = slapo.flash_attention %q, %k, %v keep %mask {masked_score = -3.4028234663852886E+38 : f64, scale = 0.35355339059327379 : f64} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<1x1x16x16xi1>) -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
    ```
  }];
  let arguments = !con((ins Slapo_FloatTensor:$query, Slapo_FloatTensor:$key,
                            Slapo_FloatTensor:$value,
                            Optional<Slapo_BoolTensor>:$keep,
                            Optional<Slapo_FloatTensor>:$bias, F64Attr:$scale,
                            F64Attr:$masked_score),
                       Slapo_AttentionDropout.args,
                       (ins UnitAttr:$bshd, UnitAttr:$packed_qkv));
  let results = (outs Slapo_FloatTensor:$result,
                      Slapo_FloatTensor:$logsumexp);
  let assemblyFormat = "$query `,` $key `,` $value (`keep` $keep^)? "
                       "(`bias` $bias^)? (`step` $step^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The element type of the log-sum-exp of operands of `elementType`:
    /// the type the kernels compute in (f64 for f64, else f32).
    static ::mlir::Type getLogSumExpElementType(::mlir::Type elementType);
  }];
}

def Slapo_FlashAttentionGradOp : Slapo_Op<"flash_attention_grad",
    [Pure, AttrSizedOperandSegments]> {
  let summary = "the gradients of flash_attention's query, key and value";
  let description = [{
    With P = exp(scores - logsumexp) recomputed tile by tile from the
    operands of the slapo.flash_attention whose `result` and `logsumexp`
    (in the compute type, as that op's) are given, and dS = P * (grad x value^T - rowsum(grad * result)), zero
    where `keep` is false (the scores there are a constant):
    grad_query = dS x key * scale, grad_key = dS^T x query * scale,
    grad_value = P^T x grad. What slapo.flash_attention's gradient rule
    builds; the mask and bias get no gradient. With the forward's dropout
    (the same attributes and `step`), the mask M (kept elements 1/(1-p),
    others 0) is drawn again: grad_value = (P * M)^T x grad and dS = P *
    ((grad x value^T) * M - rowsum(grad * result)) (FlashAttention-2's
    dropout backward; the row sum is still that of grad * result). With
    `bshd`, the forward's layout: query, key, value, result, grad and the
    gradients stored [B, T, H, D]. Three results, the gradients of query,
    key and value; with `packed_qkv`, the forward's packed operand, one: the
    gradient of that [B, T, 3H, D] tensor, each third the gradient of its
    part (what the concat of the three gradients would copy together).
  }];
  let arguments = !con((ins Slapo_FloatTensor:$query, Slapo_FloatTensor:$key,
                            Slapo_FloatTensor:$value,
                            Optional<Slapo_BoolTensor>:$keep,
                            Optional<Slapo_FloatTensor>:$bias,
                            Slapo_FloatTensor:$result,
                            Slapo_FloatTensor:$logsumexp,
                            Slapo_FloatTensor:$grad, F64Attr:$scale,
                            F64Attr:$masked_score),
                       Slapo_AttentionDropout.args,
                       (ins UnitAttr:$bshd, UnitAttr:$packed_qkv));
  let results = (outs Variadic<Slapo_FloatTensor>:$grads);
  let assemblyFormat = "$query `,` $key `,` $value (`keep` $keep^)? "
                       "(`bias` $bias^)? `result` $result `,` $logsumexp "
                       "`grad` $grad (`step` $step^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The gradients of query, key and value, unless `packed_qkv` gives
    /// them as one.
    ::mlir::Value getGradQuery() { return getUnpackedGrad(0); }
    ::mlir::Value getGradKey() { return getUnpackedGrad(1); }
    ::mlir::Value getGradValue() { return getUnpackedGrad(2); }
    ::mlir::Value getUnpackedGrad(unsigned operand) {
      assert(!getPackedQkv() && "a packed gradient has one result");
      return getGrads()[operand];
    }
  }];
}

// The window of a 2-d convolution or pooling: one stride, padding (on both
// sides) and dilation per spatial dim, [height, width]. The output's spatial
// size is the result type's (PyTorch's floor, or ceil_mode's ceil, of
// (in + 2 padding - dilation (kernel - 1) - 1) / stride + 1).
def Slapo_Window2d {
  dag args = (ins DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                    DenseI64ArrayAttr:$dilation);
}

def Slapo_Conv2dOp : Slapo_Op<"conv2d", [Pure, Slapo_Differentiable,
                                         Slapo_Shardable, Slapo_Contraction]> {
  let summary = "2-d convolution of input[N, C, H, W] by weight[O, C/groups, kH, kW]";
  let description = [{
    torch.nn.functional.conv2d: output channel o sees the input channels of
    its group (`groups` groups of C/groups channels, O/groups outputs each),
    zero padding, plus bias[O] when given.
  }];
  let arguments = !con((ins Slapo_FloatTensor:$input, Slapo_FloatTensor:$weight,
                            Optional<Slapo_FloatTensor>:$bias),
                       Slapo_Window2d.args, (ins I64Attr:$groups));
  let results = (outs Slapo_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_Conv2dGradInputOp : Slapo_Op<"conv2d_grad_input", [Pure]> {
  let summary = "the gradient of a conv2d's input";
  let description = [{
    The input gradient of slapo.conv2d with these attributes, from the
    gradient of its result and its weight (a transposed convolution); the
    result has the input's type.
  }];
  let arguments = !con((ins Slapo_FloatTensor:$grad, Slapo_FloatTensor:$weight),
                       Slapo_Window2d.args, (ins I64Attr:$groups));
  let results = (outs Slapo_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $weight attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_Conv2dGradWeightOp : Slapo_Op<"conv2d_grad_weight", [Pure]> {
  let summary = "the gradient of a conv2d's weight";
  let description = [{
    The weight gradient of slapo.conv2d with these attributes, from the
    gradient of its result and its input; the result has the weight's type.
  }];
  let arguments = !con((ins Slapo_FloatTensor:$grad, Slapo_FloatTensor:$input),
                       Slapo_Window2d.args, (ins I64Attr:$groups));
  let results = (outs Slapo_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_MaxPool2dOp : Slapo_Op<"max_pool2d", [Pure, Slapo_Differentiable,
                                                Slapo_Shardable]> {
  let summary = "maximum over windows of input[N, C, H, W]";
  let description = [{
    torch.nn.functional.max_pool2d: each output element is the maximum of
    its window, padding excluded (PyTorch pads with -inf), NaN if any
    element is NaN. Windows that ceil_mode lets run past the input are cut
    at its edge.
  }];
  let arguments = !con((ins Slapo_FloatTensor:$input,
                            DenseI64ArrayAttr:$kernel_size),
                       Slapo_Window2d.args);
  let results = (outs Slapo_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Slapo_MaxPool2dGradOp : Slapo_Op<"max_pool2d_grad", [Pure]> {
  let summary = "the gradient of a max_pool2d's input";
  let description = [{
    Each element of `grad` (the gradient of slapo.max_pool2d's result) is
    added to the input element its window took the maximum from: the first
    in row-major order among equals, as PyTorch's CPU kernel picks it.
  }];
  let arguments = !con((ins Slapo_FloatTensor:$grad, Slapo_FloatTensor:$input,
                            DenseI64ArrayAttr:$kernel_size),
                       Slapo_Window2d.args);
  let results = (outs Slapo_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions.
//===----------------------------------------------------------------------===//

class Slapo_ReduceOp<string mnemonic, Type tensor = Slapo_Tensor>
    : Slapo_Op<mnemonic, [Pure, Slapo_Differentiable, Slapo_Shardable,
                          Slapo_FusibleRow]> {
  let arguments = (ins tensor:$input, DenseI64ArrayAttr:$dims,
                       BoolAttr:$keepdim);
  let results = (outs tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}
def Slapo_SumOp : Slapo_ReduceOp<"sum", Slapo_NumericTensor> {
  let summary = "sum over dims";
}
def Slapo_MeanOp : Slapo_ReduceOp<"mean", Slapo_FloatTensor> {
  let summary = "mean over dims";
}
def Slapo_MaxOp : Slapo_ReduceOp<"max"> { let summary = "maximum over dims"; }

def Slapo_CumsumOp : Slapo_Op<"cumsum", [Pure, SameOperandsAndResultType,
                                        Slapo_Differentiable, Slapo_Shardable]> {
  let summary = "running sums along dim";
  let description = [{
    Element i along `dim` is the sum of the input's elements 0 to i, or with
    `reverse` of those from i to the last (the gradient of a cumsum, which
    PyTorch computes as a flipped cumsum). Each running sum accumulates in
    order, in the precision of the backend's sums.
  }];
  let arguments = (ins Slapo_NumericTensor:$input, I64Attr:$dim,
                       UnitAttr:$reverse);
  let results = (outs Slapo_NumericTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape and data movement.
//===----------------------------------------------------------------------===//

def Slapo_ReshapeOp : Slapo_Op<"reshape",
    [Pure, Slapo_Differentiable, Slapo_ShardableTakingPendingBiases]> {
  let summary = "same elements in row-major order, new static shape";
  let arguments = (ins Slapo_Tensor:$input);
  let results = (outs Slapo_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Slapo_PermuteOp : Slapo_Op<"permute", [Pure, Slapo_Differentiable,
                                           Slapo_Shardable]> {
  let summary = "result dim i is input dim permutation[i]";
  let arguments = (ins Slapo_Tensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Slapo_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Slapo_SliceOp : Slapo_Op<"slice", [Pure, Slapo_Differentiable,
                                       Slapo_Shardable]> {
  let summary = "input[start:end:step] along dim";
  let arguments = (ins Slapo_Tensor:$input, I64Attr:$dim, I64Attr:$start,
                       I64Attr:$end, I64Attr:$step);
  let results = (outs Slapo_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Slapo_ConcatOp : Slapo_Op<"concat", [Pure, Slapo_Differentiable,
                                         Slapo_Shardable]> {
  let summary = "joins tensors along dim";
  let arguments = (ins Variadic<Slapo_Tensor>:$inputs, I64Attr:$dim);
  let results = (outs Slapo_Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Slapo_BroadcastOp : Slapo_Op<"broadcast", [Pure, Slapo_Differentiable,
                                               Slapo_Shardable]> {
  let summary = "expands size-1 and leading dims to the result shape";
  let arguments = (ins Slapo_Tensor:$input);
  let results = (outs Slapo_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Collectives: every rank of the group runs the same op on tensors of the
// same types. They are not Pure: no rank may drop or merge one on its own.
//===----------------------------------------------------------------------===//

// Marks the ops that communicate within a process group (`group`).
def Slapo_Collective : NativeOpTrait<"Collective"> {
  let cppNamespace = "::slapo::OpTrait";
}

def Slapo_AllReduceOp : Slapo_Op<"all_reduce",
    [Slapo_Collective, DeclareOpInterfaceMethods<InferTypeOpInterface>,
     Slapo_Differentiable, Slapo_ShardableTakingPendingBiases]> {
  let summary = "sums tensors over a process group, all of them in one collective";
  let description = [{
    Result i is the sum of operand i over the ranks of `group` (with `mean`,
    divided by the group's size). Several operands form one bucket: the
    runtime reduces them with a single collective call.

    Tensor parallelism's partial sums become full values with it (Megatron's
    "g"): each rank's operand is one term of the value, so the gradient of
    every term is the result's gradient, unchanged.

    ```mlir
    %r:2 = slapo.all_reduce %a, %b <dp> mean : tensor<32x16xf32>, tensor<32xf32>
    ```
  }];
  let arguments = (ins Variadic<StaticShapeTensorOf<[F32]>>:$inputs,
                       Slapo_ProcessGroupAttr:$group, UnitAttr:$mean);
  let results = (outs Variadic<StaticShapeTensorOf<[F32]>>:$results);
  let assemblyFormat =
      "$inputs $group (`mean` $mean^)? attr-dict `:` type($inputs)";
  let hasVerifier = 1;
}

def Slapo_GradAllReduceOp : Slapo_Op<"grad_all_reduce",
    [Slapo_Collective, SameOperandsAndResultType, Slapo_Differentiable,
     Slapo_Shardable]> {
  let summary = "the identity, whose gradient is summed over a process group";
  let description = [{
    Megatron's "f": a replicated value entering tensor-parallel computation.
    Every rank uses its copy for its own shard, so each rank's gradient of it
    is one term of the whole; the backward all-reduces them. The result
    shares the operand's bytes.
  }];
  let arguments = (ins StaticShapeTensorOf<[F32]>:$input,
                       Slapo_ProcessGroupAttr:$group);
  let results = (outs StaticShapeTensorOf<[F32]>:$result);
  let assemblyFormat = "$input $group attr-dict `:` type($result)";
}

def Slapo_GroupRankOp : Slapo_Op<"group_rank", [Slapo_Collective, Pure]> {
  let summary = "this process's rank in a process group";
  let description = [{
    A tensor-parallel rank's block of a split dim starts at its rank times
    the block's size: the vocabulary-parallel embedding and cross-entropy
    offset their indices with it.
  }];
  let arguments = (ins Slapo_ProcessGroupAttr:$group);
  let results = (outs 0DTensorOf<[I64]>:$result);
  let assemblyFormat = "$group attr-dict `:` type($result)";
}

// Collectives that move blocks along one dim: rank r of the group holds
// block r of the full value.
class Slapo_BlockCollectiveOp<string mnemonic>
    : Slapo_Op<mnemonic, [Slapo_Collective, Slapo_Differentiable,
                          Slapo_Shardable]> {
  let arguments = (ins Slapo_Tensor:$input, Slapo_ProcessGroupAttr:$group,
                       I64Attr:$dim);
  let results = (outs Slapo_Tensor:$result);
  let assemblyFormat = "$input $group attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Slapo_AllGatherOp : Slapo_BlockCollectiveOp<"all_gather"> {
  let summary = "joins the group's blocks along dim, in rank order";
  let description = [{
    The result's dim `dim` is the group size times the operand's. Its
    gradient is the rank's block of the result's gradient (slapo.scatter).
  }];
}

def Slapo_ScatterOp : Slapo_BlockCollectiveOp<"scatter"> {
  let summary = "this rank's block along dim of a value every rank holds";
  let description = [{
    No communication: each rank keeps its block. The operand's dim `dim` is
    the group size times the result's. Its gradient is the all-gather of the
    blocks' gradients.
  }];
}

def Slapo_ReduceScatterOp : Slapo_BlockCollectiveOp<"reduce_scatter"> {
  let summary = "this rank's block along dim of the group's sum";
  let description = [{
    The operand's dim `dim` is the group size times the result's. Its
    gradient is the all-gather of the result's gradient.
  }];
}

//===----------------------------------------------------------------------===//
// Pipeline stages (slapo-cut-pipeline-stage, slapo-pipeline-rank).
//===----------------------------------------------------------------------===//

def Slapo_StageBoundaryOp : Slapo_Op<"stage_boundary",
    [SameOperandsAndResultType, Slapo_Differentiable, Slapo_Shardable]> {
  let summary = "a value that pipeline stage `from` passes to stage `to`";
  let description = [{
    The identity, marking where a value computed on one pipeline stage is
    used on the next: each stage's ops read only values of their own stage,
    boundaries and the step's inputs. Stages are adjacent (`to` is `from`
    plus or minus one): a value used further on crosses every stage between.
    The gradient of a forward boundary is the boundary that passes the
    result's gradient back (`from` and `to` swapped). It is not Pure: a
    boundary is a send on one stage and a receive on the other, and neither
    stage may drop it alone.

    ```mlir
    %h1 = slapo.stage_boundary %h from 0 to 1 {slapo.stage = 1 : i64} : tensor<2x16x32xf32>
    ```
  }];
  let arguments = (ins Slapo_Tensor:$input, I64Attr:$from, I64Attr:$to);
  let results = (outs Slapo_Tensor:$result);
  let assemblyFormat = "$input `from` $from `to` $to attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Slapo_StageSendOp : Slapo_Op<"stage_send"> {
  let summary = "sends a value to the rank of pipeline stage `to`";
  let description = [{
    One pipeline stage's side of a slapo.stage_boundary
    (slapo-pipeline-rank): the value leaves this stage's rank for the rank
    of stage `to` in the same data- and tensor-parallel position, which
    receives it with slapo.stage_recv, in the order of the sends.

    ```mlir
    slapo.stage_send %h to 1 : tensor<2x16x32xf32>
    ```
  }];
  let arguments = (ins Slapo_Tensor:$input, I64Attr:$to);
  let assemblyFormat = "$input `to` $to attr-dict `:` type($input)";
}

def Slapo_StageRecvOp : Slapo_Op<"stage_recv"> {
  let summary = "receives a value from the rank of pipeline stage `from`";
  let description = [{
    The other side of slapo.stage_send: the result is the value that the
    rank of stage `from` sent.

    ```mlir
    %h = slapo.stage_recv from 0 : tensor<2x16x32xf32>
    ```
  }];
  let arguments = (ins I64Attr:$from);
  let results = (outs Slapo_Tensor:$result);
  let assemblyFormat = "`from` $from attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Optimizer state and updates (built by slapo-optimizer).
//===----------------------------------------------------------------------===//

def Slapo_OptimizerStateOp : Slapo_Op<"optimizer_state",
    [Symbol, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a tensor of optimizer state belonging to one parameter";
  let description = [{
    AdamW's moments or SGD's momentum buffer of the parameter `of`: fp32 with
    the parameter's shape, zero before the first step, saved in checkpoints
    under its name (`<param>.exp_avg`, as PyTorch's optimizer state names).

    ```mlir
    slapo.optimizer_state @"fc1.weight.exp_avg" of @"fc1.weight" : tensor<32x16xf32>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, FlatSymbolRefAttr:$of,
                       Slapo_TypeAttrOf<StaticShapeTensorOf<[F32]>>:$type);
  let assemblyFormat = "$sym_name `of` $of `:` $type attr-dict";
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return getType().cast<::mlir::RankedTensorType>();
    }
  }];
}

def Slapo_ParamGradOp : Slapo_Op<"param_grad",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "marks the finished gradient of one trained parameter";
  let description = [{
    Says that `grad` is d(loss)/d(param), complete (before clipping): the
    point after backward where the rank program can read it (`--save-grads`,
    `slapoc --verify`) and where data parallelism reduces it across ranks.
    It has no effect on values, and is not Pure so that it stays. `grad` has
    the parameter's type, or bf16 for an f32 parameter (a bf16 product's
    gradient that only the update reads, slapo-propagate-casts): its values
    widened are the gradient, and the rank program writes them as f32.

    ```mlir
    slapo.param_grad @"fc1.weight", %g : tensor<32x16xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param,
                       StaticShapeTensorOf<[F32, BF16]>:$grad);
  let assemblyFormat = "$param `,` $grad attr-dict `:` type($grad)";
}

def Slapo_UpdateBufferOp : Slapo_Op<"update_buffer",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>, Slapo_Shardable]> {
  let summary = "writes a buffer's new value (model state the step updates)";
  let description = [{
    Gives the buffer `buffer` (a slapo.param marked `buffer`, never trained)
    the value `value` once the step is done: what the forward writes into
    model state in place, as BatchNorm's running statistics and
    num_batches_tracked. slapo-optimizer moves it after the parameter
    updates, so that every read of the buffer in the step sees its value
    from before the step. The new value is saved in checkpoints with the
    parameters. Not Pure, so that it stays.

    ```mlir
    slapo.update_buffer @"bn.running_mean", %m : tensor<16xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$buffer, Slapo_Tensor:$value);
  let assemblyFormat = "$buffer `,` $value attr-dict `:` type($value)";
}

// Updates write their parameter and state in place: they have no results and
// are not Pure, so they stay in program order after every read of the
// parameter they update.
/// An optimizer's update of one parameter in place. Its `grad` has the
/// parameter's type, or bf16 for an f32 parameter, widened as it is read (the
/// same values as a slapo.cast to f32 first); with `grad_scale` (0-d f32,
/// gradient clipping's coefficient) the update reads `grad * grad_scale`,
/// rounded to f32 as slapo.mul rounds it, without a pass of its own.
class Slapo_UpdateOp<string mnemonic>
    : Slapo_Op<mnemonic, [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let hasVerifier = 1;
}

def Slapo_SgdUpdateOp : Slapo_UpdateOp<"sgd_update"> {
  let summary = "torch.optim.SGD's update of one parameter";
  let description = [{
    `g = grad + weight_decay * param; buf = momentum * buf + g; param -= lr *
    buf` (without `momentum_buffer`: `param -= lr * g`). `lr` is 0-d f64.
  }];
  let arguments = (ins FlatSymbolRefAttr:$param,
                       StaticShapeTensorOf<[F32, BF16]>:$grad,
                       Slapo_F64Scalar:$lr,
                       Optional<Slapo_F32Scalar>:$grad_scale,
                       OptionalAttr<FlatSymbolRefAttr>:$momentum_buffer,
                       F64Attr:$momentum, F64Attr:$weight_decay);
  let assemblyFormat = "$param `,` $grad `,` $lr (`scaled` $grad_scale^)? "
                       "attr-dict `:` type($grad)";
}

def Slapo_AdamwUpdateOp : Slapo_UpdateOp<"adamw_update"> {
  let summary = "torch.optim.AdamW's update of one parameter";
  let description = [{
    With PyTorch's formulas and order of operations; `step` is the 1-based
    step number (0-d i64) for the bias corrections, `lr` is 0-d f64.
  }];
  let arguments = (ins FlatSymbolRefAttr:$param,
                       StaticShapeTensorOf<[F32, BF16]>:$grad,
                       Slapo_F64Scalar:$lr, Slapo_I64Scalar:$step,
                       Optional<Slapo_F32Scalar>:$grad_scale,
                       FlatSymbolRefAttr:$exp_avg, FlatSymbolRefAttr:$exp_avg_sq,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                       F64Attr:$weight_decay);
  let assemblyFormat = "$param `,` $grad `,` $lr `,` $step "
                       "(`scaled` $grad_scale^)? attr-dict `:` type($grad)";
}

#endif // SLAPO_OPS
