// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=adamw lr=0.01 weight-decay=0.1 beta1=0.8" %s | FileCheck %s --check-prefix=ADAMW
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=sgd momentum=0.9 lr=0.5 grad-clip=2.0 lr-schedule=warmup_cosine warmup-steps=3" %s | FileCheck %s --check-prefix=SGD
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=sgd lr=0.5" %s | FileCheck %s --check-prefix=PLAIN

// A linear layer summed to a loss; the optimizer turns @forward_backward into
// @train_step(inputs..., step, total_steps) -> (loss, lr).
module {
  slapo.param @w : tensor<3x4xf32>
  slapo.param @b : tensor<3xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<3x4xf32>
    %b = slapo.get_param @b : tensor<3xf32>
    %y = slapo.linear %x, %w, %b : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %l = slapo.sum %y {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// AdamW: two fp32 moments per parameter, named as PyTorch's state, declared
// after their parameter; one update per parameter with the unclipped
// gradient and the constant learning rate.
// ADAMW: slapo.param @w : tensor<3x4xf32>
// ADAMW-NEXT: slapo.optimizer_state @w.exp_avg of @w : tensor<3x4xf32>
// ADAMW-NEXT: slapo.optimizer_state @w.exp_avg_sq of @w : tensor<3x4xf32>
// ADAMW-NEXT: slapo.param @b : tensor<3xf32>
// ADAMW-NEXT: slapo.optimizer_state @b.exp_avg of @b
// ADAMW-NEXT: slapo.optimizer_state @b.exp_avg_sq of @b
// ADAMW-NOT: func.func @forward_backward
// ADAMW: func.func @train_step(%{{.*}}: tensor<2x4xf32> {slapo.name = "x"}, %[[STEP:.*]]: tensor<i64> {slapo.name = "step"}, %{{.*}}: tensor<i64> {slapo.name = "total_steps"}) -> (tensor<f32>, tensor<f64>)
// ADAMW: %[[LOSS:.*]] = slapo.sum %{{.*}} : tensor<2x3xf32> -> tensor<f32>
// ADAMW: %[[DW:.*]] = slapo.matmul {{.*}}slapo.phase = "backward"
// ADAMW: %[[DB:.*]] = slapo.sum {{.*}}slapo.phase = "backward"
// ADAMW: slapo.param_grad @w, %[[DW]] {slapo.phase = "backward"} : tensor<3x4xf32>
// ADAMW-NEXT: slapo.param_grad @b, %[[DB]] {slapo.phase = "backward"} : tensor<3xf32>
// ADAMW-NEXT: %[[LR:.*]] = slapo.constant dense<1.000000e-02> : tensor<f64> {slapo.phase = "optimizer"}
// ADAMW-NEXT: slapo.adamw_update @w, %[[DW]], %[[LR]], %[[STEP]] {beta1 = 8.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, exp_avg = @w.exp_avg, exp_avg_sq = @w.exp_avg_sq, slapo.phase = "optimizer", weight_decay = 1.000000e-01 : f64} : tensor<3x4xf32>
// ADAMW-NEXT: slapo.adamw_update @b, %[[DB]], %[[LR]], %[[STEP]] {{.*}}exp_avg = @b.exp_avg, exp_avg_sq = @b.exp_avg_sq
// ADAMW-NEXT: return %[[LOSS]], %[[LR]] : tensor<f32>, tensor<f64>

// SGD with momentum, clipping by the global norm and warmup + cosine: the
// gradients are scaled by min(1, clip / (norm + 1e-6)), as
// torch.nn.utils.clip_grad_norm_ does, by the updates as they read them (no
// slapo.mul of each gradient), and the learning rate follows
// Hugging Face's schedule of the 0-based step c = step - 1:
// c / warmup while c < warmup, else max(0, (1 + cos(pi * (c - warmup) /
// max(1, total - warmup))) / 2).
// SGD: slapo.optimizer_state @w.momentum_buffer of @w
// SGD: slapo.optimizer_state @b.momentum_buffer of @b
// SGD: func.func @train_step(%{{.*}}: tensor<2x4xf32> {{.*}}, %[[STEP:.*]]: tensor<i64> {slapo.name = "step"}, %[[TOTAL:.*]]: tensor<i64> {slapo.name = "total_steps"})
// SGD: slapo.param_grad @w, %[[DW:[0-9]+]]
// SGD: slapo.param_grad @b, %[[DB:[0-9]+]]
// SGD: %[[SQ_W:.*]] = slapo.mul %[[DW]], %[[DW]] {slapo.phase = "optimizer"}
// SGD: %[[SUM_W:.*]] = slapo.sum %[[SQ_W]] {dims = array<i64: 0, 1>
// SGD: %[[SQ_B:.*]] = slapo.mul %[[DB]], %[[DB]]
// SGD: %[[SUM_B:.*]] = slapo.sum %[[SQ_B]] {dims = array<i64: 0>
// SGD: %[[SUMSQ:.*]] = slapo.add %[[SUM_W]], %[[SUM_B]]
// SGD: %[[NORM:.*]] = slapo.sqrt %[[SUMSQ]]
// SGD: %[[EPS:.*]] = slapo.constant dense<9.99999997E-7> : tensor<f32>
// SGD: %[[DENOM:.*]] = slapo.add %[[NORM]], %[[EPS]]
// SGD: %[[CLIP:.*]] = slapo.constant dense<2.000000e+00> : tensor<f32>
// SGD: %[[RATIO:.*]] = slapo.div %[[CLIP]], %[[DENOM]]
// SGD: %[[ONE:.*]] = slapo.constant dense<1.000000e+00> : tensor<f32>
// SGD: %[[COEF:.*]] = slapo.minimum %[[RATIO]], %[[ONE]]
// SGD-NOT: slapo.mul %[[DW]], %[[COEF]]
// SGD: %[[PEAK:.*]] = slapo.constant dense<5.000000e-01> : tensor<f64>
// SGD: %[[STEP_F:.*]] = slapo.cast %[[STEP]] {{.*}} : tensor<i64> -> tensor<f64>
// SGD: %[[C:.*]] = slapo.sub %[[STEP_F]], %{{.*}}
// SGD: %[[WARMUP:.*]] = slapo.constant dense<3.000000e+00> : tensor<f64>
// SGD: %[[WARM_FACTOR:.*]] = slapo.div %[[C]], %{{.*}}
// SGD: %[[TOTAL_F:.*]] = slapo.cast %[[TOTAL]]
// SGD: %[[DECAY_STEPS:.*]] = slapo.maximum
// SGD: %[[AFTER:.*]] = slapo.sub %[[C]], %[[WARMUP]]
// SGD: %[[PROGRESS:.*]] = slapo.div %[[AFTER]], %[[DECAY_STEPS]]
// SGD: %[[PI:.*]] = slapo.constant dense<3.1415926535897931> : tensor<f64>
// SGD: slapo.mul %[[PROGRESS]], %[[PI]]
// SGD: slapo.cos
// SGD: %[[DECAY:.*]] = slapo.maximum
// SGD: %[[IN_WARMUP:.*]] = slapo.compare <lt> %[[C]], %[[WARMUP]]
// SGD: %[[FACTOR:.*]] = slapo.where %[[IN_WARMUP]], %[[WARM_FACTOR]], %[[DECAY]]
// SGD: %[[LR:.*]] = slapo.mul %[[PEAK]], %[[FACTOR]]
// SGD: slapo.sgd_update @w, %[[DW]], %[[LR]] scaled %[[COEF]] {momentum = 9.000000e-01 : f64, momentum_buffer = @w.momentum_buffer, slapo.phase = "optimizer", weight_decay = 0.000000e+00 : f64} : tensor<3x4xf32>
// SGD: slapo.sgd_update @b, %[[DB]], %[[LR]] scaled %[[COEF]] {{.*}}momentum_buffer = @b.momentum_buffer
// SGD: return %{{.*}}, %[[LR]]

// SGD without momentum keeps no state.
// PLAIN-NOT: slapo.optimizer_state
// PLAIN: slapo.sgd_update @w, %{{.*}}, %{{.*}} {momentum = 0.000000e+00 : f64, slapo.phase = "optimizer", weight_decay = 0.000000e+00 : f64} : tensor<3x4xf32>
