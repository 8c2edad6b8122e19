// RUN: slapo-opt --slapo-mixed-precision %s | FileCheck %s
// RUN: slapo-opt --slapo-mixed-precision --slapo-autodiff %s | FileCheck %s --check-prefix=GRAD

// Contractions take bf16 operands and sum in f32; everything else is left
// in f32. A product whose readers are elementwise chains (with the row ops
// along the last dim they end in) or other products is rounded to bf16, as
// torch.autocast's products are, and widened for its readers (their fusion
// groups read it in bf16); a linear's bias is added in f32 after. A
// product that a reduction, a loss or a collective reads keeps its f32
// sums: the widened copy would be a pass of its own.
module {
  slapo.param @w : tensor<3x4xf32>
  slapo.param @b : tensor<3xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<3x4xf32>
    %b = slapo.get_param @b : tensor<3xf32>
    %y = slapo.linear %x, %w, %b : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %s = slapo.tanh %y : tensor<2x3xf32>
    %t = slapo.permute %s {permutation = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
    %m = slapo.matmul %t, %s : (tensor<3x2xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
    %l = slapo.sum %m {dims = array<i64: 0, 1>, keepdim = false} : tensor<3x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
// CHECK: %[[X:.*]] = slapo.cast %arg0 : tensor<2x4xf32> -> tensor<2x4xbf16>
// CHECK-NEXT: %[[W:.*]] = slapo.cast %{{.*}} : tensor<3x4xf32> -> tensor<3x4xbf16>
// CHECK-NEXT: %[[P:.*]] = slapo.linear %[[X]], %[[W]] : (tensor<2x4xbf16>, tensor<3x4xbf16>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[PW:.*]] = slapo.cast %[[P]] : tensor<2x3xbf16> -> tensor<2x3xf32>
// CHECK-NEXT: %[[Y:.*]] = slapo.add %[[PW]], %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: slapo.tanh %[[Y]] : tensor<2x3xf32>
// CHECK: slapo.cast {{.*}} -> tensor<3x2xbf16>
// CHECK-NEXT: slapo.cast {{.*}} -> tensor<2x3xbf16>
// CHECK-NEXT: %[[M:.*]] = slapo.matmul {{.*}} : (tensor<3x2xbf16>, tensor<2x3xbf16>) -> tensor<3x3xf32>
// CHECK-NEXT: slapo.sum %[[M]]

// The backward's products take the gradient in bf16 too; the parameter's
// gradient reaches it in f32 through the cast's rule.
// GRAD-LABEL: func.func @forward_backward
// GRAD: slapo.matmul {{.*}} : (tensor<3x2xbf16>, tensor<2x4xbf16>) -> tensor<3x4xbf16>
// GRAD: slapo.cast {{.*}} : tensor<3x4xbf16> -> tensor<3x4xf32>
// GRAD: return {{.*}} : tensor<f32>, tensor<3x4xf32>, tensor<3xf32>
