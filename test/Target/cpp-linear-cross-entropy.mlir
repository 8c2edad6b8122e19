// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=adamw lr=0.01" --slapo-plan-memory %s | slapo-translate --slapo-to-cpp --slapo-target=cuda > %t.cu
// RUN: FileCheck %s < %t.cu
// RUN: %if cuda %{ nvcc -std=c++17 -x cu -c -I%runtime_include %t.cu -o %t.o %}
// The same step for the CPU calls the same kernel.
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=adamw lr=0.01" --slapo-plan-memory %s | slapo-translate --slapo-to-cpp | FileCheck %s

// The kernel of replace("cross_entropy"): one call computes the loss and
// the gradients of the hidden rows, the weight and the bias; the backward
// only scales them by the loss's gradient.
module {
  slapo.param @lm_head.weight : tensor<16x8xf32>
  slapo.param @lm_head.bias : tensor<16xf32>
  func.func @forward(%h: tensor<6x8xf32> {slapo.name = "h"}, %t: tensor<6xi64> {slapo.name = "t"}) -> tensor<f32> {
    %w = slapo.get_param @lm_head.weight {slapo.module = "lm_head"} : tensor<16x8xf32>
    %b = slapo.get_param @lm_head.bias {slapo.module = "lm_head"} : tensor<16xf32>
    %loss, %dh, %dw, %db = slapo.linear_cross_entropy %h, %w, %t bias %b {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>, slapo.module = "lm_head"} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6xi64>, tensor<16xf32>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
    return %loss : tensor<f32>
  }
}

// Its workspace, the plan's (LinearCrossEntropyWorkspace.h's layout): 6 rows
// of 8 features against 16 classes, 96 logits, fewer than a chunk's least
// (2^23), go in one chunk of 6 rows; 6 * 16 f32 logits (384 bytes), the
// bias gradient's 16 f64 sums (128) and 8 bytes for each of the 6 rows and
// one more (56, 64 aligned): 576 bytes.
// CHECK: // "lm_head": linear_cross_entropy
// CHECK: const Tensor [[WS:t[0-9]+_linear_cross_entropy_workspace]] = view(arena, {{[0-9]+}}, DType::I8, {576});
// CHECK: linearCrossEntropy(ctx, arg0, [[W:t[0-9]+_get_param]], arg1, [[B:t[0-9]+_get_param]], t{{[0-9]+}}_linear_cross_entropy, t{{[0-9]+}}_linear_cross_entropy, t{{[0-9]+}}_linear_cross_entropy, t{{[0-9]+}}_linear_cross_entropy, [[WS]], -100, Reduction::Mean);
// CHECK-NOT: crossEntropy
