// RUN: slapo-opt "--slapo-replace=modules=norm kernel=fused_layernorm" %s --split-input-file --verify-diagnostics | FileCheck %s

// BERT's old BertLayerNorm (ConvNeXt's channels-last one alike): u = mean(x),
// (x - u) / sqrt(mean((x - u)^2) + eps), times the weight, plus the bias,
// the centring written twice: one slapo.layer_norm with the module's eps
// (1e-12 as f32) and its path, nothing of the chain left.
module {
  slapo.param @norm.weight : tensor<8xf32>
  slapo.param @norm.bias : tensor<8xf32>
  func.func @forward(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %u = slapo.mean %x {dims = array<i64: 2>, keepdim = true, slapo.module = "norm"} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
    %d = slapo.sub %x, %u {slapo.module = "norm"} : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
    %two = slapo.constant dense<2.000000e+00> : tensor<f32>
    %sq = slapo.pow %d, %two {slapo.module = "norm"} : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
    %s = slapo.mean %sq {dims = array<i64: 2>, keepdim = true, slapo.module = "norm"} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
    %eps = slapo.constant dense<9.99999996E-13> : tensor<f32>
    %a = slapo.add %s, %eps {slapo.module = "norm"} : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
    %r = slapo.sqrt %a {slapo.module = "norm"} : tensor<2x4x1xf32>
    %d2 = slapo.sub %x, %u {slapo.module = "norm"} : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
    %n = slapo.div %d2, %r {slapo.module = "norm"} : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
    %w = slapo.get_param @norm.weight {slapo.module = "norm"} : tensor<8xf32>
    %m = slapo.mul %w, %n {slapo.module = "norm"} : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %b = slapo.get_param @norm.bias {slapo.module = "norm"} : tensor<8xf32>
    %y = slapo.add %m, %b {slapo.module = "norm"} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    return %y : tensor<2x4x8xf32>
  }
}
// CHECK-LABEL: func.func @forward
//  CHECK-NEXT: %[[W:.*]] = slapo.get_param @norm.weight
//  CHECK-NEXT: %[[B:.*]] = slapo.get_param @norm.bias
//  CHECK-NEXT: %[[Y:.*]] = slapo.layer_norm %arg0 weight %[[W]] bias %[[B]] {eps = 9.999999960041972E-13 : f64, normalized_rank = 1 : i64, slapo.module = "norm"} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
//  CHECK-NEXT: return %[[Y]]

// -----

// x.var(unbiased=False) as the importer spells it (its own mean, x * x) and
// (x - mean) * rsqrt(var + eps) * weight, without a bias, over the last two
// dims.
module {
  slapo.param @norm.weight : tensor<4x8xf32>
  func.func @forward(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %u = slapo.mean %x {dims = array<i64: 1, 2>, keepdim = true, slapo.module = "norm"} : tensor<2x4x8xf32> -> tensor<2x1x1xf32>
    %c = slapo.sub %x, %u {slapo.module = "norm"} : (tensor<2x4x8xf32>, tensor<2x1x1xf32>) -> tensor<2x4x8xf32>
    %u2 = slapo.mean %x {dims = array<i64: 1, 2>, keepdim = true, slapo.module = "norm"} : tensor<2x4x8xf32> -> tensor<2x1x1xf32>
    %c2 = slapo.sub %x, %u2 {slapo.module = "norm"} : (tensor<2x4x8xf32>, tensor<2x1x1xf32>) -> tensor<2x4x8xf32>
    %sq = slapo.mul %c2, %c2 {slapo.module = "norm"} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %v = slapo.mean %sq {dims = array<i64: 1, 2>, keepdim = true, slapo.module = "norm"} : tensor<2x4x8xf32> -> tensor<2x1x1xf32>
    %eps = slapo.constant dense<9.99999997E-7> : tensor<f32>
    %a = slapo.add %eps, %v {slapo.module = "norm"} : (tensor<f32>, tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
    %r = slapo.rsqrt %a {slapo.module = "norm"} : tensor<2x1x1xf32>
    %n = slapo.mul %c, %r {slapo.module = "norm"} : (tensor<2x4x8xf32>, tensor<2x1x1xf32>) -> tensor<2x4x8xf32>
    %w = slapo.get_param @norm.weight {slapo.module = "norm"} : tensor<4x8xf32>
    %y = slapo.mul %n, %w {slapo.module = "norm"} : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
    return %y : tensor<2x4x8xf32>
  }
}
// CHECK-LABEL: func.func @forward
//  CHECK-NEXT: %[[W:.*]] = slapo.get_param @norm.weight
//  CHECK-NEXT: %[[Y:.*]] = slapo.layer_norm %arg0 weight %[[W]] {eps = 9.9999999747524271E-7 : f64, normalized_rank = 2 : i64, slapo.module = "norm"} : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
//  CHECK-NEXT: return %[[Y]]

// -----

// nn.LayerNorm: already the one op, accepted as it is.
module {
  slapo.param @norm.weight : tensor<8xf32>
  slapo.param @norm.bias : tensor<8xf32>
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %w = slapo.get_param @norm.weight {slapo.module = "norm"} : tensor<8xf32>
    %b = slapo.get_param @norm.bias {slapo.module = "norm"} : tensor<8xf32>
    %y = slapo.layer_norm %x weight %w bias %b {eps = 1.0E-5 : f64, normalized_rank = 1 : i64, slapo.module = "norm"} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %z = slapo.relu %y : tensor<2x8xf32>
    return %z : tensor<2x8xf32>
  }
}
// CHECK-LABEL: func.func @forward
//  CHECK-NEXT: %[[W:.*]] = slapo.get_param @norm.weight
//  CHECK-NEXT: %[[B:.*]] = slapo.get_param @norm.bias
//  CHECK-NEXT: %[[Y:.*]] = slapo.layer_norm %arg0 weight %[[W]] bias %[[B]] {eps = 1.000000e-05 : f64, normalized_rank = 1 : i64, slapo.module = "norm"}
//  CHECK-NEXT: slapo.relu %[[Y]]

// -----

// The module's layer_norm and something more: the module is no layer norm.
module {
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    // expected-error@+1 {{replace("fused_layernorm"): module 'norm' does not compute what fused_layernorm computes: 'slapo.relu' is not part of the layer norm (the module must compute one layer norm and nothing else)}}
    %y = slapo.layer_norm %x {eps = 1.0E-5 : f64, normalized_rank = 1 : i64, slapo.module = "norm"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    // expected-note@+1 {{the op that differs}}
    %z = slapo.relu %y {slapo.module = "norm"} : tensor<2x8xf32>
    return %z : tensor<2x8xf32>
  }
}

// -----

// An unbiased variance (x.var() divides by n - 1: the importer's rescaling
// by n / (n - 1)) is no layer norm's.
module {
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %u = slapo.mean %x {dims = array<i64: 1>, keepdim = true, slapo.module = "norm"} : tensor<2x8xf32> -> tensor<2x1xf32>
    %c = slapo.sub %x, %u {slapo.module = "norm"} : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    %sq = slapo.mul %c, %c {slapo.module = "norm"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %v = slapo.mean %sq {dims = array<i64: 1>, keepdim = true, slapo.module = "norm"} : tensor<2x8xf32> -> tensor<2x1xf32>
    %k = slapo.constant dense<1.14285719> : tensor<f32>
    // expected-note@+1 {{the op that differs}}
    %unbiased = slapo.mul %v, %k {slapo.module = "norm"} : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
    %eps = slapo.constant dense<1.0E-5> : tensor<f32>
    %a = slapo.add %unbiased, %eps {slapo.module = "norm"} : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
    // expected-error@+1 {{module 'norm' does not compute what fused_layernorm computes: the variance is rescaled by 'slapo.mul' (an unbiased variance divides by n - 1); a layer norm's divides by n}}
    %r = slapo.sqrt %a {slapo.module = "norm"} : tensor<2x1xf32>
    %n = slapo.div %c, %r {slapo.module = "norm"} : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    return %n : tensor<2x8xf32>
  }
}

// -----

// eps added after the square root, not inside it.
module {
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %u = slapo.mean %x {dims = array<i64: 1>, keepdim = true, slapo.module = "norm"} : tensor<2x8xf32> -> tensor<2x1xf32>
    %c = slapo.sub %x, %u {slapo.module = "norm"} : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    %sq = slapo.mul %c, %c {slapo.module = "norm"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %v = slapo.mean %sq {dims = array<i64: 1>, keepdim = true, slapo.module = "norm"} : tensor<2x8xf32> -> tensor<2x1xf32>
    // expected-error@+2 {{module 'norm' does not compute what fused_layernorm computes: the sqrt's operand is not the variance plus a constant eps (eps inside the sqrt)}}
    // expected-note@+1 {{the op that differs}}
    %r = slapo.sqrt %v {slapo.module = "norm"} : tensor<2x1xf32>
    %eps = slapo.constant dense<1.0E-5> : tensor<f32>
    %a = slapo.add %r, %eps {slapo.module = "norm"} : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
    %n = slapo.div %c, %a {slapo.module = "norm"} : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    return %n : tensor<2x8xf32>
  }
}

// -----

// The mean subtracted is over another dim than the variance's.
module {
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    // expected-note@+1 {{the op that differs}}
    %u = slapo.mean %x {dims = array<i64: 0>, keepdim = true, slapo.module = "norm"} : tensor<2x8xf32> -> tensor<1x8xf32>
    %c = slapo.sub %x, %u {slapo.module = "norm"} : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
    %sq = slapo.mul %c, %c {slapo.module = "norm"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %v = slapo.mean %sq {dims = array<i64: 1>, keepdim = true, slapo.module = "norm"} : tensor<2x8xf32> -> tensor<2x1xf32>
    %eps = slapo.constant dense<1.0E-5> : tensor<f32>
    %a = slapo.add %v, %eps {slapo.module = "norm"} : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
    // expected-error@+1 {{the mean subtracted is over dims [0], the variance over dims [1]: a layer norm centres each row by its own mean}}
    %r = slapo.rsqrt %a {slapo.module = "norm"} : tensor<2x1xf32>
    %n = slapo.mul %c, %r {slapo.module = "norm"} : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    return %n : tensor<2x8xf32>
  }
}

// -----

// The variance is read again after the norm (returned beside it): the
// kernel never stores it.
module {
  func.func @forward(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>) {
    %u = slapo.mean %x {dims = array<i64: 1>, keepdim = true, slapo.module = "norm"} : tensor<2x8xf32> -> tensor<2x1xf32>
    %c = slapo.sub %x, %u {slapo.module = "norm"} : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    %sq = slapo.mul %c, %c {slapo.module = "norm"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %v = slapo.mean %sq {dims = array<i64: 1>, keepdim = true, slapo.module = "norm"} : tensor<2x8xf32> -> tensor<2x1xf32>
    %eps = slapo.constant dense<1.0E-5> : tensor<f32>
    %a = slapo.add %v, %eps {slapo.module = "norm"} : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
    // expected-error@+1 {{the result of 'slapo.mean' (an intermediate of the kernel) is also read by 'slapo.neg': the kernel never stores it}}
    %r = slapo.rsqrt %a {slapo.module = "norm"} : tensor<2x1xf32>
    %n = slapo.mul %c, %r {slapo.module = "norm"} : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
    // expected-note@+1 {{the op that differs}}
    %neg = slapo.neg %v : tensor<2x1xf32>
    return %n, %neg : tensor<2x8xf32>, tensor<2x1xf32>
  }
}

// -----

// A module that normalizes nothing.
module {
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    // expected-error@+1 {{module 'norm' does not compute what fused_layernorm computes: it computes no layer norm (neither 'slapo.layer_norm' nor the sqrt or rsqrt of a variance plus eps)}}
    %y = slapo.relu %x {slapo.module = "norm"} : tensor<2x8xf32>
    return %y : tensor<2x8xf32>
  }
}
