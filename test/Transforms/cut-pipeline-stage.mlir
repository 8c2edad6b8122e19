// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=h.0 %s | FileCheck %s --check-prefix=TWO
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=h.0,embed %s | FileCheck %s --check-prefix=THREE
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=h.0 --slapo-autodiff %s | FileCheck %s --check-prefix=BACKWARD
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=h.0 --slapo-autodiff --slapo-pipeline-rank=stage=0 %s | FileCheck %s --check-prefix=RANK0
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=h.0 --slapo-autodiff --slapo-pipeline-rank=stage=1 %s | FileCheck %s --check-prefix=RANK1
// RUN: not slapo-opt --slapo-cut-pipeline-stage=modules=h.0 --slapo-autodiff --slapo-pipeline-rank=stage=2 %s 2>&1 | FileCheck %s --check-prefix=RANK2
// RUN: not slapo-opt --slapo-autodiff --slapo-pipeline-rank=stage=0 %s 2>&1 | FileCheck %s --check-prefix=UNCUT
// RUN: not slapo-opt --slapo-cut-pipeline-stage=modules=loss %s 2>&1 | FileCheck %s --check-prefix=LAST
// RUN: not slapo-opt --slapo-cut-pipeline-stage=modules=h.0,h.0 %s 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not slapo-opt --slapo-cut-pipeline-stage=modules=h.2 %s 2>&1 | FileCheck %s --check-prefix=NO-OPS
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=h.0 --slapo-autodiff --slapo-pipeline-rank=stage=0 %S/Inputs/tied-stages.mlir | FileCheck %s --check-prefix=TIED0
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=h.0 --slapo-autodiff --slapo-pipeline-rank=stage=1 %S/Inputs/tied-stages.mlir | FileCheck %s --check-prefix=TIED1
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=h.0 --slapo-autodiff --slapo-microbatch=microbatches=2 --slapo-pipeline-rank=stage=0 --slapo-pipeline-schedule="stage=0 stages=2" %S/Inputs/tied-stages.mlir | FileCheck %s --check-prefix=SCHEDULE

// An embedding, two blocks with a residual add, and a loss;
// the embedding's output is also added at the end of h.1.
module {
  slapo.param @embed.weight : tensor<8x4xf32>
  slapo.param @h.0.fc.weight : tensor<4x4xf32>
  slapo.param @h.1.fc.weight : tensor<4x4xf32>
  func.func @forward(%ids: tensor<2xi64> {slapo.name = "ids"},
                     %target: tensor<2xi64> {slapo.name = "target"}) -> tensor<f32> {
    %we = slapo.get_param @embed.weight {slapo.module = "embed"} : tensor<8x4xf32>
    %x = slapo.embedding %we, %ids {slapo.module = "embed"} : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
    %w0 = slapo.get_param @h.0.fc.weight {slapo.module = "h.0.fc"} : tensor<4x4xf32>
    %f0 = slapo.linear %x, %w0 {slapo.module = "h.0.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %r0 = slapo.add %f0, %x {slapo.module = "h.0"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %w1 = slapo.get_param @h.1.fc.weight {slapo.module = "h.1.fc"} : tensor<4x4xf32>
    %f1 = slapo.linear %r0, %w1 {slapo.module = "h.1.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %r1 = slapo.add %f1, %x {slapo.module = "h.1"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %l = slapo.cross_entropy %r1, %target {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>, slapo.module = "loss"} : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// A cut after h.0: the embedding and h.0 are stage 0, h.1 and the loss
// stage 1. What stage 1 uses of stage 0 (h.0's output and the embedding's)
// enters it through boundaries at its start; the target is an input, which
// every stage reads itself.
// TWO-LABEL: func.func @forward(
// TWO-SAME: %[[IDS:.*]]: tensor<2xi64> {slapo.name = "ids"}, %[[T:.*]]: tensor<2xi64> {slapo.name = "target"})
// TWO: slapo.get_param @embed.weight {slapo.module = "embed", slapo.stage = 0 : i64}
// TWO: %[[X:.*]] = slapo.embedding {{.*}} {slapo.module = "embed", slapo.stage = 0 : i64}
// TWO: %[[R0:.*]] = slapo.add {{.*}} {slapo.module = "h.0", slapo.stage = 0 : i64}
// TWO-NEXT: %[[B0:.*]] = slapo.stage_boundary %[[X]] from 0 to 1 {slapo.module = "embed", slapo.stage = 1 : i64} : tensor<2x4xf32>
// TWO-NEXT: %[[B1:.*]] = slapo.stage_boundary %[[R0]] from 0 to 1 {slapo.module = "h.0", slapo.stage = 1 : i64} : tensor<2x4xf32>
// TWO-NEXT: %[[W1:.*]] = slapo.get_param @h.1.fc.weight {slapo.module = "h.1.fc", slapo.stage = 1 : i64}
// TWO-NEXT: %[[F1:.*]] = slapo.linear %[[B1]], %[[W1]] {slapo.module = "h.1.fc", slapo.stage = 1 : i64}
// TWO-NEXT: %[[R1:.*]] = slapo.add %[[F1]], %[[B0]] {slapo.module = "h.1", slapo.stage = 1 : i64}
// TWO-NEXT: slapo.cross_entropy %[[R1]], %[[T]] {{{.*}}slapo.stage = 1 : i64}

// Three stages: the embedding's output crosses stage 1 on its way to
// stage 2, through a boundary into each.
// THREE: %[[X:.*]] = slapo.embedding {{.*}}slapo.stage = 0 : i64
// THREE-NEXT: %[[X1:.*]] = slapo.stage_boundary %[[X]] from 0 to 1 {{.*}}slapo.stage = 1 : i64
// THREE: %[[R0:.*]] = slapo.add %{{.*}}, %[[X1]] {slapo.module = "h.0", slapo.stage = 1 : i64}
// THREE-NEXT: %[[X2:.*]] = slapo.stage_boundary %[[X1]] from 1 to 2 {{.*}}slapo.stage = 2 : i64
// THREE-NEXT: %[[R02:.*]] = slapo.stage_boundary %[[R0]] from 1 to 2 {{.*}}slapo.stage = 2 : i64
// THREE: slapo.linear %[[R02]]
// THREE: slapo.add %{{.*}}, %[[X2]] {slapo.module = "h.1", slapo.stage = 2 : i64}

// Autodiff passes the gradients back through boundaries the other way, on
// the stage of the boundary they differentiate.
// BACKWARD-LABEL: func.func @forward_backward(
// BACKWARD-DAG: slapo.stage_boundary %{{.*}} from 1 to 0 {slapo.module = "h.0", slapo.phase = "backward", slapo.stage = 1 : i64}
// BACKWARD-DAG: slapo.stage_boundary %{{.*}} from 1 to 0 {slapo.module = "embed", slapo.phase = "backward", slapo.stage = 1 : i64}

// A cut after the last module leaves nothing for the last stage.
// LAST: error: cut_pipeline_stage(): the cut after 'loss' leaves the last stage empty: no op computes anything after it

// Two cuts at one place would leave the stage between them empty.
// TWICE: error: cut_pipeline_stage(): module 'h.0' is cut twice

// NO-OPS: error: cut_pipeline_stage(): module 'h.2' has no ops in @forward: there is nothing to cut after


// Stage 0's rank: its forward, the two sends, the loss received (in the
// forward: stage 1 sends it before any gradient), then the gradients of
// both values received back (in the order stage 1's backward sends them)
// and its own backward; it returns the loss and the gradients of its
// parameters only.
// The loss comes from stage 1 once its step is done.
// RANK0-LABEL: func.func @forward_backward(
// RANK0-SAME: -> (tensor<f32>, tensor<8x4xf32> {slapo.grad_of = @embed.weight}, tensor<4x4xf32> {slapo.grad_of = @h.0.fc.weight})
// RANK0-NOT: slapo.get_param @h.1
// RANK0: %[[X:.*]] = slapo.embedding
// RANK0: %[[R0:.*]] = slapo.add {{.*}}slapo.stage = 0
// RANK0-NEXT: slapo.stage_send %[[X]] to 1 {slapo.module = "embed", slapo.stage = 0 : i64} : tensor<2x4xf32>
// RANK0-NEXT: slapo.stage_send %[[R0]] to 1 {slapo.module = "h.0", slapo.stage = 0 : i64} : tensor<2x4xf32>
// RANK0-NEXT: %[[L:.*]] = slapo.stage_recv from 1 {slapo.stage = 0 : i64} : tensor<f32>
// RANK0-NEXT: %[[DR0:.*]] = slapo.stage_recv from 1 {slapo.module = "h.0", slapo.phase = "backward", slapo.stage = 0 : i64} : tensor<2x4xf32>
// RANK0-NEXT: %[[DX:.*]] = slapo.stage_recv from 1 {slapo.module = "embed", slapo.phase = "backward", slapo.stage = 0 : i64} : tensor<2x4xf32>
// RANK0-NOT: slapo.cross_entropy
// RANK0: slapo.embedding_grad
// RANK0: return %[[L]],

// Stage 1's rank: both values received first, the loss, sent to stage 0
// at once, and its backward, the two gradients sent back; it returns the
// loss and h.1's gradient.
// RANK1-LABEL: func.func @forward_backward(
// RANK1-SAME: -> (tensor<f32>, tensor<4x4xf32> {slapo.grad_of = @h.1.fc.weight})
// RANK1-NEXT: %[[X:.*]] = slapo.stage_recv from 0 {slapo.module = "embed", slapo.stage = 1 : i64} : tensor<2x4xf32>
// RANK1-NEXT: %[[R0:.*]] = slapo.stage_recv from 0 {slapo.module = "h.0", slapo.stage = 1 : i64} : tensor<2x4xf32>
// RANK1-NOT: slapo.embedding
// RANK1: %[[L:.*]] = slapo.cross_entropy
// RANK1-NEXT: slapo.stage_send %[[L]] to 0 {slapo.stage = 1 : i64} : tensor<f32>
// RANK1: slapo.stage_send %{{.*}} to 0 {slapo.module = "h.0", slapo.phase = "backward", slapo.stage = 1 : i64}
// RANK1: slapo.stage_send %{{.*}} to 0 {slapo.module = "embed", slapo.phase = "backward", slapo.stage = 1 : i64}
// RANK1-NEXT: return %[[L]], %{{.*}} : tensor<f32>, tensor<4x4xf32>

// RANK2: error: slapo-pipeline-rank: stage 2 is not one of the 2 stages
// UNCUT: error: slapo-pipeline-rank: no op has a pipeline stage (run slapo-cut-pipeline-stage before slapo-autodiff)

// GPT-2's tied embedding and LM head (Inputs/tied-stages.mlir), cut after
// h.0: each stage holds a copy of embed.weight and sums its part of the
// gradient with the other's over the tied group; the last stage's copy is
// not counted again in gradient norms. Each erases the other's parameters.
// TIED0-NOT: slapo.param @h.1
// TIED0: slapo.param @embed.weight : tensor<8x4xf32>
// TIED0-NOT: slapo.tied_copy
// TIED0-LABEL: func.func @forward_backward(
// TIED0-SAME: -> (tensor<f32>, tensor<8x4xf32> {slapo.grad_of = @embed.weight}, tensor<4x4xf32> {slapo.grad_of = @h.0.fc.weight})
// TIED0: %[[L:.*]] = slapo.stage_recv from 1 {slapo.stage = 0 : i64} : tensor<f32>
// TIED0: %[[E:.*]] = slapo.all_reduce %{{.*}} <tied> {slapo.phase = "backward", slapo.stage = 0 : i64} : tensor<8x4xf32>
// TIED0: return %[[L]], %[[E]],
// TIED1: slapo.param @embed.weight : tensor<8x4xf32> {slapo.tied_copy}
// TIED1-NOT: slapo.param @h.0
// TIED1-LABEL: func.func @forward_backward(
// TIED1-SAME: -> (tensor<f32>, tensor<8x4xf32> {slapo.grad_of = @embed.weight}, tensor<4x4xf32> {slapo.grad_of = @h.1.fc.weight})
// TIED1: slapo.linear %{{.*}}, %{{.*}} {slapo.module = "lm_head", slapo.stage = 1 : i64}
// TIED1: slapo.stage_send %{{.*}} to 0 {slapo.stage = 1 : i64} : tensor<f32>
// TIED1: %[[E:.*]] = slapo.all_reduce %{{.*}} <tied> {slapo.phase = "backward", slapo.stage = 1 : i64} : tensor<8x4xf32>
// TIED1: return %{{.*}}, %[[E]],

// 1F1B on stage 0 of 2 with 2 microbatches: microbatch 0's forward, then
// microbatch 1's forward before microbatch 0's backward (whose gradient
// stage 1 sends back), then microbatch 1's backward.
// SCHEDULE-LABEL: func.func @forward_backward(
// SCHEDULE: slapo.stage_send {{.*}}slapo.microbatch = 0
// SCHEDULE: slapo.stage_send {{.*}}slapo.microbatch = 1
// SCHEDULE: slapo.stage_recv {{.*}}slapo.microbatch = 0
// SCHEDULE: slapo.embedding_grad {{.*}}slapo.microbatch = 0
// SCHEDULE: slapo.stage_recv {{.*}}slapo.microbatch = 1
// SCHEDULE: slapo.embedding_grad {{.*}}slapo.microbatch = 1
