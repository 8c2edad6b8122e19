// RUN: slapo-opt "--slapo-replace=modules=lm_head kernel=cross_entropy" %s --split-input-file --verify-diagnostics | FileCheck %s

// GPT-2's LM head and shifted loss: the logits [2, 4, 16] lose their last
// position and become rows [6, 16] for the cross-entropy. The hidden rows
// take the same slice and reshape, and one slapo.linear_cross_entropy
// replaces the linear and the loss: no [2, 4, 16] or [6, 16] tensor is left.
module {
  slapo.param @wte.weight : tensor<16x8xf32> {aliases = ["lm_head.weight"]}
  func.func @forward(%h: tensor<2x4x8xf32>, %labels: tensor<2x4xi64>) -> tensor<f32> {
    %w = slapo.get_param @wte.weight {slapo.module = "lm_head"} : tensor<16x8xf32>
    %logits = slapo.linear %h, %w {slapo.module = "lm_head"} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
    %shift = slapo.slice %logits {dim = 1 : i64, end = 3 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x4x16xf32> -> tensor<2x3x16xf32>
    %rows = slapo.reshape %shift : tensor<2x3x16xf32> -> tensor<6x16xf32>
    %l = slapo.slice %labels {dim = 1 : i64, end = 4 : i64, start = 1 : i64, step = 1 : i64} : tensor<2x4xi64> -> tensor<2x3xi64>
    %t = slapo.reshape %l : tensor<2x3xi64> -> tensor<6xi64>
    %loss = slapo.cross_entropy %rows, %t {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<6x16xf32>, tensor<6xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
// CHECK-LABEL: func.func @forward
//   CHECK-NOT: tensor<2x4x16xf32>
//   CHECK-NOT: tensor<6x16xf32>
//       CHECK: %[[W:.*]] = slapo.get_param @wte.weight
//       CHECK: %[[T:.*]] = slapo.reshape %{{.*}} : tensor<2x3xi64> -> tensor<6xi64>
//  CHECK-NEXT: %[[SHIFT:.*]] = slapo.slice %arg0 {dim = 1 : i64, end = 3 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x3x8xf32>
//  CHECK-NEXT: %[[ROWS:.*]] = slapo.reshape %[[SHIFT]] : tensor<2x3x8xf32> -> tensor<6x8xf32>
//  CHECK-NEXT: %[[LOSS:.*]], %{{.*}}, %{{.*}} = slapo.linear_cross_entropy %[[ROWS]], %[[W]], %[[T]] {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>, slapo.module = "lm_head"} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>)
//  CHECK-NEXT: return %[[LOSS]]
//   CHECK-NOT: tensor<6x16xf32>

// -----

// BERT's decoder: a bias, the logits viewed as rows directly, a summed loss
// with another ignored index.
module {
  slapo.param @decoder.bias : tensor<16xf32>
  func.func @forward(%h: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %t: tensor<8xi32>) -> tensor<f32> {
    %b = slapo.get_param @decoder.bias {slapo.module = "lm_head"} : tensor<16xf32>
    %logits = slapo.linear %h, %w, %b {slapo.module = "lm_head"} : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
    %rows = slapo.reshape %logits : tensor<2x4x16xf32> -> tensor<8x16xf32>
    %loss = slapo.cross_entropy %rows, %t {ignore_index = 0 : i64, reduction = #slapo.reduction<sum>} : (tensor<8x16xf32>, tensor<8xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
// CHECK-LABEL: func.func @forward
//       CHECK: %[[B:.*]] = slapo.get_param @decoder.bias
//  CHECK-NEXT: %[[ROWS:.*]] = slapo.reshape %arg0 : tensor<2x4x8xf32> -> tensor<8x8xf32>
//  CHECK-NEXT: %[[LOSS:.*]], %{{.*}}, %{{.*}}, %{{.*}} = slapo.linear_cross_entropy %[[ROWS]], %arg1, %arg2 bias %[[B]] {ignore_index = 0 : i64, reduction = #slapo.reduction<sum>, slapo.module = "lm_head"} : (tensor<8x8xf32>, tensor<16x8xf32>, tensor<8xi32>, tensor<16xf32>) -> (tensor<f32>, tensor<8x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
//  CHECK-NEXT: return %[[LOSS]]

// -----

// The logits are also read by another op (a softmax for sampling): the
// kernel never stores them.
module {
  func.func @forward(%h: tensor<6x8xf32>, %w: tensor<16x8xf32>, %t: tensor<6xi64>) -> (tensor<f32>, tensor<6x16xf32>) {
    // expected-error@+1 {{replace("cross_entropy"): module 'lm_head' does not compute what cross_entropy computes: the result of 'slapo.linear' (an intermediate of the kernel) is also read by 'slapo.softmax': the kernel never stores it}}
    %logits = slapo.linear %h, %w {slapo.module = "lm_head"} : (tensor<6x8xf32>, tensor<16x8xf32>) -> tensor<6x16xf32>
    %loss = slapo.cross_entropy %logits, %t {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<6x16xf32>, tensor<6xi64>) -> tensor<f32>
    // expected-note@+1 {{the op that differs}}
    %p = slapo.softmax %logits {dim = 1 : i64} : tensor<6x16xf32>
    return %loss, %p : tensor<f32>, tensor<6x16xf32>
  }
}

// -----

// A slice of the classes is no view of rows.
module {
  func.func @forward(%h: tensor<6x8xf32>, %w: tensor<16x8xf32>, %t: tensor<6xi64>) -> tensor<f32> {
    // expected-error@+1 {{the logits are read by 'slapo.slice', not by a cross-entropy (through slices, reshapes and permutes of rows that keep the classes last)}}
    %logits = slapo.linear %h, %w {slapo.module = "lm_head"} : (tensor<6x8xf32>, tensor<16x8xf32>) -> tensor<6x16xf32>
    // expected-note@+1 {{the op that differs}}
    %some = slapo.slice %logits {dim = 1 : i64, end = 10 : i64, start = 0 : i64, step = 1 : i64} : tensor<6x16xf32> -> tensor<6x10xf32>
    %loss = slapo.cross_entropy %some, %t {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<6x10xf32>, tensor<6xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Per-row losses: the kernel computes the gradients in the forward, for a
// scalar loss.
module {
  func.func @forward(%h: tensor<6x8xf32>, %w: tensor<16x8xf32>, %t: tensor<6xi64>) -> tensor<f32> {
    // expected-error@+1 {{the cross-entropy has reduction='none': the kernel computes the gradients in the forward, for a scalar loss}}
    %logits = slapo.linear %h, %w {slapo.module = "lm_head"} : (tensor<6x8xf32>, tensor<16x8xf32>) -> tensor<6x16xf32>
    // expected-note@+1 {{the op that differs}}
    %each = slapo.cross_entropy %logits, %t {ignore_index = -100 : i64, reduction = #slapo.reduction<none>} : (tensor<6x16xf32>, tensor<6xi64>) -> tensor<6xf32>
    %loss = slapo.sum %each {dims = array<i64: 0>, keepdim = false} : tensor<6xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A vocabulary-parallel LM head (its weight sharded along the classes) is
// replaced as any other: slapo-propagate-sharding splits the kernel over
// the ranks' classes (sharding-linear-cross-entropy.mlir).
module {
  slapo.param @wte.weight : tensor<8x8xf32> {shard_axis = 0 : i64}
  func.func @forward(%h: tensor<6x8xf32>, %t: tensor<6xi64>) -> tensor<f32> {
    %w = slapo.get_param @wte.weight {slapo.module = "lm_head"} : tensor<8x8xf32>
    %logits = slapo.linear %h, %w {slapo.module = "lm_head"} : (tensor<6x8xf32>, tensor<8x8xf32>) -> tensor<6x8xf32>
    %loss = slapo.cross_entropy %logits, %t {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<6x8xf32>, tensor<6xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
// CHECK-LABEL: slapo.param @wte.weight : tensor<8x8xf32> {shard_axis = 0 : i64}
// CHECK: slapo.linear_cross_entropy %arg0, %{{.*}}, %arg1 {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>, slapo.module = "lm_head"}
// CHECK-NOT: slapo.cross_entropy

// -----

// The logits go nowhere near a cross-entropy (a classifier's logits returned).
module {
  func.func @forward(%h: tensor<6x8xf32>, %w: tensor<16x8xf32>) -> tensor<6x16xf32> {
    // expected-error@+1 {{the logits are read by 'func.return', not by a cross-entropy}}
    %logits = slapo.linear %h, %w {slapo.module = "lm_head"} : (tensor<6x8xf32>, tensor<16x8xf32>) -> tensor<6x16xf32>
    // expected-note@+1 {{the op that differs}}
    return %logits : tensor<6x16xf32>
  }
}

// -----

// A module without a linear.
module {
  func.func @forward(%x: tensor<6x16xf32>, %t: tensor<6xi64>) -> tensor<f32> {
    // expected-error@+1 {{module 'lm_head' does not compute what cross_entropy computes: it computes no linear (the LM head: hidden x weight^T, whose logits the cross-entropy reads)}}
    %y = slapo.softmax %x {dim = 1 : i64, slapo.module = "lm_head"} : tensor<6x16xf32>
    %loss = slapo.cross_entropy %y, %t {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<6x16xf32>, tensor<6xi64>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
