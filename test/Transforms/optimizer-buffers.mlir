// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=sgd momentum=0.9 lr=0.5" %s | FileCheck %s

// A buffer the forward writes (as BatchNorm's running mean, from values that
// depend on a parameter) is state, not trained: it gets no gradient and no
// optimizer state, and the step writes its new value last, after the
// parameters' updates, so that every read of the buffer in the step sees its
// value from before the step.
module {
  slapo.param @w : tensor<4xf32>
  slapo.param buffer @m : tensor<4xf32>
  func.func @forward(%x: tensor<4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<4xf32>
    %m = slapo.get_param @m : tensor<4xf32>
    %y = slapo.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %c = slapo.constant dense<5.0e-01> : tensor<f32>
    %k = slapo.mul %m, %c : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    %u = slapo.add %k, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %l = slapo.sum %y {dims = array<i64: 0>, keepdim = false} : tensor<4xf32> -> tensor<f32>
    slapo.update_buffer @m, %u : tensor<4xf32>
    return %l : tensor<f32>
  }
}

// CHECK: slapo.param @w : tensor<4xf32>
// CHECK-NEXT: slapo.optimizer_state @w.momentum_buffer of @w
// CHECK-NEXT: slapo.param buffer @m : tensor<4xf32>
// CHECK-NOT: slapo.optimizer_state
// CHECK: func.func @train_step
// CHECK: %[[NEW:.*]] = slapo.add
// CHECK-NOT: slapo.update_buffer
// CHECK: slapo.param_grad @w,
// CHECK-NOT: slapo.param_grad
// CHECK: slapo.sgd_update @w,
// CHECK-NEXT: slapo.update_buffer @m, %[[NEW]] {slapo.phase = "optimizer"} : tensor<4xf32>
// CHECK-NEXT: return
