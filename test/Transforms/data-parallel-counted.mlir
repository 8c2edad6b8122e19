// RUN: slapo-opt --slapo-autodiff --slapo-data-parallel %s | FileCheck %s
// RUN: slapo-opt --slapo-autodiff --slapo-microbatch=microbatches=2 --slapo-data-parallel %s | FileCheck %s --check-prefix=MICRO

// A mean-reduced cross-entropy counts only the targets not equal to
// ignore_index: ranks whose labels are padded differently count different
// numbers of them, and the average of their means is not the whole batch's.
module {
  slapo.param @fc.weight : tensor<3x4xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"},
                     %target: tensor<2xi64> {slapo.name = "target"}) -> tensor<f32> {
    %w = slapo.get_param @fc.weight {slapo.module = "fc"} : tensor<3x4xf32>
    %y = slapo.linear %x, %w {slapo.module = "fc"} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
    %loss = slapo.cross_entropy %y, %target {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// Right after the loss, in the forward: the rank's count of counted targets
// and its share of the group's mean count. Each part is multiplied by the
// share (0 where the rank counts no target: its 0 / 0 adds nothing) before
// the group's mean.
// CHECK-LABEL: func.func @forward_backward(
// CHECK: %[[LOSS:.*]] = slapo.cross_entropy %{{.*}}, %[[T:[^ ]*]] {ignore_index = -100
// CHECK: %[[KEPT:.*]] = slapo.compare <ne> %[[T]]
// CHECK: %[[COUNT:.*]] = slapo.sum %{{.*}} {dims = array<i64: 0>, keepdim = false} : tensor<2xf32> -> tensor<f32>
// CHECK-NEXT: %[[MEAN:.*]] = slapo.all_reduce %[[COUNT]] <dp> mean : tensor<f32>
// CHECK-NEXT: %[[SHARE:.*]] = slapo.div %[[COUNT]], %[[MEAN]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK: %[[DW:.*]] = slapo.matmul {{.*}} -> tensor<3x4xf32>
// CHECK: %[[ANY:.*]] = slapo.compare <gt> %[[COUNT]], %{{.*}} {slapo.phase = "backward"}
// CHECK: %[[WDW:.*]] = slapo.mul %[[DW]], %[[SHARE]] {slapo.phase = "backward"}
// CHECK-NEXT: %[[KDW:.*]] = slapo.where %[[ANY]], %[[WDW]], %{{.*}} {slapo.phase = "backward"}
// CHECK-NEXT: %[[RDW:.*]] = slapo.all_reduce %[[KDW]] <dp> mean {slapo.phase = "backward"}
// CHECK: %[[WL:.*]] = slapo.mul %[[LOSS]], %[[SHARE]] {slapo.phase = "backward"}
// CHECK-NEXT: %[[KL:.*]] = slapo.where %{{.*}}, %[[WL]], %{{.*}} {slapo.phase = "backward"}
// CHECK-NEXT: %[[RL:.*]] = slapo.all_reduce %[[KL]] <dp> mean {slapo.phase = "backward"}
// CHECK-NEXT: return %[[RL]], %[[RDW]]

// With microbatches the rank's loss is their sum over their count: that
// count is the rank's, shared after the last microbatch, in the backward,
// before the first gradient's bucket.
// MICRO-LABEL: func.func @forward_backward(
// MICRO: %[[ALL:.*]] = slapo.add %{{.*}}, %{{.*}} {slapo.microbatch = 1 : i64, slapo.phase = "backward"} : (tensor<f32>, tensor<f32>)
// MICRO: %[[LOSS:.*]] = slapo.div %{{.*}}, %[[ALL]] {slapo.counted_mean, slapo.phase = "backward"}
// MICRO-NEXT: %[[MEAN:.*]] = slapo.all_reduce %[[ALL]] <dp> mean {slapo.phase = "backward"}
// MICRO-NEXT: %[[SHARE:.*]] = slapo.div %[[ALL]], %[[MEAN]] {slapo.phase = "backward"}
// MICRO: slapo.all_reduce {{.*}} <dp> mean {slapo.phase = "backward"} : tensor<3x4xf32>
// MICRO: slapo.all_reduce {{.*}} <dp> mean {slapo.phase = "backward"} : tensor<f32>
// MICRO-NEXT: return
