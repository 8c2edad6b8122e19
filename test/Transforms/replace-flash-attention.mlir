// RUN: slapo-opt "--slapo-replace=modules=attn kernel=flash_attention" %s --split-input-file --verify-diagnostics | FileCheck %s

// GPT-2's attention (Hugging Face's _attn): q k^T, divided by sqrt(head
// size), the causal buffer's slice as where(mask, scores, lowest), softmax
// over the keys, times v: one slapo.flash_attention, the key transposed back
// (the two permutes compose to the heads' split), the mask kept as an
// operand, and nothing of the chain left.
module {
  slapo.param buffer @attn.bias : tensor<1x1x8x8xi1>
  func.func @forward(%x: tensor<2x8x8xf32>) -> tensor<2x4x8x2xf32> {
    %r = slapo.reshape %x {slapo.module = "attn"} : tensor<2x8x8xf32> -> tensor<2x8x4x2xf32>
    %q = slapo.permute %r {permutation = array<i64: 0, 2, 1, 3>, slapo.module = "attn"} : tensor<2x8x4x2xf32> -> tensor<2x4x8x2xf32>
    %kt = slapo.permute %r {permutation = array<i64: 0, 2, 3, 1>, slapo.module = "attn"} : tensor<2x8x4x2xf32> -> tensor<2x4x2x8xf32>
    %s = slapo.matmul %q, %kt {slapo.module = "attn"} : (tensor<2x4x8x2xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x8x8xf32>
    %c = slapo.constant dense<1.41421354> : tensor<f32>
    %d = slapo.div %s, %c {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
    %mask = slapo.get_param @attn.bias {slapo.module = "attn"} : tensor<1x1x8x8xi1>
    %low = slapo.constant dense<-3.40282347E+38> : tensor<f32>
    %w = slapo.where %mask, %d, %low {slapo.module = "attn"} : (tensor<1x1x8x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
    %p = slapo.softmax %w {dim = 3 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    %o = slapo.matmul %p, %q {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32>
    return %o : tensor<2x4x8x2xf32>
  }
}
// CHECK-LABEL: func.func @forward
//       CHECK: %[[R:.*]] = slapo.reshape
//       CHECK: %[[Q:.*]] = slapo.permute %[[R]] {permutation = array<i64: 0, 2, 1, 3>
//       CHECK: %[[MASK:.*]] = slapo.get_param @attn.bias
//       CHECK: %[[K:.*]] = slapo.permute %[[R]] {permutation = array<i64: 0, 2, 1, 3>, slapo.module = "attn"}
//       CHECK: %[[O:.*]], %{{.*}} = slapo.flash_attention %[[Q]], %[[K]], %[[Q]] keep %[[MASK]] {masked_score = -3.4028234663852886E+38 : f64, scale = 0.707106{{[0-9]+}} : f64, slapo.module = "attn"} : (tensor<2x4x8x2xf32>, tensor<2x4x8x2xf32>, tensor<2x4x8x2xf32>, tensor<1x1x8x8xi1>) -> (tensor<2x4x8x2xf32>, tensor<2x4x8xf32>)
//       CHECK: return %[[O]]
//   CHECK-NOT: slapo.softmax
//   CHECK-NOT: slapo.matmul

// -----

// BERT's: scaled by a product here, an additive padding mask [B, 1, 1, S]
// from an input; the key already in [B, H, S, D] and transposed once.
module {
  func.func @forward(%q: tensor<2x4x8x2xf32>, %k: tensor<2x4x8x2xf32>, %v: tensor<2x4x8x3xf32>, %m: tensor<2x1x1x8xf32>) -> tensor<2x4x8x3xf32> {
    %kt = slapo.permute %k {permutation = array<i64: 0, 1, 3, 2>, slapo.module = "attn"} : tensor<2x4x8x2xf32> -> tensor<2x4x2x8xf32>
    %s = slapo.matmul %q, %kt {slapo.module = "attn"} : (tensor<2x4x8x2xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x8x8xf32>
    %c = slapo.constant dense<5.000000e-01> : tensor<f32>
    %d = slapo.mul %c, %s {slapo.module = "attn"} : (tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
    %a = slapo.add %d, %m {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<2x1x1x8xf32>) -> tensor<2x4x8x8xf32>
    %p = slapo.softmax %a {dim = 3 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    %o = slapo.matmul %p, %v {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<2x4x8x3xf32>) -> tensor<2x4x8x3xf32>
    return %o : tensor<2x4x8x3xf32>
  }
}
// CHECK-LABEL: func.func @forward
//  CHECK-NEXT: %[[O:.*]], %{{.*}} = slapo.flash_attention %arg0, %arg1, %arg2 bias %arg3 {masked_score = 0.000000e+00 : f64, scale = 5.000000e-01 : f64, slapo.module = "attn"} : (tensor<2x4x8x2xf32>, tensor<2x4x8x2xf32>, tensor<2x4x8x3xf32>, tensor<2x1x1x8xf32>) -> (tensor<2x4x8x3xf32>, tensor<2x4x8xf32>)
//  CHECK-NEXT: return %[[O]]

// -----

// LLaMA's grouped-query attention: 4 query heads share 2 key and value
// heads, which Hugging Face's repeat_kv copies (reshape to [B, Hk, 1, S, D],
// broadcast, reshape to [B, H, S, D]). flash_attention reads the 2 heads
// where they are; the copies go.
module {
  func.func @forward(%q: tensor<2x4x8x2xf32>, %k: tensor<2x2x8x2xf32>, %v: tensor<2x2x8x3xf32>, %m: tensor<1x1x8x8xf32>) -> tensor<2x4x8x3xf32> {
    %k1 = slapo.reshape %k {slapo.module = "attn"} : tensor<2x2x8x2xf32> -> tensor<2x2x1x8x2xf32>
    %k2 = slapo.broadcast %k1 {slapo.module = "attn"} : tensor<2x2x1x8x2xf32> -> tensor<2x2x2x8x2xf32>
    %kr = slapo.reshape %k2 {slapo.module = "attn"} : tensor<2x2x2x8x2xf32> -> tensor<2x4x8x2xf32>
    %v1 = slapo.reshape %v {slapo.module = "attn"} : tensor<2x2x8x3xf32> -> tensor<2x2x1x8x3xf32>
    %v2 = slapo.broadcast %v1 {slapo.module = "attn"} : tensor<2x2x1x8x3xf32> -> tensor<2x2x2x8x3xf32>
    %vr = slapo.reshape %v2 {slapo.module = "attn"} : tensor<2x2x2x8x3xf32> -> tensor<2x4x8x3xf32>
    %kt = slapo.permute %kr {permutation = array<i64: 0, 1, 3, 2>, slapo.module = "attn"} : tensor<2x4x8x2xf32> -> tensor<2x4x2x8xf32>
    %s = slapo.matmul %q, %kt {slapo.module = "attn"} : (tensor<2x4x8x2xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x8x8xf32>
    %c = slapo.constant dense<5.000000e-01> : tensor<f32>
    %d = slapo.mul %s, %c {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
    %a = slapo.add %d, %m {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x4x8x8xf32>
    %p = slapo.softmax %a {dim = 3 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    %o = slapo.matmul %p, %vr {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<2x4x8x3xf32>) -> tensor<2x4x8x3xf32>
    return %o : tensor<2x4x8x3xf32>
  }
}
// CHECK-LABEL: func.func @forward
//  CHECK-NEXT: %[[O:.*]], %{{.*}} = slapo.flash_attention %arg0, %arg1, %arg2 bias %arg3 {{.*}} : (tensor<2x4x8x2xf32>, tensor<2x2x8x2xf32>, tensor<2x2x8x3xf32>, tensor<1x1x8x8xf32>) -> (tensor<2x4x8x3xf32>, tensor<2x4x8xf32>)
//  CHECK-NEXT: return %[[O]]

// -----

// A repeated key that something else reads too keeps its copy for that
// reader; the attention reads the key's 2 heads.
module {
  func.func @forward(%q: tensor<2x4x8x2xf32>, %k: tensor<2x2x8x2xf32>, %v: tensor<2x2x8x2xf32>) -> (tensor<2x4x8x2xf32>, tensor<2x4x8x2xf32>) {
    %k1 = slapo.reshape %k {slapo.module = "attn"} : tensor<2x2x8x2xf32> -> tensor<2x2x1x8x2xf32>
    %k2 = slapo.broadcast %k1 {slapo.module = "attn"} : tensor<2x2x1x8x2xf32> -> tensor<2x2x2x8x2xf32>
    %kr = slapo.reshape %k2 {slapo.module = "attn"} : tensor<2x2x2x8x2xf32> -> tensor<2x4x8x2xf32>
    %v1 = slapo.reshape %v {slapo.module = "attn"} : tensor<2x2x8x2xf32> -> tensor<2x2x1x8x2xf32>
    %v2 = slapo.broadcast %v1 {slapo.module = "attn"} : tensor<2x2x1x8x2xf32> -> tensor<2x2x2x8x2xf32>
    %vr = slapo.reshape %v2 {slapo.module = "attn"} : tensor<2x2x2x8x2xf32> -> tensor<2x4x8x2xf32>
    %kt = slapo.permute %kr {permutation = array<i64: 0, 1, 3, 2>, slapo.module = "attn"} : tensor<2x4x8x2xf32> -> tensor<2x4x2x8xf32>
    %s = slapo.matmul %q, %kt {slapo.module = "attn"} : (tensor<2x4x8x2xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x8x8xf32>
    %p = slapo.softmax %s {dim = 3 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    %o = slapo.matmul %p, %vr {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32>
    return %o, %kr : tensor<2x4x8x2xf32>, tensor<2x4x8x2xf32>
  }
}
// CHECK-LABEL: func.func @forward
//       CHECK: %[[KR:.*]] = slapo.reshape %{{.*}} : tensor<2x2x2x8x2xf32> -> tensor<2x4x8x2xf32>
//   CHECK-NOT: slapo.broadcast
//       CHECK: %[[O:.*]], %{{.*}} = slapo.flash_attention %arg0, %arg1, %arg2 {{.*}} : (tensor<2x4x8x2xf32>, tensor<2x2x8x2xf32>, tensor<2x2x8x2xf32>) -> (tensor<2x4x8x2xf32>, tensor<2x4x8xf32>)
//  CHECK-NEXT: return %[[O]], %[[KR]]

// -----

// A broadcast that tiles the heads ([B, 1, Hk, S, D]: query head h would
// read value head h % Hk) is no repeat_kv: the value stays repeated, and so
// does the key with it (key and value of flash_attention share their heads).
module {
  func.func @forward(%q: tensor<2x4x8x2xf32>, %k: tensor<2x2x8x2xf32>, %v: tensor<2x2x8x2xf32>) -> tensor<2x4x8x2xf32> {
    %k1 = slapo.reshape %k {slapo.module = "attn"} : tensor<2x2x8x2xf32> -> tensor<2x2x1x8x2xf32>
    %k2 = slapo.broadcast %k1 {slapo.module = "attn"} : tensor<2x2x1x8x2xf32> -> tensor<2x2x2x8x2xf32>
    %kr = slapo.reshape %k2 {slapo.module = "attn"} : tensor<2x2x2x8x2xf32> -> tensor<2x4x8x2xf32>
    %v1 = slapo.reshape %v {slapo.module = "attn"} : tensor<2x2x8x2xf32> -> tensor<2x1x2x8x2xf32>
    %v2 = slapo.broadcast %v1 {slapo.module = "attn"} : tensor<2x1x2x8x2xf32> -> tensor<2x2x2x8x2xf32>
    %vr = slapo.reshape %v2 {slapo.module = "attn"} : tensor<2x2x2x8x2xf32> -> tensor<2x4x8x2xf32>
    %kt = slapo.permute %kr {permutation = array<i64: 0, 1, 3, 2>, slapo.module = "attn"} : tensor<2x4x8x2xf32> -> tensor<2x4x2x8xf32>
    %s = slapo.matmul %q, %kt {slapo.module = "attn"} : (tensor<2x4x8x2xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x8x8xf32>
    %p = slapo.softmax %s {dim = 3 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    %o = slapo.matmul %p, %vr {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32>
    return %o : tensor<2x4x8x2xf32>
  }
}
// CHECK-LABEL: func.func @forward
//       CHECK: %[[KR:.*]] = slapo.reshape %{{.*}} : tensor<2x2x2x8x2xf32> -> tensor<2x4x8x2xf32>
//       CHECK: %[[VR:.*]] = slapo.reshape %{{.*}} : tensor<2x2x2x8x2xf32> -> tensor<2x4x8x2xf32>
//  CHECK-NEXT: %[[O:.*]], %{{.*}} = slapo.flash_attention %arg0, %[[KR]], %[[VR]] {{.*}} : (tensor<2x4x8x2xf32>, tensor<2x4x8x2xf32>, tensor<2x4x8x2xf32>) -> (tensor<2x4x8x2xf32>, tensor<2x4x8xf32>)
//  CHECK-NEXT: return %[[O]]

// -----

// In bf16 (a module run in bf16 throughout), the log-sum-exp is f32: the
// compute type, as PyTorch keeps it; in f64, f64.
module {
  func.func @forward(%q: tensor<2x4x8x2xbf16>, %kt: tensor<2x4x2x8xbf16>, %v: tensor<2x4x8x3xbf16>) -> tensor<2x4x8x3xbf16> {
    %s = slapo.matmul %q, %kt {slapo.module = "attn"} : (tensor<2x4x8x2xbf16>, tensor<2x4x2x8xbf16>) -> tensor<2x4x8x8xbf16>
    %p = slapo.softmax %s {dim = 3 : i64, slapo.module = "attn"} : tensor<2x4x8x8xbf16>
    %o = slapo.matmul %p, %v {slapo.module = "attn"} : (tensor<2x4x8x8xbf16>, tensor<2x4x8x3xbf16>) -> tensor<2x4x8x3xbf16>
    return %o : tensor<2x4x8x3xbf16>
  }
}
// CHECK-LABEL: func.func @forward
//  CHECK-NEXT: %[[K:.*]] = slapo.permute %arg1 {permutation = array<i64: 0, 1, 3, 2>
//  CHECK-NEXT: %[[O:.*]], %{{.*}} = slapo.flash_attention %arg0, %[[K]], %arg2 {{.*}} : (tensor<2x4x8x2xbf16>, tensor<2x4x8x2xbf16>, tensor<2x4x8x3xbf16>) -> (tensor<2x4x8x3xbf16>, tensor<2x4x8xf32>)
//  CHECK-NEXT: return %[[O]]

// -----

module {
  func.func @forward(%q: tensor<2x4x8x2xf64>, %kt: tensor<2x4x2x8xf64>, %v: tensor<2x4x8x3xf64>) -> tensor<2x4x8x3xf64> {
    %s = slapo.matmul %q, %kt {slapo.module = "attn"} : (tensor<2x4x8x2xf64>, tensor<2x4x2x8xf64>) -> tensor<2x4x8x8xf64>
    %p = slapo.softmax %s {dim = 3 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf64>
    %o = slapo.matmul %p, %v {slapo.module = "attn"} : (tensor<2x4x8x8xf64>, tensor<2x4x8x3xf64>) -> tensor<2x4x8x3xf64>
    return %o : tensor<2x4x8x3xf64>
  }
}
// CHECK-LABEL: func.func @forward
//  CHECK-NEXT: %[[K:.*]] = slapo.permute %arg1 {permutation = array<i64: 0, 1, 3, 2>
//  CHECK-NEXT: %[[O:.*]], %{{.*}} = slapo.flash_attention %arg0, %[[K]], %arg2 {{.*}} : (tensor<2x4x8x2xf64>, tensor<2x4x8x2xf64>, tensor<2x4x8x3xf64>) -> (tensor<2x4x8x3xf64>, tensor<2x4x8xf64>)
//  CHECK-NEXT: return %[[O]]

// -----

// Attention dropout (p > 0, GPT-2's attn_dropout in train mode): the kernel
// draws its mask, with the dropout's p, stream and fork_rng.
module {
  func.func @forward(%q: tensor<2x4x8x2xf32>, %kt: tensor<2x4x2x8xf32>, %v: tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32> {
    %s = slapo.matmul %q, %kt {slapo.module = "attn"} : (tensor<2x4x8x2xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x8x8xf32>
    %p = slapo.softmax %s {dim = 3 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    %dp = slapo.dropout %p {fork_rng, p = 1.000000e-01 : f64, stream = 4 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    %o = slapo.matmul %dp, %v {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32>
    return %o : tensor<2x4x8x2xf32>
  }
}
// CHECK-LABEL: func.func @forward
//       CHECK: %[[O:.*]], %{{.*}} = slapo.flash_attention %arg0, %{{.*}}, %arg2 {dropout_p = 1.000000e-01 : f64, dropout_stream = 4 : i64, fork_rng, masked_score = 0.000000e+00 : f64, scale = 1.000000e+00 : f64, slapo.module = "attn"}
//  CHECK-NEXT: return %[[O]]

// -----

// The dropout's result read by a second op: the kernel never makes it.
module {
  func.func @forward(%q: tensor<2x4x8x2xf32>, %kt: tensor<2x4x2x8xf32>, %v: tensor<2x4x8x2xf32>) -> (tensor<2x4x8x2xf32>, tensor<2x4x8x8xf32>) {
    %s = slapo.matmul %q, %kt {slapo.module = "attn"} : (tensor<2x4x8x2xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x8x8xf32>
    // expected-error@+1 {{module 'attn' does not compute what flash_attention computes: the result of 'slapo.dropout' (an intermediate of the kernel) is also read by 'func.return': the kernel never stores it}}
    %p = slapo.softmax %s {dim = 3 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    %dp = slapo.dropout %p {p = 1.000000e-01 : f64, stream = 0 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    %o = slapo.matmul %dp, %v {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32>
    // expected-note@+1 {{the op that differs}}
    return %o, %dp : tensor<2x4x8x2xf32>, tensor<2x4x8x8xf32>
  }
}

// -----

// Two dropouts of the probabilities: the kernel draws one mask.
module {
  func.func @forward(%q: tensor<2x4x8x2xf32>, %kt: tensor<2x4x2x8xf32>, %v: tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32> {
    %s = slapo.matmul %q, %kt {slapo.module = "attn"} : (tensor<2x4x8x2xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x8x8xf32>
    // expected-error@+1 {{module 'attn' does not compute what flash_attention computes: the probabilities are dropped twice: flash_attention draws one mask}}
    %p = slapo.softmax %s {dim = 3 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    %dp = slapo.dropout %p {p = 1.000000e-01 : f64, stream = 0 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    // expected-note@+1 {{the op that differs}}
    %dp2 = slapo.dropout %dp {p = 1.000000e-01 : f64, stream = 1 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    %o = slapo.matmul %dp2, %v {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32>
    return %o : tensor<2x4x8x2xf32>
  }
}

// -----

// A dropout of the scores, before the softmax: not what the kernel drops.
module {
  func.func @forward(%q: tensor<2x4x8x2xf32>, %kt: tensor<2x4x2x8xf32>, %v: tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32> {
    %s = slapo.matmul %q, %kt {slapo.module = "attn"} : (tensor<2x4x8x2xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x8x8xf32>
    // expected-note@+1 {{the op that differs}}
    %ds = slapo.dropout %s {p = 1.000000e-01 : f64, stream = 0 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    // expected-error@+1 {{module 'attn' does not compute what flash_attention computes: the scores are dropped before the softmax: flash_attention drops the probabilities after it alone}}
    %p = slapo.softmax %ds {dim = 3 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    %o = slapo.matmul %p, %v {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32>
    return %o : tensor<2x4x8x2xf32>
  }
}

// -----

// The probabilities read by a second op (returned) must be stored: refused.
module {
  func.func @forward(%q: tensor<2x4x8x2xf32>, %kt: tensor<2x4x2x8xf32>, %v: tensor<2x4x8x2xf32>) -> (tensor<2x4x8x2xf32>, tensor<2x4x8x8xf32>) {
    %s = slapo.matmul %q, %kt {slapo.module = "attn"} : (tensor<2x4x8x2xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x8x8xf32>
    // expected-error@+1 {{module 'attn' does not compute what flash_attention computes: the result of 'slapo.softmax' (an intermediate of the kernel) is also read by 'func.return': the kernel never stores it}}
    %p = slapo.softmax %s {dim = 3 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    %o = slapo.matmul %p, %v {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32>
    // expected-note@+1 {{the op that differs}}
    return %o, %p : tensor<2x4x8x2xf32>, tensor<2x4x8x8xf32>
  }
}

// -----

// A scale that is not a constant.
module {
  func.func @forward(%q: tensor<2x4x8x2xf32>, %kt: tensor<2x4x2x8xf32>, %v: tensor<2x4x8x2xf32>, %t: tensor<f32>) -> tensor<2x4x8x2xf32> {
    %s = slapo.matmul %q, %kt {slapo.module = "attn"} : (tensor<2x4x8x2xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x8x8xf32>
    // expected-note@+1 {{the op that differs}}
    %d = slapo.div %s, %t {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
    // expected-error@+1 {{the scores are scaled by 'slapo.div' of a tensor, not of a scalar constant}}
    %p = slapo.softmax %d {dim = 3 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    %o = slapo.matmul %p, %v {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32>
    return %o : tensor<2x4x8x2xf32>
  }
}

// -----

// Scores that are no product q k^T (here an exp of it, which softmax would
// need to see).
module {
  func.func @forward(%q: tensor<2x4x8x2xf32>, %kt: tensor<2x4x2x8xf32>, %v: tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32> {
    %s = slapo.matmul %q, %kt {slapo.module = "attn"} : (tensor<2x4x8x2xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x8x8xf32>
    // expected-note@+1 {{the op that differs}}
    %e = slapo.tanh %s {slapo.module = "attn"} : tensor<2x4x8x8xf32>
    // expected-error@+1 {{the scores are computed by 'slapo.tanh', not by the product query x key^T ('slapo.matmul')}}
    %p = slapo.softmax %e {dim = 3 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    %o = slapo.matmul %p, %v {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32>
    return %o : tensor<2x4x8x2xf32>
  }
}

// -----

// A softmax over the queries, not the keys.
module {
  func.func @forward(%q: tensor<2x4x8x2xf32>, %kt: tensor<2x4x2x8xf32>, %v: tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32> {
    %s = slapo.matmul %q, %kt {slapo.module = "attn"} : (tensor<2x4x8x2xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x8x8xf32>
    // expected-error@+2 {{the softmax is over dim 2, not the keys (the last dim)}}
    // expected-note@+1 {{the op that differs}}
    %p = slapo.softmax %s {dim = 2 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    %o = slapo.matmul %p, %v {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32>
    return %o : tensor<2x4x8x2xf32>
  }
}

// -----

// A module without attention.
module {
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    // expected-error@+1 {{module 'attn' does not compute what flash_attention computes: it computes no softmax (the attention's probabilities over the keys)}}
    %y = slapo.relu %x {slapo.module = "attn"} : tensor<2x8xf32>
    return %y : tensor<2x8xf32>
  }
}

// -----

// An additive bias computed from a parameter (a learned relative-position
// bias) needs a gradient, which the kernel gives its masks none of.
module {
  slapo.param @attn.rel : tensor<1x4x8x8xf32>
  func.func @forward(%q: tensor<2x4x8x2xf32>, %kt: tensor<2x4x2x8xf32>, %v: tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32> {
    %s = slapo.matmul %q, %kt {slapo.module = "attn"} : (tensor<2x4x8x2xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x8x8xf32>
    %b = slapo.get_param @attn.rel {slapo.module = "attn"} : tensor<1x4x8x8xf32>
    // expected-note@+1 {{the op that differs}}
    %a = slapo.add %s, %b {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<2x4x8x8xf32>
    // expected-error@+1 {{the additive mask is computed from a parameter (a learned bias needs a gradient, and flash_attention gives its masks none)}}
    %p = slapo.softmax %a {dim = 3 : i64, slapo.module = "attn"} : tensor<2x4x8x8xf32>
    %o = slapo.matmul %p, %v {slapo.module = "attn"} : (tensor<2x4x8x8xf32>, tensor<2x4x8x2xf32>) -> tensor<2x4x8x2xf32>
    return %o : tensor<2x4x8x2xf32>
  }
}
