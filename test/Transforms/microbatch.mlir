// RUN: slapo-opt --slapo-autodiff --slapo-microbatch=microbatches=2 %s | FileCheck %s
// RUN: slapo-opt --slapo-autodiff --slapo-microbatch=microbatches=1 %s | FileCheck %s --check-prefix=ONE
// RUN: not slapo-opt --slapo-microbatch=microbatches=2 %s 2>&1 | FileCheck %s --check-prefix=ORDER

// A linear layer and a mean-reduced cross-entropy, imported for one
// microbatch of 2 rows.
module {
  slapo.param @fc.weight : tensor<3x4xf32>
  slapo.param @fc.bias : tensor<3xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"},
                     %target: tensor<2xi64> {slapo.name = "target"}) -> tensor<f32> {
    %w = slapo.get_param @fc.weight {slapo.module = "fc"} : tensor<3x4xf32>
    %b = slapo.get_param @fc.bias {slapo.module = "fc"} : tensor<3xf32>
    %y = slapo.linear %x, %w, %b {slapo.module = "fc"} : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %loss = slapo.cross_entropy %y, %target {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// The step takes the rank's 4 rows; each microbatch's forward reads its
// rows, and its backward runs before the next microbatch's forward.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<4x4xf32> {slapo.name = "x"}, %[[T:arg[0-9]+]]: tensor<4xi64> {slapo.name = "target"})
// CHECK-SAME: -> (tensor<f32>, tensor<3x4xf32> {slapo.grad_of = @fc.weight}, tensor<3xf32> {slapo.grad_of = @fc.bias})
// CHECK: %[[X0:.*]] = slapo.slice %[[X]] {dim = 0 : i64, end = 2 : i64, start = 0 : i64, step = 1 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK: %[[T0:.*]] = slapo.slice %[[T]] {dim = 0 : i64, end = 2 : i64, start = 0 : i64, step = 1 : i64} : tensor<4xi64> -> tensor<2xi64>
// CHECK: %[[Y0:.*]] = slapo.linear %[[X0]]
// CHECK: %[[L0:.*]] = slapo.cross_entropy %[[Y0]], %[[T0]]
// CHECK: slapo.cross_entropy_grad %[[Y0]], %[[T0]]
// CHECK: %[[DW0:.*]] = slapo.matmul {{.*}}%[[X0]] {{.*}}-> tensor<3x4xf32>
// CHECK: %[[DB0:.*]] = slapo.sum
// CHECK: %[[X1:.*]] = slapo.slice %[[X]] {dim = 0 : i64, end = 4 : i64, start = 2 : i64, step = 1 : i64}
// CHECK: %[[T1:.*]] = slapo.slice %[[T]] {dim = 0 : i64, end = 4 : i64, start = 2 : i64, step = 1 : i64}
// CHECK: %[[Y1:.*]] = slapo.linear %[[X1]]
// CHECK: %[[L1:.*]] = slapo.cross_entropy %[[Y1]], %[[T1]]
// CHECK: %[[DW1:.*]] = slapo.matmul {{.*}}%[[X1]] {{.*}}-> tensor<3x4xf32>
// CHECK: %[[DB1:.*]] = slapo.sum
// The sums of the microbatches, then their means.
// CHECK: %[[L:.*]] = slapo.add %[[L0]], %[[L1]] {slapo.phase = "backward"}
// CHECK: %[[DW:.*]] = slapo.add %[[DW0]], %[[DW1]] {slapo.phase = "backward"}
// CHECK: %[[DB:.*]] = slapo.add %[[DB0]], %[[DB1]] {slapo.phase = "backward"}
// CHECK: %[[HALF:.*]] = slapo.constant dense<5.000000e-01> : tensor<f32> {slapo.phase = "backward"}
// CHECK: %[[LM:.*]] = slapo.mul %[[L]], %[[HALF]] {slapo.phase = "backward"}
// CHECK: %[[DWM:.*]] = slapo.mul %[[DW]], %{{.*}} {slapo.phase = "backward"}
// CHECK: %[[DBM:.*]] = slapo.mul %[[DB]], %{{.*}} {slapo.phase = "backward"}
// CHECK: return %[[LM]], %[[DWM]], %[[DBM]]

// One microbatch changes nothing.
// ONE-LABEL: func.func @forward_backward(
// ONE-SAME: tensor<2x4xf32>
// ONE-NOT: slapo.slice

// ORDER: error: slapo-microbatch needs @forward_backward (run slapo-autodiff first)
