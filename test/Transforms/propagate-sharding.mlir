// RUN: slapo-opt "--slapo-shard=modules=qkv param=weight axis=1" "--slapo-shard=modules=qkv param=bias axis=0" "--slapo-sync=modules=qkv mode=bwd_post op=all_reduce" "--slapo-shard=modules=proj param=weight axis=0" "--slapo-sync=modules=proj mode=fwd_post op=all_reduce" --slapo-propagate-sharding=tp=2 %s | FileCheck %s
// RUN: slapo-opt "--slapo-shard=modules=qkv param=weight axis=1" "--slapo-shard=modules=qkv param=bias axis=0" "--slapo-sync=modules=qkv mode=bwd_post op=all_reduce" "--slapo-shard=modules=proj param=weight axis=0" "--slapo-sync=modules=proj mode=fwd_post op=all_reduce" --slapo-propagate-sharding=tp=2 --slapo-autodiff %s | FileCheck %s --check-prefix=GRAD

// Attention with a fused q/k/v projection (HF GPT-2's Conv1D layout:
// weight [in, 3 * hidden]) over tp=2: four heads of two, split into q and k
// by slices; a row-parallel output projection with a bias; a residual.
module {
  slapo.param @pre.weight : tensor<8x8xf32>
  slapo.param @qkv.weight : tensor<8x24xf32>
  slapo.param @qkv.bias : tensor<24xf32>
  slapo.param @proj.weight : tensor<8x8xf32>
  slapo.param @proj.bias : tensor<8xf32>
  func.func @forward(%x: tensor<2x8xf32> {slapo.name = "x"}) -> tensor<f32> {
    %wp = slapo.get_param @pre.weight {slapo.module = "pre"} : tensor<8x8xf32>
    %h = slapo.linear %x, %wp {slapo.module = "pre"} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %w = slapo.get_param @qkv.weight {slapo.module = "qkv"} : tensor<8x24xf32>
    %b = slapo.get_param @qkv.bias {slapo.module = "qkv"} : tensor<24xf32>
    %m = slapo.matmul %h, %w {slapo.module = "qkv"} : (tensor<2x8xf32>, tensor<8x24xf32>) -> tensor<2x24xf32>
    %a = slapo.add %b, %m {slapo.module = "qkv"} : (tensor<24xf32>, tensor<2x24xf32>) -> tensor<2x24xf32>
    %q = slapo.slice %a {dim = 1 : i64, start = 0 : i64, end = 8 : i64, step = 1 : i64, slapo.module = "attn"} : tensor<2x24xf32> -> tensor<2x8xf32>
    %k = slapo.slice %a {dim = 1 : i64, start = 8 : i64, end = 16 : i64, step = 1 : i64, slapo.module = "attn"} : tensor<2x24xf32> -> tensor<2x8xf32>
    %qh = slapo.reshape %q {slapo.module = "attn"} : tensor<2x8xf32> -> tensor<2x4x2xf32>
    %kh = slapo.reshape %k {slapo.module = "attn"} : tensor<2x8xf32> -> tensor<2x4x2xf32>
    %qt = slapo.permute %qh {permutation = array<i64: 1, 0, 2>, slapo.module = "attn"} : tensor<2x4x2xf32> -> tensor<4x2x2xf32>
    %kt = slapo.permute %kh {permutation = array<i64: 1, 2, 0>, slapo.module = "attn"} : tensor<2x4x2xf32> -> tensor<4x2x2xf32>
    %s = slapo.matmul %qt, %kt {slapo.module = "attn"} : (tensor<4x2x2xf32>, tensor<4x2x2xf32>) -> tensor<4x2x2xf32>
    %p = slapo.softmax %s {dim = 2 : i64, slapo.module = "attn"} : tensor<4x2x2xf32>
    %o = slapo.permute %p {permutation = array<i64: 1, 0, 2>, slapo.module = "attn"} : tensor<4x2x2xf32> -> tensor<2x4x2xf32>
    %c = slapo.reshape %o {slapo.module = "attn"} : tensor<2x4x2xf32> -> tensor<2x8xf32>
    %wo = slapo.get_param @proj.weight {slapo.module = "proj"} : tensor<8x8xf32>
    %bo = slapo.get_param @proj.bias {slapo.module = "proj"} : tensor<8xf32>
    %y = slapo.matmul %c, %wo {slapo.module = "proj"} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %yb = slapo.add %bo, %y {slapo.module = "proj"} : (tensor<8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %r = slapo.add %yb, %h : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %t = slapo.tanh %r : tensor<2x8xf32>
    %l = slapo.sum %t {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// The slices take whole thirds of the projection: its parameters are split
// per chunk, so each rank holds its two heads of q, of k and of v.
// CHECK: slapo.param @pre.weight : tensor<8x8xf32>
// CHECK-NEXT: slapo.param @qkv.weight : tensor<8x12xf32> {shard_axis = 1 : i64, shard_chunks = 3 : i64}
// CHECK-NEXT: slapo.param @qkv.bias : tensor<12xf32> {shard_axis = 0 : i64, shard_chunks = 3 : i64}
// CHECK-NEXT: slapo.param @proj.weight : tensor<4x8xf32> {shard_axis = 0 : i64}
// CHECK-NEXT: slapo.param @proj.bias : tensor<8xf32>
// CHECK-NOT: shard_axis
// CHECK: %[[H:.*]] = slapo.linear %arg0, %{{.*}} {slapo.module = "pre"} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
// CHECK: %[[IN:.*]] = slapo.grad_all_reduce %[[H]] <tp> {slapo.module = "qkv"} : tensor<2x8xf32>
// CHECK-NEXT: %[[M:.*]] = slapo.matmul %[[IN]], %{{.*}} {slapo.module = "qkv"} : (tensor<2x8xf32>, tensor<8x12xf32>) -> tensor<2x12xf32>
// CHECK-NEXT: %[[A:.*]] = slapo.add %{{.*}}, %[[M]] {slapo.module = "qkv"} : (tensor<12xf32>, tensor<2x12xf32>) -> tensor<2x12xf32>
// The rank's q and k are its first and second thirds; the views have its
// heads.
// CHECK-NEXT: %[[Q:.*]] = slapo.slice %[[A]] {dim = 1 : i64, end = 4 : i64, slapo.module = "attn", start = 0 : i64, step = 1 : i64} : tensor<2x12xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %[[K:.*]] = slapo.slice %[[A]] {dim = 1 : i64, end = 8 : i64, slapo.module = "attn", start = 4 : i64, step = 1 : i64} : tensor<2x12xf32> -> tensor<2x4xf32>
// CHECK-NEXT: slapo.reshape %[[Q]] {slapo.module = "attn"} : tensor<2x4xf32> -> tensor<2x2x2xf32>
// CHECK-NEXT: slapo.reshape %[[K]] {slapo.module = "attn"} : tensor<2x4xf32> -> tensor<2x2x2xf32>
// CHECK-NEXT: slapo.permute {{.*}} -> tensor<2x2x2xf32>
// CHECK-NEXT: slapo.permute {{.*}} -> tensor<2x2x2xf32>
// CHECK-NEXT: slapo.matmul {{.*}} -> tensor<2x2x2xf32>
// CHECK-NEXT: slapo.softmax {{.*}} : tensor<2x2x2xf32>
// CHECK-NEXT: slapo.permute {{.*}} -> tensor<2x2x2xf32>
// CHECK-NEXT: %[[C:.*]] = slapo.reshape {{.*}} : tensor<2x2x2xf32> -> tensor<2x4xf32>
// The output projection's partial sum is completed before its bias and the
// residual are added, once.
// CHECK: %[[BO:.*]] = slapo.get_param @proj.bias
// CHECK-NEXT: %[[Y:.*]] = slapo.matmul %[[C]], %{{.*}} {slapo.module = "proj"} : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[S:.*]] = slapo.all_reduce %[[Y]] <tp> {slapo.module = "proj"} : tensor<2x8xf32>
// CHECK-NEXT: %[[YB:.*]] = slapo.add %[[S]], %[[BO]] {slapo.module = "proj"} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[R:.*]] = slapo.add %[[YB]], %[[H]] : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: slapo.tanh %[[R]]

// The backward comes from the collectives' rules: the gradient of the
// replicated input of the column-parallel projection is all-reduced before
// it reaches @pre.weight's gradient.
// GRAD-LABEL: func.func @forward_backward
// GRAD: %[[D:.*]] = slapo.matmul %{{.*}}, %{{.*}} {slapo.module = "qkv", slapo.phase = "backward"} : (tensor<2x12xf32>, tensor<12x8xf32>) -> tensor<2x8xf32>
// GRAD: %[[DS:.*]] = slapo.all_reduce %[[D]] <tp> {slapo.module = "qkv", slapo.phase = "backward"} : tensor<2x8xf32>
// GRAD-NEXT: slapo.add %{{.*}}, %[[DS]] {slapo.module = "qkv", slapo.phase = "backward"}
