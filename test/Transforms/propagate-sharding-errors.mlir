// RUN: not slapo-opt --slapo-propagate-sharding=tp=2 --split-input-file %s 2>&1 | FileCheck %s

// Every schedule that would compute a wrong value on some rank is an error
// at the op that shows it, naming the module and the fix. The parameters
// carry the shard_axis of slapo-shard and the collectives are those of
// slapo-sync.

// A row-parallel fc2 without sync("fwd_post", "all_reduce"): its partial sum
// reaches a nonlinear op.
module {
  slapo.param @fc1.weight : tensor<8x4xf32> {shard_axis = 0 : i64}
  slapo.param @fc2.weight : tensor<4x8xf32> {shard_axis = 1 : i64}
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w1 = slapo.get_param @fc1.weight {slapo.module = "fc1"} : tensor<8x4xf32>
    %h = slapo.linear %x, %w1 {slapo.module = "fc1"} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %w2 = slapo.get_param @fc2.weight {slapo.module = "fc2"} : tensor<4x8xf32>
    %y = slapo.linear %h, %w2 {slapo.module = "fc2"} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    // CHECK: error: {{.*}}tensor parallelism: a partial sum (from 'fc2', where a split contraction leaves each rank one term of it) reaches 'tanh' in 'act', which needs the whole value; complete the sum first: sch{{\[}}"fc2"].sync("fwd_post", "all_reduce")
    %t = slapo.tanh %y {slapo.module = "act"} : tensor<2x4xf32>
    %l = slapo.sum %t {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A column-parallel fc1 whose replicated input has a gradient (it comes from
// the replicated `pre`) without sync("bwd_post", "all_reduce").
module {
  slapo.param @pre.weight : tensor<4x4xf32>
  slapo.param @fc1.weight : tensor<8x4xf32> {shard_axis = 0 : i64}
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %wp = slapo.get_param @pre.weight {slapo.module = "pre"} : tensor<4x4xf32>
    %p = slapo.linear %x, %wp {slapo.module = "pre"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %w1 = slapo.get_param @fc1.weight {slapo.module = "fc1"} : tensor<8x4xf32>
    // CHECK: error: {{.*}}tensor parallelism: the replicated input of 'linear' in 'fc1' meets split computation: each rank would get one term of its gradient; all-reduce it in the backward: sch{{\[}}"fc1"].sync("bwd_post", "all_reduce")
    %h = slapo.linear %p, %w1 {slapo.module = "fc1"} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %g = slapo.all_gather %h <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
    %l = slapo.sum %g {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// sync("fwd_post", "all_reduce") on a column-parallel layer: its output is
// split, not a partial sum.
module {
  slapo.param @fc1.weight : tensor<8x4xf32> {shard_axis = 0 : i64}
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w1 = slapo.get_param @fc1.weight {slapo.module = "fc1"} : tensor<8x4xf32>
    %h = slapo.linear %x, %w1 {slapo.module = "fc1"} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    // CHECK: error: {{.*}}tensor parallelism: all_reduce of a value that is split along dim 1, not a partial sum: it would multiply it by the tensor-parallel size
    %r = slapo.all_reduce %h <tp> {slapo.module = "fc1"} : tensor<2x8xf32>
    %l = slapo.sum %r {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// all_gather of a partial sum, and along the wrong dim.
module {
  slapo.param @fc1.weight : tensor<8x4xf32> {shard_axis = 0 : i64}
  slapo.param @fc2.weight : tensor<4x8xf32> {shard_axis = 1 : i64}
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w1 = slapo.get_param @fc1.weight : tensor<8x4xf32>
    %h = slapo.linear %x, %w1 : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %w2 = slapo.get_param @fc2.weight : tensor<4x8xf32>
    %y = slapo.linear %h, %w2 : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    // CHECK: error: {{.*}}tensor parallelism: all_gather along dim 1 of a value that is a partial sum
    %g = slapo.all_gather %y <tp> {dim = 1 : i64} : tensor<2x4xf32> -> tensor<2x4xf32>
    %l = slapo.sum %g {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module {
  slapo.param @fc1.weight : tensor<8x4xf32> {shard_axis = 0 : i64}
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w1 = slapo.get_param @fc1.weight : tensor<8x4xf32>
    %h = slapo.linear %x, %w1 : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    // CHECK: error: {{.*}}tensor parallelism: all_gather along dim 0 of a value that is split along dim 1
    %g = slapo.all_gather %h <tp> {dim = 0 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
    %l = slapo.sum %g {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module {
  slapo.param @fc1.weight : tensor<8x4xf32> {shard_axis = 0 : i64}
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w1 = slapo.get_param @fc1.weight : tensor<8x4xf32>
    %h = slapo.linear %x, %w1 : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    // CHECK: error: {{.*}}tensor parallelism: 'softmax' along dim 1, which is split over the ranks
    %s = slapo.softmax %h {dim = 1 : i64} : tensor<2x8xf32>
    %l = slapo.sum %s {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A replicated parameter scaling split activations would get one term of
// its gradient on each rank.
module {
  slapo.param @fc1.weight : tensor<8x4xf32> {shard_axis = 0 : i64}
  slapo.param @scale : tensor<2x1xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w1 = slapo.get_param @fc1.weight : tensor<8x4xf32>
    %h = slapo.linear %x, %w1 : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %c = slapo.get_param @scale : tensor<2x1xf32>
    // CHECK: error: {{.*}}tensor parallelism: the replicated parameter 'scale' is used by 'mul' in the root module with split operands: each rank would get one term of its gradient; shard it as well
    %s = slapo.mul %h, %c : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    %g = slapo.all_gather %s <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
    %l = slapo.sum %g {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A dim that does not divide by tp; a slice that no chunking aligns.
module {
  // CHECK: error: {{.*}}tensor parallelism: dim 0 of 'fc1.weight' (7) does not divide by tp=2
  slapo.param @fc1.weight : tensor<7x4xf32> {shard_axis = 0 : i64}
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w1 = slapo.get_param @fc1.weight : tensor<7x4xf32>
    %h = slapo.linear %x, %w1 : (tensor<2x4xf32>, tensor<7x4xf32>) -> tensor<2x7xf32>
    %l = slapo.sum %h {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x7xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module {
  slapo.param @fc1.weight : tensor<8x4xf32> {shard_axis = 0 : i64}
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w1 = slapo.get_param @fc1.weight : tensor<8x4xf32>
    %h = slapo.linear %x, %w1 : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    // CHECK: error: {{.*}}tensor parallelism: slices {{\[}}1, 4) of dim 1 (8) of a tensor split along dim 1: the slice cannot be aligned with 2 ranks
    %s = slapo.slice %h {dim = 1 : i64, start = 1 : i64, end = 4 : i64, step = 1 : i64} : tensor<2x8xf32> -> tensor<2x3xf32>
    %l = slapo.sum %s {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A vocabulary-parallel loss splits the classes; rows split are not.
module {
  func.func @forward(%x: tensor<2x8xf32>, %t: tensor<2xi64>) -> tensor<f32> {
    %s = slapo.scatter %x <tp> {dim = 0 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
    // CHECK: error: {{.*}}tensor parallelism: cross-entropy of logits split along dim 0: only classes (dim 1) split in one chunk are vocabulary-parallel
    %l = slapo.cross_entropy %s, %t {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
