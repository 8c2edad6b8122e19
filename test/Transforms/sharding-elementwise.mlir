// RUN: slapo-opt --slapo-propagate-sharding=tp=2 --split-input-file --verify-diagnostics %s | FileCheck %s

// The sharding rules of the elementwise ops (dialects/lib/ShardingElementwise.cpp).
// Split values come from slapo.scatter (each rank's block of an input) and
// partial sums from a sum over the split dim; ops without a location are in
// the root module.

// Split operands keep their split through every elementwise op, aligned
// from the trailing dims (the bias split along its dim 0 meets dim 1 of the
// activations); a replicated operand that is 1 along the split dim
// broadcasts over each rank's block.
module {
  slapo.param @bias : tensor<8xf32> {shard_axis = 0 : i64}
  func.func @forward(%x: tensor<2x8xf32>, %col: tensor<2x1xf32>) -> tensor<2x8xf32> {
    %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
    %b = slapo.get_param @bias : tensor<8xf32>
    %biased = slapo.add %s, %b : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %scaled = slapo.mul %biased, %col : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    %t = slapo.tanh %scaled : tensor<2x8xf32>
    %zero = slapo.constant dense<0.0> : tensor<f32>
    %positive = slapo.compare <gt> %t, %zero : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xi1>
    %r = slapo.where %positive, %t, %zero : (tensor<2x8xi1>, tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %d = slapo.dropout %r {p = 1.000000e-01 : f64, stream = 0 : i64} : tensor<2x8xf32>
    %g = slapo.all_gather %d <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
    return %g : tensor<2x8xf32>
  }
}
// CHECK: slapo.param @bias : tensor<4xf32> {shard_axis = 0 : i64}
// CHECK: slapo.add %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: slapo.mul %{{.*}}, %arg1 : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: slapo.tanh %{{.*}} : tensor<2x4xf32>
// CHECK-NEXT: slapo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: slapo.compare <gt> {{.*}} : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xi1>
// CHECK-NEXT: slapo.where {{.*}} : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
// A split value's mask is the rank's part of the whole value's.
// CHECK-NEXT: slapo.dropout %{{.*}} {p = 1.000000e-01 : f64, shard_axis = 1 : i64, stream = 0 : i64} : tensor<2x4xf32>
// CHECK-NEXT: slapo.all_gather %{{.*}} <tp> {dim = 1 : i64} : tensor<2x4xf32> -> tensor<2x8xf32>

// -----

// A partial sum stays one through what is linear in it: negation, scaling
// by or division by a replicated value, sums and differences of partial
// sums, float casts and dropout (every rank draws the same mask). A
// replicated bias added to it waits for the all_reduce, and rides along
// through more terms of the sum.
module {
  slapo.param @bias : tensor<4xf32>
  func.func @forward(%x: tensor<2x2x4xf32>, %scale: tensor<2x1xf32>) -> tensor<2x4xf32> {
    %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
    %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x4xf32> -> tensor<2x4xf32>
    %n = slapo.neg %p : tensor<2x4xf32>
    %m = slapo.mul %n, %scale : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
    %q = slapo.div %m, %scale : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
    %diff = slapo.sub %q, %p : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %wide = slapo.cast %diff : tensor<2x4xf32> -> tensor<2x4xf64>
    %narrow = slapo.cast %wide : tensor<2x4xf64> -> tensor<2x4xf32>
    %d = slapo.dropout %narrow {p = 1.000000e-01 : f64, stream = 0 : i64} : tensor<2x4xf32>
    %b = slapo.get_param @bias : tensor<4xf32>
    %biased = slapo.add %d, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %more = slapo.add %biased, %p : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %r = slapo.all_reduce %more <tp> : tensor<2x4xf32>
    return %r : tensor<2x4xf32>
  }
}
// CHECK: // {{-+}}
// CHECK: slapo.param @bias : tensor<4xf32>
// CHECK: %[[P:.*]] = slapo.sum %{{.*}} {dims = array<i64: 1>, keepdim = false} : tensor<2x1x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: slapo.neg %[[P]] : tensor<2x4xf32>
// CHECK-NEXT: slapo.mul
// CHECK-NEXT: slapo.div
// CHECK-NEXT: slapo.sub
// CHECK-NEXT: slapo.cast
// CHECK-NEXT: slapo.cast
// CHECK-NEXT: %[[D:.*]] = slapo.dropout %{{.*}} {p = 1.000000e-01 : f64, stream = 0 : i64} : tensor<2x4xf32>
// CHECK-NEXT: %[[B:.*]] = slapo.get_param @bias : tensor<4xf32>
// CHECK-NEXT: %[[MORE:.*]] = slapo.add %[[D]], %[[P]] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[R:.*]] = slapo.all_reduce %[[MORE]] <tp> : tensor<2x4xf32>
// CHECK-NEXT: %[[BIASED:.*]] = slapo.add %[[R]], %[[B]] : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: return %[[BIASED]] : tensor<2x4xf32>

// -----

func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s1 = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  %s0 = slapo.scatter %x <tp> {dim = 0 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  // expected-error @+1 {{tensor parallelism: combines operands split along dim 1 and split along dim 0}}
  %y = slapo.add %s1, %s0 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// A replicated row as long as the split dim: each rank adds its block of
// it (T5's position bias, replicated, added to scores split by heads). The
// row's gradient is the all_gather of the blocks' (scatter's), whole on
// every rank, so the replicated parameter needs no sync.
module {
  slapo.param @row : tensor<8xf32>
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
    %row = slapo.get_param @row : tensor<8xf32>
    %y = slapo.add %s, %row : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %g = slapo.all_gather %y <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
    return %g : tensor<2x8xf32>
  }
}
// CHECK-LABEL: slapo.param @row : tensor<8xf32>
// CHECK: %[[ROW:.*]] = slapo.get_param @row : tensor<8xf32>
// CHECK-NEXT: %[[BLOCK:.*]] = slapo.scatter %[[ROW]] <tp> {dim = 0 : i64} : tensor<8xf32> -> tensor<4xf32>
// CHECK-NEXT: slapo.add %{{.*}}, %[[BLOCK]] : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>

// -----

// The same where the split is in chunks (a column split's rows, flattened:
// Bloom's ALiBi biases, [batch * heads, 1, keys], added to scores whose
// heads are split in each batch's chunk): each rank reads its block of every
// chunk of the row, through a view of the chunks as a dim of their own.
module {
  slapo.param @fc1.weight : tensor<8x4xf32> {shard_axis = 0 : i64}
  func.func @forward(%x: tensor<2x4xf32>, %row: tensor<16xf32>) -> tensor<16xf32> {
    %w1 = slapo.get_param @fc1.weight : tensor<8x4xf32>
    %h = slapo.linear %x, %w1 : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %f = slapo.reshape %h : tensor<2x8xf32> -> tensor<16xf32>
    %y = slapo.add %f, %row : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
    %back = slapo.reshape %y : tensor<16xf32> -> tensor<2x8xf32>
    %g = slapo.all_gather %back <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
    %r = slapo.reshape %g : tensor<2x8xf32> -> tensor<16xf32>
    return %r : tensor<16xf32>
  }
}
// CHECK-LABEL: slapo.param @fc1.weight : tensor<4x4xf32>
// CHECK: %[[F:.*]] = slapo.reshape %{{.*}} : tensor<2x4xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[CHUNKS:.*]] = slapo.reshape %arg1 : tensor<16xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[BLOCKS:.*]] = slapo.scatter %[[CHUNKS]] <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %[[ROW:.*]] = slapo.reshape %[[BLOCKS]] : tensor<2x4xf32> -> tensor<8xf32>
// CHECK-NEXT: slapo.add %[[F]], %[[ROW]] : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>

// -----

func.func @forward(%x: tensor<2x2x4xf32>, %y: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
  %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x4xf32> -> tensor<2x4xf32>
  %split = slapo.scatter %y <tp> {dim = 1 : i64} : tensor<2x4xf32> -> tensor<2x4xf32>
  // expected-error @+1 {{tensor parallelism: a partial sum (from the root module, where a split contraction leaves each rank one term of it) reaches 'mul' in the root module, which needs the whole value; complete the sum first: sch[""].sync("fwd_post", "all_reduce")}}
  %m = slapo.mul %split, %p : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %g = slapo.all_gather %m <tp> {dim = 1 : i64} : tensor<2x4xf32> -> tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}

// -----

func.func @forward(%x: tensor<2x2x4xf32>) -> tensor<2x4xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
  %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x4xf32> -> tensor<2x4xf32>
  // expected-error @+1 {{reaches 'exp' in the root module, which needs the whole value}}
  %e = slapo.exp %p : tensor<2x4xf32>
  %r = slapo.all_reduce %e <tp> : tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

// A product of two partial sums is not the sum of the ranks' products.
func.func @forward(%x: tensor<2x2x4xf32>) -> tensor<2x4xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
  %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x4xf32> -> tensor<2x4xf32>
  // expected-error @+1 {{reaches 'mul' in the root module, which needs the whole value}}
  %m = slapo.mul %p, %p : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %r = slapo.all_reduce %m <tp> : tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

func.func @forward(%x: tensor<2x2x4xf32>, %y: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
  %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x4xf32> -> tensor<2x4xf32>
  // expected-error @+1 {{reaches 'div' in the root module, which needs the whole value}}
  %q = slapo.div %y, %p : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %r = slapo.all_reduce %q <tp> : tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

// Every rank would subtract the whole replicated value from its term.
func.func @forward(%x: tensor<2x2x4xf32>, %y: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
  %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x4xf32> -> tensor<2x4xf32>
  // expected-error @+1 {{reaches 'sub' in the root module, which needs the whole value}}
  %d = slapo.sub %p, %y : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %r = slapo.all_reduce %d <tp> : tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

// Only a replicated value along the sum's trailing dims is a bias that can
// wait for the all_reduce.
func.func @forward(%x: tensor<2x2x4xf32>, %col: tensor<2x1xf32>) -> tensor<2x4xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
  %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x4xf32> -> tensor<2x4xf32>
  // expected-error @+1 {{reaches 'add' in the root module, which needs the whole value}}
  %a = slapo.add %p, %col : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  %r = slapo.all_reduce %a <tp> : tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

// A partial sum whose bias waits reaches an op that would see it without
// the bias.
module {
  slapo.param @bias : tensor<4xf32>
  func.func @forward(%x: tensor<2x2x4xf32>, %scale: tensor<2x1xf32>) -> tensor<2x4xf32> {
    %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
    %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x4xf32> -> tensor<2x4xf32>
    %b = slapo.get_param @bias : tensor<4xf32>
    %biased = slapo.add %p, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    // expected-error @+1 {{reaches 'mul' in the root module, which needs the whole value}}
    %m = slapo.mul %biased, %scale : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
    %r = slapo.all_reduce %m <tp> : tensor<2x4xf32>
    return %r : tensor<2x4xf32>
  }
}

// -----

func.func @forward(%x: tensor<2x2x4xf32>) -> tensor<2x4xi64> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
  %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x4xf32> -> tensor<2x4xf32>
  // expected-error @+1 {{reaches 'cast' in the root module, which needs the whole value}}
  %i = slapo.cast %p : tensor<2x4xf32> -> tensor<2x4xi64>
  return %i : tensor<2x4xi64>
}

// -----

func.func @forward(%x: tensor<2x2x4xf32>, %y: tensor<2x4xf32>) -> tensor<2x4xi1> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
  %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x4xf32> -> tensor<2x4xf32>
  // expected-error @+1 {{reaches 'compare' in the root module, which needs the whole value}}
  %c = slapo.compare <gt> %p, %y : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xi1>
  return %c : tensor<2x4xi1>
}

// -----

func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  // expected-error @+1 {{tensor parallelism: tril/triu of a tensor split along one of its last two dims}}
  %t = slapo.triangular %s {diagonal = 0 : i64, lower = true} : tensor<2x8xf32>
  %g = slapo.all_gather %t <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  return %g : tensor<2x8xf32>
}

// -----

func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{tensor parallelism: fork_rng() gives each rank its own dropout mask, but the input of 'dropout' in the root module is replicated: the ranks' copies would differ; fork only modules whose dropouts meet split activations}}
  %d = slapo.dropout %x {fork_rng, p = 1.000000e-01 : f64, stream = 0 : i64} : tensor<2x8xf32>
  return %d : tensor<2x8xf32>
}

// -----

// Ops of the backward have no rule: the pass runs on @forward.
func.func @forward(%g: tensor<2x8xf32>, %x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{tensor parallelism: 'slapo.gelu_grad' has no sharding rule yet}}
  %d = slapo.gelu_grad %g, %x <tanh> : tensor<2x8xf32>
  return %d : tensor<2x8xf32>
}
