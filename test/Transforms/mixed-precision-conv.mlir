// RUN: slapo-opt --slapo-mixed-precision %s | FileCheck %s
// RUN: slapo-opt --slapo-mixed-precision --slapo-autodiff %s | FileCheck %s --check-prefix=GRAD

// A convolution takes bf16 operands and gives f32 sums (its reader, the
// pooling, is no elementwise chain that would widen a bf16 result for free:
// test/Transforms/mixed-precision-rounding.mlir), its bias added in f32 as
// [O, 1, 1]; batch_norm's ops and pooling are left in f32.
module {
  slapo.param @w : tensor<6x4x3x3xf32>
  slapo.param @b : tensor<6xf32>
  func.func @forward(%x: tensor<2x4x8x8xf32>) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<6x4x3x3xf32>
    %b = slapo.get_param @b : tensor<6xf32>
    %y = slapo.conv2d %x, %w, %b {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1} : (tensor<2x4x8x8xf32>, tensor<6x4x3x3xf32>, tensor<6xf32>) -> tensor<2x6x8x8xf32>
    %p = slapo.max_pool2d %y {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<2x6x8x8xf32> -> tensor<2x6x4x4xf32>
    %l = slapo.sum %p {dims = array<i64: 0, 1, 2, 3>, keepdim = false} : tensor<2x6x4x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
// CHECK: %[[X:.*]] = slapo.cast %arg0 : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xbf16>
// CHECK-NEXT: %[[W:.*]] = slapo.cast %{{.*}} : tensor<6x4x3x3xf32> -> tensor<6x4x3x3xbf16>
// CHECK-NEXT: %[[P:.*]] = slapo.conv2d %[[X]], %[[W]] {{.*}} : (tensor<2x4x8x8xbf16>, tensor<6x4x3x3xbf16>) -> tensor<2x6x8x8xf32>
// CHECK-NEXT: %[[B:.*]] = slapo.reshape %{{.*}} : tensor<6xf32> -> tensor<6x1x1xf32>
// CHECK-NEXT: %[[Y:.*]] = slapo.add %[[P]], %[[B]] : (tensor<2x6x8x8xf32>, tensor<6x1x1xf32>) -> tensor<2x6x8x8xf32>
// CHECK-NEXT: slapo.max_pool2d %[[Y]] {{.*}} : tensor<2x6x8x8xf32> -> tensor<2x6x4x4xf32>

// The weight's gradient product takes the gradient in bf16 and gives bf16
// (the input's, an argument's, is not built); it reaches the parameter in
// f32 through the cast's rule, and the bias's sums stay f32.
// GRAD-LABEL: func.func @forward_backward
// GRAD: %[[G:.*]] = slapo.cast %{{.*}} : tensor<2x6x8x8xf32> -> tensor<2x6x8x8xbf16>
// GRAD-NOT: slapo.conv2d_grad_input
// GRAD: %[[DW:.*]] = slapo.conv2d_grad_weight %[[G]], %{{.*}} : (tensor<2x6x8x8xbf16>, tensor<2x4x8x8xbf16>) -> tensor<6x4x3x3xbf16>
// GRAD: slapo.cast %[[DW]] {{.*}}: tensor<6x4x3x3xbf16> -> tensor<6x4x3x3xf32>
// GRAD: return {{.*}} : tensor<f32>, tensor<6x4x3x3xf32>, tensor<6xf32>
