// RUN: slapo-opt --slapo-pack-qkv --split-input-file %s | FileCheck %s

// GPT-2's attention (B = 2, T = 4, H = 2, D = 3, C = 6): query, key and
// value are the thirds of c_attn's [B, T, 3C] output, and the gradients
// are concatenated back into its gradient. The attention and its gradient
// read the output viewed [B, T, 3H, D], the gradient writes that view's
// gradient, and the slices, the concat and their reshapes are gone.
// CHECK-LABEL: func.func @gpt2
// CHECK-NEXT: %[[QKV:.*]] = slapo.reshape %arg0 : tensor<2x4x18xf32> -> tensor<2x4x6x3xf32>
// CHECK-NEXT: %[[O:.*]], %[[L:.*]] = slapo.flash_attention %[[QKV]], %[[QKV]], %[[QKV]] keep %arg1 {bshd, masked_score = -1.000000e+09 : f64, packed_qkv, scale = 5.000000e-01 : f64} : (tensor<2x4x6x3xf32>, tensor<2x4x6x3xf32>, tensor<2x4x6x3xf32>, tensor<1x1x4x4xi1>) -> (tensor<2x4x2x3xf32>, tensor<2x2x4xf32>)
// CHECK-NEXT: %[[G:.*]] = slapo.flash_attention_grad %[[QKV]], %[[QKV]], %[[QKV]] keep %arg1 result %[[O]], %[[L]] grad %arg2 {bshd, masked_score = -1.000000e+09 : f64, packed_qkv, scale = 5.000000e-01 : f64} : (tensor<2x4x6x3xf32>, tensor<2x4x6x3xf32>, tensor<2x4x6x3xf32>, tensor<1x1x4x4xi1>, tensor<2x4x2x3xf32>, tensor<2x2x4xf32>, tensor<2x4x2x3xf32>) -> tensor<2x4x6x3xf32>
// CHECK-NEXT: %[[C:.*]] = slapo.reshape %[[G]] {slapo.phase = "backward"} : tensor<2x4x6x3xf32> -> tensor<2x4x18xf32>
// CHECK-NEXT: return %[[O]], %[[C]]
func.func @gpt2(%x: tensor<2x4x18xf32>, %m: tensor<1x1x4x4xi1>, %g: tensor<2x4x2x3xf32>) -> (tensor<2x4x2x3xf32>, tensor<2x4x18xf32>) {
  %qs = slapo.slice %x {dim = 2 : i64, start = 0 : i64, end = 6 : i64, step = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %ks = slapo.slice %x {dim = 2 : i64, start = 6 : i64, end = 12 : i64, step = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %vs = slapo.slice %x {dim = 2 : i64, start = 12 : i64, end = 18 : i64, step = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %q = slapo.reshape %qs : tensor<2x4x6xf32> -> tensor<2x4x2x3xf32>
  %k = slapo.reshape %ks : tensor<2x4x6xf32> -> tensor<2x4x2x3xf32>
  %v = slapo.reshape %vs : tensor<2x4x6xf32> -> tensor<2x4x2x3xf32>
  %o, %lse = slapo.flash_attention %q, %k, %v keep %m {bshd, masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<1x1x4x4xi1>) -> (tensor<2x4x2x3xf32>, tensor<2x2x4xf32>)
  %gq, %gk, %gv = slapo.flash_attention_grad %q, %k, %v keep %m result %o, %lse grad %g {bshd, masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<1x1x4x4xi1>, tensor<2x4x2x3xf32>, tensor<2x2x4xf32>, tensor<2x4x2x3xf32>) -> (tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>)
  %rq = slapo.reshape %gq {slapo.phase = "backward"} : tensor<2x4x2x3xf32> -> tensor<2x4x6xf32>
  %rk = slapo.reshape %gk {slapo.phase = "backward"} : tensor<2x4x2x3xf32> -> tensor<2x4x6xf32>
  %rv = slapo.reshape %gv {slapo.phase = "backward"} : tensor<2x4x2x3xf32> -> tensor<2x4x6xf32>
  %c = slapo.concat %rq, %rk, %rv {dim = 2 : i64, slapo.phase = "backward"} : (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x18xf32>
  return %o, %c : tensor<2x4x2x3xf32>, tensor<2x4x18xf32>
}

// -----

// Key and value from each other's third: nothing is packed.
// CHECK-LABEL: func.func @swapped_thirds
// CHECK-NOT: packed_qkv
// CHECK: slapo.concat
func.func @swapped_thirds(%x: tensor<2x4x18xf32>, %m: tensor<1x1x4x4xi1>, %g: tensor<2x4x2x3xf32>) -> (tensor<2x4x2x3xf32>, tensor<2x4x18xf32>) {
  %qs = slapo.slice %x {dim = 2 : i64, start = 0 : i64, end = 6 : i64, step = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %ks = slapo.slice %x {dim = 2 : i64, start = 12 : i64, end = 18 : i64, step = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %vs = slapo.slice %x {dim = 2 : i64, start = 6 : i64, end = 12 : i64, step = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %q = slapo.reshape %qs : tensor<2x4x6xf32> -> tensor<2x4x2x3xf32>
  %k = slapo.reshape %ks : tensor<2x4x6xf32> -> tensor<2x4x2x3xf32>
  %v = slapo.reshape %vs : tensor<2x4x6xf32> -> tensor<2x4x2x3xf32>
  %o, %lse = slapo.flash_attention %q, %k, %v keep %m {bshd, masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<1x1x4x4xi1>) -> (tensor<2x4x2x3xf32>, tensor<2x2x4xf32>)
  %gq, %gk, %gv = slapo.flash_attention_grad %q, %k, %v keep %m result %o, %lse grad %g {bshd, masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<1x1x4x4xi1>, tensor<2x4x2x3xf32>, tensor<2x2x4xf32>, tensor<2x4x2x3xf32>) -> (tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>)
  %rq = slapo.reshape %gq {slapo.phase = "backward"} : tensor<2x4x2x3xf32> -> tensor<2x4x6xf32>
  %rk = slapo.reshape %gk {slapo.phase = "backward"} : tensor<2x4x2x3xf32> -> tensor<2x4x6xf32>
  %rv = slapo.reshape %gv {slapo.phase = "backward"} : tensor<2x4x2x3xf32> -> tensor<2x4x6xf32>
  %c = slapo.concat %rq, %rk, %rv {dim = 2 : i64, slapo.phase = "backward"} : (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x18xf32>
  return %o, %c : tensor<2x4x2x3xf32>, tensor<2x4x18xf32>
}

// -----

// Heads-major attention reads no token-major thirds.
// CHECK-LABEL: func.func @heads_major
// CHECK-NOT: packed_qkv
func.func @heads_major(%x: tensor<2x4x18xf32>, %m: tensor<1x1x4x4xi1>) -> (tensor<2x2x4x3xf32>, tensor<2x4x18xf32>) {
  %qs = slapo.slice %x {dim = 2 : i64, start = 0 : i64, end = 6 : i64, step = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %ks = slapo.slice %x {dim = 2 : i64, start = 6 : i64, end = 12 : i64, step = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %vs = slapo.slice %x {dim = 2 : i64, start = 12 : i64, end = 18 : i64, step = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %q = slapo.reshape %qs : tensor<2x4x6xf32> -> tensor<2x2x4x3xf32>
  %k = slapo.reshape %ks : tensor<2x4x6xf32> -> tensor<2x2x4x3xf32>
  %v = slapo.reshape %vs : tensor<2x4x6xf32> -> tensor<2x2x4x3xf32>
  %o, %lse = slapo.flash_attention %q, %k, %v keep %m {masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x2x4x3xf32>, tensor<2x2x4x3xf32>, tensor<2x2x4x3xf32>, tensor<1x1x4x4xi1>) -> (tensor<2x2x4x3xf32>, tensor<2x2x4xf32>)
  return %o, %x : tensor<2x2x4x3xf32>, tensor<2x4x18xf32>
}

// -----

// Query from another tensor's third.
// CHECK-LABEL: func.func @two_tensors
// CHECK-NOT: packed_qkv
func.func @two_tensors(%x: tensor<2x4x18xf32>, %y: tensor<2x4x18xf32>, %m: tensor<1x1x4x4xi1>) -> tensor<2x4x2x3xf32> {
  %qs = slapo.slice %y {dim = 2 : i64, start = 0 : i64, end = 6 : i64, step = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %ks = slapo.slice %x {dim = 2 : i64, start = 6 : i64, end = 12 : i64, step = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %vs = slapo.slice %x {dim = 2 : i64, start = 12 : i64, end = 18 : i64, step = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %q = slapo.reshape %qs : tensor<2x4x6xf32> -> tensor<2x4x2x3xf32>
  %k = slapo.reshape %ks : tensor<2x4x6xf32> -> tensor<2x4x2x3xf32>
  %v = slapo.reshape %vs : tensor<2x4x6xf32> -> tensor<2x4x2x3xf32>
  %o, %lse = slapo.flash_attention %q, %k, %v keep %m {bshd, masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<1x1x4x4xi1>) -> (tensor<2x4x2x3xf32>, tensor<2x2x4xf32>)
  return %o : tensor<2x4x2x3xf32>
}

// -----

// A gradient read elsewhere than by the concat: the forward reads the
// view, the gradient keeps the slices (and they stay for it).
// CHECK-LABEL: func.func @gradient_read_twice
// CHECK-COUNT-3: slapo.slice
// CHECK: slapo.flash_attention {{.*}}packed_qkv
// CHECK: %[[G:.*]]:3 = slapo.flash_attention_grad
// CHECK-NOT: packed_qkv
// CHECK: slapo.concat
// CHECK: return %{{.*}}, %{{.*}}, %[[G]]#0
func.func @gradient_read_twice(%x: tensor<2x4x18xf32>, %m: tensor<1x1x4x4xi1>, %g: tensor<2x4x2x3xf32>) -> (tensor<2x4x2x3xf32>, tensor<2x4x18xf32>, tensor<2x4x2x3xf32>) {
  %qs = slapo.slice %x {dim = 2 : i64, start = 0 : i64, end = 6 : i64, step = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %ks = slapo.slice %x {dim = 2 : i64, start = 6 : i64, end = 12 : i64, step = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %vs = slapo.slice %x {dim = 2 : i64, start = 12 : i64, end = 18 : i64, step = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %q = slapo.reshape %qs : tensor<2x4x6xf32> -> tensor<2x4x2x3xf32>
  %k = slapo.reshape %ks : tensor<2x4x6xf32> -> tensor<2x4x2x3xf32>
  %v = slapo.reshape %vs : tensor<2x4x6xf32> -> tensor<2x4x2x3xf32>
  %o, %lse = slapo.flash_attention %q, %k, %v keep %m {bshd, masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<1x1x4x4xi1>) -> (tensor<2x4x2x3xf32>, tensor<2x2x4xf32>)
  %gq, %gk, %gv = slapo.flash_attention_grad %q, %k, %v keep %m result %o, %lse grad %g {bshd, masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<1x1x4x4xi1>, tensor<2x4x2x3xf32>, tensor<2x2x4xf32>, tensor<2x4x2x3xf32>) -> (tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>)
  %rq = slapo.reshape %gq {slapo.phase = "backward"} : tensor<2x4x2x3xf32> -> tensor<2x4x6xf32>
  %rk = slapo.reshape %gk {slapo.phase = "backward"} : tensor<2x4x2x3xf32> -> tensor<2x4x6xf32>
  %rv = slapo.reshape %gv {slapo.phase = "backward"} : tensor<2x4x2x3xf32> -> tensor<2x4x6xf32>
  %c = slapo.concat %rq, %rk, %rv {dim = 2 : i64, slapo.phase = "backward"} : (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> tensor<2x4x18xf32>
  return %o, %c, %gq : tensor<2x4x2x3xf32>, tensor<2x4x18xf32>, tensor<2x4x2x3xf32>
}

// -----

// A third also read elsewhere stays for that reader.
// CHECK-LABEL: func.func @slice_read_twice
// CHECK: %[[K:.*]] = slapo.slice %arg0 {dim = 2 : i64, end = 12 : i64, start = 6 : i64, step = 1 : i64}
// CHECK-NOT: slapo.slice
// CHECK: slapo.flash_attention {{.*}}packed_qkv
// CHECK: return %{{.*}}, %[[K]]
func.func @slice_read_twice(%x: tensor<2x4x18xf32>, %m: tensor<1x1x4x4xi1>) -> (tensor<2x4x2x3xf32>, tensor<2x4x6xf32>) {
  %qs = slapo.slice %x {dim = 2 : i64, start = 0 : i64, end = 6 : i64, step = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %ks = slapo.slice %x {dim = 2 : i64, start = 6 : i64, end = 12 : i64, step = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %vs = slapo.slice %x {dim = 2 : i64, start = 12 : i64, end = 18 : i64, step = 1 : i64} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>
  %q = slapo.reshape %qs : tensor<2x4x6xf32> -> tensor<2x4x2x3xf32>
  %k = slapo.reshape %ks : tensor<2x4x6xf32> -> tensor<2x4x2x3xf32>
  %v = slapo.reshape %vs : tensor<2x4x6xf32> -> tensor<2x4x2x3xf32>
  %o, %lse = slapo.flash_attention %q, %k, %v keep %m {bshd, masked_score = -1.0e9 : f64, scale = 5.000000e-01 : f64} : (tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<2x4x2x3xf32>, tensor<1x1x4x4xi1>) -> (tensor<2x4x2x3xf32>, tensor<2x2x4xf32>)
  return %o, %ks : tensor<2x4x2x3xf32>, tensor<2x4x6xf32>
}
