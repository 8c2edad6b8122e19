// RUN: slapo-opt "--slapo-shard=modules=block.fc1 param=weight axis=0" "--slapo-sync=modules=block.fc1 mode=bwd_post op=all_reduce" "--slapo-sync=modules=block.fc2 mode=fwd_post op=all_reduce" "--slapo-sync=modules=block.fc2 mode=fwd_pre op=scatter axis=-1" %s | FileCheck %s
// RUN: not slapo-opt "--slapo-shard=modules=block.fc9 param=weight axis=0" %s 2>&1 | FileCheck %s --check-prefix=NO-PARAM
// RUN: not slapo-opt "--slapo-shard=modules=block.fc1 param=weight axis=0" "--slapo-shard=modules=block.fc1 param=weight axis=1" %s 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not slapo-opt "--slapo-sync=modules=block mode=fwd_post op=all_reduce" %s 2>&1 | FileCheck %s --check-prefix=OUTPUTS
// RUN: not slapo-opt "--slapo-sync=modules=block.fc1 mode=bwd_post op=all_gather axis=0" %s 2>&1 | FileCheck %s --check-prefix=BWD

// shard only marks the parameter; sync puts its collectives at the module's
// boundary with the model's types (slapo-propagate-sharding gives them the
// ranks' shapes): bwd_post and fwd_pre on the input, before the module's
// first use of it, fwd_post on the output, before its uses outside. The
// input of bwd_post is the one with a gradient (here scaled by @scale).
module {
  slapo.param @scale : tensor<4xf32>
  slapo.param @block.fc1.weight : tensor<8x4xf32>
  slapo.param @block.fc2.weight : tensor<4x8xf32>
  func.func @forward(%in: tensor<2x4xf32>) -> (tensor<f32>, tensor<2x8xf32>) {
    %s = slapo.get_param @scale : tensor<4xf32>
    %x = slapo.mul %in, %s : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %w1 = slapo.get_param @block.fc1.weight {slapo.module = "block.fc1"} : tensor<8x4xf32>
    %h = slapo.linear %x, %w1 {slapo.module = "block.fc1"} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %w2 = slapo.get_param @block.fc2.weight {slapo.module = "block.fc2"} : tensor<4x8xf32>
    %y = slapo.linear %h, %w2 {slapo.module = "block.fc2"} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %t = slapo.tanh %y {slapo.module = "block"} : tensor<2x4xf32>
    %l = slapo.sum %t {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    return %l, %h : tensor<f32>, tensor<2x8xf32>
  }
}
// CHECK: slapo.param @scale : tensor<4xf32>{{$}}
// CHECK-NEXT: slapo.param @block.fc1.weight : tensor<8x4xf32> {shard_axis = 0 : i64}
// CHECK-NEXT: slapo.param @block.fc2.weight : tensor<4x8xf32>{{$}}
// CHECK: %[[IN:.*]] = slapo.mul %arg0
// CHECK: %[[X:.*]] = slapo.grad_all_reduce %[[IN]] <tp> {slapo.module = "block.fc1"} : tensor<2x4xf32>
// CHECK-NEXT: %[[H:.*]] = slapo.linear %[[X]], %{{.*}}
// CHECK-NEXT: slapo.get_param @block.fc2.weight
// CHECK-NEXT: %[[S:.*]] = slapo.scatter %[[H]] <tp> {dim = 1 : i64, slapo.module = "block.fc2"} : tensor<2x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[Y:.*]] = slapo.linear %[[S]], %{{.*}}
// CHECK-NEXT: %[[R:.*]] = slapo.all_reduce %[[Y]] <tp> {slapo.module = "block.fc2"} : tensor<2x4xf32>
// CHECK-NEXT: slapo.tanh %[[R]]
// The value also returned outside the module is left as it was.
// CHECK: return %{{.*}}, %[[H]]

// NO-PARAM: error: {{.*}}slapo-shard: the model has no parameter 'block.fc9.weight'
// TWICE: error: {{.*}}slapo-shard: 'block.fc1.weight' is split along axis 0 already; a parameter is split along one axis
// The module `block` hands its fc1 result and its tanh to the outside.
// OUTPUTS: error: {{.*}}sync("fwd_post", "all_reduce") needs one output of module 'block', which has 2
// OUTPUTS: note: {{.*}}output: 'linear' in 'block.fc1'
// OUTPUTS: note: {{.*}}output: 'tanh' in 'block'
// BWD: error: {{.*}}sync("bwd_post", "all_gather") is not supported
