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
    names the op and its module path. The ops of the backward carry
    `slapo.phase = "backward"` and the `slapo.module` of the forward op
    whose gradient they compute.
  }];
  let constructor = "::slapo::createAutodiffPass()";
  let dependentDialects = ["::slapo::SlapoDialect",
                           "::mlir::func::FuncDialect"];
}

def CSE : Pass<"slapo-cse", "::mlir::ModuleOp"> {
  let summary = "common subexpression elimination blind to module paths";
  let description = [{
    MLIR's `cse`, except that ops that differ only in their `slapo.module`
    are merged, as ops that differ only in their locations are: a module
    path says where an op came from, not what it computes. The op kept keeps
    its own path.
  }];
}

def Decompose : Pass<"slapo-decompose", "::mlir::ModuleOp"> {
  let summary = "schedule primitive decompose(): a linear layer as product and bias add";
  let description = [{
    Each `slapo.linear` with a bias in the modules in `modules` (or their
    submodules) becomes a linear without bias followed by `slapo.add` of
    the bias, at the same location and module path. A selected module
    without such a linear is an error.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
  let options = [
    ListOption<"modules", "modules", "::slapo::ModelName", "module paths">,
  ];
}

def Replace : Pass<"slapo-replace", "::mlir::ModuleOp"> {
  let summary = "schedule primitive replace(kernel): a module's computation as one library kernel";
  let description = [{
    For each module in `modules`, finds in @forward the ops that `kernel`
    computes, checks that they compute exactly what the kernel computes
    (each kernel of the registry in Replace.cpp has a pattern), and
    replaces them by the kernel's op. Ops that differ from the pattern are
    an error that names the module, the schedule line (the primitive's
    location) and the first op that differs, rather than a kernel that
    computes something else.

    `flash_attention`: every slapo.softmax of the module over the last dim
    is the middle of an attention, matched outwards from it:
    `matmul(query, key^T)`, optionally divided or multiplied by a scalar
    constant (the scale), optionally `where(keep, scores, constant)` (a
    boolean mask: GPT-2's causal buffer), optionally `+ bias` (an additive
    mask computed from no parameter: BERT's padding mask), the softmax,
    optionally a slapo.dropout of the probabilities (train mode's attention
    dropout), and `matmul(probabilities, value)`, all of rank 4 ([batch,
    heads, seq, seq] scores), each intermediate read by the next op alone.
    They become one slapo.flash_attention, which keeps no [seq, seq] tensor
    for the backward; the dropout's p, stream and fork_rng become its own,
    and its kernels draw the mask that dropout would draw. Refused: a
    dropout of the scores (before the softmax), two dropouts of the
    probabilities (the kernel draws one mask).

    `fused_rmsnorm`: every slapo.rsqrt of the module is the middle of an
    RMSNorm (LLaMA's): `x * rsqrt(mean(x^2 or x * x, last dim, keepdim) +
    eps)` with a constant eps, optionally times a weight of the last dim's
    size; each intermediate read by the next op alone. They become one
    slapo.rms_norm.

    `cross_entropy`: every slapo.linear of the module (the LM head) gives
    logits that a slapo.cross_entropy (mean or sum) alone reads, through
    slices, reshapes and permutes that keep the classes last; its weight
    and bias are not sharded. The views move to the hidden rows, and the
    linear and the loss become one slapo.linear_cross_entropy, which never
    stores the [rows, classes] logits or their gradient.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
  let options = [
    ListOption<"modules", "modules", "::slapo::ModelName", "module paths">,
    Option<"kernel", "kernel", "std::string", "\"flash_attention\"",
           "the kernel's name (getReplaceKernels() lists them)">,
  ];
}

def Shard : Pass<"slapo-shard", "::mlir::ModuleOp"> {
  let summary = "schedule primitive shard(param, axis): a tensor-parallel parameter";
  let description = [{
    Marks the parameter `param` of each module in `modules` (the state_dict
    name `<module>.<param>`, or an alias of it) as split along `axis` over
    the tensor-parallel group: `shard_axis` on its `slapo.param`. Types are
    left as they are: slapo-propagate-sharding gives every value its shape
    on one rank. A parameter split along two axes is an error.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
  let options = [
    ListOption<"modules", "modules", "::slapo::ModelName", "module paths">,
    Option<"param", "param", "::slapo::ModelName", "\"weight\"",
           "the parameter's name on each module">,
    Option<"axis", "axis", "int64_t", "0", "the dim to split">,
  ];
}

def Sync : Pass<"slapo-sync", "::mlir::ModuleOp"> {
  let summary = "schedule primitive sync(mode, op[, axis]): a collective at a module's boundary";
  let description = [{
    For each module in `modules` (the ops of @forward at that module path or
    below), inserts a collective over the tensor-parallel group, as Slapo
    means it:

    - `fwd_pre`: on the module's input, in the forward;
    - `fwd_post`: on the module's output, in the forward;
    - `bwd_post`: on the gradient of the module's input, in the backward
      (only `all_reduce`: slapo.grad_all_reduce on the input).

    with `op` one of all_reduce (slapo.all_reduce), all_gather, scatter and
    reduce_scatter (along `axis`). The module's input is the one value its
    ops use that an op outside it computes (parameters and constants do not
    count); its output is the one value it computes that an op outside it
    uses; for `bwd_post`, inputs without a gradient (masks, rotary tables,
    token ids) do not count. A module called several times (a shared layer)
    is synced at each call: its ops fall into calls, the groups linked by
    the values they pass each other or take together from outside, and
    each call needs one input (or output). A module or call with several is
    an error that names them. Types
    are left as they are: slapo-propagate-sharding gives the collectives
    their shapes and checks that each one fits the sharding it meets.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
  let options = [
    ListOption<"modules", "modules", "::slapo::ModelName", "module paths">,
    Option<"mode", "mode", "std::string", "\"fwd_post\"",
           "fwd_pre, fwd_post or bwd_post">,
    Option<"op", "op", "std::string", "\"all_reduce\"",
           "all_reduce, all_gather, scatter or reduce_scatter">,
    Option<"axis", "axis", "int64_t", "-1",
           "the dim of all_gather, scatter and reduce_scatter">,
  ];
}

def ForkRng : Pass<"slapo-fork-rng", "::mlir::ModuleOp"> {
  let summary = "schedule primitive fork_rng(): each tp rank draws its own dropout masks in a module";
  let description = [{
    Marks every slapo.dropout of @forward at the path of a module in
    `modules`, or below it, with `fork_rng`: each tensor-parallel rank then
    draws its own masks (its tp rank is in the mask's stream), as Slapo's
    fork_rng() and Megatron's model-parallel RNG region mean it for
    activations split over the ranks. Without it the ranks draw the masks
    of the whole tensor, each its part (see slapo.dropout).
    slapo-propagate-sharding checks that a forked dropout's operand is
    split: forked masks of a replicated value would make the ranks' copies
    differ. A module without dropout (an eval-mode export has none) gets a
    warning: fork_rng() changes nothing there.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
  let options = [
    ListOption<"modules", "modules", "::slapo::ModelName", "module paths">,
  ];
}

def PropagateSharding : Pass<"slapo-propagate-sharding", "::mlir::ModuleOp"> {
  let summary = "gives every value of @forward its tensor-parallel sharding and its shape on one rank";
  let description = [{
    Follows the shardings of the parameters (slapo-shard) through @forward
    in program order: every value is replicated, split along a dim (the
    dim is `chunks` equal chunks, each split over the `tp` ranks), or a
    partial sum (each rank holds one term of it). Each op has a rule: a
    column-split weight makes its matmul's result split, a row-split one
    makes it a partial sum, elementwise ops, reshapes (splitting or merging
    the split dim: the heads of attention follow the split hidden size),
    permutes, slices, reductions, softmax and layer norm carry splits of
    other dims through, and the collectives of slapo-sync change them
    (all_reduce: partial to replicated, all_gather: split to replicated,
    scatter: replicated to split, reduce_scatter: partial to split). Then
    every value gets its shape on one rank (the split dim divided by `tp`),
    parameters too.

    Everything that would compute a wrong value is an error at the op, with
    its module path and the sync that fixes it: a partial sum reaching an op
    that needs the whole value (a nonlinear op, a norm, the loss); a split
    tensor meeting a replicated one along the split dim; a collective that
    does not fit its operand (all_reduce of a split tensor, all_gather of a
    partial sum or along another dim); a replicated value that needs a
    gradient entering split computation without `sync("bwd_post",
    "all_reduce")` (its gradient would stay a partial sum on each rank);
    a dropout marked by fork_rng() (slapo-fork-rng) whose operand is not
    split (its ranks' masks would differ where the values must not).

    A dropout of a split value records the split (`shard_axis`,
    `shard_chunks`), so that each rank draws its part of the whole value's
    mask.

    A bias added to a partial sum is added once, after the all_reduce that
    completes the sum. A slice of a split dim that takes whole chunks (a
    fused q/k/v projection split into q, k and v) makes the parameters it
    comes from sharded per chunk (`shard_chunks`), so that each rank holds
    its heads of each; a slice that cannot be aligned is an error.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
  let options = [
    Option<"tp", "tp", "int64_t", "2", "ranks of the tensor-parallel group">,
  ];
}

def CutPipelineStage : Pass<"slapo-cut-pipeline-stage", "::mlir::ModuleOp"> {
  let summary = "schedule primitive cut_pipeline_stage(): pipeline stages of @forward";
  let description = [{
    Each module of `modules` ends a pipeline stage (Slapo's meaning): the
    ops of @forward after its last op run on the next stage. Every op gets
    `slapo.stage = k`, its stage, and every value that an op of a later
    stage uses passes through `slapo.stage_boundary` ops, one per stage it
    enters (stages pass values to the next stage only), placed at the start
    of the stage that receives it. The step's inputs need none (every stage
    reads its own), nor do parameter reads and constants: a stage that uses
    one reads it itself.

    Errors, at the cut: a module with no ops in @forward, a cut inside a
    module (ops of another module, not one containing the cut one, run both
    before and after it), a stage left without computation (two cuts at
    one place, a cut after the last op), and a trainable parameter read by
    two stages (tied weights, as GPT-2's embedding and LM head: their
    gradients would have to be summed between the stages).

    The pipeline runs at the pace of its most expensive stage. The pass
    estimates each stage's cost per microbatch, the FLOPs of its
    contractions' forward and backward (FlopCountOpInterface, on @forward's
    shapes: before tensor parallelism divides them), and records it with
    the best-balanced cuts in `slapo.pipeline_balance` on the module: `cuts`
    and `stage_flops`, `balanced_cuts` and `balanced_stage_flops` (the cuts
    after modules, among all that are not inside another module, whose most
    expensive stage costs least). It warns at a cut of the most expensive
    stage when that stage costs more than 1.2x the cheapest, naming the
    balanced cuts if they are better.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
  let options = [
    ListOption<"modules", "modules", "::slapo::ModelName",
               "the modules after which a stage ends">,
  ];
}

def PipelineRank : Pass<"slapo-pipeline-rank", "::mlir::ModuleOp"> {
  let summary = "the part of @forward_backward that the rank of one pipeline stage runs";
  let description = [{
    On `@forward_backward` (slapo-autodiff) of a forward cut into stages
    (slapo-cut-pipeline-stage), keeps the ops of stage `stage` and turns
    each `slapo.stage_boundary` this stage is a side of into its half: a
    boundary from this stage into another becomes `slapo.stage_send`, one
    from another into this stage `slapo.stage_recv`, in place, so that both
    ranks meet their messages in program order (the forward's values go
    down the stages, their gradients come back up). Ops without a stage
    (constants, and what only the inputs and constants compute, such as
    slices of the inputs, whose stage the pass takes off) stay where the
    kept ops use them; ops
    built after the cut without one (slapo-microbatch's sums) take the
    stage of the values they read.

    The function returns the loss, which the last stage sends to every
    other stage (right after computing it; with microbatches, once its step
    is done), and the gradients of the parameters
    this stage's ops read. A parameter read on the first and the last stage
    (tied, as GPT-2's embedding and LM head) has a copy on both: each sums
    its part of the gradient with the other's (`slapo.all_reduce <tied>`,
    Megatron's embedding group), so that both copies train alike, and the
    last stage's copy is marked `slapo.tied_copy` for gradient norms. @forward
    and the parameters the stage does not read are erased.

    With `dp` > 1, a stage that receives a loss over counted targets (a
    mean-reduced cross-entropy) counts them itself, from the labels every
    stage reads, for slapo-data-parallel to weigh its ranks by, as the last
    stage does.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
  let options = [
    Option<"stage", "stage", "int64_t", "0", "the pipeline stage to keep">,
    Option<"dp", "dp", "int64_t", "1",
           "the data-parallel ranks of each stage">,
  ];
}

def PipelineSchedule : Pass<"slapo-pipeline-schedule", "::mlir::ModuleOp"> {
  let summary = "orders one pipeline stage's microbatches as 1F1B";
  let description = [{
    On `@forward_backward` after slapo-pipeline-rank, whose ops carry the
    microbatch they compute (`slapo.microbatch`, slapo-microbatch), moves
    the microbatches' forwards and backwards into the one-forward-one-
    backward order of stage `stage` of `stages`: the forwards of the first
    w = min(stages - stage - 1, m) microbatches (warm-up), then the forward
    of microbatch i + w and the backward of microbatch i for each i (steady
    state), then the last w backwards (cool-down). A microbatch's forward
    and backward ops keep their order, as do the forwards among themselves
    and the backwards among themselves. Without microbatches (m = 1) it
    changes nothing.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
  let options = [
    Option<"stage", "stage", "int64_t", "0", "the stage whose part this is">,
    Option<"stages", "stages", "int64_t", "1", "the pipeline's stages">,
  ];
}

def DataParallel : Pass<"slapo-data-parallel", "::mlir::ModuleOp"> {
  let summary = "averages the gradients and the loss over the data-parallel group";
  let description = [{
    Data parallelism gives every rank of a dp group its own rows of the
    global batch (dim 0 of every input). In `@forward_backward`
    (slapo-autodiff), each rank computed the loss and the gradients of its
    rows; this pass makes every returned gradient the mean over the dp group
    with `slapo.all_reduce ... <dp> mean`, and the returned loss too, so that
    every rank reports and applies the global batch's values. For a loss that
    is a mean over equally many rows per rank, the mean of the ranks' losses
    and gradients is exactly the global batch's. A mean over the targets a
    cross-entropy does not ignore (its ignore_index pads labels) counts
    different numbers of targets on different ranks: each rank first
    multiplies its loss and gradients by its count over the group's mean
    count (one more all_reduce, of a scalar, after the loss), or by 0 where
    it counts none, so that the average is the mean over all counted
    targets, as on one device.

    Gradients are reduced in buckets of at least `bucket-bytes` (the last
    one may be smaller), taken in the order the backward finishes them: each
    bucket is one collective, placed right after the op that computes its
    last gradient. The ops it adds carry `slapo.phase = "backward"`.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
  let options = [
    Option<"bucketBytes", "bucket-bytes", "int64_t", "25 * 1024 * 1024",
           "bytes of gradients to reduce together (PyTorch DDP's 25 MiB)">,
  ];
}

def Microbatch : Pass<"slapo-microbatch", "::mlir::ModuleOp"> {
  let summary = "train(microbatches=m): the step accumulates the gradients of m microbatches";
  let description = [{
    Runs on `@forward_backward` (slapo-autodiff) as built for one
    microbatch, that is with every input's dim 0 (the batch) the rank's
    batch divided by `microbatches`. The function then takes the rank's
    whole batch: for each microbatch in turn it slices rows [i*b, (i+1)*b)
    of every input and runs a copy of the forward and backward on them, and
    adds its loss and gradients to the sums of the microbatches before it.
    The returned loss and gradients are the whole batch's, up to rounding:
    for a loss computed by a mean-reduced cross-entropy, each microbatch's
    are weighted by its number of targets not ignored (a microbatch whose
    targets are all ignored adds nothing) and the sums divided by the
    batch's; for a sum-reduced cross-entropy or a sum
    they are the sums; for any other loss, taken for a mean over equally
    many rows per microbatch (as data parallelism takes its ranks' shares),
    the sums divided by `microbatches`. Microbatch i's activations die with
    its backward, before microbatch i+1's forward starts, so the plan keeps
    one microbatch's activations at a time.

    Dropout is refused: its masks are drawn for the tensor one device
    computes for the whole batch, and a microbatch's copy would draw
    another block of it. The ops it adds carry `slapo.phase = "backward"`.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
  let options = [
    Option<"microbatches", "microbatches", "int64_t", "1",
           "microbatches per step (1: the pass changes nothing)">,
  ];
}

def MixedPrecision : Pass<"slapo-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "precision bf16: contractions and convolutions in bf16, accumulating in f32";
  let description = [{
    Every f32 `slapo.linear`, `slapo.matmul` and `slapo.conv2d` of @forward
    takes bf16 operands (slapo.cast of its f32 ones) and gives its f32 sums,
    as torch.autocast(dtype=bfloat16) computes them but without rounding the
    result: a linear's or convolution's bias is added in f32. Everything
    else stays f32: parameters (the master weights), their gradients and the
    optimizer state, norms (batch_norm included), softmax, pooling and the
    loss. The gradient rules of the contractions take the gradient in bf16
    as well, so the backward's products (the convolutions' two gradients
    too) run in bf16. An f32 `slapo.flash_attention` runs in bf16 as a whole,
    as torch.autocast runs scaled_dot_product_attention: bf16 query, key,
    value and bias (the keep mask stays bool), bf16 result cast to f32 for
    its users, the log-sum-exp f32 as it was (the compute type, as PyTorch
    keeps it); its gradient runs in bf16 too. On the GPU
    that is what cuDNN's fused attention runs.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
}

def Optimizer : Pass<"slapo-optimizer", "::mlir::ModuleOp"> {
  let summary = "builds @train_step: forward, backward and the optimizer update";
  let description = [{
    From `@forward_backward` (slapo-autodiff), adds `func.func @train_step`
    with the forward's arguments followed by `%step` (the 1-based step number)
    and `%total_steps` (the run's last step), both `tensor<i64>`. It returns
    the loss and the learning rate the step used (`tensor<f64>`), and updates
    every trained parameter in place with `slapo.sgd_update` or
    `slapo.adamw_update`; the optimizer's state is declared with
    `slapo.optimizer_state` (`<param>.exp_avg`, `<param>.exp_avg_sq`,
    `<param>.momentum_buffer`). Every `slapo.dropout` of the step, forward
    and backward, gets `%step` as its step operand, so that it draws this
    step's mask. Formulas are PyTorch's:

    - gradient clipping (`grad-clip` > 0) as `clip_grad_norm_`: every
      gradient is scaled by `min(1, grad-clip / (norm + 1e-6))`, where `norm`
      is the 2-norm of all gradients together: with `pp` pipeline stages,
      each stage's squares are summed over the pipeline group, and a copy of
      a tied parameter marked `slapo.tied_copy` is not counted again;
    - learning rate `constant`, or `warmup_cosine` as Hugging Face's
      `get_cosine_schedule_with_warmup`: with c = step - 1, `lr * c / W` for
      c < W warmup steps, then `lr * max(0, (1 + cos(pi * (c - W) / max(1,
      total_steps - W))) / 2)`.

    The ops it adds carry `slapo.phase = "optimizer"`; @forward_backward is
    removed (it is inlined into @train_step).
  }];
  let dependentDialects = ["::slapo::SlapoDialect",
                           "::mlir::func::FuncDialect"];
  let options = [
    Option<"optimizer", "optimizer", "std::string", "\"adamw\"",
           "adamw or sgd">,
    Option<"lr", "lr", "::slapo::ExactDouble", "1e-3",
           "peak learning rate">,
    Option<"beta1", "beta1", "::slapo::ExactDouble", "0.9",
           "AdamW's beta1">,
    Option<"beta2", "beta2", "::slapo::ExactDouble", "0.999",
           "AdamW's beta2">,
    Option<"eps", "eps", "::slapo::ExactDouble", "1e-8",
           "AdamW's epsilon">,
    Option<"weightDecay", "weight-decay", "::slapo::ExactDouble", "0",
           "weight decay">,
    Option<"momentum", "momentum", "::slapo::ExactDouble", "0",
           "SGD momentum">,
    Option<"gradClip", "grad-clip", "::slapo::ExactDouble", "0",
           "largest global gradient norm; 0 does not clip">,
    Option<"lrSchedule", "lr-schedule", "std::string", "\"constant\"",
           "constant or warmup_cosine">,
    Option<"warmupSteps", "warmup-steps", "int64_t", "0",
           "warmup steps of warmup_cosine">,
    Option<"pp", "pp", "int64_t", "1",
           "pipeline stages: this stage's gradients are one part of the "
           "norm">,
  ];
}

def RecognizeGelu : Pass<"slapo-recognize-gelu", "::mlir::ModuleOp"> {
  let summary = "the tanh gelu written with elementwise ops becomes one slapo.gelu";
  let description = [{
    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`, as Hugging
    Face's GPT-2 spells its activation (NewGELUActivation) and as it imports
    (slapo.mul, slapo.add, slapo.pow and slapo.tanh with scalar
    constants, operands of each product and sum in either order, every value
    of x's type), becomes `slapo.gelu %x <tanh>`: one pass forward and one
    (slapo.gelu_grad) backward instead of eight and more, with only x kept
    for the backward. The ops of the chain that nothing else reads are
    erased. Runs first, on the imported model.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
}

def RecognizeRotary : Pass<"slapo-recognize-rotary", "::mlir::ModuleOp"> {
  let summary = "a rotary position embedding written out becomes one slapo.rotary_embedding";
  let description = [{
    `x * cos + rotate_half(x) * sin`, rotate_half(x) = `cat(-x[..., D/2:],
    x[..., :D/2])` over the last dim, as Hugging Face's LLaMA spells
    apply_rotary_pos_emb and as it imports (slapo.slice, slapo.neg,
    slapo.concat, slapo.mul and slapo.add, each product's and the sum's
    operands in either order, every value of x's type; cos and sin
    broadcasting to it with its last dim, computed from no parameter),
    becomes `slapo.rotary_embedding %x, %cos, %sin`: one pass forward and
    one backward instead of six and more, the same products and sum. The
    ops of the chain that nothing else reads are erased. Runs first, with
    slapo-recognize-gelu, on the imported model.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
}

def PropagateCasts : Pass<"slapo-propagate-casts", "::mlir::ModuleOp"> {
  let summary = "narrowing casts before layout ops, widening casts after them, round trips removed";
  let description = [{
    A `slapo.cast` to a type that its input's type holds exactly (f32 to
    bf16) moves before the reshapes, permutes and broadcasts that alone
    produce its input (a reshape that others read too is cloned), and
    before slices when every slice of the tensor feeds only such casts and
    the slices take all its elements (the tensor is cast once). A cast to a
    type that holds its input's exactly (bf16 to f32) moves after the
    reshape, permute or slice that alone reads it, and after a concat of
    such casts only; a `slapo.sum` that reads it, unless a row reduction of
    slapo-fuse-elementwise's loops (along the last dim, keepdim), sums its
    input into the wide type instead, and a norm's gradient
    (`slapo.layer_norm_grad`, `slapo.rms_norm_grad`) reads its input as its
    `grad` and widens it itself, as an optimizer's update
    (`slapo.adamw_update`, `slapo.sgd_update`) and `slapo.param_grad` read
    a bf16 gradient of an f32 parameter (the cast stays for other readers:
    clipping's squares). Narrowing casts that alone read a norm's
    result (`slapo.layer_norm`, `slapo.rms_norm`) become its result type:
    the norm rounds its rows once. A narrowing cast of a widening cast's
    result is its input: both go where nothing else reads the widened
    tensor. Layout ops then copy bf16 rather than f32, casts of mixed
    precision meet the elementwise chains that compute their inputs (for
    slapo-fuse-elementwise) and the bf16 operands of slapo-fold-permutes'
    matmuls, and attention's bf16 results reach the next product without a
    round trip. Exact: the same bits are computed. Runs after
    slapo-autodiff and slapo-optimizer, before slapo-fold-permutes; a cast
    moves only next to an op of the same phase, microbatch, pipeline stage
    and recomputation.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
}

def FoldPermutes : Pass<"slapo-fold-permutes", "::mlir::ModuleOp"> {
  let summary = "matmuls read and write permuted tensors in place of slapo.permute copies";
  let description = [{
    A `slapo.permute` (or a chain of them) whose result a `slapo.matmul`
    reads becomes the matmul's `lhs_permutation` or `rhs_permutation`, the
    matmul reading the permute's input; a permute that is the only user of a
    matmul's result becomes its `result_permutation`, the matmul writing the
    permuted tensor. A permutation is folded only where the matrices keep
    dense rows or columns (the stored innermost dim is one of the tensor's
    last two dims), as oneDNN's fast kernels need; a result stored with the
    product's columns as its rows is computed as the transposed product,
    rhs^T lhs^T (mixed precision's bf16 casts of the products' operands are
    moved before the permutes by slapo-propagate-casts). Permutes left without
    users are erased, so the transposes of the contractions' gradient rules
    and attention's head splits and merges cost no copy. Likewise the
    flash attentions (and their gradients) that read their query, key and
    value through head swaps (permutes [0, 2, 1, 3] of [B, H, T, D]) and
    whose results only head swaps read become `bshd`: they read and write
    the token-major tensors on the other side of the swaps. Attentions that
    share a tensor change together or not at all (a gradient reads its
    forward's result), so no swap is ever added. Runs on every function,
    after slapo-autodiff (folded matmuls have no gradient rule) and before
    slapo-plan-memory.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
}

def PackQkv : Pass<"slapo-pack-qkv", "::mlir::ModuleOp"> {
  let summary = "token-major flash attentions read query, key and value from their fused projection";
  let description = [{
    A `bshd` slapo.flash_attention whose query, key and value are the
    thirds of one [B, T, 3C] tensor along its last dim (three slices, each
    reshaped to the same [B, T, H, D]: GPT-2's c_attn output split) reads
    that tensor viewed [B, T, 3H, D] instead, `packed_qkv`, and its
    gradient, where the concat of its three gradients (reshaped back) alone
    reads them, writes one [B, T, 3H, D] gradient in their place: the
    slices and the concat, each a copy of the projection's output or its
    gradient, are gone. Runs after slapo-fold-permutes (which makes the
    attentions token-major) and before slapo-checkpoint and
    slapo-plan-memory.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
}

def Checkpoint : Pass<"slapo-checkpoint", "::mlir::ModuleOp"> {
  let summary = "schedule primitive checkpoint(): modules whose forward the backward recomputes";
  let description = [{
    Activation checkpointing on @train_step (after slapo-optimizer, before
    slapo-plan-memory). For each module of `modules` (and its submodules),
    the forward ops whose results the module's own backward reads, with the
    forward ops they depend on, are cloned just before the first backward op
    of the module that reads one of them; the module's backward reads the
    clones, so the originals die in the forward and the plan reuses their
    bytes. What the module reads from outside (its inputs, parameters,
    constants) is kept, as are the values other modules' backward reads (the
    module's output is the next module's input). Clones get the phase of
    their first reader and `slapo.recomputed`. Dropouts draw the same masks
    again (masks are counter-based) and collectives are issued again, as
    Megatron does, so the step computes bit for bit what it computed before.

    With microbatches (`slapo.microbatch`, slapo-microbatch), each
    microbatch's backward of the module recomputes that microbatch's forward
    from its own values, before its own first reader; what serves every
    microbatch (an op of no microbatch) is kept. On a pipeline stage
    (slapo-pipeline-rank), a module none of whose ops is this stage's is
    left to its stage, and a value received from another stage
    (`slapo.stage_recv`) is kept: it is sent once.

    With `memory-budget` (bytes, > 0), modules of `candidates` are added,
    cheapest first (matmul FLOPs recomputed per byte of activations freed),
    the fewest that make the planned arena fit; if checkpointing all of them
    does not, it is an error giving the smallest arena reachable.

    The module gets `slapo.recomputation`: `modules` (every module
    checkpointed), `matmul_flops` (the matmul FLOPs recomputed per step),
    `activation_bytes_not_kept` (the forward results the modules' backward
    reads, no longer kept from the forward to it), `arena_bytes_without`
    (the arena without checkpointing), and with a budget `budget` and
    `chosen` (the candidates it chose).

    Errors: a module that computes nothing in the forward, and one that
    computes the forward's result (the loss: its backward follows its
    forward at once, so there is nothing to free).
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
  let options = [
    ListOption<"modules", "modules", "::slapo::ModelName", "module paths">,
    Option<"memoryBudget", "memory-budget", "int64_t", "0",
           "the planned arena's limit in bytes; 0: none">,
    ListOption<"candidates", "candidates", "::slapo::ModelName",
               "modules the budget may checkpoint">,
  ];
}

def FoldLogitsSlice : Pass<"slapo-fold-logits-slice", "::mlir::ModuleOp"> {
  let summary = "a cross entropy of a slice of the logits as the loss of all of them with the other rows' targets ignored";
  let description = [{
    `slapo.cross_entropy` (reduction mean or sum) of the rows a
    `slapo.slice` keeps (along a dim other than the classes, through
    reshapes that keep each row of classes whole), each value read by the
    next op alone, becomes the cross entropy of the slice's input, its
    targets padded with `ignore_index` where the slice drops rows: the
    shifted loss of a causal LM, `logits[:, :-1]` against `labels[:, 1:]`,
    reads the logits where they are instead of a copy, and its gradient is
    written whole instead of joined to zeros by a concat. The same loss (an
    ignored row adds 0 to the sum and is not counted by the mean) and the
    same gradient (an ignored row's is zero). Runs after the schedule's
    primitives (a `replace("cross_entropy")` loss slices the hidden rows
    instead, and a vocabulary-parallel one is lowered), before
    slapo-mixed-precision and slapo-autodiff.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
}

def FoldAddends : Pass<"slapo-fold-addends", "::mlir::ModuleOp"> {
  let summary = "gradient sums written by the op that computes one of their terms";
  let description = [{
    A `slapo.add` of a value that an AddendOpInterface op (a norm's
    gradient) computes for it alone, and of another value of the same type
    computed before that op, in the same phase and microbatch, becomes the
    op's addend: the op writes the sum as it writes its result (the bits of
    the add), and the add, a pass over memory of its own, is gone. In a
    transformer's backward these are the residual streams' gradients: the
    norm's input gradient plus the gradient through the residual
    connection. Runs on every function, after slapo-autodiff, under
    train(fusion="auto"): fusion="none" keeps one kernel per op.
  }];
}

def FuseElementwise : Pass<"slapo-fuse-elementwise", "::mlir::ModuleOp"> {
  let summary = "fusion: chains of elementwise ops of @train_step as slapo.fused groups";
  let description = [{
    Runs on the training step (after slapo-optimizer and slapo-checkpoint,
    before slapo-plan-memory, so that the values a group keeps to itself get
    no bytes). In program order, each FusibleElementwise op of `modules`
    (every module if none is given) with f32 or f64 elements joins the group
    of the latest of its operands' producers that is one: of the same shape
    (the loop's), phase and recomputation, its operands broadcasting to that
    shape as one block of its dims (a bias row, a column, a scalar), and
    only if no op outside the group that reads a value of the group comes
    before it. Groups of two ops or more become a `slapo.fused` at the
    place of their last op; the values read outside a group are its
    results.

    So a group never spans an op that is not fusible: a reduction or a
    collective between two elementwise ops reads the first, before the
    second, and keeps them apart. The group's module path is the longest
    one that holds all of its ops; its location fuses theirs. A dropout of
    the step (with its step number) joins a group where its tensor is not
    split over tp ranks: the loop draws its mask from the element's index.
    Without a kind, a bias add (a row of the last dim added to a product)
    that only a reshape keeping the last dim reads moves after it, where a
    fusible op reads the reshape (HF's Conv1D's [B*T, N] viewed as [B, T,
    N] for the gelu or the residual add), so that it joins that op's group.

    With a `kind` (schedule: `fuse("bias_gelu")`), each module must compute
    the kind's pattern (the registry in FusionKinds.cpp), checked on its
    forward ops; ops that differ are an error at the primitive's schedule
    line naming the module, with a note at the first op that differs. The
    kind prepares the matched ops and the groups hold only them and the
    elementwise ops of their gradients (the backward ops at the same
    location and module path), grouped as above; each group records the
    kind (`kind` of slapo.fused). A module without forward ops in the step
    (one of another pipeline stage) has nothing to fuse.

    `bias_gelu`: every gelu of the module reads a linear layer with a bias
    (slapo.linear with a bias, or a product plus a bias row: HF's Conv1D),
    optionally through a reshape that keeps the last dim. The linear is
    split into its product and the bias add, placed after the reshape, so
    that the add and the gelu are one group; the backward adds the bias
    again in front of gelu's gradient (Megatron's bias_gelu), so that its
    group reads the product and the forward's group writes only the gelu.

    `bias_dropout_add`: every dropout of the module that reads a linear
    layer with a bias (as above) is read in its forward by one add of its
    shape in the module, the residual add (other dropouts, of attention
    probabilities, are not the pattern's; the module has at least one). The
    bias is split off as for bias_gelu; the bias add, the dropout and the
    residual add are one group.

    `silu_mul`: every silu of the module is read in its forward by one
    product alone, `silu(gate) * up` of one shape (LLaMA's MLP). The silu
    and the product are one group; the backward computes the silu again
    where the product's gradient reads it, so that the forward's group
    writes only the product.
  }];
  let dependentDialects = ["::slapo::SlapoDialect"];
  let options = [
    ListOption<"modules", "modules", "::slapo::ModelName",
               "module paths whose ops are fused; none: every module">,
    Option<"kind", "kind", "std::string", "\"\"",
           "a named kind whose pattern the modules must compute "
           "(getFuseKinds() lists them); empty: every elementwise chain">,
  ];
}

def PlanMemory : Pass<"slapo-plan-memory", "::mlir::ModuleOp"> {
  let summary = "places every tensor of @train_step at an offset of one arena";
  let description = [{
    Persistent tensors come first, in this order, each for the whole run:
    parameters and buffers (`slapo.offset` on each `slapo.param`), optimizer
    state (on each `slapo.optimizer_state`), @train_step's arguments (inputs
    and step counters, `slapo.offset` argument attributes) and constants.
    Every other value lives from the op that defines it to its last use (the
    loss and learning rate, which @train_step returns, to the end) and is
    placed after them, greedily by decreasing size at the lowest offset where
    no value live at the same time sits. `slapo.get_param` and `slapo.reshape`
    results share their source's bytes. Offsets are 64-byte aligned; each op
    gets `slapo.offsets`, one per result. An op whose kernel computes in a
    workspace (WorkspaceOpInterface) gets one more buffer of its bytes, live
    during the op only and placed as the values are, and `slapo.workspace`
    = [offset, bytes].

    The module gets `slapo.memory`: the arena's size and the planned peak by
    category in bytes: weights, optimizer_state, inputs, constants, and, at
    the op where the transient values peak, gradients (the values `slapo.param_grad` marks),
    activations (forward values kept for the backward), temporaries and
    workspaces.
  }];
  let constructor = "::slapo::createPlanMemoryPass()";
}

#endif // SLAPO_TRANSFORMS_PASSES
