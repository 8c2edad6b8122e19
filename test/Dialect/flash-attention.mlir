// RUN: slapo-opt %s | slapo-opt | FileCheck %s
// RUN: slapo-opt %s --mlir-print-op-generic | slapo-opt | FileCheck %s

// flash_attention and its gradient with an attention dropout: p, stream,
// fork_rng, a split of the heads and the step number, as slapo.dropout
// carries them.

// CHECK-LABEL: func.func @dropout
func.func @dropout(%q: tensor<2x2x8x4xf32>, %k: tensor<2x2x8x4xf32>, %v: tensor<2x2x8x4xf32>, %m: tensor<1x1x8x8xi1>, %g: tensor<2x2x8x4xf32>, %step: tensor<i64>) {
  // CHECK-NEXT: %[[O:.*]], %[[L:.*]] = slapo.flash_attention %{{.*}}, %{{.*}}, %{{.*}} keep %{{.*}} step %{{.*}} {dropout_p = 1.000000e-01 : f64, dropout_stream = 3 : i64, fork_rng, masked_score = -1.000000e+04 : f64, scale = 5.000000e-01 : f64, shard_axis = 1 : i64} : (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<1x1x8x8xi1>, tensor<i64>) -> (tensor<2x2x8x4xf32>, tensor<2x2x8xf32>)
  // CHECK-NEXT: slapo.flash_attention_grad %{{.*}}, %{{.*}}, %{{.*}} keep %{{.*}} result %[[O]], %[[L]] grad %{{.*}} step %{{.*}} {dropout_p = 1.000000e-01 : f64, dropout_stream = 3 : i64, fork_rng, masked_score = -1.000000e+04 : f64, scale = 5.000000e-01 : f64, shard_axis = 1 : i64}
  // CHECK-NEXT: slapo.flash_attention %{{.*}}, %{{.*}}, %{{.*}} {dropout_p = 2.000000e-01 : f64, dropout_stream = 0 : i64, masked_score = 0.000000e+00 : f64, scale = 5.000000e-01 : f64}
  %o, %lse = slapo.flash_attention %q, %k, %v keep %m step %step {dropout_p = 0.1 : f64, dropout_stream = 3 : i64, fork_rng, masked_score = -1.0e4 : f64, scale = 0.5 : f64, shard_axis = 1 : i64} : (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<1x1x8x8xi1>, tensor<i64>) -> (tensor<2x2x8x4xf32>, tensor<2x2x8xf32>)
  %gq, %gk, %gv = slapo.flash_attention_grad %q, %k, %v keep %m result %o, %lse grad %g step %step {dropout_p = 0.1 : f64, dropout_stream = 3 : i64, fork_rng, masked_score = -1.0e4 : f64, scale = 0.5 : f64, shard_axis = 1 : i64} : (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<1x1x8x8xi1>, tensor<2x2x8x4xf32>, tensor<2x2x8xf32>, tensor<2x2x8x4xf32>, tensor<i64>) -> (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>)
  // Without a step (the imported @forward's).
  %o2, %lse2 = slapo.flash_attention %q, %k, %v {dropout_p = 0.2 : f64, dropout_stream = 0 : i64, masked_score = 0.0 : f64, scale = 0.5 : f64} : (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>) -> (tensor<2x2x8x4xf32>, tensor<2x2x8xf32>)
  return
}

// The log-sum-exp in the compute type: f32 for bf16 (and f16) operands,
// f64 for f64 ones.
// CHECK-LABEL: func.func @compute_type_logsumexp
func.func @compute_type_logsumexp(%q: tensor<1x2x4x4xbf16>, %d: tensor<1x2x4x4xf64>) {
  // CHECK-NEXT: %[[O:.*]], %[[L:.*]] = slapo.flash_attention {{.*}} -> (tensor<1x2x4x4xbf16>, tensor<1x2x4xf32>)
  // CHECK-NEXT: slapo.flash_attention_grad {{.*}} result %[[O]], %[[L]] grad {{.*}} : (tensor<1x2x4x4xbf16>, tensor<1x2x4x4xbf16>, tensor<1x2x4x4xbf16>, tensor<1x2x4x4xbf16>, tensor<1x2x4xf32>, tensor<1x2x4x4xbf16>) -> (tensor<1x2x4x4xbf16>, tensor<1x2x4x4xbf16>, tensor<1x2x4x4xbf16>)
  // CHECK-NEXT: slapo.flash_attention {{.*}} -> (tensor<1x2x4x4xf64>, tensor<1x2x4xf64>)
  %o, %l = slapo.flash_attention %q, %q, %q {masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x2x4x4xbf16>, tensor<1x2x4x4xbf16>, tensor<1x2x4x4xbf16>) -> (tensor<1x2x4x4xbf16>, tensor<1x2x4xf32>)
  %a, %b, %c = slapo.flash_attention_grad %q, %q, %q result %o, %l grad %q {masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x2x4x4xbf16>, tensor<1x2x4x4xbf16>, tensor<1x2x4x4xbf16>, tensor<1x2x4x4xbf16>, tensor<1x2x4xf32>, tensor<1x2x4x4xbf16>) -> (tensor<1x2x4x4xbf16>, tensor<1x2x4x4xbf16>, tensor<1x2x4x4xbf16>)
  %o64, %l64 = slapo.flash_attention %d, %d, %d {masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x2x4x4xf64>, tensor<1x2x4x4xf64>, tensor<1x2x4x4xf64>) -> (tensor<1x2x4x4xf64>, tensor<1x2x4xf64>)
  return
}

// Token-major operands (bshd): query, key and value [B, T, H, D] with keys
// of another length, the mask and the log-sum-exp in the scores' order.
// CHECK-LABEL: func.func @bshd
func.func @bshd(%q: tensor<2x5x3x4xf32>, %k: tensor<2x7x3x4xf32>, %v: tensor<2x7x3x6xf32>, %m: tensor<1x1x5x7xi1>, %g: tensor<2x5x3x6xf32>) {
  // CHECK-NEXT: %[[O:.*]], %[[L:.*]] = slapo.flash_attention {{.*}} {bshd, masked_score = 0.000000e+00 : f64, scale = 5.000000e-01 : f64} : (tensor<2x5x3x4xf32>, tensor<2x7x3x4xf32>, tensor<2x7x3x6xf32>, tensor<1x1x5x7xi1>) -> (tensor<2x5x3x6xf32>, tensor<2x3x5xf32>)
  // CHECK-NEXT: slapo.flash_attention_grad {{.*}} {bshd, masked_score
  %o, %l = slapo.flash_attention %q, %k, %v keep %m {bshd, masked_score = 0.0 : f64, scale = 0.5 : f64} : (tensor<2x5x3x4xf32>, tensor<2x7x3x4xf32>, tensor<2x7x3x6xf32>, tensor<1x1x5x7xi1>) -> (tensor<2x5x3x6xf32>, tensor<2x3x5xf32>)
  %a, %b, %c = slapo.flash_attention_grad %q, %k, %v keep %m result %o, %l grad %g {bshd, masked_score = 0.0 : f64, scale = 0.5 : f64} : (tensor<2x5x3x4xf32>, tensor<2x7x3x4xf32>, tensor<2x7x3x6xf32>, tensor<1x1x5x7xi1>, tensor<2x5x3x6xf32>, tensor<2x3x5xf32>, tensor<2x5x3x6xf32>) -> (tensor<2x5x3x4xf32>, tensor<2x7x3x4xf32>, tensor<2x7x3x6xf32>)
  return
}

// packed_qkv: query, key and value are the three thirds of the heads of one
// [B, T, 3H, D] tensor (H = 2 here), the result and log-sum-exp those of
// H heads; the gradient is one, of the packed tensor.
// CHECK-LABEL: func.func @packed_qkv
func.func @packed_qkv(%qkv: tensor<2x5x6x4xf32>, %m: tensor<1x1x5x5xi1>, %g: tensor<2x5x2x4xf32>) {
  // CHECK-NEXT: %[[O:.*]], %[[L:.*]] = slapo.flash_attention %arg0, %arg0, %arg0 keep %arg1 {bshd, masked_score = 0.000000e+00 : f64, packed_qkv, scale = 5.000000e-01 : f64} : (tensor<2x5x6x4xf32>, tensor<2x5x6x4xf32>, tensor<2x5x6x4xf32>, tensor<1x1x5x5xi1>) -> (tensor<2x5x2x4xf32>, tensor<2x2x5xf32>)
  // CHECK-NEXT: slapo.flash_attention_grad %arg0, %arg0, %arg0 keep %arg1 result %[[O]], %[[L]] grad %arg2 {bshd, masked_score = 0.000000e+00 : f64, packed_qkv, scale = 5.000000e-01 : f64} : (tensor<2x5x6x4xf32>, tensor<2x5x6x4xf32>, tensor<2x5x6x4xf32>, tensor<1x1x5x5xi1>, tensor<2x5x2x4xf32>, tensor<2x2x5xf32>, tensor<2x5x2x4xf32>) -> tensor<2x5x6x4xf32>
  %o, %l = slapo.flash_attention %qkv, %qkv, %qkv keep %m {bshd, packed_qkv, masked_score = 0.0 : f64, scale = 0.5 : f64} : (tensor<2x5x6x4xf32>, tensor<2x5x6x4xf32>, tensor<2x5x6x4xf32>, tensor<1x1x5x5xi1>) -> (tensor<2x5x2x4xf32>, tensor<2x2x5xf32>)
  %d = slapo.flash_attention_grad %qkv, %qkv, %qkv keep %m result %o, %l grad %g {bshd, packed_qkv, masked_score = 0.0 : f64, scale = 0.5 : f64} : (tensor<2x5x6x4xf32>, tensor<2x5x6x4xf32>, tensor<2x5x6x4xf32>, tensor<1x1x5x5xi1>, tensor<2x5x2x4xf32>, tensor<2x2x5xf32>, tensor<2x5x2x4xf32>) -> tensor<2x5x6x4xf32>
  return
}

// Grouped-query attention: key and value of 2 heads shared by 6 query heads
// (3 each), heads-major and token-major; their gradients have their heads.
// CHECK-LABEL: func.func @grouped
func.func @grouped(%q: tensor<2x6x5x4xf32>, %k: tensor<2x2x7x4xf32>, %v: tensor<2x2x7x6xf32>, %g: tensor<2x6x5x6xf32>, %qt: tensor<2x5x6x4xf32>, %kt: tensor<2x7x1x4xf32>) {
  // CHECK-NEXT: %[[O:.*]], %[[L:.*]] = slapo.flash_attention {{.*}} : (tensor<2x6x5x4xf32>, tensor<2x2x7x4xf32>, tensor<2x2x7x6xf32>) -> (tensor<2x6x5x6xf32>, tensor<2x6x5xf32>)
  // CHECK-NEXT: slapo.flash_attention_grad {{.*}} -> (tensor<2x6x5x4xf32>, tensor<2x2x7x4xf32>, tensor<2x2x7x6xf32>)
  // CHECK-NEXT: slapo.flash_attention {{.*}} {bshd, {{.*}} : (tensor<2x5x6x4xf32>, tensor<2x7x1x4xf32>, tensor<2x7x1x4xf32>) -> (tensor<2x5x6x4xf32>, tensor<2x6x5xf32>)
  %o, %l = slapo.flash_attention %q, %k, %v {masked_score = 0.0 : f64, scale = 0.5 : f64} : (tensor<2x6x5x4xf32>, tensor<2x2x7x4xf32>, tensor<2x2x7x6xf32>) -> (tensor<2x6x5x6xf32>, tensor<2x6x5xf32>)
  %a, %b, %c = slapo.flash_attention_grad %q, %k, %v result %o, %l grad %g {masked_score = 0.0 : f64, scale = 0.5 : f64} : (tensor<2x6x5x4xf32>, tensor<2x2x7x4xf32>, tensor<2x2x7x6xf32>, tensor<2x6x5x6xf32>, tensor<2x6x5xf32>, tensor<2x6x5x6xf32>) -> (tensor<2x6x5x4xf32>, tensor<2x2x7x4xf32>, tensor<2x2x7x6xf32>)
  %ot, %lt = slapo.flash_attention %qt, %kt, %kt {bshd, masked_score = 0.0 : f64, scale = 0.5 : f64} : (tensor<2x5x6x4xf32>, tensor<2x7x1x4xf32>, tensor<2x7x1x4xf32>) -> (tensor<2x5x6x4xf32>, tensor<2x6x5xf32>)
  return
}
