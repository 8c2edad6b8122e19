// RUN: slapo-opt --slapo-fold-permutes --split-input-file %s | FileCheck %s

// A linear's weight gradient, grad^T x: the matmul reads grad transposed and
// the copy is gone.
// CHECK-LABEL: func.func @weight_gradient
// CHECK-NEXT: %[[P:.*]] = slapo.matmul %arg0, %arg1 {lhs_permutation = array<i64: 1, 0>} : (tensor<6x4xf32>, tensor<6x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: return %[[P]]
func.func @weight_gradient(%grad: tensor<6x4xf32>, %x: tensor<6x3xf32>) -> tensor<4x3xf32> {
  %t = slapo.permute %grad {permutation = array<i64: 1, 0>} : tensor<6x4xf32> -> tensor<4x6xf32>
  %w = slapo.matmul %t, %x : (tensor<4x6xf32>, tensor<6x3xf32>) -> tensor<4x3xf32>
  return %w : tensor<4x3xf32>
}

// -----

// Attention on [B, S, H, D] tensors: the head split of q, the split and
// transpose of k (a chain, composed), and the head merge of the product.
// CHECK-LABEL: func.func @attention
// CHECK-NEXT: %[[S:.*]] = slapo.matmul %arg0, %arg1 {lhs_permutation = array<i64: 0, 2, 1, 3>, result_permutation = array<i64: 0, 2, 1, 3>, rhs_permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>) -> tensor<2x5x3x5xf32>
// CHECK-NEXT: return %[[S]]
func.func @attention(%q: tensor<2x5x3x4xf32>, %k: tensor<2x5x3x4xf32>) -> tensor<2x5x3x5xf32> {
  %qh = slapo.permute %q {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %kh = slapo.permute %k {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %kt = slapo.permute %kh {permutation = array<i64: 0, 1, 3, 2>} : tensor<2x3x5x4xf32> -> tensor<2x3x4x5xf32>
  %s = slapo.matmul %qh, %kt : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x5x5xf32>
  %m = slapo.permute %s {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x5x5xf32> -> tensor<2x5x3x5xf32>
  return %m : tensor<2x5x3x5xf32>
}

// -----

// Permutes that undo each other leave no attribute; a chain after the
// result is composed.
// CHECK-LABEL: func.func @identity_and_result_chain
// CHECK-NEXT: %[[P:.*]] = slapo.matmul %arg0, %arg1 {result_permutation = array<i64: 1, 2, 0, 3>} : (tensor<2x3x4x6xf32>, tensor<2x3x6x5xf32>) -> tensor<3x4x2x5xf32>
// CHECK-NEXT: return %[[P]]
func.func @identity_and_result_chain(%a: tensor<2x3x4x6xf32>, %b: tensor<2x3x6x5xf32>) -> tensor<3x4x2x5xf32> {
  %t = slapo.permute %a {permutation = array<i64: 0, 1, 3, 2>} : tensor<2x3x4x6xf32> -> tensor<2x3x6x4xf32>
  %u = slapo.permute %t {permutation = array<i64: 0, 1, 3, 2>} : tensor<2x3x6x4xf32> -> tensor<2x3x4x6xf32>
  %p = slapo.matmul %u, %b : (tensor<2x3x4x6xf32>, tensor<2x3x6x5xf32>) -> tensor<2x3x4x5xf32>
  %r = slapo.permute %p {permutation = array<i64: 1, 0, 2, 3>} : tensor<2x3x4x5xf32> -> tensor<3x2x4x5xf32>
  %s = slapo.permute %r {permutation = array<i64: 0, 2, 1, 3>} : tensor<3x2x4x5xf32> -> tensor<3x4x2x5xf32>
  return %s : tensor<3x4x2x5xf32>
}

// -----

// A permute that another op reads stays (the matmul reads its input all the
// same); a product read by more than a permute keeps its layout.
// CHECK-LABEL: func.func @shared
// CHECK-NEXT: %[[T:.*]] = slapo.permute %arg0 {permutation = array<i64: 1, 0>}
// CHECK-NEXT: %[[P:.*]] = slapo.matmul %arg0, %arg1 {lhs_permutation = array<i64: 1, 0>} : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[R:.*]] = slapo.permute %[[P]] {permutation = array<i64: 1, 0>}
// CHECK-NEXT: %[[S:.*]] = slapo.add %[[R]], %[[P]]
// CHECK-NEXT: return %[[T]], %[[S]]
func.func @shared(%a: tensor<6x4xf32>, %b: tensor<6x4xf32>) -> (tensor<4x6xf32>, tensor<4x4xf32>) {
  %t = slapo.permute %a {permutation = array<i64: 1, 0>} : tensor<6x4xf32> -> tensor<4x6xf32>
  %p = slapo.matmul %t, %b : (tensor<4x6xf32>, tensor<6x4xf32>) -> tensor<4x4xf32>
  %r = slapo.permute %p {permutation = array<i64: 1, 0>} : tensor<4x4xf32> -> tensor<4x4xf32>
  %s = slapo.add %r, %p : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %t, %s : tensor<4x6xf32>, tensor<4x4xf32>
}

// -----

// Only layouts with dense matrix rows or columns are folded: here the stored
// innermost dim of the lhs would be a batch dim. A result stored with the
// product's columns as rows is the transposed product, rhs^T lhs^T, written
// with dense rows.
// CHECK-LABEL: func.func @strided_matrices
// CHECK-NEXT: %[[T:.*]] = slapo.permute %arg0 {permutation = array<i64: 2, 0, 1>}
// CHECK-NEXT: %[[P:.*]] = slapo.matmul %arg1, %[[T]] {lhs_permutation = array<i64: 0, 2, 1>, rhs_permutation = array<i64: 0, 2, 1>} : (tensor<6x4x3xf32>, tensor<6x2x4xf32>) -> tensor<6x3x2xf32>
// CHECK-NEXT: return %[[P]]
func.func @strided_matrices(%a: tensor<2x4x6xf32>, %b: tensor<6x4x3xf32>) -> tensor<6x3x2xf32> {
  %t = slapo.permute %a {permutation = array<i64: 2, 0, 1>} : tensor<2x4x6xf32> -> tensor<6x2x4xf32>
  %p = slapo.matmul %t, %b : (tensor<6x2x4xf32>, tensor<6x4x3xf32>) -> tensor<6x2x3xf32>
  %r = slapo.permute %p {permutation = array<i64: 0, 2, 1>} : tensor<6x2x3xf32> -> tensor<6x3x2xf32>
  return %r : tensor<6x3x2xf32>
}

// -----

// Attention's key gradient: (q^T dS) stored as [B, S, H, D] is written as
// dS^T q, each operand read in place.
// CHECK-LABEL: func.func @key_gradient
// CHECK-NEXT: %[[G:.*]] = slapo.matmul %arg1, %arg0 {lhs_permutation = array<i64: 0, 1, 3, 2>, result_permutation = array<i64: 0, 2, 1, 3>, rhs_permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x3x5x5xf32>, tensor<2x5x3x4xf32>) -> tensor<2x5x3x4xf32>
// CHECK-NEXT: return %[[G]]
func.func @key_gradient(%q: tensor<2x5x3x4xf32>, %ds: tensor<2x3x5x5xf32>) -> tensor<2x5x3x4xf32> {
  %qt = slapo.permute %q {permutation = array<i64: 0, 2, 3, 1>} : tensor<2x5x3x4xf32> -> tensor<2x3x4x5xf32>
  %g = slapo.matmul %qt, %ds : (tensor<2x3x4x5xf32>, tensor<2x3x5x5xf32>) -> tensor<2x3x4x5xf32>
  %gt = slapo.permute %g {permutation = array<i64: 0, 1, 3, 2>} : tensor<2x3x4x5xf32> -> tensor<2x3x5x4xf32>
  %gk = slapo.permute %gt {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  return %gk : tensor<2x5x3x4xf32>
}


// -----

// Flash attention between head splits and a head merge, and its gradient
// between the gradients' swaps: both read and write the token-major
// tensors (bshd), no swap is left; the mask and the log-sum-exp keep their
// [B, H, T, S] order.
// CHECK-LABEL: func.func @attention_heads
// CHECK-NEXT: %[[O:.*]], %[[LSE:.*]] = slapo.flash_attention %arg0, %arg1, %arg2 keep %arg3 {bshd, masked_score = -1.000000e+09 : f64, scale = 5.000000e-01 : f64} : (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<1x1x5x5xi1>) -> (tensor<2x5x3x4xf32>, tensor<2x3x5xf32>)
// CHECK-NEXT: %[[G:.*]]:3 = slapo.flash_attention_grad %arg0, %arg1, %arg2 keep %arg3 result %[[O]], %[[LSE]] grad %arg4 {bshd, masked_score = -1.000000e+09 : f64, scale = 5.000000e-01 : f64} : (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<1x1x5x5xi1>, tensor<2x5x3x4xf32>, tensor<2x3x5xf32>, tensor<2x5x3x4xf32>) -> (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>)
// CHECK-NEXT: return %[[O]], %[[G]]#0, %[[G]]#1, %[[G]]#2
func.func @attention_heads(%q: tensor<2x5x3x4xf32>, %k: tensor<2x5x3x4xf32>, %v: tensor<2x5x3x4xf32>, %mask: tensor<1x1x5x5xi1>, %g: tensor<2x5x3x4xf32>) -> (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>) {
  %qh = slapo.permute %q {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %kh = slapo.permute %k {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %vh = slapo.permute %v {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %o, %lse = slapo.flash_attention %qh, %kh, %vh keep %mask {masked_score = -1.0e9 : f64, scale = 0.5 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<1x1x5x5xi1>) -> (tensor<2x3x5x4xf32>, tensor<2x3x5xf32>)
  %merged = slapo.permute %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  %gh = slapo.permute %g {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %dqh, %dkh, %dvh = slapo.flash_attention_grad %qh, %kh, %vh keep %mask result %o, %lse grad %gh {masked_score = -1.0e9 : f64, scale = 0.5 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<1x1x5x5xi1>, tensor<2x3x5x4xf32>, tensor<2x3x5xf32>, tensor<2x3x5x4xf32>) -> (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>)
  %dq = slapo.permute %dqh {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  %dk = slapo.permute %dkh {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  %dv = slapo.permute %dvh {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  return %merged, %dq, %dk, %dv : tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>
}

// -----

// The forward's result is also read as it is (heads-major): it keeps its
// layout, and so does the gradient that reads it, which would otherwise
// need a swap of its own; their swaps stay.
// CHECK-LABEL: func.func @attention_result_shared
// CHECK-NEXT: slapo.permute
// CHECK-NEXT: slapo.flash_attention {{.*}} {masked_score
// CHECK-NEXT: slapo.permute
// CHECK-NEXT: slapo.permute
// CHECK-NEXT: slapo.flash_attention_grad {{.*}} {masked_score
// CHECK-COUNT-3: slapo.permute
func.func @attention_result_shared(%q: tensor<2x5x3x4xf32>, %g: tensor<2x5x3x4xf32>) -> (tensor<2x5x3x4xf32>, tensor<2x3x5x4xf32>, tensor<2x5x3x4xf32>) {
  %qh = slapo.permute %q {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %o, %lse = slapo.flash_attention %qh, %qh, %qh {masked_score = 0.0 : f64, scale = 0.5 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> (tensor<2x3x5x4xf32>, tensor<2x3x5xf32>)
  %merged = slapo.permute %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  %gh = slapo.permute %g {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %dqh, %dkh, %dvh = slapo.flash_attention_grad %qh, %qh, %qh result %o, %lse grad %gh {masked_score = 0.0 : f64, scale = 0.5 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5xf32>, tensor<2x3x5x4xf32>) -> (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>)
  %dq = slapo.permute %dqh {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  %dk = slapo.permute %dkh {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  %dv = slapo.permute %dvh {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  %sum = slapo.add %dq, %dk : (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>) -> tensor<2x5x3x4xf32>
  %all = slapo.add %sum, %dv : (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>) -> tensor<2x5x3x4xf32>
  return %merged, %o, %all : tensor<2x5x3x4xf32>, tensor<2x3x5x4xf32>, tensor<2x5x3x4xf32>
}

// -----

// Operands stored heads-major (no swap to fold): the attention stays.
// CHECK-LABEL: func.func @attention_heads_major
// CHECK: slapo.flash_attention %arg0, %arg0, %arg0 {masked_score
// CHECK-NEXT: slapo.permute
func.func @attention_heads_major(%q: tensor<2x3x5x4xf32>) -> tensor<2x5x3x4xf32> {
  %o, %lse = slapo.flash_attention %q, %q, %q {masked_score = 0.0 : f64, scale = 0.5 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> (tensor<2x3x5x4xf32>, tensor<2x3x5xf32>)
  %merged = slapo.permute %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  return %merged : tensor<2x5x3x4xf32>
}

// -----

// LLaMA: the query and key rotated between the head split and the
// attention, their gradients rotated back between the attention's gradient
// and the head merge. The rotations move to the token-major side of the
// swaps (cos and sin [1, 1, T, D] viewed as [1, T, 1, D]; a [T, D] angle
// broadcast the same), the swaps meet the attentions, and none is left.
// CHECK-LABEL: func.func @rotary_attention_heads
// CHECK-NEXT: %[[COS:.*]] = slapo.reshape %arg3 : tensor<1x1x5x4xf32> -> tensor<1x5x1x4xf32>
// CHECK-NEXT: %[[SIN:.*]] = slapo.reshape %arg4 : tensor<5x4xf32> -> tensor<1x5x1x4xf32>
// CHECK-NEXT: %[[Q:.*]] = slapo.rotary_embedding %arg0, %[[COS]], %[[SIN]] : (tensor<2x5x3x4xf32>, tensor<1x5x1x4xf32>, tensor<1x5x1x4xf32>) -> tensor<2x5x3x4xbf16>
// CHECK: %[[K:.*]] = slapo.rotary_embedding %arg1, {{.*}} -> tensor<2x5x3x4xbf16>
// CHECK-NEXT: %[[O:.*]], %[[LSE:.*]] = slapo.flash_attention %[[Q]], %[[K]], %arg2 {bshd,
// CHECK-NEXT: %[[G:.*]]:3 = slapo.flash_attention_grad %[[Q]], %[[K]], %arg2 result %[[O]], %[[LSE]] grad %arg5 {bshd,
// CHECK: %[[DQ:.*]] = slapo.rotary_embedding %[[G]]#0, {{.*}} {transposed} : (tensor<2x5x3x4xbf16>, tensor<1x5x1x4xf32>, tensor<1x5x1x4xf32>) -> tensor<2x5x3x4xf32>
// CHECK: %[[DK:.*]] = slapo.rotary_embedding %[[G]]#1, {{.*}} {transposed}
// CHECK-NOT: slapo.permute
// CHECK: return %[[O]], %[[DQ]], %[[DK]], %[[G]]#2
func.func @rotary_attention_heads(%q: tensor<2x5x3x4xf32>, %k: tensor<2x5x3x4xf32>, %v: tensor<2x5x3x4xbf16>, %cos: tensor<1x1x5x4xf32>, %sin: tensor<5x4xf32>, %g: tensor<2x5x3x4xbf16>) -> (tensor<2x5x3x4xbf16>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xbf16>) {
  %qh = slapo.permute %q {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %kh = slapo.permute %k {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %vh = slapo.permute %v {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xbf16> -> tensor<2x3x5x4xbf16>
  %qr = slapo.rotary_embedding %qh, %cos, %sin : (tensor<2x3x5x4xf32>, tensor<1x1x5x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5x4xbf16>
  %kr = slapo.rotary_embedding %kh, %cos, %sin : (tensor<2x3x5x4xf32>, tensor<1x1x5x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5x4xbf16>
  %o, %lse = slapo.flash_attention %qr, %kr, %vh {masked_score = 0.0 : f64, scale = 0.5 : f64} : (tensor<2x3x5x4xbf16>, tensor<2x3x5x4xbf16>, tensor<2x3x5x4xbf16>) -> (tensor<2x3x5x4xbf16>, tensor<2x3x5xf32>)
  %merged = slapo.permute %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x5x4xbf16> -> tensor<2x5x3x4xbf16>
  %gh = slapo.permute %g {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xbf16> -> tensor<2x3x5x4xbf16>
  %dqr, %dkr, %dvh = slapo.flash_attention_grad %qr, %kr, %vh result %o, %lse grad %gh {masked_score = 0.0 : f64, scale = 0.5 : f64} : (tensor<2x3x5x4xbf16>, tensor<2x3x5x4xbf16>, tensor<2x3x5x4xbf16>, tensor<2x3x5x4xbf16>, tensor<2x3x5xf32>, tensor<2x3x5x4xbf16>) -> (tensor<2x3x5x4xbf16>, tensor<2x3x5x4xbf16>, tensor<2x3x5x4xbf16>)
  %dqh = slapo.rotary_embedding %dqr, %cos, %sin {transposed} : (tensor<2x3x5x4xbf16>, tensor<1x1x5x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5x4xf32>
  %dkh = slapo.rotary_embedding %dkr, %cos, %sin {transposed} : (tensor<2x3x5x4xbf16>, tensor<1x1x5x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5x4xf32>
  %dq = slapo.permute %dqh {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  %dk = slapo.permute %dkh {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  %dv = slapo.permute %dvh {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x5x4xbf16> -> tensor<2x5x3x4xbf16>
  return %merged, %dq, %dk, %dv : tensor<2x5x3x4xbf16>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>, tensor<2x5x3x4xbf16>
}

// -----

// A rotary whose result is also read by something besides attentions (here
// returned as it is): the swap stays before it, and the attention keeps its
// heads-major layout.
// CHECK-LABEL: func.func @rotary_read_elsewhere
// CHECK-NEXT: slapo.permute
// CHECK-NEXT: slapo.rotary_embedding {{.*}} : (tensor<2x3x5x4xf32>, tensor<1x1x5x4xf32>, tensor<1x1x5x4xf32>) -> tensor<2x3x5x4xf32>
// CHECK-NEXT: slapo.flash_attention {{.*}} {masked_score
func.func @rotary_read_elsewhere(%q: tensor<2x5x3x4xf32>, %cos: tensor<1x1x5x4xf32>) -> (tensor<2x5x3x4xf32>, tensor<2x3x5x4xf32>) {
  %qh = slapo.permute %q {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %qr = slapo.rotary_embedding %qh, %cos, %cos : (tensor<2x3x5x4xf32>, tensor<1x1x5x4xf32>, tensor<1x1x5x4xf32>) -> tensor<2x3x5x4xf32>
  %o, %lse = slapo.flash_attention %qr, %qr, %qr {masked_score = 0.0 : f64, scale = 0.5 : f64} : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> (tensor<2x3x5x4xf32>, tensor<2x3x5xf32>)
  %merged = slapo.permute %o {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x5x4xf32> -> tensor<2x5x3x4xf32>
  return %merged, %qr : tensor<2x5x3x4xf32>, tensor<2x3x5x4xf32>
}
