// RUN: slapo-opt --slapo-propagate-sharding=tp=2 --split-input-file --verify-diagnostics %s | FileCheck %s

// The sharding rules of contractions, embeddings, losses, softmax and norms
// (dialects/lib/ShardingNN.cpp). Split values come from parameters that
// slapo-shard split or from slapo.scatter (each rank's block of an input),
// partial sums from a sum over the split dim.

// Megatron's MLP: fc1 column-parallel (its bias split alike), fc2
// row-parallel, whose replicated bias is added once, after the all_reduce.
module {
  slapo.param @fc1.weight : tensor<8x4xf32> {shard_axis = 0 : i64}
  slapo.param @fc1.bias : tensor<8xf32> {shard_axis = 0 : i64}
  slapo.param @fc2.weight : tensor<4x8xf32> {shard_axis = 1 : i64}
  slapo.param @fc2.bias : tensor<4xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %w1 = slapo.get_param @fc1.weight : tensor<8x4xf32>
    %b1 = slapo.get_param @fc1.bias : tensor<8xf32>
    %h = slapo.linear %x, %w1, %b1 : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %a = slapo.gelu %h <tanh> : tensor<2x8xf32>
    %w2 = slapo.get_param @fc2.weight : tensor<4x8xf32>
    %b2 = slapo.get_param @fc2.bias : tensor<4xf32>
    %y = slapo.linear %a, %w2, %b2 : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %r = slapo.all_reduce %y <tp> : tensor<2x4xf32>
    return %r : tensor<2x4xf32>
  }
}
// CHECK: slapo.param @fc1.weight : tensor<4x4xf32> {shard_axis = 0 : i64}
// CHECK: slapo.linear %arg0, %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = slapo.gelu %{{.*}} <tanh> : tensor<2x4xf32>
// CHECK-NEXT: %[[W2:.*]] = slapo.get_param @fc2.weight : tensor<4x4xf32>
// CHECK-NEXT: %[[B2:.*]] = slapo.get_param @fc2.bias : tensor<4xf32>
// CHECK-NEXT: %[[Y:.*]] = slapo.linear %[[A]], %[[W2]] : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[R:.*]] = slapo.all_reduce %[[Y]] <tp> : tensor<2x4xf32>
// CHECK-NEXT: %[[OUT:.*]] = slapo.add %[[R]], %[[B2]] : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: return %[[OUT]]

// -----

// Attention split by heads (the batch dim of the products): softmax along
// the keys, and a product with a value that broadcasts along the heads.
func.func @forward(%q: tensor<4x2x2xf32>, %k: tensor<4x2x2xf32>, %v: tensor<1x2x2xf32>) -> tensor<4x2x2xf32> {
  %qs = slapo.scatter %q <tp> {dim = 0 : i64} : tensor<4x2x2xf32> -> tensor<4x2x2xf32>
  %ks = slapo.scatter %k <tp> {dim = 0 : i64} : tensor<4x2x2xf32> -> tensor<4x2x2xf32>
  %s = slapo.matmul %qs, %ks : (tensor<4x2x2xf32>, tensor<4x2x2xf32>) -> tensor<4x2x2xf32>
  %p = slapo.softmax %s {dim = 2 : i64} : tensor<4x2x2xf32>
  %o = slapo.matmul %p, %v : (tensor<4x2x2xf32>, tensor<1x2x2xf32>) -> tensor<4x2x2xf32>
  %g = slapo.all_gather %o <tp> {dim = 0 : i64} : tensor<4x2x2xf32> -> tensor<4x2x2xf32>
  return %g : tensor<4x2x2xf32>
}
// CHECK: // {{-+}}
// CHECK: slapo.matmul %{{.*}}, %{{.*}} : (tensor<2x2x2xf32>, tensor<2x2x2xf32>) -> tensor<2x2x2xf32>
// CHECK-NEXT: slapo.softmax %{{.*}} {dim = 2 : i64} : tensor<2x2x2xf32>
// CHECK-NEXT: slapo.matmul %{{.*}}, %arg2 : (tensor<2x2x2xf32>, tensor<1x2x2xf32>) -> tensor<2x2x2xf32>
// CHECK-NEXT: slapo.all_gather %{{.*}} <tp> {dim = 0 : i64} : tensor<2x2x2xf32> -> tensor<4x2x2xf32>

// -----

// The contraction split on both sides leaves each rank one term; a product
// of that partial sum with a replicated factor stays one.
func.func @forward(%a: tensor<2x8xf32>, %b: tensor<8x4xf32>, %c: tensor<4x4xf32>) -> tensor<2x4xf32> {
  %as = slapo.scatter %a <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  %bs = slapo.scatter %b <tp> {dim = 0 : i64} : tensor<8x4xf32> -> tensor<8x4xf32>
  %m = slapo.matmul %as, %bs : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %n = slapo.matmul %m, %c : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r = slapo.all_reduce %n <tp> : tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}
// CHECK: // {{-+}}
// CHECK: %[[M:.*]] = slapo.matmul %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[N:.*]] = slapo.matmul %[[M]], %arg2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: slapo.all_reduce %[[N]] <tp> : tensor<2x4xf32>

// -----

// An embedding with its features split looks up each rank's columns.
module {
  slapo.param @wte : tensor<16x8xf32> {shard_axis = 1 : i64}
  func.func @forward(%ids: tensor<2x4xi64>) -> tensor<2x4x8xf32> {
    %w = slapo.get_param @wte : tensor<16x8xf32>
    %e = slapo.embedding %w, %ids : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
    %g = slapo.all_gather %e <tp> {dim = 2 : i64} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
    return %g : tensor<2x4x8xf32>
  }
}
// CHECK: // {{-+}}
// CHECK: slapo.param @wte : tensor<16x4xf32> {shard_axis = 1 : i64}
// CHECK: slapo.embedding %{{.*}}, %arg0 : (tensor<16x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
// CHECK-NEXT: slapo.all_gather %{{.*}} <tp> {dim = 2 : i64} : tensor<2x4x4xf32> -> tensor<2x4x8xf32>

// -----

// Rows split: the norm and log-softmax along the features keep the split,
// and the loss takes the gathered logits.
func.func @forward(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>, %t: tensor<4xi64>) -> tensor<f32> {
  %xs = slapo.scatter %x <tp> {dim = 0 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %n = slapo.layer_norm %xs weight %w bias %b {eps = 1.000000e-05 : f64, normalized_rank = 1 : i64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %l = slapo.log_softmax %n {dim = 1 : i64} : tensor<4x8xf32>
  %g = slapo.all_gather %l <tp> {dim = 0 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %loss = slapo.cross_entropy %g, %t {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}
// CHECK: // {{-+}}
// CHECK: slapo.layer_norm %{{.*}} weight %arg1 bias %arg2 {{.*}} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: slapo.log_softmax %{{.*}} {dim = 1 : i64} : tensor<2x8xf32>
// CHECK-NEXT: slapo.all_gather %{{.*}} <tp> {dim = 0 : i64} : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: slapo.cross_entropy %{{.*}}, %arg3 {{.*}} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>

// -----

func.func @forward(%x: tensor<2x2x4xf32>, %w: tensor<8x4xf32>) -> tensor<2x8xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
  %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x4xf32> -> tensor<2x4xf32>
  // expected-error @+1 {{reaches 'linear' in the root module, which needs the whole value}}
  %y = slapo.linear %p, %w : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

module {
  slapo.param @fc.weight : tensor<8x4xf32>
  slapo.param @fc.bias : tensor<8xf32> {shard_axis = 0 : i64}
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
    %w = slapo.get_param @fc.weight : tensor<8x4xf32>
    %b = slapo.get_param @fc.bias : tensor<8xf32>
    // expected-error @+1 {{tensor parallelism: a split bias with a replicated weight}}
    %y = slapo.linear %x, %w, %b : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    return %y : tensor<2x8xf32>
  }
}

// -----

module {
  slapo.param @fc.weight : tensor<8x4xf32> {shard_axis = 0 : i64}
  slapo.param @fc.bias : tensor<8xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
    %w = slapo.get_param @fc.weight : tensor<8x4xf32>
    %b = slapo.get_param @fc.bias : tensor<8xf32>
    // expected-error @+1 {{tensor parallelism: the bias of a weight split along dim 0 must be split alike, not replicated}}
    %y = slapo.linear %x, %w, %b : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %g = slapo.all_gather %y <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
    return %g : tensor<2x8xf32>
  }
}

// -----

module {
  slapo.param @fc.weight : tensor<4x8xf32> {shard_axis = 1 : i64}
  slapo.param @fc.bias : tensor<4xf32> {shard_axis = 0 : i64}
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
    %xs = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
    %w = slapo.get_param @fc.weight : tensor<4x8xf32>
    %b = slapo.get_param @fc.bias : tensor<4xf32>
    // expected-error @+1 {{tensor parallelism: the bias of a row-parallel weight must be replicated, not split along dim 0}}
    %y = slapo.linear %xs, %w, %b : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %r = slapo.all_reduce %y <tp> : tensor<2x4xf32>
    return %r : tensor<2x4xf32>
  }
}

// -----

// Rows of the input split and output features of the weight split: no rank
// holds a block of the result.
module {
  slapo.param @fc.weight : tensor<8x4xf32> {shard_axis = 0 : i64}
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
    %xs = slapo.scatter %x <tp> {dim = 0 : i64} : tensor<2x4xf32> -> tensor<2x4xf32>
    %w = slapo.get_param @fc.weight : tensor<8x4xf32>
    // expected-error @+1 {{tensor parallelism: multiplies an input split along dim 0 by a weight split along dim 0 ([out, in])}}
    %y = slapo.linear %xs, %w : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    return %y : tensor<2x8xf32>
  }
}

// -----

func.func @forward(%a: tensor<2x8xf32>, %b: tensor<8x4xf32>) -> tensor<2x4xf32> {
  %as = slapo.scatter %a <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  // expected-error @+1 {{tensor parallelism: multiplies lhs [..., M, K] split along dim 1 by rhs [..., K, N] replicated: splitting the contraction needs K split on both (lhs's last dim, rhs's second to last), in the same chunks}}
  %m = slapo.matmul %as, %b : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %r = slapo.all_reduce %m <tp> : tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

func.func @forward(%x: tensor<2x2x4xf32>) -> tensor<2x2xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
  %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x4xf32> -> tensor<2x4xf32>
  %pt = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x4xf32> -> tensor<2x4xf32>
  %t = slapo.permute %pt {permutation = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
  // expected-error @+1 {{reaches 'matmul' in the root module, which needs the whole value}}
  %m = slapo.matmul %p, %t : (tensor<2x4xf32>, tensor<4x2xf32>) -> tensor<2x2xf32>
  %r = slapo.all_reduce %m <tp> : tensor<2x2xf32>
  return %r : tensor<2x2xf32>
}

// -----

func.func @forward(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x4xf32> {
  %as = slapo.scatter %a <tp> {dim = 0 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %bs = slapo.scatter %b <tp> {dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x4xf32>
  // expected-error @+1 {{tensor parallelism: multiplies operands split along dim 0 and split along dim 1, which leaves no split on one rank}}
  %m = slapo.matmul %as, %bs : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %m : tensor<4x4xf32>
}

// -----

func.func @forward(%q: tensor<4x2x2xf32>, %k: tensor<4x2x2xf32>) -> tensor<4x2x2xf32> {
  %qs = slapo.scatter %q <tp> {dim = 0 : i64} : tensor<4x2x2xf32> -> tensor<4x2x2xf32>
  // expected-error @+1 {{tensor parallelism: multiplies an operand split along batch dim 0 with a replicated one}}
  %s = slapo.matmul %qs, %k : (tensor<4x2x2xf32>, tensor<4x2x2xf32>) -> tensor<4x2x2xf32>
  %g = slapo.all_gather %s <tp> {dim = 0 : i64} : tensor<4x2x2xf32> -> tensor<4x2x2xf32>
  return %g : tensor<4x2x2xf32>
}

// -----

module {
  slapo.param @wte : tensor<16x4xf32> {shard_axis = 0 : i64}
  func.func @forward(%ids: tensor<2x3xi64>) -> tensor<2x3x4xf32> {
    %w = slapo.get_param @wte : tensor<16x4xf32>
    // expected-error @+1 {{tensor parallelism: a vocabulary-parallel embedding needs its rows split in one chunk and no padding_idx}}
    %e = slapo.embedding %w, %ids {padding_idx = 0 : i64} : (tensor<16x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %r = slapo.all_reduce %e <tp> : tensor<2x3x4xf32>
    return %r : tensor<2x3x4xf32>
  }
}

// -----

func.func @forward(%x: tensor<2x2x8xf32>, %t: tensor<2xi64>) -> tensor<f32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x8xf32> -> tensor<2x2x8xf32>
  %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x8xf32> -> tensor<2x8xf32>
  // expected-error @+1 {{reaches 'cross_entropy' in the root module, which needs the whole value}}
  %l = slapo.cross_entropy %p, %t {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @forward(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %xs = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  // expected-error @+1 {{tensor parallelism: 'layer_norm' along dim 1, which is split over the ranks}}
  %n = slapo.layer_norm %xs {eps = 1.000000e-05 : f64, normalized_rank = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = slapo.all_gather %n <tp> {dim = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

module {
  slapo.param @ln.weight : tensor<8xf32> {shard_axis = 0 : i64}
  func.func @forward(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %xs = slapo.scatter %x <tp> {dim = 0 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    %w = slapo.get_param @ln.weight : tensor<8xf32>
    // expected-error @+1 {{tensor parallelism: the affine parameters of a norm must be replicated, not split along dim 0}}
    %n = slapo.layer_norm %xs weight %w {eps = 1.000000e-05 : f64, normalized_rank = 1 : i64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %g = slapo.all_gather %n <tp> {dim = 0 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
    return %g : tensor<4x8xf32>
  }
}

// -----

func.func @forward(%x: tensor<2x2x8xf32>) -> tensor<2x8xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x8xf32> -> tensor<2x2x8xf32>
  %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x8xf32> -> tensor<2x8xf32>
  // expected-error @+1 {{reaches 'softmax' in the root module, which needs the whole value}}
  %y = slapo.softmax %p {dim = 1 : i64} : tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Token-major attention (bshd: the heads are dim 2 of q, k, v and the
// result, dim 1 of the log-sum-exp) has no rule: it is made after the
// propagation, from the heads-major attention that was split.
module {
  slapo.param @qkv : tensor<2x4x6x8xf32> {shard_axis = 2 : i64}
  func.func @forward() -> tensor<2x4x6x8xf32> {
    %q = slapo.get_param @qkv : tensor<2x4x6x8xf32>
    // expected-error @+1 {{tensor parallelism: 'flash_attention' with bshd operands has no sharding rule}}
    %o, %lse = slapo.flash_attention %q, %q, %q {bshd, masked_score = 0.0 : f64, scale = 0.5 : f64} : (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> (tensor<2x4x6x8xf32>, tensor<2x6x4xf32>)
    return %o : tensor<2x4x6x8xf32>
  }
}
