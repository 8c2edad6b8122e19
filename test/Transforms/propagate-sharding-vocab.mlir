// RUN: slapo-opt --slapo-propagate-sharding=tp=2 %s | FileCheck %s

// Megatron's vocabulary-parallel GPT: the token embedding's rows split over
// the ranks, the tied LM head computing each rank's block of the logits,
// and the cross-entropy computed from the blocks: no rank holds all logits.
module {
  slapo.param @wte.weight : tensor<16x4xf32> {shard_axis = 0 : i64, aliases = ["lm_head.weight"]}
  func.func @forward(%ids: tensor<2x3xi64>, %labels: tensor<6xi64>) -> tensor<f32> {
    %w = slapo.get_param @wte.weight : tensor<16x4xf32>
    %e = slapo.embedding %w, %ids : (tensor<16x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %h = slapo.all_reduce %e <tp> : tensor<2x3x4xf32>
    %x = slapo.grad_all_reduce %h <tp> : tensor<2x3x4xf32>
    %z = slapo.linear %x, %w : (tensor<2x3x4xf32>, tensor<16x4xf32>) -> tensor<2x3x16xf32>
    %r = slapo.reshape %z : tensor<2x3x16xf32> -> tensor<6x16xf32>
    %l = slapo.cross_entropy %r, %labels {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<6x16xf32>, tensor<6xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
// CHECK: slapo.param @wte.weight : tensor<8x4xf32> {aliases = ["lm_head.weight"], shard_axis = 0 : i64}
// The lookup: ids minus this rank's first row, zero rows for others' ids.
// CHECK: %[[RANK:.*]] = slapo.group_rank <tp> : tensor<i64>
// CHECK: %[[START:.*]] = slapo.mul %{{.*}}, %{{.*}} : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK: %[[LOCAL:.*]] = slapo.sub %arg0, %[[START]]
// CHECK: %[[SAFE:.*]] = slapo.where %{{.*}}, %[[LOCAL]], %{{.*}} : (tensor<2x3xi1>, tensor<2x3xi64>, tensor<i64>) -> tensor<2x3xi64>
// CHECK: %[[ROWS:.*]] = slapo.embedding %{{.*}}, %[[SAFE]] : (tensor<8x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
// CHECK: %[[KEPT:.*]] = slapo.where %{{.*}}, %[[ROWS]], %{{.*}} : (tensor<2x3x1xi1>, tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: slapo.all_reduce %[[KEPT]] <tp> : tensor<2x3x4xf32>
// The LM head gives this rank's 8 of 16 classes; the loss gathers one
// log-sum-exp per row and rank, and all-reduces the target's logit.
// CHECK: slapo.linear %{{.*}}, %{{.*}} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
// CHECK: %[[LSE:.*]] = slapo.all_gather %{{.*}} <tp> {dim = 1 : i64} : tensor<6x1xf32> -> tensor<6x2xf32>
// CHECK: %[[PICKED:.*]] = slapo.sum %{{.*}} {dims = array<i64: 1>, keepdim = false} : tensor<6x8xf32> -> tensor<6xf32>
// CHECK-NEXT: slapo.all_reduce %[[PICKED]] <tp> : tensor<6xf32>
// CHECK-NOT: slapo.cross_entropy
// CHECK: return %{{.*}} : tensor<f32>
