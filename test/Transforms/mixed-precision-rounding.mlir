// RUN: slapo-opt --slapo-mixed-precision %s | FileCheck %s

// Which products mixed precision rounds to bf16: those whose readers, seen
// through reshapes, permutes and slices, are all elementwise ops, row ops
// along the last dim, or products. Their fusion groups read the bf16
// product in their loop and a product casts it to bf16 anyway; any other
// reader would read a widened copy that costs a pass of its own, so the
// product keeps its f32 sums there. So does a product whose elementwise
// chains reach an exponential (attention's scores before the softmax).
module {
  slapo.param @w1 : tensor<4x4xf32>
  slapo.param @w2 : tensor<4x3xf32>
  slapo.param @w3 : tensor<4x4xf32>
  func.func @forward(%x: tensor<2x4xf32>, %t: tensor<2xi64>, %angles: tensor<2x4xf32>) -> tensor<f32> {
    %w1 = slapo.get_param @w1 : tensor<4x4xf32>
    %w2 = slapo.get_param @w2 : tensor<4x3xf32>
    %w3 = slapo.get_param @w3 : tensor<4x4xf32>
    // Read by a product through a reshape and a permute: rounded, and its
    // widening meets the next product's narrowing (slapo-propagate-casts
    // cancels the two).
    %h = slapo.matmul %x, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %v = slapo.reshape %h : tensor<2x4xf32> -> tensor<2x2x2xf32>
    %p = slapo.permute %v {permutation = array<i64: 0, 2, 1>} : tensor<2x2x2xf32> -> tensor<2x2x2xf32>
    %f = slapo.reshape %p : tensor<2x2x2xf32> -> tensor<2x4xf32>
    // Read by the loss (the logits): f32.
    %logits = slapo.matmul %f, %w2 : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %ce = slapo.cross_entropy %logits, %t {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    // Read by an elementwise op and a row op along the last dim: rounded.
    %g = slapo.matmul %x, %w3 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %e = slapo.neg %g : tensor<2x4xf32>
    %s = slapo.sum %g {dims = array<i64: 1>, keepdim = true} : tensor<2x4xf32> -> tensor<2x1xf32>
    // Scores: the chain that reads them reaches a softmax, which would
    // amplify their rounding: f32.
    %a = slapo.matmul %x, %w3 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %half = slapo.constant dense<5.000000e-01> : tensor<f32>
    %as = slapo.mul %a, %half : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
    %probs = slapo.softmax %as {dim = 1 : i64} : tensor<2x4xf32>
    %ps = slapo.add %probs, %s : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
    // Read by an elementwise op and a reduction over the first dim: f32.
    %k = slapo.matmul %e, %w3 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %n = slapo.neg %k : tensor<2x4xf32>
    %m = slapo.mean %k {dims = array<i64: 0>, keepdim = false} : tensor<2x4xf32> -> tensor<4xf32>
    %sn = slapo.add %ps, %n : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %l1 = slapo.mean %sn {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    %l2 = slapo.mean %m {dims = array<i64: 0>, keepdim = false} : tensor<4xf32> -> tensor<f32>
    %l12 = slapo.add %l1, %l2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    // Read by a rotary embedding through a head split (LLaMA's query):
    // rounded, the rotary widens its input as it reads it.
    %qp = slapo.matmul %x, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %qv = slapo.reshape %qp : tensor<2x4xf32> -> tensor<1x2x1x4xf32>
    %qh = slapo.permute %qv {permutation = array<i64: 0, 2, 1, 3>} : tensor<1x2x1x4xf32> -> tensor<1x1x2x4xf32>
    %qr = slapo.rotary_embedding %qh, %angles, %angles : (tensor<1x1x2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<1x1x2x4xf32>
    %l3 = slapo.mean %qr {dims = array<i64: 0, 1, 2, 3>, keepdim = false} : tensor<1x1x2x4xf32> -> tensor<f32>
    %l123 = slapo.add %l12, %l3 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %l = slapo.add %l123, %ce : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
// CHECK: %[[H:.*]] = slapo.matmul {{.*}} -> tensor<2x4xbf16>
// CHECK-NEXT: %[[HW:.*]] = slapo.cast %[[H]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK-NEXT: slapo.reshape %[[HW]]
// CHECK: %[[LOGITS:.*]] = slapo.matmul {{.*}} : (tensor<2x4xbf16>, tensor<4x3xbf16>) -> tensor<2x3xf32>
// CHECK-NEXT: slapo.cross_entropy %[[LOGITS]]
// CHECK: %[[G:.*]] = slapo.matmul {{.*}} -> tensor<2x4xbf16>
// CHECK-NEXT: %[[GW:.*]] = slapo.cast %[[G]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK-NEXT: slapo.neg %[[GW]]
// CHECK-NEXT: slapo.sum %[[GW]]
// CHECK: %[[A:.*]] = slapo.matmul {{.*}} : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xf32>
// CHECK-NEXT: slapo.constant
// CHECK-NEXT: slapo.mul %[[A]]
// CHECK: %[[K:.*]] = slapo.matmul {{.*}} : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xf32>
// CHECK-NEXT: slapo.neg %[[K]]
// CHECK-NEXT: slapo.mean %[[K]]
// CHECK: %[[Q:.*]] = slapo.matmul {{.*}} -> tensor<2x4xbf16>
// CHECK-NEXT: %[[QW:.*]] = slapo.cast %[[Q]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK-NEXT: slapo.reshape %[[QW]]
