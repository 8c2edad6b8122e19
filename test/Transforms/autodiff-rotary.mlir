// RUN: slapo-opt --slapo-autodiff %s | FileCheck %s

// The rotary embedding's gradient rule: the transposed map of the grad, with
// the same angles (which get no gradient).
module {
  slapo.param @q : tensor<2x3x8xf32>
  slapo.param buffer @cos : tensor<3x8xf32>
  slapo.param buffer @sin : tensor<3x8xf32>
  func.func @forward() -> tensor<f32> {
    %q = slapo.get_param @q : tensor<2x3x8xf32>
    %c = slapo.get_param @cos : tensor<3x8xf32>
    %s = slapo.get_param @sin : tensor<3x8xf32>
    %r = slapo.rotary_embedding %q, %c, %s : (tensor<2x3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<2x3x8xf32>
    %loss = slapo.sum %r {dims = array<i64: 0, 1, 2>, keepdim = false} : tensor<2x3x8xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// CHECK-LABEL: func.func @forward_backward
// CHECK: %[[C:.*]] = slapo.get_param @cos
// CHECK: %[[S:.*]] = slapo.get_param @sin
// CHECK: slapo.rotary_embedding %{{.*}}, %[[C]], %[[S]] :
// CHECK: %[[G:.*]] = slapo.rotary_embedding %{{.*}}, %[[C]], %[[S]] {slapo.phase = "backward", transposed} : (tensor<2x3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<2x3x8xf32>
// CHECK: return %{{.*}}, %[[G]]
