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
    `slapo.phase = "backward"`.
  }];
  let constructor = "::slapo::createAutodiffPass()";
  let dependentDialects = ["::slapo::SlapoDialect",
                           "::mlir::func::FuncDialect"];
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
    `<param>.momentum_buffer`). Formulas are PyTorch's:

    - gradient clipping (`grad-clip` > 0) as `clip_grad_norm_`: every
      gradient is scaled by `min(1, grad-clip / (norm + 1e-6))`, where `norm`
      is the 2-norm of all gradients together;
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
    Option<"lr", "lr", "double", "1e-3", "peak learning rate">,
    Option<"beta1", "beta1", "double", "0.9", "AdamW's beta1">,
    Option<"beta2", "beta2", "double", "0.999", "AdamW's beta2">,
    Option<"eps", "eps", "double", "1e-8", "AdamW's epsilon">,
    Option<"weightDecay", "weight-decay", "double", "0", "weight decay">,
    Option<"momentum", "momentum", "double", "0", "SGD momentum">,
    Option<"gradClip", "grad-clip", "double", "0",
           "largest global gradient norm; 0 does not clip">,
    Option<"lrSchedule", "lr-schedule", "std::string", "\"constant\"",
           "constant or warmup_cosine">,
    Option<"warmupSteps", "warmup-steps", "int64_t", "0",
           "warmup steps of warmup_cosine">,
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
    gets `slapo.offsets`, one per result.

    The module gets `slapo.memory`: the arena's size and the planned peak by
    category in bytes: weights, optimizer_state, inputs, constants, and, at
    the op where the transient values peak, gradients (the values `slapo.param_grad` marks),
    activations (forward values kept for the backward) and temporaries.
  }];
  let constructor = "::slapo::createPlanMemoryPass()";
}

#endif // SLAPO_TRANSFORMS_PASSES
