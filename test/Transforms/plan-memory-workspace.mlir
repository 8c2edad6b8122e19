// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=sgd lr=0.5" --slapo-plan-memory %s | FileCheck %s

// The LM head kernels compute in a workspace (WorkspaceOpInterface): the
// plan gives each one a buffer live during its op only, counted among the
// workspaces, whose bytes other buffers reuse before and after.
module {
  slapo.param @w : tensor<16x8xf32>
  func.func @forward(%h: tensor<6x8xf32> {slapo.name = "h"}) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<16x8xf32>
    %lse = slapo.linear_log_sum_exp %h, %w : (tensor<6x8xf32>, tensor<16x8xf32>) -> tensor<6xf32>
    %loss = slapo.sum %lse {dims = array<i64: 0>, keepdim = false} : tensor<6xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// 6 rows of 8 features against 16 classes: 96 logits, fewer than a chunk's
// least (2^23), so one chunk of all 6 rows, whose f32 logits are 6 * 16 * 4
// = 384 bytes; that is the forward's whole workspace, and the gradient's
// too (with one chunk, and later ones adding their weight gradient inside
// the GEMM, there is no weight gradient part). At the peak one of them is
// live: the two are never live at once, so the peak counts 384, not 768.
// CHECK: module attributes {slapo.memory = {{{.*}}, weights = 512 : i64, workspaces = 384 : i64}}
// The forward's workspace is free after its op: the weight's gradient, a
// result of the gradient's op, takes its bytes.
// CHECK: slapo.linear_log_sum_exp {{.*}}slapo.workspace = array<i64: [[AT:[0-9]+]], 384>
// CHECK: slapo.linear_log_sum_exp_grad {{.*}}slapo.offsets = array<i64: {{[0-9]+}}, [[AT]]>{{.*}}slapo.workspace = array<i64: {{[0-9]+}}, 384>
