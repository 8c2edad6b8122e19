// RUN: slapo-opt "--slapo-replace=modules=norm kernel=fused_rmsnorm" %s --split-input-file --verify-diagnostics | FileCheck %s

// LLaMA's RMSNorm (pow, mean over the last dim, + eps, rsqrt, times the
// input, times the weight) is one slapo.rms_norm with the module's eps.
module {
  slapo.param @norm.weight : tensor<8xf32>
  func.func @forward(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %two = slapo.constant dense<2.000000e+00> : tensor<f32>
    %sq = slapo.pow %x, %two {slapo.module = "norm"} : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
    %m = slapo.mean %sq {dims = array<i64: 2>, keepdim = true, slapo.module = "norm"} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
    %eps = slapo.constant dense<9.99999997E-7> : tensor<f32>
    %a = slapo.add %m, %eps {slapo.module = "norm"} : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
    %r = slapo.rsqrt %a {slapo.module = "norm"} : tensor<2x4x1xf32>
    %n = slapo.mul %x, %r {slapo.module = "norm"} : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
    %w = slapo.get_param @norm.weight {slapo.module = "norm"} : tensor<8xf32>
    %y = slapo.mul %w, %n {slapo.module = "norm"} : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %y : tensor<2x4x8xf32>
  }
}
// CHECK-LABEL: func.func @forward
//  CHECK-NEXT: %[[W:.*]] = slapo.get_param @norm.weight
//  CHECK-NEXT: %[[Y:.*]] = slapo.rms_norm %arg0 weight %[[W]] {eps = 9.9999999747524271E-7 : f64, slapo.module = "norm"} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
//  CHECK-NEXT: return %[[Y]]

// -----

// A norm over the mean of another value than the one it scales is no RMSNorm.
module {
  func.func @forward(%x: tensor<2x8xf32>, %z: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %sq = slapo.mul %z, %z {slapo.module = "norm"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %m = slapo.mean %sq {dims = array<i64: 1>, keepdim = true, slapo.module = "norm"} : tensor<2x8xf32> -> tensor<2x1xf32>
    %eps = slapo.constant dense<1.0E-5> : tensor<f32>
    %a = slapo.add %m, %eps {slapo.module = "norm"} : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
    // expected-error@+1 {{replace("fused_rmsnorm"): module 'norm' does not compute what fused_rmsnorm computes: the rsqrt does not scale the input it was computed from (x * rsqrt(...))}}
    %r = slapo.rsqrt %a {slapo.module = "norm"} : tensor<2x1xf32>
    // expected-note@+1 {{the op that differs}}
    %n = slapo.mul %x, %r {slapo.module = "norm"} : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    return %n : tensor<2x8xf32>
  }
}

// -----

// A mean over another dim than the last.
module {
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %sq = slapo.mul %x, %x {slapo.module = "norm"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    // expected-note@+1 {{the op that differs}}
    %m = slapo.mean %sq {dims = array<i64: 0>, keepdim = true, slapo.module = "norm"} : tensor<2x8xf32> -> tensor<1x8xf32>
    %eps = slapo.constant dense<1.0E-5> : tensor<f32>
    %a = slapo.add %m, %eps {slapo.module = "norm"} : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
    // expected-error@+1 {{eps is not added to a mean over the last dim (keepdim)}}
    %r = slapo.rsqrt %a {slapo.module = "norm"} : tensor<1x8xf32>
    %n = slapo.mul %x, %r {slapo.module = "norm"} : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
    return %n : tensor<2x8xf32>
  }
}

// -----

// A module without an rsqrt (LayerNorm's own op is no RMSNorm).
module {
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    // expected-error@+1 {{module 'norm' does not compute what fused_rmsnorm computes: it computes no rsqrt (RMSNorm's 1 / sqrt(mean(x^2) + eps))}}
    %y = slapo.layer_norm %x {eps = 1.0E-5 : f64, normalized_rank = 1 : i64, slapo.module = "norm"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    return %y : tensor<2x8xf32>
  }
}
