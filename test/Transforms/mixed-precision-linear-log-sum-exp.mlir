// RUN: slapo-opt --slapo-mixed-precision %s | FileCheck %s
// RUN: slapo-opt --slapo-mixed-precision --slapo-autodiff %s | FileCheck %s --check-prefix=GRAD

// The vocabulary-parallel LM head (replace("cross_entropy") under tensor
// parallelism) takes its hidden states and weight in bf16, as the whole
// head's kernel does; its log-sum-exp and bias stay f32.
module {
  slapo.param @h : tensor<6x8xf32>
  slapo.param @w : tensor<16x8xf32>
  slapo.param @b : tensor<16xf32>
  func.func @forward() -> tensor<f32> {
    %h = slapo.get_param @h : tensor<6x8xf32>
    %w = slapo.get_param @w : tensor<16x8xf32>
    %b = slapo.get_param @b : tensor<16xf32>
    %lse = slapo.linear_log_sum_exp %h, %w bias %b : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<6xf32>
    %s = slapo.sum %lse {dims = array<i64: 0>, keepdim = false} : tensor<6xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
// CHECK: %[[H:.*]] = slapo.get_param @h
// CHECK-NEXT: %[[W:.*]] = slapo.get_param @w
// CHECK-NEXT: %[[B:.*]] = slapo.get_param @b
// CHECK-NEXT: %[[H16:.*]] = slapo.cast %[[H]] : tensor<6x8xf32> -> tensor<6x8xbf16>
// CHECK-NEXT: %[[W16:.*]] = slapo.cast %[[W]] : tensor<16x8xf32> -> tensor<16x8xbf16>
// CHECK-NEXT: %{{.*}} = slapo.linear_log_sum_exp %[[H16]], %[[W16]] bias %[[B]] : (tensor<6x8xbf16>, tensor<16x8xbf16>, tensor<16xf32>) -> tensor<6xf32>

// Its gradient op computes f32 gradients from the bf16 operands; those of
// the operands are rounded to bf16 (as linear_cross_entropy's rule rounds
// them), which their casts' rules widen back for the parameters; the
// bias's stays f32.
// GRAD-LABEL: func.func @forward_backward
// GRAD: %[[H16:.*]] = slapo.cast %{{.*}} : tensor<6x8xf32> -> tensor<6x8xbf16>
// GRAD-NEXT: %[[W16:.*]] = slapo.cast %{{.*}} : tensor<16x8xf32> -> tensor<16x8xbf16>
// GRAD-NEXT: %[[LSE:.*]] = slapo.linear_log_sum_exp %[[H16]], %[[W16]] bias
// GRAD: %[[DH:.*]], %[[DW:.*]], %[[DB:.*]] = slapo.linear_log_sum_exp_grad %[[H16]], %[[W16]] bias %{{.*}} logsumexp %[[LSE]] grad %{{.*}} {{.*}} : (tensor<6x8xbf16>, tensor<16x8xbf16>, tensor<16xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<6x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
// GRAD-NEXT: %[[DH16:.*]] = slapo.cast %[[DH]] {{.*}} : tensor<6x8xf32> -> tensor<6x8xbf16>
// GRAD-NEXT: %[[DW16:.*]] = slapo.cast %[[DW]] {{.*}} : tensor<16x8xf32> -> tensor<16x8xbf16>
// GRAD-DAG: %[[DWF:.*]] = slapo.cast %[[DW16]] {{.*}} : tensor<16x8xbf16> -> tensor<16x8xf32>
// GRAD-DAG: %[[DHF:.*]] = slapo.cast %[[DH16]] {{.*}} : tensor<6x8xbf16> -> tensor<6x8xf32>
// GRAD: return %{{.*}}, %[[DHF]], %[[DWF]], %[[DB]] :
