// RUN: slapo-opt --slapo-propagate-sharding=tp=2 --slapo-autodiff %s | FileCheck %s

// The backward of tensor parallelism comes from the collectives' rules:
// scatter and reduce_scatter give all_gather, all_gather gives scatter,
// grad_all_reduce gives all_reduce, and all_reduce passes its gradient on.
module {
  slapo.param @pre : tensor<4xf32>
  slapo.param @fc1.weight : tensor<8x4xf32> {shard_axis = 0 : i64}
  slapo.param @fc2.weight : tensor<4x8xf32> {shard_axis = 1 : i64}
  func.func @forward(%in: tensor<2x4xf32>) -> tensor<f32> {
    %p = slapo.get_param @pre : tensor<4xf32>
    %x = slapo.mul %in, %p : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %xs = slapo.grad_all_reduce %x <tp> : tensor<2x4xf32>
    %w1 = slapo.get_param @fc1.weight : tensor<8x4xf32>
    %h = slapo.linear %xs, %w1 : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %g = slapo.all_gather %h <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
    %a = slapo.tanh %g : tensor<2x8xf32>
    %s = slapo.scatter %a <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
    %w2 = slapo.get_param @fc2.weight : tensor<4x8xf32>
    %y = slapo.linear %s, %w2 : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %r = slapo.reduce_scatter %y <tp> {dim = 1 : i64} : tensor<2x4xf32> -> tensor<2x4xf32>
    %t = slapo.tanh %r : tensor<2x4xf32>
    %f = slapo.all_gather %t <tp> {dim = 1 : i64} : tensor<2x4xf32> -> tensor<2x4xf32>
    %l = slapo.sum %f {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
// The forward on one rank: the collectives' shapes follow the sharding.
// CHECK-LABEL: func.func @forward(
// CHECK: slapo.linear {{.*}} -> tensor<2x4xf32>
// CHECK-NEXT: slapo.all_gather %{{.*}} <tp> {dim = 1 : i64} : tensor<2x4xf32> -> tensor<2x8xf32>
// CHECK: slapo.scatter %{{.*}} <tp> {dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x4xf32>
// CHECK: slapo.reduce_scatter %{{.*}} <tp> {dim = 1 : i64} : tensor<2x4xf32> -> tensor<2x2xf32>
// CHECK: slapo.all_gather %{{.*}} <tp> {dim = 1 : i64} : tensor<2x2xf32> -> tensor<2x4xf32>
// CHECK-LABEL: func.func @forward_backward(
// CHECK: slapo.scatter %{{.*}} <tp> {dim = 1 : i64, slapo.phase = "backward"} : tensor<2x4xf32> -> tensor<2x2xf32>
// CHECK: slapo.all_gather %{{.*}} <tp> {dim = 1 : i64, slapo.phase = "backward"} : tensor<2x2xf32> -> tensor<2x4xf32>
// CHECK: slapo.all_gather %{{.*}} <tp> {dim = 1 : i64, slapo.phase = "backward"} : tensor<2x4xf32> -> tensor<2x8xf32>
// CHECK: slapo.scatter %{{.*}} <tp> {dim = 1 : i64, slapo.phase = "backward"} : tensor<2x8xf32> -> tensor<2x4xf32>
// CHECK: slapo.all_reduce %{{.*}} <tp> {slapo.phase = "backward"} : tensor<2x4xf32>
