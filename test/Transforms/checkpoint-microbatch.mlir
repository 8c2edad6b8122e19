// RUN: slapo-opt --slapo-autodiff --slapo-microbatch=microbatches=2 --slapo-optimizer=optimizer=sgd --slapo-cse --slapo-checkpoint=modules=b.0 %s | FileCheck %s
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=b.0 --slapo-autodiff --slapo-microbatch=microbatches=2 --slapo-pipeline-rank=stage=0 "--slapo-pipeline-schedule=stage=0 stages=2" --slapo-optimizer=optimizer=sgd --slapo-cse --slapo-checkpoint=modules=b.0,b.1 %s | FileCheck %s --check-prefix=STAGE0
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=b.0.fc --slapo-autodiff --slapo-microbatch=microbatches=2 --slapo-pipeline-rank=stage=1 "--slapo-pipeline-schedule=stage=1 stages=2" --slapo-optimizer=optimizer=sgd --slapo-cse --slapo-checkpoint=modules=b.0 %s | FileCheck %s --check-prefix=RECV

// checkpoint() with microbatches: two blocks of a linear layer and tanh
// (whose gradient reads its result), in 2 microbatches of 2 rows.
module {
  slapo.param @b.0.fc.weight : tensor<4x4xf32>
  slapo.param @b.1.fc.weight : tensor<4x4xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %w0 = slapo.get_param @b.0.fc.weight {slapo.module = "b.0.fc"} : tensor<4x4xf32>
    %h0 = slapo.linear %x, %w0 {slapo.module = "b.0.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %a0 = slapo.tanh %h0 {slapo.module = "b.0.act"} : tensor<2x4xf32>
    %w1 = slapo.get_param @b.1.fc.weight {slapo.module = "b.1.fc"} : tensor<4x4xf32>
    %h1 = slapo.linear %a0, %w1 {slapo.module = "b.1.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %a1 = slapo.tanh %h1 {slapo.module = "b.1.act"} : tensor<2x4xf32>
    %l = slapo.sum %a1 {dims = array<i64: 0, 1>, keepdim = false, slapo.module = "loss"} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// Each microbatch's backward of b.0 recomputes that microbatch's forward of
// b.0 from its own rows, after the backward of b.1 and before the next
// microbatch's forward: one microbatch's tanh result (32 bytes) is not kept,
// twice.
// CHECK: slapo.recomputation = {activation_bytes_not_kept = 64 : i64, {{.*}}, matmul_flops = 128 : i64, modules = ["b.0"]}
// CHECK: %[[X0:.*]] = slapo.slice %{{.*}} {dim = 0 : i64, end = 2 : i64, slapo.microbatch = 0 : i64
// CHECK: %[[W0:.*]] = slapo.get_param @b.0.fc.weight {slapo.microbatch = 0 : i64
// CHECK: %[[A0:.*]] = slapo.tanh {{.*}}slapo.microbatch = 0 : i64, slapo.module = "b.0.act"}
// CHECK: slapo.linear %[[A0]]
// CHECK: %[[H0R:.*]] = slapo.linear %[[X0]], %[[W0]] {slapo.microbatch = 0 : i64, slapo.module = "b.0.fc", slapo.phase = "backward", slapo.recomputed}
// CHECK-NEXT: %[[A0R:.*]] = slapo.tanh %[[H0R]] {slapo.microbatch = 0 : i64, slapo.module = "b.0.act", slapo.phase = "backward", slapo.recomputed}
// CHECK-NEXT: slapo.mul %[[A0R]], %[[A0R]] {slapo.microbatch = 0 : i64, slapo.module = "b.0.act", slapo.phase = "backward"}
// CHECK: %[[X1:.*]] = slapo.slice %{{.*}} {dim = 0 : i64, end = 4 : i64, slapo.microbatch = 1 : i64
// CHECK: %[[W1:.*]] = slapo.get_param @b.0.fc.weight {slapo.microbatch = 1 : i64
// CHECK: %[[A1:.*]] = slapo.tanh {{.*}}slapo.microbatch = 1 : i64, slapo.module = "b.0.act"}
// CHECK: slapo.linear %[[A1]]
// CHECK: %[[H1R:.*]] = slapo.linear %[[X1]], %[[W1]] {slapo.microbatch = 1 : i64, slapo.module = "b.0.fc", slapo.phase = "backward", slapo.recomputed}
// CHECK-NEXT: %[[A1R:.*]] = slapo.tanh %[[H1R]] {slapo.microbatch = 1 : i64, slapo.module = "b.0.act", slapo.phase = "backward", slapo.recomputed}
// CHECK-NEXT: slapo.mul %[[A1R]], %[[A1R]] {slapo.microbatch = 1 : i64, slapo.module = "b.0.act", slapo.phase = "backward"}
// CHECK-NOT: slapo.recomputed
// CHECK: return

// Pipeline stage 0 of two (cut after b.0) checkpoints b.0, which it
// computes, and leaves b.1 to stage 1: each microbatch's backward, in 1F1B
// order, starts with the gradient received and recomputes its forward.
// STAGE0: slapo.recomputation = {{{.*}}modules = ["b.0"]}
// STAGE0: slapo.stage_send {{.*}}slapo.microbatch = 0 : i64
// STAGE0: slapo.stage_send {{.*}}slapo.microbatch = 1 : i64
// STAGE0: slapo.stage_recv from 1 {slapo.microbatch = 0 : i64, slapo.module = "b.0.act", slapo.phase = "backward"
// STAGE0: slapo.linear {{.*}}slapo.microbatch = 0 : i64, slapo.module = "b.0.fc", slapo.phase = "backward", slapo.recomputed
// STAGE0-NEXT: slapo.tanh {{.*}}slapo.microbatch = 0 : i64, slapo.module = "b.0.act", slapo.phase = "backward", slapo.recomputed
// STAGE0: slapo.stage_recv from 1 {slapo.microbatch = 1 : i64, slapo.module = "b.0.act", slapo.phase = "backward"
// STAGE0: slapo.linear {{.*}}slapo.microbatch = 1 : i64, slapo.module = "b.0.fc", slapo.phase = "backward", slapo.recomputed
// STAGE0-NEXT: slapo.tanh {{.*}}slapo.microbatch = 1 : i64, slapo.module = "b.0.act", slapo.phase = "backward", slapo.recomputed
// STAGE0-NOT: slapo.recomputed

// Cut inside b.0 (after its linear layer), stage 1 recomputes b.0's tanh
// from the value it received: the message is received once, never again.
// RECV: %[[IN0:.*]] = slapo.stage_recv from 0 {slapo.microbatch = 0 : i64, slapo.module = "b.0.fc", slapo.stage = 1 : i64}
// RECV: slapo.tanh %[[IN0]] {slapo.microbatch = 0 : i64, slapo.module = "b.0.act", slapo.phase = "backward", slapo.recomputed
// RECV: %[[IN1:.*]] = slapo.stage_recv from 0 {slapo.microbatch = 1 : i64, slapo.module = "b.0.fc", slapo.stage = 1 : i64}
// RECV: slapo.tanh %[[IN1]] {slapo.microbatch = 1 : i64, slapo.module = "b.0.act", slapo.phase = "backward", slapo.recomputed
// RECV-NOT: slapo.stage_recv from 0 {{.*}}slapo.recomputed
