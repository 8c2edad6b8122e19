// RUN: slapo-opt --slapo-autodiff %s | FileCheck %s

// A packed attention's gradient rule: one packed gradient, which is the
// whole gradient of the one tensor its query, key and value are (its
// other two uses add nothing).
module {
  slapo.param @qkv : tensor<1x4x6x3xf32>
  func.func @forward() -> tensor<f32> {
    %qkv = slapo.get_param @qkv : tensor<1x4x6x3xf32>
    %o, %lse = slapo.flash_attention %qkv, %qkv, %qkv {bshd, packed_qkv, masked_score = 0.0 : f64, scale = 5.000000e-01 : f64} : (tensor<1x4x6x3xf32>, tensor<1x4x6x3xf32>, tensor<1x4x6x3xf32>) -> (tensor<1x4x2x3xf32>, tensor<1x2x4xf32>)
    %loss = slapo.sum %o {dims = array<i64: 0, 1, 2, 3>, keepdim = false} : tensor<1x4x2x3xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[QKV:.*]] = slapo.get_param @qkv
// CHECK: %[[O:.*]], %[[L:.*]] = slapo.flash_attention %[[QKV]], %[[QKV]], %[[QKV]] {bshd
// CHECK: %[[G:.*]] = slapo.flash_attention_grad %[[QKV]], %[[QKV]], %[[QKV]] result %[[O]], %[[L]] grad %{{.*}} {bshd, masked_score = 0.000000e+00 : f64, packed_qkv, scale = 5.000000e-01 : f64, slapo.phase = "backward"} : ({{.*}}) -> tensor<1x4x6x3xf32>
// CHECK-NOT: slapo.add
// CHECK: return %{{.*}}, %[[G]]
