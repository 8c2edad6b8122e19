// RUN: slapo-opt --slapo-autodiff --slapo-optimizer=optimizer=sgd --slapo-cse --slapo-checkpoint=modules=b.0,b.1,b.0.act %s | FileCheck %s
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer=optimizer=sgd --slapo-cse --slapo-checkpoint --slapo-plan-memory %s | FileCheck %s --check-prefix=NONE
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer=optimizer=sgd --slapo-cse --slapo-checkpoint=modules=b.0 --slapo-plan-memory %s | FileCheck %s --check-prefix=PLANNED
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer=optimizer=sgd --slapo-cse "--slapo-checkpoint=memory-budget=1000 candidates=b.0,b.1" %s | FileCheck %s --check-prefix=ROOMY
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer=optimizer=sgd --slapo-cse "--slapo-checkpoint=memory-budget=850 candidates=b.1,b.0" --slapo-plan-memory %s | FileCheck %s --check-prefix=FITS
// RUN: not slapo-opt --slapo-autodiff --slapo-optimizer=optimizer=sgd --slapo-cse "--slapo-checkpoint=memory-budget=800 candidates=b.0,b.1" %s 2>&1 | FileCheck %s --check-prefix=TIGHT
// RUN: not slapo-opt --slapo-autodiff --slapo-optimizer=optimizer=sgd --slapo-cse --slapo-checkpoint=modules=loss %s 2>&1 | FileCheck %s --check-prefix=LOSS-MODULE
// RUN: not slapo-opt --slapo-autodiff --slapo-optimizer=optimizer=sgd --slapo-cse --slapo-checkpoint=modules=b.0.fc.weight %s 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not slapo-opt --slapo-checkpoint=modules=b.0 %s 2>&1 | FileCheck %s --check-prefix=ORDER

// Two blocks: a linear layer, tanh (whose gradient reads its result) and a
// dropout; block 1's layer all-reduces its (tensor-parallel) partial sums.
module {
  slapo.param @b.0.fc.weight : tensor<4x4xf32>
  slapo.param @b.1.fc.weight : tensor<4x4xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %w0 = slapo.get_param @b.0.fc.weight {slapo.module = "b.0.fc"} : tensor<4x4xf32>
    %h0 = slapo.linear %x, %w0 {slapo.module = "b.0.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %a0 = slapo.tanh %h0 {slapo.module = "b.0.act"} : tensor<2x4xf32>
    %d0 = slapo.dropout %a0 {p = 1.000000e-01 : f64, stream = 0 : i64, slapo.module = "b.0.drop"} : tensor<2x4xf32>
    %w1 = slapo.get_param @b.1.fc.weight {slapo.module = "b.1.fc"} : tensor<4x4xf32>
    %h1 = slapo.linear %d0, %w1 {slapo.module = "b.1.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %r1 = slapo.all_reduce %h1 <tp> {slapo.module = "b.1.fc"} : tensor<2x4xf32>
    %a1 = slapo.tanh %r1 {slapo.module = "b.1.act"} : tensor<2x4xf32>
    %l = slapo.sum %a1 {dims = array<i64: 0, 1>, keepdim = false, slapo.module = "loss"} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// The forward is unchanged. b.0.act is inside b.0, which recomputes it.
// Each block no longer keeps its tanh result (32 bytes) for its backward.
// CHECK: module attributes {slapo.recomputation = {activation_bytes_not_kept = 64 : i64, arena_bytes_without = 896 : i64, matmul_flops = 128 : i64, modules = ["b.0", "b.1"]}}
// CHECK: func.func @train_step(%[[X:.*]]: tensor<2x4xf32> {slapo.name = "x"}, %[[STEP:.*]]: tensor<i64> {slapo.name = "step"}
// CHECK-NEXT: %[[W0:.*]] = slapo.get_param @b.0.fc.weight
// CHECK-NEXT: %[[H0:.*]] = slapo.linear %[[X]], %[[W0]] {slapo.module = "b.0.fc"} :
// CHECK-NEXT: %[[A0:.*]] = slapo.tanh %[[H0]] {slapo.module = "b.0.act"} :
// CHECK-NEXT: %[[D0:.*]] = slapo.dropout %[[A0]] step %[[STEP]] {p = 1.000000e-01 : f64, slapo.module = "b.0.drop", stream = 0 : i64}
// CHECK-NEXT: %[[W1:.*]] = slapo.get_param @b.1.fc.weight
// CHECK-NEXT: %[[H1:.*]] = slapo.linear %[[D0]], %[[W1]] {slapo.module = "b.1.fc"} :
// CHECK-NEXT: %[[R1:.*]] = slapo.all_reduce %[[H1]] <tp> {slapo.module = "b.1.fc"} :
// CHECK-NEXT: %[[A1:.*]] = slapo.tanh %[[R1]] {slapo.module = "b.1.act"} :
// CHECK-NEXT: %[[LOSS:.*]] = slapo.sum %[[A1]]
// Block 1's backward starts with tanh's gradient, which reads tanh's result:
// the layer and its all-reduce (issued again, as in Megatron) and tanh are
// computed again from the block's input and weight, just before it.
// CHECK: %[[H1R:.*]] = slapo.linear %[[D0]], %[[W1]] {slapo.module = "b.1.fc", slapo.phase = "backward", slapo.recomputed}
// CHECK-NEXT: %[[R1R:.*]] = slapo.all_reduce %[[H1R]] <tp> {slapo.module = "b.1.fc", slapo.phase = "backward", slapo.recomputed}
// CHECK-NEXT: %[[A1R:.*]] = slapo.tanh %[[R1R]] {slapo.module = "b.1.act", slapo.phase = "backward", slapo.recomputed}
// CHECK-NEXT: slapo.mul %[[A1R]], %[[A1R]] {slapo.module = "b.1.act", slapo.phase = "backward"}
// The weight's gradient reads the block's input, which is kept: block 0's
// dropout is not recomputed (block 0's backward does not read it; the
// dropout's gradient draws its mask again).
// CHECK: %[[G1:.*]] = slapo.matmul %{{.*}}, %[[D0]] {slapo.module = "b.1.fc", slapo.phase = "backward"}
// CHECK: %[[GD0:.*]] = slapo.dropout %{{.*}} step %[[STEP]] {p = 1.000000e-01 : f64, slapo.module = "b.0.drop", slapo.phase = "backward", stream = 0 : i64}
// CHECK-NEXT: %[[H0R:.*]] = slapo.linear %[[X]], %[[W0]] {slapo.module = "b.0.fc", slapo.phase = "backward", slapo.recomputed}
// CHECK-NEXT: %[[A0R:.*]] = slapo.tanh %[[H0R]] {slapo.module = "b.0.act", slapo.phase = "backward", slapo.recomputed}
// CHECK-NEXT: slapo.mul %[[A0R]], %[[A0R]] {slapo.module = "b.0.act", slapo.phase = "backward"}
// CHECK-NOT: slapo.recomputed
// CHECK: return %[[LOSS]]

// Without modules it changes nothing, and says what the arena is: at the
// peak the backward still holds 64 bytes of forward values and the 4-byte
// loss (68 bytes of activations); checkpointing b.0 recomputes 32 of them
// (36).
// NONE: module attributes {slapo.memory = {activations = 68 : i64, arena_bytes = 896 : i64, {{.*}}}, slapo.recomputation = {activation_bytes_not_kept = 0 : i64, arena_bytes_without = 896 : i64, matmul_flops = 0 : i64, modules = []}}
// NONE-NOT: slapo.recomputed

// Block 0's tanh result no longer lives through block 1: 64 bytes less.
// PLANNED: module attributes {slapo.memory = {activations = 36 : i64, arena_bytes = 832 : i64, {{.*}}}, slapo.recomputation = {activation_bytes_not_kept = 32 : i64, arena_bytes_without = 896 : i64, matmul_flops = 64 : i64, modules = ["b.0"]}}

// A budget the plan meets already checkpoints nothing.
// ROOMY: slapo.recomputation = {activation_bytes_not_kept = 0 : i64, arena_bytes_without = 896 : i64, budget = 1000 : i64, chosen = [], matmul_flops = 0 : i64, modules = []}
// ROOMY-NOT: slapo.recomputed

// 850 bytes: one block is enough. Equally cheap per byte kept, the
// candidates are tried in the order given, but block 1 frees nothing at the
// peak (its backward comes first, right after the forward), so both fit
// and then block 1 is left out: the budget is met without it.
// FITS: slapo.memory = {activations = 36 : i64, arena_bytes = 832 : i64
// FITS-SAME: slapo.recomputation = {activation_bytes_not_kept = 32 : i64, arena_bytes_without = 896 : i64, budget = 850 : i64, chosen = ["b.0"], matmul_flops = 64 : i64, modules = ["b.0"]}

// TIGHT: error: memory_budget of 800 B cannot be met: the planned arena is 896 B, and checkpointing all 2 more module(s) reaches no less than 832 B

// LOSS-MODULE: checkpoint.mlir:{{[0-9]+}}:{{[0-9]+}}: error: checkpoint(): module 'loss' computes the loss: its backward follows its forward at once, so checkpointing it frees nothing; checkpoint the blocks before it
// EMPTY: error: checkpoint(): module 'b.0.fc.weight' computes nothing in the forward: there is nothing to recompute
// ORDER: error: slapo-checkpoint: there is no one-block func.func @train_step (run slapo-optimizer first)
