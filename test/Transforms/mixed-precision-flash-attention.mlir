// RUN: slapo-opt --slapo-mixed-precision %s | FileCheck %s
// RUN: slapo-opt --slapo-mixed-precision --slapo-autodiff %s | FileCheck %s --check-prefix=GRAD

// A flash attention runs in bf16 as a whole (as torch.autocast runs
// scaled_dot_product_attention): its float operands cast to bf16, the keep
// mask and the dropout's attributes as they were, and its bf16 result cast
// back to f32 for the ops after it, which stay f32. The log-sum-exp stays
// f32 (the compute type, as PyTorch keeps it) and is cast nowhere.
module {
  slapo.param @q : tensor<2x2x4x8xf32>
  slapo.param buffer @mask : tensor<1x1x4x4xi1>
  func.func @forward(%k: tensor<2x2x4x8xf32>, %v: tensor<2x2x4x8xf32>, %bias: tensor<2x1x1x4xf32>) -> tensor<f32> {
    %q = slapo.get_param @q : tensor<2x2x4x8xf32>
    %mask = slapo.get_param @mask : tensor<1x1x4x4xi1>
    %o, %lse = slapo.flash_attention %q, %k, %v keep %mask bias %bias {masked_score = -3.4028234663852886E+38 : f64, scale = 0.35355339059327379 : f64} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<1x1x4x4xi1>, tensor<2x1x1x4xf32>) -> (tensor<2x2x4x8xf32>, tensor<2x2x4xf32>)
    %e = slapo.exp %o : tensor<2x2x4x8xf32>
    %l = slapo.sum %e {dims = array<i64: 0, 1, 2, 3>, keepdim = false} : tensor<2x2x4x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
// CHECK: %[[QF:.*]] = slapo.get_param @q
// CHECK-NEXT: %[[MASK:.*]] = slapo.get_param @mask
// CHECK-NEXT: %[[Q:.*]] = slapo.cast %[[QF]] : tensor<2x2x4x8xf32> -> tensor<2x2x4x8xbf16>
// CHECK-NEXT: %[[K:.*]] = slapo.cast %arg0 : tensor<2x2x4x8xf32> -> tensor<2x2x4x8xbf16>
// CHECK-NEXT: %[[V:.*]] = slapo.cast %arg1 : tensor<2x2x4x8xf32> -> tensor<2x2x4x8xbf16>
// CHECK-NEXT: %[[B:.*]] = slapo.cast %arg2 : tensor<2x1x1x4xf32> -> tensor<2x1x1x4xbf16>
// CHECK-NEXT: %[[O:.*]], %{{.*}} = slapo.flash_attention %[[Q]], %[[K]], %[[V]] keep %[[MASK]] bias %[[B]] {masked_score = -3.4028234663852886E+38 : f64, scale = 0.35355339059327379 : f64} : (tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>, tensor<1x1x4x4xi1>, tensor<2x1x1x4xbf16>) -> (tensor<2x2x4x8xbf16>, tensor<2x2x4xf32>)
// CHECK-NEXT: %[[WIDE:.*]] = slapo.cast %[[O]] : tensor<2x2x4x8xbf16> -> tensor<2x2x4x8xf32>
// CHECK-NEXT: slapo.exp %[[WIDE]] : tensor<2x2x4x8xf32>
// CHECK-NOT: slapo.cast

// The gradient takes the gradient in bf16 and gives bf16 gradients, cast to
// f32 where they reach the parameter.
// GRAD-LABEL: func.func @forward_backward
// GRAD: %[[O:.*]], %[[LSE:.*]] = slapo.flash_attention {{.*}} -> (tensor<2x2x4x8xbf16>, tensor<2x2x4xf32>)
// GRAD: %[[G:.*]] = slapo.cast %{{.*}} {slapo.phase = "backward"} : tensor<2x2x4x8xf32> -> tensor<2x2x4x8xbf16>
// GRAD-NEXT: %[[GRADS:.*]]:3 = slapo.flash_attention_grad {{.*}} result %[[O]], %[[LSE]] grad %[[G]] {{.*}} : ({{.*}}, tensor<2x2x4x8xbf16>, tensor<2x2x4xf32>, tensor<2x2x4x8xbf16>) -> (tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>)
// GRAD-NEXT: %[[DQF:.*]] = slapo.cast %[[GRADS]]#0 {{.*}} : tensor<2x2x4x8xbf16> -> tensor<2x2x4x8xf32>
// GRAD-NEXT: return %{{.*}}, %[[DQF]] : tensor<f32>, tensor<2x2x4x8xf32>
