// RUN: slapo-opt --slapo-mixed-precision %s | FileCheck %s
// RUN: slapo-opt --slapo-mixed-precision --slapo-autodiff %s | FileCheck %s --check-prefix=GRAD

// An LM head replaced with its loss (replace("cross_entropy")) takes its
// hidden states and weight in bf16, as torch.autocast's bf16 LM head does;
// the bias, the loss and the gradients the kernel computes stay f32.
module {
  slapo.param @h : tensor<6x8xf32>
  slapo.param @w : tensor<16x8xf32>
  slapo.param @b : tensor<16xf32>
  func.func @forward(%t: tensor<6xi64>) -> tensor<f32> {
    %h = slapo.get_param @h : tensor<6x8xf32>
    %w = slapo.get_param @w : tensor<16x8xf32>
    %b = slapo.get_param @b : tensor<16xf32>
    %l, %dh, %dw, %db = slapo.linear_cross_entropy %h, %w, %t bias %b {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6xi64>, tensor<16xf32>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
    return %l : tensor<f32>
  }
}
// CHECK: %[[H:.*]] = slapo.get_param @h
// CHECK-NEXT: %[[W:.*]] = slapo.get_param @w
// CHECK-NEXT: %[[B:.*]] = slapo.get_param @b
// CHECK-NEXT: %[[H16:.*]] = slapo.cast %[[H]] : tensor<6x8xf32> -> tensor<6x8xbf16>
// CHECK-NEXT: %[[W16:.*]] = slapo.cast %[[W]] : tensor<16x8xf32> -> tensor<16x8xbf16>
// CHECK-NEXT: %[[L:.*]], %{{.*}}, %{{.*}}, %{{.*}} = slapo.linear_cross_entropy %[[H16]], %[[W16]], %arg0 bias %[[B]] {{.*}} : (tensor<6x8xbf16>, tensor<16x8xbf16>, tensor<6xi64>, tensor<16xf32>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
// CHECK-NEXT: return %[[L]] : tensor<f32>

// The rule scales the f32 gradients by the loss's gradient and rounds those
// of the bf16 operands to bf16, which their casts' rules widen back to f32
// for the parameters; the bias's stays f32 throughout.
// GRAD-LABEL: func.func @forward_backward
// GRAD: %[[L:.*]], %[[DH:.*]], %[[DW:.*]], %[[DB:.*]] = slapo.linear_cross_entropy
// GRAD: %[[SDH:.*]] = slapo.mul %[[DH]], %{{.*}} {{.*}} : (tensor<6x8xf32>, tensor<f32>) -> tensor<6x8xf32>
// GRAD-NEXT: %[[DH16:.*]] = slapo.cast %[[SDH]] {{.*}} : tensor<6x8xf32> -> tensor<6x8xbf16>
// GRAD-NEXT: %[[SDW:.*]] = slapo.mul %[[DW]], %{{.*}} {{.*}} : (tensor<16x8xf32>, tensor<f32>) -> tensor<16x8xf32>
// GRAD-NEXT: %[[DW16:.*]] = slapo.cast %[[SDW]] {{.*}} : tensor<16x8xf32> -> tensor<16x8xbf16>
// GRAD-NEXT: %[[SDB:.*]] = slapo.mul %[[DB]], %{{.*}} {{.*}} : (tensor<16xf32>, tensor<f32>) -> tensor<16xf32>
// GRAD-DAG: %[[DWF:.*]] = slapo.cast %[[DW16]] {{.*}} : tensor<16x8xbf16> -> tensor<16x8xf32>
// GRAD-DAG: %[[DHF:.*]] = slapo.cast %[[DH16]] {{.*}} : tensor<6x8xbf16> -> tensor<6x8xf32>
// GRAD: return %[[L]], %[[DHF]], %[[DWF]], %[[SDB]] :
