// RUN: slapo-opt --split-input-file --slapo-autodiff --slapo-microbatch=microbatches=2 %s | FileCheck %s
// RUN: slapo-opt --split-input-file --slapo-autodiff --slapo-microbatch=microbatches=1 %s | FileCheck %s --check-prefix=ONE
// RUN: not slapo-opt --split-input-file --slapo-microbatch=microbatches=2 %s 2>&1 | FileCheck %s --check-prefix=ORDER

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
// CHECK: %[[X0:.*]] = slapo.slice %[[X]] {dim = 0 : i64, end = 2 : i64, slapo.microbatch = 0 : i64, start = 0 : i64, step = 1 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK: %[[T0:.*]] = slapo.slice %[[T]] {dim = 0 : i64, end = 2 : i64, slapo.microbatch = 0 : i64, start = 0 : i64, step = 1 : i64} : tensor<4xi64> -> tensor<2xi64>
// CHECK: %[[Y0:.*]] = slapo.linear %[[X0]]
// CHECK: %[[L0:.*]] = slapo.cross_entropy %[[Y0]], %[[T0]]
// CHECK: slapo.cross_entropy_grad %[[Y0]], %[[T0]]
// CHECK: %[[DW0:.*]] = slapo.matmul {{.*}}%[[X0]] {{.*}}-> tensor<3x4xf32>
// CHECK: %[[DB0:.*]] = slapo.sum
// CHECK: %[[X1:.*]] = slapo.slice %[[X]] {dim = 0 : i64, end = 4 : i64, slapo.microbatch = 1 : i64, start = 2 : i64, step = 1 : i64}
// CHECK: %[[T1:.*]] = slapo.slice %[[T]] {dim = 0 : i64, end = 4 : i64, slapo.microbatch = 1 : i64, start = 2 : i64, step = 1 : i64}
// CHECK: %[[Y1:.*]] = slapo.linear %[[X1]]
// CHECK: %[[L1:.*]] = slapo.cross_entropy %[[Y1]], %[[T1]]
// CHECK: %[[DW1:.*]] = slapo.matmul {{.*}}%[[X1]] {{.*}}-> tensor<3x4xf32>
// CHECK: %[[DB1:.*]] = slapo.sum
// A mean-reduced cross-entropy is the mean over the targets not ignored:
// each microbatch's loss and gradients count as many times as it has such
// targets (none if it has none), and the sums are divided by the batch's.
// CHECK: %[[C1:.*]] = slapo.sum {{.*}}slapo.phase = "backward"} : tensor<2xf32> -> tensor<f32>
// CHECK: %[[ALL:.*]] = slapo.add %[[C0:.*]], %[[C1]] {slapo.microbatch = 1 : i64, slapo.phase = "backward"}
// CHECK: %[[ANY1:.*]] = slapo.compare <gt> %[[C1]]
// CHECK: %[[LW1:.*]] = slapo.mul %[[L1]], %[[C1]] {slapo.microbatch = 1 : i64, slapo.phase = "backward"}
// CHECK: %[[LK1:.*]] = slapo.where %[[ANY1]], %[[LW1]], %{{.*}} {slapo.microbatch = 1 : i64, slapo.phase = "backward"}
// CHECK: %[[L:.*]] = slapo.add %{{.*}}, %[[LK1]] {slapo.microbatch = 1 : i64, slapo.phase = "backward"}
// CHECK: %[[DW:.*]] = slapo.add %{{.*}}, %{{.*}} {slapo.microbatch = 1 : i64, slapo.phase = "backward"} : (tensor<3x4xf32>, tensor<3x4xf32>)
// CHECK: %[[DB:.*]] = slapo.add %{{.*}}, %{{.*}} {slapo.microbatch = 1 : i64, slapo.phase = "backward"} : (tensor<3xf32>, tensor<3xf32>)
// CHECK: %[[LM:.*]] = slapo.div %[[L]], %[[ALL]] {slapo.counted_mean, slapo.phase = "backward"}
// CHECK: %[[DWM:.*]] = slapo.div %[[DW]], %[[ALL]] {slapo.counted_mean, slapo.phase = "backward"}
// CHECK: %[[DBM:.*]] = slapo.div %[[DB]], %[[ALL]] {slapo.counted_mean, slapo.phase = "backward"}
// CHECK: return %[[LM]], %[[DWM]], %[[DBM]]

// One microbatch changes nothing.
// ONE-LABEL: func.func @forward_backward(
// ONE-SAME: tensor<2x4xf32>
// ONE-NOT: slapo.slice

// ORDER: error: slapo-microbatch needs @forward_backward (run slapo-autodiff first)

// -----

// Any other loss is taken for a mean over equally many rows per
// microbatch: the sums are divided by the number of microbatches.
module {
  slapo.param @w : tensor<3x4xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<3x4xf32>
    %y = slapo.linear %x, %w : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
    %l = slapo.mean %y {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: tensor<4x4xf32>
// CHECK: %[[L:.*]] = slapo.add %{{.*}}, %{{.*}} {slapo.microbatch = 1 : i64, slapo.phase = "backward"} : (tensor<f32>, tensor<f32>)
// CHECK: %[[DW:.*]] = slapo.add %{{.*}}, %{{.*}} {slapo.microbatch = 1 : i64, slapo.phase = "backward"} : (tensor<3x4xf32>, tensor<3x4xf32>)
// CHECK: %[[HALF:.*]] = slapo.constant dense<5.000000e-01> : tensor<f32> {slapo.phase = "backward"}
// CHECK: %[[LM:.*]] = slapo.mul %[[L]], %[[HALF]] {slapo.phase = "backward"}
// CHECK: %[[DWM:.*]] = slapo.mul %[[DW]], %{{.*}} {slapo.phase = "backward"}
// CHECK: return %[[LM]], %[[DWM]]

// -----

// A sum adds the microbatches' losses and gradients.
module {
  slapo.param @w : tensor<3x4xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<3x4xf32>
    %y = slapo.linear %x, %w : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
    %l = slapo.sum %y {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[L:.*]] = slapo.add %{{.*}}, %{{.*}} {slapo.microbatch = 1 : i64, slapo.phase = "backward"} : (tensor<f32>, tensor<f32>)
// CHECK-NEXT: %[[DW:.*]] = slapo.add %{{.*}}, %{{.*}} {slapo.microbatch = 1 : i64, slapo.phase = "backward"} : (tensor<3x4xf32>, tensor<3x4xf32>)
// CHECK-NEXT: return %[[L]], %[[DW]]
