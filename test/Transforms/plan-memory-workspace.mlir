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

// 6 rows of 8 features against 16 classes: chunks of ceil(6 / ceil(16 / 8))
// = 3 rows, so a chunk's f32 logits are 3 * 16 * 4 = 192 bytes; that is the
// forward's whole workspace. The gradient's adds a later chunk's f32 weight
// gradient, 16 * 8 * 4 = 512 bytes: 704. At the peak (the gradient's op)
// the gradient's workspace is live.
// CHECK: module attributes {slapo.memory = {{{.*}}, weights = 512 : i64, workspaces = 704 : i64}}
// The two workspaces are never live at once: they share their bytes.
// CHECK: slapo.linear_log_sum_exp {{.*}}slapo.workspace = array<i64: [[AT:[0-9]+]], 192>
// CHECK: slapo.linear_log_sum_exp_grad {{.*}}slapo.workspace = array<i64: [[AT]], 704>
