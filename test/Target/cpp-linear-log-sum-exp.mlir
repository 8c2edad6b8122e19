// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=adamw lr=0.01" --slapo-plan-memory %s | slapo-translate --slapo-to-cpp --slapo-target=cuda > %t.cu
// RUN: FileCheck %s < %t.cu
// RUN: %if cuda %{ nvcc -std=c++17 -x cu -c -I%runtime_include %t.cu -o %t.o %}
// The same step for the CPU calls the same kernels.
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=adamw lr=0.01" --slapo-plan-memory %s | slapo-translate --slapo-to-cpp | FileCheck %s

// The vocabulary-parallel LM head's kernels: the forward keeps each row's
// log-sum-exp, the backward recomputes the chunks' logits from it.
module {
  slapo.param @lm_head.weight : tensor<16x8xf32>
  slapo.param @lm_head.bias : tensor<16xf32>
  func.func @forward(%h: tensor<6x8xf32> {slapo.name = "h"}) -> tensor<f32> {
    %w = slapo.get_param @lm_head.weight {slapo.module = "lm_head"} : tensor<16x8xf32>
    %b = slapo.get_param @lm_head.bias {slapo.module = "lm_head"} : tensor<16xf32>
    %lse = slapo.linear_log_sum_exp %h, %w bias %b {slapo.module = "lm_head"} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<6xf32>
    %loss = slapo.sum %lse {dims = array<i64: 0>, keepdim = false} : tensor<6xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// Each gets its workspace, the plan's: 6 rows of 8 features against 16
// classes, 96 logits, fewer than a chunk's least (2^23), go in one chunk of
// 6 rows, 6 * 16 f32 logits (384 bytes), all the forward needs; the
// gradient's adds the bias gradient's 16 f64 sums (128): 512 bytes.
// CHECK: // "lm_head": linear_log_sum_exp
// CHECK: const Tensor [[FWS:t[0-9]+_linear_log_sum_exp_workspace]] = view(arena, {{[0-9]+}}, DType::I8, {384});
// CHECK: linearLogSumExp(ctx, arg0, [[W:t[0-9]+_get_param]], [[B:t[0-9]+_get_param]], [[LSE:t[0-9]+_linear_log_sum_exp]], [[FWS]]);
// CHECK: const Tensor [[BWS:t[0-9]+_linear_log_sum_exp_grad_workspace]] = view(arena, {{[0-9]+}}, DType::I8, {512});
// CHECK: linearLogSumExpGrad(ctx, arg0, [[W]], [[B]], [[LSE]], {{[a-z0-9_]+}}, t{{[0-9]+}}_linear_log_sum_exp_grad, t{{[0-9]+}}_linear_log_sum_exp_grad, t{{[0-9]+}}_linear_log_sum_exp_grad, [[BWS]]);
