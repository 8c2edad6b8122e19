// RUN: slapo-opt --slapo-propagate-sharding=tp=2 --split-input-file --verify-diagnostics %s | FileCheck %s

// The sharding rules of reductions, views, slices and concatenation
// (dialects/lib/ShardingShape.cpp). Split values come from parameters that
// slapo-shard split or from slapo.scatter (each rank's block of an input),
// partial sums from a sum over the split dim.

// Views carry the split to the dim it becomes: a reshape splits the hidden
// size into heads and merges them back, a permute moves the heads, a
// broadcast adds leading dims; slices and concatenations of other dims
// keep it.
func.func @forward(%x: tensor<2x8xf32>) -> tensor<4x2x8xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  %heads = slapo.reshape %s : tensor<2x8xf32> -> tensor<2x4x2xf32>
  %t = slapo.permute %heads {permutation = array<i64: 1, 0, 2>} : tensor<2x4x2xf32> -> tensor<4x2x2xf32>
  %back = slapo.permute %t {permutation = array<i64: 1, 0, 2>} : tensor<4x2x2xf32> -> tensor<2x4x2xf32>
  %merged = slapo.reshape %back : tensor<2x4x2xf32> -> tensor<2x8xf32>
  %b = slapo.broadcast %merged : tensor<2x8xf32> -> tensor<3x2x8xf32>
  %sl = slapo.slice %b {dim = 0 : i64, start = 0 : i64, end = 2 : i64, step = 1 : i64} : tensor<3x2x8xf32> -> tensor<2x2x8xf32>
  %c = slapo.concat %sl, %sl {dim = 0 : i64} : (tensor<2x2x8xf32>, tensor<2x2x8xf32>) -> tensor<4x2x8xf32>
  %g = slapo.all_gather %c <tp> {dim = 2 : i64} : tensor<4x2x8xf32> -> tensor<4x2x8xf32>
  return %g : tensor<4x2x8xf32>
}
// CHECK: slapo.reshape %{{.*}} : tensor<2x4xf32> -> tensor<2x2x2xf32>
// CHECK-NEXT: slapo.permute %{{.*}} {permutation = array<i64: 1, 0, 2>} : tensor<2x2x2xf32> -> tensor<2x2x2xf32>
// CHECK-NEXT: slapo.permute %{{.*}} {permutation = array<i64: 1, 0, 2>} : tensor<2x2x2xf32> -> tensor<2x2x2xf32>
// CHECK-NEXT: slapo.reshape %{{.*}} : tensor<2x2x2xf32> -> tensor<2x4xf32>
// CHECK-NEXT: slapo.broadcast %{{.*}} : tensor<2x4xf32> -> tensor<3x2x4xf32>
// CHECK-NEXT: slapo.slice %{{.*}} {dim = 0 : i64, end = 2 : i64, start = 0 : i64, step = 1 : i64} : tensor<3x2x4xf32> -> tensor<2x2x4xf32>
// CHECK-NEXT: slapo.concat %{{.*}}, %{{.*}} {dim = 0 : i64} : (tensor<2x2x4xf32>, tensor<2x2x4xf32>) -> tensor<4x2x4xf32>
// CHECK-NEXT: slapo.all_gather %{{.*}} <tp> {dim = 2 : i64} : tensor<4x2x4xf32> -> tensor<4x2x8xf32>

// -----

// Reductions over other dims keep the split (moved where dims are
// dropped); the sum over the split dim is a partial sum, and a mean of it
// stays one.
func.func @forward(%x: tensor<2x3x8xf32>) -> tensor<f32> {
  %s = slapo.scatter %x <tp> {dim = 2 : i64} : tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  %m = slapo.mean %s {dims = array<i64: 0>, keepdim = false} : tensor<2x3x8xf32> -> tensor<3x8xf32>
  %mx = slapo.max %m {dims = array<i64: 0>, keepdim = true} : tensor<3x8xf32> -> tensor<1x8xf32>
  %p = slapo.sum %mx {dims = array<i64: 1>, keepdim = false} : tensor<1x8xf32> -> tensor<1xf32>
  %avg = slapo.mean %p {dims = array<i64: 0>, keepdim = false} : tensor<1xf32> -> tensor<f32>
  %r = slapo.all_reduce %avg <tp> : tensor<f32>
  return %r : tensor<f32>
}
// CHECK: // {{-+}}
// CHECK: slapo.mean %{{.*}} {dims = array<i64: 0>, keepdim = false} : tensor<2x3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT: slapo.max %{{.*}} {dims = array<i64: 0>, keepdim = true} : tensor<3x4xf32> -> tensor<1x4xf32>
// CHECK-NEXT: slapo.sum %{{.*}} {dims = array<i64: 1>, keepdim = false} : tensor<1x4xf32> -> tensor<1xf32>
// CHECK-NEXT: %[[AVG:.*]] = slapo.mean %{{.*}} {dims = array<i64: 0>, keepdim = false} : tensor<1xf32> -> tensor<f32>
// CHECK-NEXT: slapo.all_reduce %[[AVG]] <tp> : tensor<f32>

// -----

// Running sums along another dim keep the split; those of a partial sum
// (each rank's term) are each rank's term of the running sums.
func.func @forward(%x: tensor<2x3x8xf32>) -> tensor<3x8xf32> {
  %s = slapo.scatter %x <tp> {dim = 2 : i64} : tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  %c = slapo.cumsum %s {dim = 1 : i64} : tensor<2x3x8xf32>
  %p = slapo.sum %c {dims = array<i64: 2>, keepdim = true} : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
  %back = slapo.cumsum %p {dim = 0 : i64, reverse} : tensor<2x3x1xf32>
  %r = slapo.all_reduce %back <tp> : tensor<2x3x1xf32>
  %g = slapo.all_gather %c <tp> {dim = 2 : i64} : tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  %m = slapo.mul %g, %r : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %out = slapo.sum %m {dims = array<i64: 0>, keepdim = false} : tensor<2x3x8xf32> -> tensor<3x8xf32>
  return %out : tensor<3x8xf32>
}
// CHECK: // {{-+}}
// CHECK: slapo.cumsum %{{.*}} {dim = 1 : i64} : tensor<2x3x4xf32>
// CHECK-NEXT: slapo.sum %{{.*}} {dims = array<i64: 2>, keepdim = true} : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
// CHECK-NEXT: %[[BACK:.*]] = slapo.cumsum %{{.*}} {dim = 0 : i64, reverse} : tensor<2x3x1xf32>
// CHECK-NEXT: slapo.all_reduce %[[BACK]] <tp> : tensor<2x3x1xf32>

// -----

// A slice of whole chunks of the split dim (k of a fused q/k/v projection
// split per chunk) is each rank's part of those chunks.
module {
  slapo.param @qkv : tensor<4x12xf32> {shard_axis = 1 : i64, shard_chunks = 3 : i64}
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %w = slapo.get_param @qkv : tensor<4x12xf32>
    %y = slapo.matmul %x, %w : (tensor<2x4xf32>, tensor<4x12xf32>) -> tensor<2x12xf32>
    %k = slapo.slice %y {dim = 1 : i64, start = 4 : i64, end = 8 : i64, step = 1 : i64} : tensor<2x12xf32> -> tensor<2x4xf32>
    %g = slapo.all_gather %k <tp> {dim = 1 : i64} : tensor<2x4xf32> -> tensor<2x4xf32>
    return %g : tensor<2x4xf32>
  }
}
// CHECK: // {{-+}}
// CHECK: slapo.param @qkv : tensor<4x6xf32> {shard_axis = 1 : i64, shard_chunks = 3 : i64}
// CHECK: slapo.slice %{{.*}} {dim = 1 : i64, end = 4 : i64, start = 2 : i64, step = 1 : i64} : tensor<2x6xf32> -> tensor<2x2xf32>
// CHECK-NEXT: slapo.all_gather %{{.*}} <tp> {dim = 1 : i64} : tensor<2x2xf32> -> tensor<2x4xf32>

// -----

// A reshape that keeps the trailing dims of a partial sum carries the bias
// that waits for its all_reduce.
module {
  slapo.param @bias : tensor<4xf32>
  func.func @forward(%x: tensor<2x3x2x4xf32>) -> tensor<6x4xf32> {
    %s = slapo.scatter %x <tp> {dim = 2 : i64} : tensor<2x3x2x4xf32> -> tensor<2x3x2x4xf32>
    %p = slapo.sum %s {dims = array<i64: 2>, keepdim = false} : tensor<2x3x2x4xf32> -> tensor<2x3x4xf32>
    %b = slapo.get_param @bias : tensor<4xf32>
    %biased = slapo.add %p, %b : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
    %flat = slapo.reshape %biased : tensor<2x3x4xf32> -> tensor<6x4xf32>
    %r = slapo.all_reduce %flat <tp> : tensor<6x4xf32>
    return %r : tensor<6x4xf32>
  }
}
// CHECK: // {{-+}}
// CHECK: %[[P:.*]] = slapo.sum %{{.*}} {dims = array<i64: 2>, keepdim = false} : tensor<2x3x1x4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[B:.*]] = slapo.get_param @bias : tensor<4xf32>
// CHECK-NEXT: %[[FLAT:.*]] = slapo.reshape %[[P]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT: %[[R:.*]] = slapo.all_reduce %[[FLAT]] <tp> : tensor<6x4xf32>
// CHECK-NEXT: slapo.add %[[R]], %[[B]] : (tensor<6x4xf32>, tensor<4xf32>) -> tensor<6x4xf32>

// -----

// Merging the dims before the split one into it: [B, H, T, d] split by
// heads to [B*H, T, d] (OPT's attention before its bmm) is a split of the
// merged dim in B chunks, each rank holding its heads of every batch row;
// splitting it back gives the heads' split again.
func.func @forward(%x: tensor<2x4x3x2xf32>) -> tensor<2x4x3x2xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x4x3x2xf32> -> tensor<2x4x3x2xf32>
  %m = slapo.reshape %s : tensor<2x4x3x2xf32> -> tensor<8x3x2xf32>
  %t = slapo.permute %m {permutation = array<i64: 0, 2, 1>} : tensor<8x3x2xf32> -> tensor<8x2x3xf32>
  %p = slapo.matmul %m, %t : (tensor<8x3x2xf32>, tensor<8x2x3xf32>) -> tensor<8x3x3xf32>
  %q = slapo.matmul %p, %m : (tensor<8x3x3xf32>, tensor<8x3x2xf32>) -> tensor<8x3x2xf32>
  %back = slapo.reshape %q : tensor<8x3x2xf32> -> tensor<2x4x3x2xf32>
  %g = slapo.all_gather %back <tp> {dim = 1 : i64} : tensor<2x4x3x2xf32> -> tensor<2x4x3x2xf32>
  return %g : tensor<2x4x3x2xf32>
}
// CHECK-LABEL: func.func @forward(%{{.*}}: tensor<2x4x3x2xf32>)
// CHECK: slapo.reshape %{{.*}} : tensor<2x2x3x2xf32> -> tensor<4x3x2xf32>
// CHECK: slapo.matmul %{{.*}}, %{{.*}} : (tensor<4x3x2xf32>, tensor<4x2x3xf32>) -> tensor<4x3x3xf32>
// CHECK: slapo.reshape %{{.*}} : tensor<4x3x2xf32> -> tensor<2x2x3x2xf32>
// CHECK-NEXT: slapo.all_gather %{{.*}} <tp> {dim = 1 : i64} : tensor<2x2x3x2xf32> -> tensor<2x4x3x2xf32>

// -----

// Flattening columns split over the ranks: each rank's columns of a row
// are one chunk's part of the flat dim, two chunks (the rows), which
// all_gather cannot join whole.
func.func @forward(%x: tensor<2x8xf32>) -> tensor<16xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  %f = slapo.reshape %s : tensor<2x8xf32> -> tensor<16xf32>
  // expected-error @+1 {{split along dim 0 in 2 chunks}}
  %g = slapo.all_gather %f <tp> {dim = 0 : i64} : tensor<16xf32> -> tensor<16xf32>
  return %g : tensor<16xf32>
}

// -----

// Each rank's columns do not make whole rows of the result.
func.func @forward(%x: tensor<2x6xf32>) -> tensor<3x4xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x6xf32> -> tensor<2x6xf32>
  // expected-error @+1 {{tensor parallelism: reshapes a tensor of shape [2, 6] split along dim 1 to [3, 4], which does not keep the split whole}}
  %f = slapo.reshape %s : tensor<2x6xf32> -> tensor<3x4xf32>
  %g = slapo.all_gather %f <tp> {dim = 0 : i64} : tensor<3x4xf32> -> tensor<3x4xf32>
  return %g : tensor<3x4xf32>
}

// -----

module {
  slapo.param @bias : tensor<4xf32>
  func.func @forward(%x: tensor<2x2x4xf32>) -> tensor<8xf32> {
    %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
    %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x4xf32> -> tensor<2x4xf32>
    %b = slapo.get_param @bias : tensor<4xf32>
    %biased = slapo.add %p, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    // expected-error @+1 {{tensor parallelism: a reshape of a partial sum changes the dims its bias is added along}}
    %f = slapo.reshape %biased : tensor<2x4xf32> -> tensor<8xf32>
    %r = slapo.all_reduce %f <tp> : tensor<8xf32>
    return %r : tensor<8xf32>
  }
}

// -----

func.func @forward(%x: tensor<2x8xf32>) -> tensor<4x8xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  // expected-error @+1 {{tensor parallelism: joins tensors sharded differently (split along dim 1 and replicated)}}
  %c = slapo.concat %s, %x {dim = 0 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
  return %c : tensor<4x8xf32>
}

// -----

func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x16xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  // expected-error @+1 {{tensor parallelism: joins tensors along their split dim}}
  %c = slapo.concat %s, %s {dim = 1 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x16xf32>
  %g = slapo.all_gather %c <tp> {dim = 1 : i64} : tensor<2x16xf32> -> tensor<2x16xf32>
  return %g : tensor<2x16xf32>
}

// -----

// A mean over the split dim is not the sum of the ranks' means.
func.func @forward(%x: tensor<2x8xf32>) -> tensor<2xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  // expected-error @+1 {{tensor parallelism: 'mean' over dim 1, which is split over the ranks}}
  %m = slapo.mean %s {dims = array<i64: 1>, keepdim = false} : tensor<2x8xf32> -> tensor<2xf32>
  return %m : tensor<2xf32>
}

// -----

// A running sum along the split dim needs the ranks before it.
func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  // expected-error @+1 {{tensor parallelism: 'cumsum' over dim 1, which is split over the ranks}}
  %c = slapo.cumsum %s {dim = 1 : i64} : tensor<2x8xf32>
  %g = slapo.all_gather %c <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  return %g : tensor<2x8xf32>
}

// -----

func.func @forward(%x: tensor<2x2x4xf32>) -> tensor<2xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
  %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x4xf32> -> tensor<2x4xf32>
  // expected-error @+1 {{reaches 'max' in the root module, which needs the whole value}}
  %m = slapo.max %p {dims = array<i64: 1>, keepdim = false} : tensor<2x4xf32> -> tensor<2xf32>
  return %m : tensor<2xf32>
}

// -----

func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  // expected-error @+1 {{tensor parallelism: slices [0, 8) of dim 1 (8) of a tensor split along dim 1: the slice cannot be aligned with 2 ranks}}
  %sl = slapo.slice %s {dim = 1 : i64, start = 0 : i64, end = 8 : i64, step = 2 : i64} : tensor<2x8xf32> -> tensor<2x4xf32>
  %g = slapo.all_gather %sl <tp> {dim = 1 : i64} : tensor<2x4xf32> -> tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}

// -----

// Halves would align if the value came from parameters that could be split
// per half; an input's blocks cannot.
func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  // expected-error @+1 {{tensor parallelism: slices [0, 4) of dim 1 (8) of a tensor split along dim 1: the slice cannot be aligned with 2 ranks}}
  %sl = slapo.slice %s {dim = 1 : i64, start = 0 : i64, end = 4 : i64, step = 1 : i64} : tensor<2x8xf32> -> tensor<2x4xf32>
  %g = slapo.all_gather %sl <tp> {dim = 1 : i64} : tensor<2x4xf32> -> tensor<2x4xf32>
  return %g : tensor<2x4xf32>
}

// -----

func.func @forward(%x: tensor<1x8xf32>) -> tensor<4x8xf32> {
  %s = slapo.scatter %x <tp> {dim = 0 : i64} : tensor<1x8xf32> -> tensor<1x8xf32>
  // expected-error @+1 {{tensor parallelism: cannot broadcast along the split dim}}
  %b = slapo.broadcast %s : tensor<1x8xf32> -> tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}
