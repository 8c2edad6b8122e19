// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=adamw lr=0.01" --slapo-plan-memory %s | slapo-translate --slapo-to-cpp --slapo-target=cuda > %t.cu
// RUN: FileCheck %s < %t.cu
// RUN: %if cuda %{ nvcc -std=c++17 -x cu -c -I%runtime_include %t.cu -o %t.o %}
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=adamw lr=0.01" --slapo-plan-memory %s | slapo-translate --slapo-to-cpp | FileCheck %s

// flash_attention with its attention dropout (a tp rank's heads of a split,
// forked): slapo-optimizer gives it and its gradient the step number, and
// both kernels get the mask's key and placement as slapo.dropout's kernel
// does, so that the backward draws the forward's mask. Token-major (bshd,
// [B, T, H, D]): the gradient rule keeps the layout, both kernels get it.
module {
  slapo.param @attn.w : tensor<2x4x2x8xf32>
  func.func @forward(%x: tensor<2x4x2x8xf32> {slapo.name = "x"}) -> tensor<f32> {
    %w = slapo.get_param @attn.w {slapo.module = "attn"} : tensor<2x4x2x8xf32>
    %q = slapo.mul %x, %w {slapo.module = "attn"} : (tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
    %o, %lse = slapo.flash_attention %q, %q, %q {bshd, dropout_p = 1.000000e-01 : f64, dropout_stream = 3 : i64, fork_rng, masked_score = 0.0 : f64, scale = 0.35355339059327379 : f64, shard_axis = 1 : i64, slapo.module = "attn"} : (tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) -> (tensor<2x4x2x8xf32>, tensor<2x2x4xf32>)
    %l = slapo.sum %o {dims = array<i64: 0, 1, 2, 3>, keepdim = false} : tensor<2x4x2x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK: // "attn": flash_attention
// CHECK: flashAttention(ctx, [[Q:t[0-9]+_mul]], [[Q]], [[Q]], Tensor(), Tensor(), [[O:t[0-9]+_flash_attention]], [[LSE:t[0-9]+_flash_attention]], 0.35355339059327379, 0, AttentionLayout::Bshd, /*dropout=*/{0.10000000000000001, {kSeed, step, /*stream=*/3, /*rankStream=*/mesh.getTpRank()}, {mesh.getDpRank(), {/*axis=*/1, /*chunks=*/1, mesh.getTp()}, mesh.getTpRank()}});
// CHECK: // "attn": flash_attention_grad
// CHECK: flashAttentionGrad(ctx, [[Q]], [[Q]], [[Q]], Tensor(), Tensor(), [[O]], [[LSE]], t{{[0-9]+}}_{{[a-z_]+}}, t{{[0-9]+}}_flash_attention_grad, t{{[0-9]+}}_flash_attention_grad, t{{[0-9]+}}_flash_attention_grad, 0.35355339059327379, 0, AttentionLayout::Bshd, /*dropout=*/{0.10000000000000001, {kSeed, step, /*stream=*/3, /*rankStream=*/mesh.getTpRank()}, {mesh.getDpRank(), {/*axis=*/1, /*chunks=*/1, mesh.getTp()}, mesh.getTpRank()}});
