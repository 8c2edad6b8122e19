// RUN: slapo-opt --slapo-propagate-sharding=tp=2 --split-input-file --verify-diagnostics %s | FileCheck %s

// The sharding rules of the collectives (dialects/lib/ShardingCollectives.cpp)
// and of @forward's results.

// grad_all_reduce lets a replicated value with a gradient (and its views)
// meet split computation; all_gather joins a split value, scatter splits a
// replicated one, reduce_scatter splits a partial sum and all_reduce
// completes one.
module {
  slapo.param @pre.weight : tensor<8x8xf32>
  slapo.param @fc.weight : tensor<8x8xf32> {shard_axis = 0 : i64}
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<1x8xf32> {
    %wp = slapo.get_param @pre.weight : tensor<8x8xf32>
    %h = slapo.linear %x, %wp : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %synced = slapo.grad_all_reduce %h <tp> : tensor<2x8xf32>
    %view = slapo.reshape %synced : tensor<2x8xf32> -> tensor<2x2x4xf32>
    %flat = slapo.reshape %view : tensor<2x2x4xf32> -> tensor<2x8xf32>
    %wf = slapo.get_param @fc.weight : tensor<8x8xf32>
    %y = slapo.linear %flat, %wf : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %g = slapo.all_gather %y <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
    %s = slapo.scatter %g <tp> {dim = 0 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
    %p = slapo.sum %s {dims = array<i64: 0>, keepdim = true} : tensor<2x8xf32> -> tensor<1x8xf32>
    %rs = slapo.reduce_scatter %p <tp> {dim = 1 : i64} : tensor<1x8xf32> -> tensor<1x8xf32>
    %back = slapo.all_gather %rs <tp> {dim = 1 : i64} : tensor<1x8xf32> -> tensor<1x8xf32>
    %r = slapo.all_reduce %p <tp> : tensor<1x8xf32>
    %out = slapo.add %back, %r : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<1x8xf32>
    return %out : tensor<1x8xf32>
  }
}
// CHECK: slapo.param @fc.weight : tensor<4x8xf32> {shard_axis = 0 : i64}
// CHECK: slapo.grad_all_reduce %{{.*}} <tp> : tensor<2x8xf32>
// CHECK: slapo.linear %{{.*}}, %{{.*}} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: slapo.all_gather %{{.*}} <tp> {dim = 1 : i64} : tensor<2x4xf32> -> tensor<2x8xf32>
// CHECK-NEXT: slapo.scatter %{{.*}} <tp> {dim = 0 : i64} : tensor<2x8xf32> -> tensor<1x8xf32>
// CHECK-NEXT: %[[P:.*]] = slapo.sum %{{.*}} {dims = array<i64: 0>, keepdim = true} : tensor<1x8xf32> -> tensor<1x8xf32>
// CHECK-NEXT: slapo.reduce_scatter %[[P]] <tp> {dim = 1 : i64} : tensor<1x8xf32> -> tensor<1x4xf32>
// CHECK-NEXT: slapo.all_gather %{{.*}} <tp> {dim = 1 : i64} : tensor<1x4xf32> -> tensor<1x8xf32>
// CHECK-NEXT: slapo.all_reduce %[[P]] <tp> : tensor<1x8xf32>

// -----

func.func @forward(%x: tensor<2x2x4xf32>) -> tensor<2x4xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
  %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x4xf32> -> tensor<2x4xf32>
  // expected-error @+1 {{tensor parallelism: only single tensor-parallel all_reduces belong in @forward}}
  %r = slapo.all_reduce %p <dp> : tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

func.func @forward(%x: tensor<2x2x4xf32>) -> tensor<2x4xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
  %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x4xf32> -> tensor<2x4xf32>
  // expected-error @+1 {{tensor parallelism: only single tensor-parallel all_reduces belong in @forward}}
  %r:2 = slapo.all_reduce %p, %p <tp> : tensor<2x4xf32>, tensor<2x4xf32>
  return %r#0 : tensor<2x4xf32>
}

// -----

func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{tensor parallelism: all_reduce of a value that is replicated, not a partial sum: it would multiply it by the tensor-parallel size}}
  %r = slapo.all_reduce %x <tp> : tensor<2x4xf32>
  return %r : tensor<2x4xf32>
}

// -----

func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  // expected-error @+1 {{tensor parallelism: sync("bwd_post", "all_reduce") of a value that is split along dim 1: only a replicated value's gradient is all-reduced}}
  %g = slapo.grad_all_reduce %s <tp> : tensor<2x8xf32>
  %a = slapo.all_gather %g <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  return %a : tensor<2x8xf32>
}

// -----

// Blocks of three chunks are not the ranks' blocks of the whole value.
module {
  slapo.param @qkv : tensor<4x12xf32> {shard_axis = 1 : i64, shard_chunks = 3 : i64}
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x12xf32> {
    %w = slapo.get_param @qkv : tensor<4x12xf32>
    %y = slapo.matmul %x, %w : (tensor<2x4xf32>, tensor<4x12xf32>) -> tensor<2x12xf32>
    // expected-error @+1 {{tensor parallelism: all_gather along dim 1 of a value that is split along dim 1 in 3 chunks}}
    %g = slapo.all_gather %y <tp> {dim = 1 : i64} : tensor<2x12xf32> -> tensor<2x12xf32>
    return %g : tensor<2x12xf32>
  }
}

// -----

func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  // expected-error @+1 {{tensor parallelism: scatter of a value that is split along dim 1, not replicated}}
  %t = slapo.scatter %s <tp> {dim = 0 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  return %t : tensor<2x8xf32>
}

// -----

func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{tensor parallelism: reduce_scatter of a value that is replicated, not a partial sum}}
  %r = slapo.reduce_scatter %x <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  %g = slapo.all_gather %r <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  return %g : tensor<2x8xf32>
}

// -----

func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  // expected-error @+1 {{tensor parallelism: @forward returns a value that is split along dim 1; gather it first}}
  return %s : tensor<2x8xf32>
}

// -----

func.func @forward(%x: tensor<2x2x4xf32>) -> tensor<2x4xf32> {
  %s = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
  %p = slapo.sum %s {dims = array<i64: 1>, keepdim = false} : tensor<2x2x4xf32> -> tensor<2x4xf32>
  // expected-error @+1 {{reaches 'return' in the root module, which needs the whole value}}
  return %p : tensor<2x4xf32>
}

// -----

// Ops on a value whose gradient grad_all_reduce all-reduces pass the sync on
// to split computation (each rank's gradient of the tanh is one term, and
// so is the one it hands back); values without a gradient may join.
// CHECK: slapo.tanh
// CHECK: slapo.linear %{{.*}}, %{{.*}} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
module {
  slapo.param @pre.weight : tensor<8x8xf32>
  slapo.param @fc.weight : tensor<8x8xf32> {shard_axis = 0 : i64}
  func.func @forward(%x: tensor<2x8xf32>, %mask: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %wp = slapo.get_param @pre.weight : tensor<8x8xf32>
    %h = slapo.linear %x, %wp : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %synced = slapo.grad_all_reduce %h <tp> : tensor<2x8xf32>
    %t = slapo.tanh %synced : tensor<2x8xf32>
    %m = slapo.add %t, %mask : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %wf = slapo.get_param @fc.weight : tensor<8x8xf32>
    %y = slapo.linear %m, %wf : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %g = slapo.all_gather %y <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
    return %g : tensor<2x8xf32>
  }
}

// -----

// A residual inside the synced module (ALBERT's attention): the gradient of
// %h through the add is whole on each rank, and the all-reduce would double
// it.
module {
  slapo.param @pre.weight : tensor<8x8xf32>
  slapo.param @fc.weight : tensor<8x8xf32> {shard_axis = 0 : i64}
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %wp = slapo.get_param @pre.weight : tensor<8x8xf32>
    %h = slapo.linear %x, %wp : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %synced = slapo.grad_all_reduce %h <tp> : tensor<2x8xf32>
    %wf = slapo.get_param @fc.weight : tensor<8x8xf32>
    %y = slapo.linear %synced, %wf : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %g = slapo.all_gather %y <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
    // expected-error @+1 {{tensor parallelism: 'add' in the root module joins a value whose gradient a sync("bwd_post", "all_reduce") all-reduces with another value that has a gradient}}
    %r = slapo.add %synced, %g : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    return %r : tensor<2x8xf32>
  }
}
