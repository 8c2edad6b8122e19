// RUN: slapo-opt --slapo-autodiff --slapo-microbatch=microbatches=4 --slapo-optimizer=optimizer=sgd --slapo-cse --slapo-plan-memory %s | FileCheck %s --check-prefix=ONE-STAGE
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=b.0 --slapo-autodiff --slapo-microbatch=microbatches=4 --slapo-pipeline-rank=stage=0 "--slapo-pipeline-schedule=stage=0 stages=2" --slapo-optimizer=optimizer=sgd --slapo-cse --slapo-plan-memory %s | FileCheck %s --check-prefix=FIRST
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=b.0 --slapo-autodiff --slapo-microbatch=microbatches=4 --slapo-pipeline-rank=stage=1 "--slapo-pipeline-schedule=stage=1 stages=2" --slapo-optimizer=optimizer=sgd --slapo-cse --slapo-plan-memory %s | FileCheck %s --check-prefix=LAST
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=b.0,b.1 --slapo-autodiff --slapo-microbatch=microbatches=4 --slapo-pipeline-rank=stage=0 "--slapo-pipeline-schedule=stage=0 stages=3" --slapo-optimizer=optimizer=sgd --slapo-cse --slapo-plan-memory %s | FileCheck %s --check-prefix=FIRST-OF-THREE
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=b.0,b.1 --slapo-autodiff --slapo-microbatch=microbatches=4 --slapo-pipeline-rank=stage=1 "--slapo-pipeline-schedule=stage=1 stages=3" --slapo-optimizer=optimizer=sgd --slapo-cse --slapo-plan-memory %s | FileCheck %s --check-prefix=MIDDLE
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=b.0,b.1 --slapo-autodiff --slapo-microbatch=microbatches=2 --slapo-pipeline-rank=stage=0 "--slapo-pipeline-schedule=stage=0 stages=3" --slapo-optimizer=optimizer=sgd --slapo-cse --slapo-plan-memory %s | FileCheck %s --check-prefix=FEWER
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=b.0 --slapo-autodiff --slapo-pipeline-rank=stage=0 --slapo-optimizer=optimizer=sgd --slapo-cse --slapo-plan-memory %s | FileCheck %s --check-prefix=NONE

// The memory plan of a pipeline stage holds the activations of the
// microbatches in flight, not of all of them. Three blocks of a linear
// layer and tanh, whose gradient reads its result (one microbatch's is
// 2 x 4 f32, 32 bytes); 4 microbatches of 2 rows.
module {
  slapo.param @b.0.fc.weight : tensor<4x4xf32>
  slapo.param @b.1.fc.weight : tensor<4x4xf32>
  slapo.param @b.2.fc.weight : tensor<4x4xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %w0 = slapo.get_param @b.0.fc.weight {slapo.module = "b.0.fc"} : tensor<4x4xf32>
    %h0 = slapo.linear %x, %w0 {slapo.module = "b.0.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %a0 = slapo.tanh %h0 {slapo.module = "b.0.act"} : tensor<2x4xf32>
    %w1 = slapo.get_param @b.1.fc.weight {slapo.module = "b.1.fc"} : tensor<4x4xf32>
    %h1 = slapo.linear %a0, %w1 {slapo.module = "b.1.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %a1 = slapo.tanh %h1 {slapo.module = "b.1.act"} : tensor<2x4xf32>
    %w2 = slapo.get_param @b.2.fc.weight {slapo.module = "b.2.fc"} : tensor<4x4xf32>
    %h2 = slapo.linear %a1, %w2 {slapo.module = "b.2.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %a2 = slapo.tanh %h2 {slapo.module = "b.2.act"} : tensor<2x4xf32>
    %l = slapo.sum %a2 {dims = array<i64: 0, 1>, keepdim = false, slapo.module = "loss"} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// Without stages a microbatch's forward and backward run before the next
// one's: one is in flight.
// ONE-STAGE: slapo.memory = {{{.*}}microbatches = 4 : i64, microbatches_in_flight = 1 : i64,

// The first of two stages (b.0) runs 1F1B: microbatch k + 1's forward before
// k's backward. Each microbatch keeps its 32-byte slice of x (the weight
// gradient's operand) and b.0's tanh result: 64 bytes, for 2 microbatches at
// once, not 4.
// FIRST: slapo.memory = {activations = {{[0-9]+}} : i64, activations_in_flight = 128 : i64, {{.*}}microbatches = 4 : i64, microbatches_in_flight = 2 : i64,
// A later microbatch's activations take the bytes of an earlier one's whose
// backward has run: microbatch 3's tanh result those of microbatch 1's.
// FIRST: slapo.tanh {{.*}}slapo.microbatch = 0 : i64
// FIRST: slapo.tanh {{.*}}slapo.microbatch = 1 : i64, slapo.module = "b.0.act", slapo.offsets = array<i64: [[ODD:[0-9]+]]>
// FIRST: slapo.stage_recv {{.*}}slapo.microbatch = 0 : i64
// FIRST: slapo.tanh {{.*}}slapo.microbatch = 2 : i64
// FIRST: slapo.stage_recv {{.*}}slapo.microbatch = 1 : i64
// FIRST: slapo.tanh {{.*}}slapo.microbatch = 3 : i64, slapo.module = "b.0.act", slapo.offsets = array<i64: [[ODD]]>

// The last stage runs each microbatch's backward right after its forward.
// LAST: slapo.memory = {{{.*}}microbatches = 4 : i64, microbatches_in_flight = 1 : i64,

// The first of three stages holds 3 microbatches (pp - stage), 3 x 64
// bytes; with 2 microbatches, both. The middle stage holds 2, each with the
// b.0 result it received (b.1's weight gradient reads it) and b.1's tanh
// result: 2 x 64 bytes.
// FIRST-OF-THREE: slapo.memory = {activations = {{[0-9]+}} : i64, activations_in_flight = 192 : i64, {{.*}}microbatches = 4 : i64, microbatches_in_flight = 3 : i64,
// FEWER: slapo.memory = {activations = {{[0-9]+}} : i64, activations_in_flight = 128 : i64, {{.*}}microbatches = 2 : i64, microbatches_in_flight = 2 : i64,
// MIDDLE: slapo.memory = {activations = {{[0-9]+}} : i64, activations_in_flight = 128 : i64, {{.*}}microbatches = 4 : i64, microbatches_in_flight = 2 : i64,

// Without microbatches the summary has no counts of them.
// NONE-NOT: microbatches
// NONE: slapo.memory = {activations = {{[0-9]+}} : i64, arena_bytes
// NONE-NOT: microbatches
