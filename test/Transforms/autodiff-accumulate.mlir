// RUN: slapo-opt --slapo-autodiff --split-input-file %s | FileCheck %s

// Broadcasting, accumulation and which parameters get a gradient.

// A bias broadcast over [2, 3, 4] gets the gradient summed back to [4]; an
// operand broadcast from [3, 1] is summed over the leading dim and dim 2.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: -> (tensor<f32>, tensor<4xf32> {slapo.grad_of = @bias}, tensor<3x1xf32> {slapo.grad_of = @scale})
// CHECK: %[[SEED:.*]] = slapo.constant dense<1.000000e+00> : tensor<f32> {slapo.phase = "backward"}
// CHECK: %[[SPREAD:.*]] = slapo.broadcast %{{.*}} {slapo.phase = "backward"} : tensor<1x1x1xf32> -> tensor<2x3x4xf32>
// CHECK-DAG: %[[DSCALE_FULL:.*]] = slapo.mul %{{.*}}, %{{.*}} {slapo.phase = "backward"} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-DAG: %[[DSCALE_SUM:.*]] = slapo.sum %[[DSCALE_FULL]] {dims = array<i64: 0, 2>, keepdim = false, slapo.phase = "backward"} : tensor<2x3x4xf32> -> tensor<3xf32>
// CHECK-DAG: %[[DSCALE:.*]] = slapo.reshape %[[DSCALE_SUM]] {slapo.phase = "backward"} : tensor<3xf32> -> tensor<3x1xf32>
// CHECK-DAG: %[[DBIAS:.*]] = slapo.sum %{{.*}} {dims = array<i64: 0, 1>, keepdim = false, slapo.phase = "backward"} : tensor<2x3x4xf32> -> tensor<4xf32>
// CHECK: return %{{.*}}, %[[DBIAS]], %[[DSCALE]] : tensor<f32>, tensor<4xf32>, tensor<3x1xf32>
module {
  slapo.param @bias : tensor<4xf32>
  slapo.param @scale : tensor<3x1xf32>
  func.func @forward(%x: tensor<2x3x4xf32>) -> tensor<f32> {
    %b = slapo.get_param @bias : tensor<4xf32>
    %s = slapo.get_param @scale : tensor<3x1xf32>
    %y = slapo.add %x, %b : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
    %z = slapo.mul %y, %s : (tensor<2x3x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
    %loss = slapo.sum %z {dims = array<i64: 0, 1, 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A value used twice gets the sum of both gradients; a parameter read twice
// (tied weights) gets one result, the sum over its reads. Buffers and
// parameters the loss does not depend on get no result; the forward's other
// results are dropped.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: -> (tensor<f32>, tensor<4xf32> {slapo.grad_of = @tied})
// CHECK-NOT: slapo.grad_of
// CHECK: %[[W:.*]] = slapo.get_param @tied : tensor<4xf32>
// CHECK: %[[SQUARE:.*]] = slapo.mul %[[W]], %[[W]]
// CHECK: %[[W2:.*]] = slapo.get_param @tied : tensor<4xf32>
// CHECK: slapo.mul %[[SQUARE]], %[[W2]]
// CHECK: %[[D_SQUARE:.*]] = slapo.mul %{{.*}}, %[[W2]] {slapo.phase = "backward"}
// CHECK: %[[FROM_W2:.*]] = slapo.mul %{{.*}}, %[[SQUARE]] {slapo.phase = "backward"}
// CHECK: %[[LHS:.*]] = slapo.mul %[[D_SQUARE]], %[[W]] {slapo.phase = "backward"}
// CHECK: %[[RHS:.*]] = slapo.mul %[[D_SQUARE]], %[[W]] {slapo.phase = "backward"}
// CHECK: %[[BOTH:.*]] = slapo.add %[[LHS]], %[[RHS]] {slapo.phase = "backward"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: %[[TIED:.*]] = slapo.add %[[FROM_W2]], %[[BOTH]] {slapo.phase = "backward"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: return %{{.*}}, %[[TIED]] : tensor<f32>, tensor<4xf32>
module {
  slapo.param @tied : tensor<4xf32> {aliases = ["head.weight"]}
  slapo.param @unused : tensor<4xf32>
  slapo.param buffer @mask : tensor<4xf32>
  func.func @forward(%x: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>) {
    %w = slapo.get_param @tied : tensor<4xf32>
    %square = slapo.mul %w, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %w2 = slapo.get_param @tied : tensor<4xf32>
    %cube = slapo.mul %square, %w2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %m = slapo.get_param @mask : tensor<4xf32>
    %masked = slapo.mul %cube, %m : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %loss = slapo.sum %masked {dims = array<i64: 0>, keepdim = false} : tensor<4xf32> -> tensor<f32>
    %u = slapo.get_param @unused : tensor<4xf32>
    %other = slapo.add %u, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %loss, %other : tensor<f32>, tensor<4xf32>
  }
}

// -----

// A loss that depends on no parameter: @forward_backward returns it alone.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: (%{{.*}}: tensor<4xf32>) -> tensor<f32>
// CHECK-NEXT: slapo.sum
// CHECK-NEXT: return
module {
  slapo.param @w : tensor<4xf32>
  func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
    %loss = slapo.sum %x {dims = array<i64: 0>, keepdim = false} : tensor<4xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// The gradients of slices that together read all of a tensor (q, k and v
// split from one projection) fill one concat in slice order, with no zeros
// and no add; a slice read twice still gets its two gradients added, and
// overlapping slices are added as zero-padded wholes. Here @w's [2, 6] is
// read as [0, 2) twice, [2, 4) and [4, 6): one concat of three pieces.
// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[A:.*]] = slapo.slice %[[W:.*]] {dim = 1 : i64, end = 2 : i64, start = 0 : i64
// CHECK: %[[B:.*]] = slapo.slice %[[W]] {dim = 1 : i64, end = 4 : i64, start = 2 : i64
// CHECK: %[[C:.*]] = slapo.slice %[[W]] {dim = 1 : i64, end = 6 : i64, start = 4 : i64
// CHECK-DAG: %[[DA:.*]] = slapo.add %{{.*}}, %{{.*}} {slapo.phase = "backward"} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
// CHECK-DAG: %[[DB:.*]] = slapo.mul %{{.*}}, %[[C]] {slapo.phase = "backward"}
// CHECK-DAG: %[[DC:.*]] = slapo.mul %{{.*}}, %[[B]] {slapo.phase = "backward"}
// CHECK-NOT: slapo.add
// CHECK: %[[DW:.*]] = slapo.concat %[[DA]], %[[DB]], %[[DC]] {dim = 1 : i64, slapo.phase = "backward"}
// CHECK-NOT: slapo.add
// CHECK: return %{{.*}}, %[[DW]] :
module {
  slapo.param @w : tensor<2x6xf32>
  func.func @forward() -> tensor<f32> {
    %w = slapo.get_param @w : tensor<2x6xf32>
    %a = slapo.slice %w {dim = 1 : i64, end = 2 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x6xf32> -> tensor<2x2xf32>
    %b = slapo.slice %w {dim = 1 : i64, end = 4 : i64, start = 2 : i64, step = 1 : i64} : tensor<2x6xf32> -> tensor<2x2xf32>
    %c = slapo.slice %w {dim = 1 : i64, end = 6 : i64, start = 4 : i64, step = 1 : i64} : tensor<2x6xf32> -> tensor<2x2xf32>
    %bc = slapo.mul %b, %c : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    %abc = slapo.add %a, %bc : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    %aabc = slapo.add %abc, %a : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    %loss = slapo.sum %aabc {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x2xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Overlapping slices ([0, 4) and [2, 6)) are padded with zeros and added.
// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[HIGH:.*]] = slapo.concat %{{.*}}, %{{.*}} {dim = 1 : i64, slapo.phase = "backward"} : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x6xf32>
// CHECK: %[[LOW:.*]] = slapo.concat %{{.*}}, %{{.*}} {dim = 1 : i64, slapo.phase = "backward"} : (tensor<2x4xf32>, tensor<2x2xf32>) -> tensor<2x6xf32>
// CHECK: %[[DW:.*]] = slapo.add %[[HIGH]], %[[LOW]] {slapo.phase = "backward"} : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
// CHECK: return %{{.*}}, %[[DW]] :
module {
  slapo.param @w : tensor<2x6xf32>
  func.func @forward() -> tensor<f32> {
    %w = slapo.get_param @w : tensor<2x6xf32>
    %a = slapo.slice %w {dim = 1 : i64, end = 4 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x6xf32> -> tensor<2x4xf32>
    %b = slapo.slice %w {dim = 1 : i64, end = 6 : i64, start = 2 : i64, step = 1 : i64} : tensor<2x6xf32> -> tensor<2x4xf32>
    %ab = slapo.mul %a, %b : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %loss = slapo.sum %ab {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
