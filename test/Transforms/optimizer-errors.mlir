// RUN: not slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=lamb" %s 2>&1 | FileCheck %s --check-prefix=NAME
// RUN: not slapo-opt --slapo-autodiff --slapo-optimizer="lr=-1" %s 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not slapo-opt --slapo-autodiff --slapo-optimizer="lr-schedule=linear" %s 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not slapo-opt --slapo-autodiff --slapo-optimizer="grad-clip=-2" %s 2>&1 | FileCheck %s --check-prefix=CLIP
// RUN: not slapo-opt --slapo-optimizer %s 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: not slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=adamw" %s 2>&1 | FileCheck %s --check-prefix=CLASH

// NAME: error: slapo-optimizer: unknown optimizer 'lamb' (adamw or sgd)
// LR: error: slapo-optimizer: lr must be positive, got -1
// SCHEDULE: error: slapo-optimizer: unknown lr-schedule 'linear' (constant or warmup_cosine)
// CLIP: error: slapo-optimizer: grad-clip must be 0 (off) or positive, got -2
// ORDER: error: slapo-optimizer: there is no func.func @forward_backward (run slapo-autodiff first)

// A parameter whose name is what AdamW's state of another would be called:
// the state cannot take it.
// CLASH: optimizer-errors.mlir:[[# @LINE + 2]]:3: error: slapo-optimizer: the optimizer state of @w would be named "w.exp_avg", which is taken
module {
  slapo.param @"w.exp_avg" : tensor<4xf32>
  slapo.param @w : tensor<4xf32>
  func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<4xf32>
    %m = slapo.get_param @"w.exp_avg" : tensor<4xf32>
    %y = slapo.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %z = slapo.mul %y, %m : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %loss = slapo.sum %z {dims = array<i64: 0>, keepdim = false} : tensor<4xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
