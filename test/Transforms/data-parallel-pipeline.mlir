// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=h.0 --slapo-autodiff "--slapo-pipeline-rank=stage=0 dp=2" --slapo-data-parallel %s | FileCheck %s
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=h.0 --slapo-autodiff --slapo-microbatch=microbatches=2 "--slapo-pipeline-rank=stage=0 dp=2" "--slapo-pipeline-schedule=stage=0 stages=2" --slapo-data-parallel %s | FileCheck %s --check-prefix=MICRO
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=h.0 --slapo-autodiff --slapo-pipeline-rank=stage=0 %s | FileCheck %s --check-prefix=ONE

// dp x pp with a mean-reduced cross-entropy: the first of two stages has no
// loss of its own, only the last stage's, received, and still weighs its
// rank's gradients by the targets the rank's rows count.
module {
  slapo.param @h.0.fc.weight : tensor<4x4xf32>
  slapo.param @h.1.fc.weight : tensor<3x4xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"},
                     %target: tensor<2xi64> {slapo.name = "target"}) -> tensor<f32> {
    %w0 = slapo.get_param @h.0.fc.weight {slapo.module = "h.0.fc"} : tensor<4x4xf32>
    %h = slapo.linear %x, %w0 {slapo.module = "h.0.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %w1 = slapo.get_param @h.1.fc.weight {slapo.module = "h.1.fc"} : tensor<3x4xf32>
    %y = slapo.linear %h, %w1 {slapo.module = "h.1.fc"} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
    %loss = slapo.cross_entropy %y, %target {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// Stage 0 counts the targets itself, from the labels, before it receives
// the loss; its share of the group's mean count weighs its gradient and the
// received loss before the group's mean, as on the last stage.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x4xf32> {slapo.name = "x"}, %[[T:[^:]*]]: tensor<2xi64> {slapo.name = "target"})
// CHECK: slapo.stage_send
// CHECK: %[[KEPT:.*]] = slapo.compare <ne> %[[T]]
// CHECK: %[[COUNT:.*]] = slapo.sum %{{.*}} {dims = array<i64: 0>, keepdim = false, slapo.received_loss_targets, slapo.stage = 0 : i64}
// CHECK-NEXT: %[[LOSS:.*]] = slapo.stage_recv from 1 {slapo.stage = 0 : i64} : tensor<f32>
// CHECK-NEXT: %[[MEAN:.*]] = slapo.all_reduce %[[COUNT]] <dp> mean : tensor<f32>
// CHECK-NEXT: %[[SHARE:.*]] = slapo.div %[[COUNT]], %[[MEAN]]
// CHECK: %[[DW:.*]] = slapo.matmul {{.*}} -> tensor<4x4xf32>
// CHECK: %[[WDW:.*]] = slapo.mul %[[DW]], %[[SHARE]] {slapo.phase = "backward"}
// CHECK-NEXT: %[[KDW:.*]] = slapo.where %{{.*}}, %[[WDW]], %{{.*}} {slapo.phase = "backward"}
// CHECK-NEXT: %[[RDW:.*]] = slapo.all_reduce %[[KDW]] <dp> mean {slapo.phase = "backward"}
// CHECK: %[[WL:.*]] = slapo.mul %[[LOSS]], %[[SHARE]] {slapo.phase = "backward"}
// CHECK-NEXT: %[[KL:.*]] = slapo.where %{{.*}}, %[[WL]], %{{.*}} {slapo.phase = "backward"}
// CHECK-NEXT: %[[RL:.*]] = slapo.all_reduce %[[KL]] <dp> mean {slapo.phase = "backward"}
// CHECK-NEXT: return %[[RL]], %[[RDW]]

// With microbatches the count is the microbatches' sum of theirs, which the
// stage's gradients are divided by already.
// MICRO-LABEL: func.func @forward_backward(
// MICRO: %[[ALL:.*]] = slapo.add %{{.*}}, %{{.*}} {slapo.microbatch = 1 : i64, slapo.phase = "backward", slapo.received_loss_targets, slapo.stage = 0 : i64} : (tensor<f32>, tensor<f32>)
// MICRO: %[[GRAD:.*]] = slapo.div %{{.*}}, %[[ALL]] {slapo.counted_mean
// MICRO-NEXT: %[[LOSS:.*]] = slapo.stage_recv from 1 {slapo.phase = "backward", slapo.stage = 0 : i64} : tensor<f32>
// MICRO-NEXT: %[[MEAN:.*]] = slapo.all_reduce %[[ALL]] <dp> mean {slapo.phase = "backward"}
// MICRO-NEXT: %[[SHARE:.*]] = slapo.div %[[ALL]], %[[MEAN]] {slapo.phase = "backward"}
// MICRO: slapo.mul %[[GRAD]], %[[SHARE]]
// MICRO: slapo.all_reduce {{.*}} <dp> mean {slapo.phase = "backward"} : tensor<4x4xf32>
// MICRO: slapo.mul %[[LOSS]], %[[SHARE]]
// MICRO: slapo.all_reduce {{.*}} <dp> mean {slapo.phase = "backward"} : tensor<f32>
// MICRO-NEXT: return

// Without data parallelism nothing counts them.
// ONE-LABEL: func.func @forward_backward(
// ONE-NOT: slapo.received_loss_targets
// ONE-NOT: slapo.compare
// ONE: return
