// RUN: not slapo-opt --split-input-file "--slapo-sync=modules=shared.fc mode=bwd_post op=all_reduce" "--slapo-sync=modules=shared.fc mode=fwd_post op=all_reduce" %s 2>/dev/null | FileCheck %s
// RUN: not slapo-opt --split-input-file "--slapo-sync=modules=shared.fc mode=bwd_post op=all_reduce" "--slapo-sync=modules=shared.fc mode=fwd_post op=all_reduce" %s 2>&1 >/dev/null | FileCheck %s --check-prefix=OUTPUTS

// A shared layer called twice (ALBERT's): its ops at the module path fall
// into two calls, each with one input and one output, and each call gets
// its own collectives. The mask, which has no gradient, links no calls.
module {
  slapo.param @shared.fc.weight : tensor<4x4xf32>
  func.func @forward(%in: tensor<2x4xf32>, %mask: tensor<2x4xf32>) -> tensor<f32> {
    %w = slapo.get_param @shared.fc.weight {slapo.module = "shared.fc"} : tensor<4x4xf32>
    %x = slapo.linear %in, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %h1 = slapo.linear %x, %w {slapo.module = "shared.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %m1 = slapo.add %h1, %mask {slapo.module = "shared.fc"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %t = slapo.tanh %m1 {slapo.module = "shared"} : tensor<2x4xf32>
    %h2 = slapo.linear %t, %w {slapo.module = "shared.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %m2 = slapo.add %h2, %mask {slapo.module = "shared.fc"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %u = slapo.add %m2, %t {slapo.module = "shared"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %l = slapo.sum %u {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
// CHECK: %[[X:.*]] = slapo.linear %arg0
// CHECK-NEXT: %[[G1:.*]] = slapo.grad_all_reduce %[[X]] <tp> {slapo.module = "shared.fc"}
// CHECK-NEXT: %[[H1:.*]] = slapo.linear %[[G1]]
// CHECK-NEXT: %[[M1:.*]] = slapo.add %[[H1]], %arg1
// CHECK-NEXT: %[[R1:.*]] = slapo.all_reduce %[[M1]] <tp> {slapo.module = "shared.fc"}
// CHECK-NEXT: %[[T:.*]] = slapo.tanh %[[R1]]
// CHECK-NEXT: %[[G2:.*]] = slapo.grad_all_reduce %[[T]] <tp> {slapo.module = "shared.fc"}
// CHECK-NEXT: %[[H2:.*]] = slapo.linear %[[G2]]
// CHECK-NEXT: %[[M2:.*]] = slapo.add %[[H2]], %arg1
// CHECK-NEXT: %[[R2:.*]] = slapo.all_reduce %[[M2]] <tp> {slapo.module = "shared.fc"}
// The second call's output goes on to the rest, its input %t (the tanh) too.
// CHECK-NEXT: slapo.add %[[R2]], %[[T]]


// -----

// Here the second call hands two values to the rest: the error lists them.
module {
  slapo.param @shared.fc.weight : tensor<4x4xf32>
  func.func @forward(%in: tensor<2x4xf32>) -> tensor<f32> {
    %w = slapo.get_param @shared.fc.weight {slapo.module = "shared.fc"} : tensor<4x4xf32>
    %x = slapo.linear %in, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %h1 = slapo.linear %x, %w {slapo.module = "shared.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %t = slapo.tanh %h1 : tensor<2x4xf32>
    %h2 = slapo.linear %t, %w {slapo.module = "shared.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %e = slapo.exp %h2 {slapo.module = "shared.fc"} : tensor<2x4xf32>
    %u = slapo.add %e, %h2 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %l = slapo.sum %u {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
// OUTPUTS: error: sync("fwd_post", "all_reduce") needs one output of module 'shared.fc' in each of its 2 calls, which has 2
// OUTPUTS: note: output: 'linear' in 'shared.fc'
// OUTPUTS: note: output: 'exp' in 'shared.fc'
