// RUN: slapo-opt "--slapo-shard=modules=fc1 param=weight axis=0" "--slapo-shard=modules=fc2 param=weight axis=1" "--slapo-sync=modules=fc2 mode=fwd_post op=all_reduce" --slapo-fork-rng=modules=act --slapo-propagate-sharding=tp=2 %s | FileCheck %s
// RUN: not slapo-opt "--slapo-shard=modules=fc1 param=weight axis=0" "--slapo-shard=modules=fc2 param=weight axis=1" "--slapo-sync=modules=fc2 mode=fwd_post op=all_reduce" --slapo-fork-rng=modules=drop --slapo-propagate-sharding=tp=2 %s 2>&1 | FileCheck %s --check-prefix=REPLICATED
// RUN: not slapo-opt "--slapo-shard=modules=fc1 param=weight axis=0" "--slapo-shard=modules=fc2 param=weight axis=1" "--slapo-sync=modules=fc2 mode=fwd_post op=all_reduce" --slapo-fork-rng=modules=fc2 --slapo-propagate-sharding=tp=2 %s 2>&1 | FileCheck %s --check-prefix=PARTIAL
// RUN: slapo-opt --slapo-fork-rng=modules=fc1,act %s 2>&1 | FileCheck %s --check-prefix=NONE

// A Megatron MLP (fc1 column-parallel, fc2 row-parallel) with dropouts of a
// replicated input, a split activation and a partial sum.
module {
  slapo.param @fc1.weight : tensor<8x4xf32>
  slapo.param @fc2.weight : tensor<4x8xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %in = slapo.dropout %x {p = 1.000000e-01 : f64, stream = 0 : i64, slapo.module = "drop"} : tensor<2x4xf32>
    %w1 = slapo.get_param @fc1.weight {slapo.module = "fc1"} : tensor<8x4xf32>
    %h = slapo.linear %in, %w1 {slapo.module = "fc1"} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %a = slapo.tanh %h {slapo.module = "act"} : tensor<2x8xf32>
    %d = slapo.dropout %a {p = 1.000000e-01 : f64, stream = 1 : i64, slapo.module = "act.drop"} : tensor<2x8xf32>
    %w2 = slapo.get_param @fc2.weight {slapo.module = "fc2"} : tensor<4x8xf32>
    %y = slapo.linear %d, %w2 {slapo.module = "fc2"} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %yd = slapo.dropout %y {p = 1.000000e-01 : f64, stream = 2 : i64, slapo.module = "fc2.drop"} : tensor<2x4xf32>
    %l = slapo.sum %yd {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// fork_rng marks the dropouts at or below the module's path. Each dropout of
// a split value records the split, so that every rank draws its part of the
// whole value's mask; a partial sum is dropped alike on every rank, so it
// stays one through the dropout and is all-reduced after it.
// CHECK: slapo.dropout %arg0 {p = 1.000000e-01 : f64, slapo.module = "drop", stream = 0 : i64} : tensor<2x4xf32>
// CHECK: %[[A:.*]] = slapo.tanh %{{.*}} {slapo.module = "act"} : tensor<2x4xf32>
// CHECK-NEXT: slapo.dropout %[[A]] {fork_rng, p = 1.000000e-01 : f64, shard_axis = 1 : i64, slapo.module = "act.drop", stream = 1 : i64} : tensor<2x4xf32>
// CHECK: %[[Y:.*]] = slapo.linear
// CHECK-NEXT: %[[YD:.*]] = slapo.dropout %[[Y]] {p = 1.000000e-01 : f64, slapo.module = "fc2.drop", stream = 2 : i64} : tensor<2x4xf32>
// CHECK-NEXT: slapo.all_reduce %[[YD]] <tp> {slapo.module = "fc2"} : tensor<2x4xf32>

// Forked masks of a value that is not split would make the ranks disagree.
// REPLICATED: error: {{.*}}tensor parallelism: fork_rng() gives each rank its own dropout mask, but the input of 'dropout' in 'drop' is replicated: the ranks' copies would differ; fork only modules whose dropouts meet split activations
// PARTIAL: error: {{.*}}tensor parallelism: fork_rng() gives each rank its own dropout mask, but the input of 'dropout' in 'fc2.drop' is a partial sum: the ranks' terms would be dropped unalike; fork only modules whose dropouts meet split activations

// A module without dropout (as in an eval-mode export) is forked in vain.
// NONE: warning: slapo-fork-rng: module 'fc1' has no dropout (an eval-mode export has none): fork_rng() changes nothing there
// NONE-NOT: warning
// NONE: slapo.dropout %{{.*}} {fork_rng, p = 1.000000e-01 : f64, slapo.module = "act.drop", stream = 1 : i64}
