// RUN: slapo-opt --slapo-autodiff %s | FileCheck %s
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer %s | FileCheck %s --check-prefix=STEP

// For a fixed mask dropout is linear in its input: its gradient is the same
// dropout (one stream, p, split and fork_rng, so one mask) of the result's
// gradient. A dropout of an input no parameter reaches gets no gradient.
module {
  slapo.param @w : tensor<4xf32>
  func.func @forward(%x: tensor<4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %in = slapo.dropout %x {p = 2.000000e-01 : f64, stream = 0 : i64} : tensor<4xf32>
    %w = slapo.get_param @w : tensor<4xf32>
    %y = slapo.mul %in, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %d = slapo.dropout %y {fork_rng, p = 1.000000e-01 : f64, shard_axis = 0 : i64, stream = 1 : i64} : tensor<4xf32>
    %loss = slapo.sum %d {dims = array<i64: 0>, keepdim = false} : tensor<4xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// CHECK-LABEL: func.func @forward_backward
// CHECK-NEXT: %[[IN:.*]] = slapo.dropout %arg0 {p = 2.000000e-01 : f64, stream = 0 : i64} : tensor<4xf32>
// CHECK: %[[Y:.*]] = slapo.mul %[[IN]], %{{.*}}
// CHECK-NEXT: slapo.dropout %[[Y]] {fork_rng, p = 1.000000e-01 : f64, shard_axis = 0 : i64, stream = 1 : i64} : tensor<4xf32>
// CHECK: %[[DD:.*]] = slapo.broadcast %{{.*}} {slapo.phase = "backward"} : tensor<1xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[DY:.*]] = slapo.dropout %[[DD]] {fork_rng, p = 1.000000e-01 : f64, shard_axis = 0 : i64, slapo.phase = "backward", stream = 1 : i64} : tensor<4xf32>
// CHECK-NEXT: %[[DW:.*]] = slapo.mul %[[DY]], %[[IN]] {slapo.phase = "backward"}
// CHECK-NOT: slapo.dropout
// CHECK: return %{{.*}}, %[[DW]]

// @train_step gives every dropout, forward and backward, the step's number:
// the backward draws the forward's mask.
// STEP-LABEL: func.func @train_step
// STEP-SAME: %[[STEP:arg[0-9]+]]: tensor<i64> {slapo.name = "step"}
// STEP: slapo.dropout %arg0 step %[[STEP]] {p = 2.000000e-01 : f64, stream = 0 : i64}
// STEP: slapo.dropout %{{.*}} step %[[STEP]] {fork_rng, {{.*}}stream = 1 : i64}
// STEP: slapo.dropout %{{.*}} step %[[STEP]] {fork_rng, {{.*}}slapo.phase = "backward", stream = 1 : i64}
