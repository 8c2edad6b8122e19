// RUN: slapo-opt --slapo-propagate-sharding=tp=2 --split-input-file --verify-diagnostics %s | FileCheck %s

// The sharding rule of slapo.linear_cross_entropy
// (dialects/lib/ShardingNN.cpp): replicated operands give replicated
// results; a weight (and bias) split by classes, the vocabulary over the
// ranks, makes it vocabulary-parallel (compiler/Transforms/VocabParallel.cpp).
module {
  slapo.param @w : tensor<16x8xf32>
  func.func @forward(%h: tensor<6x8xf32>, %t: tensor<6xi64>) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<16x8xf32>
    %loss, %dh, %dw = slapo.linear_cross_entropy %h, %w, %t {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>)
    return %loss : tensor<f32>
  }
}
// CHECK: slapo.linear_cross_entropy {{.*}} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>)

// -----

// Vocabulary-parallel, with a bias: each rank's log-sum-exp over its 8
// classes by the chunked kernel, gathered ([6, 2]) into each row's; the
// target's logit from its weight row and bias on the rank that owns it,
// all-reduced; no [6, 8] or [6, 16] logits.
module {
  slapo.param @w : tensor<16x8xf32> {shard_axis = 0 : i64}
  slapo.param @b : tensor<16xf32> {shard_axis = 0 : i64}
  func.func @forward(%h: tensor<6x8xf32>, %t: tensor<6xi64>) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<16x8xf32>
    %b = slapo.get_param @b : tensor<16xf32>
    %loss, %dh, %dw, %db = slapo.linear_cross_entropy %h, %w, %t bias %b {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6xi64>, tensor<16xf32>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
    return %loss : tensor<f32>
  }
}
// CHECK-LABEL: slapo.param @b
// CHECK-NOT: linear_cross_entropy
// CHECK: %[[W:.*]] = slapo.get_param @w : tensor<8x8xf32>
// CHECK: %[[B:.*]] = slapo.get_param @b : tensor<8xf32>
// CHECK: %[[LSE:.*]] = slapo.linear_log_sum_exp %arg0, %[[W]] bias %[[B]] : (tensor<6x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<6xf32>
// CHECK: %[[COLUMN:.*]] = slapo.reshape %[[LSE]] : tensor<6xf32> -> tensor<6x1xf32>
// CHECK: slapo.all_gather %[[COLUMN]] <tp> {dim = 1 : i64} : tensor<6x1xf32> -> tensor<6x2xf32>
// CHECK: slapo.group_rank
// CHECK: %[[ROWS:.*]] = slapo.embedding %[[W]], %[[LOCAL:.*]] : (tensor<8x8xf32>, tensor<6xi64>) -> tensor<6x8xf32>
// CHECK: slapo.mul %arg0, %[[ROWS]]
// CHECK: slapo.embedding %{{.*}}, %[[LOCAL]] : (tensor<8x1xf32>, tensor<6xi64>) -> tensor<6x1xf32>
// CHECK: %[[OWN:.*]] = slapo.where
// CHECK-NEXT: slapo.all_reduce %[[OWN]] <tp> : tensor<6xf32>
// CHECK-NOT: tensor<6x16xf32>
// CHECK-NOT: linear_cross_entropy
// CHECK: return

// -----

// The hidden rows computed from a parameter: their gradient would be one
// term on each rank without a bwd_post all_reduce.
module {
  slapo.param @w : tensor<16x8xf32> {shard_axis = 0 : i64}
  slapo.param @scale : tensor<8xf32>
  func.func @forward(%x: tensor<6x8xf32>, %t: tensor<6xi64>) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<16x8xf32>
    %scale = slapo.get_param @scale : tensor<8xf32>
    %h = slapo.mul %x, %scale : (tensor<6x8xf32>, tensor<8xf32>) -> tensor<6x8xf32>
    // expected-error @+1 {{tensor parallelism: the replicated input of 'linear_cross_entropy' in}}
    %loss, %dh, %dw = slapo.linear_cross_entropy %h, %w, %t {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>)
    return %loss : tensor<f32>
  }
}

// -----

// The weight split by features: not vocabulary-parallel.
module {
  slapo.param @w : tensor<16x8xf32> {shard_axis = 1 : i64}
  func.func @forward(%h: tensor<6x8xf32>, %t: tensor<6xi64>) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<16x8xf32>
    // expected-error @+1 {{tensor parallelism: 'linear_cross_entropy' (replace("cross_entropy")) needs its hidden rows and targets whole on every rank and its weight and bias whole or split by classes (dim 0), but an operand is split along dim 1}}
    %loss, %dh, %dw = slapo.linear_cross_entropy %h, %w, %t {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>)
    return %loss : tensor<f32>
  }
}

// -----

// The weight split by classes and the bias whole.
module {
  slapo.param @w : tensor<16x8xf32> {shard_axis = 0 : i64}
  slapo.param @b : tensor<16xf32>
  func.func @forward(%h: tensor<6x8xf32>, %t: tensor<6xi64>) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<16x8xf32>
    %b = slapo.get_param @b : tensor<16xf32>
    // expected-error @+1 {{of a weight and bias of which only one is split by classes: shard both along axis 0}}
    %loss, %dh, %dw, %db = slapo.linear_cross_entropy %h, %w, %t bias %b {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6xi64>, tensor<16xf32>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
    return %loss : tensor<f32>
  }
}
