// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=adamw lr=0.01" --slapo-plan-memory %s | slapo-translate --slapo-to-cpp --slapo-target=cuda > %t.cu
// RUN: FileCheck %s < %t.cu
// RUN: %if cuda %{ nvcc -std=c++17 -x cu -c -I%runtime_include %t.cu -o %t.o %}
// The same step for the CPU calls the same kernels.
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=adamw lr=0.01" --slapo-plan-memory %s | slapo-translate --slapo-to-cpp | FileCheck %s

// The kernels of replace("flash_attention") and replace("fused_rmsnorm")
// for --target=cuda: flash attention with a causal keep mask and its
// backward, and the RMS norm (its backward is made of other kernels).
module {
  slapo.param @norm.weight : tensor<8xf32>
  slapo.param buffer @attn.bias : tensor<1x1x4x4xi1>
  func.func @forward(%x: tensor<2x2x4x8xf32> {slapo.name = "x"}) -> tensor<f32> {
    %w = slapo.get_param @norm.weight {slapo.module = "norm"} : tensor<8xf32>
    %n = slapo.rms_norm %x weight %w {eps = 1.0E-6 : f64, slapo.module = "norm"} : (tensor<2x2x4x8xf32>, tensor<8xf32>) -> tensor<2x2x4x8xf32>
    %mask = slapo.get_param @attn.bias {slapo.module = "attn"} : tensor<1x1x4x4xi1>
    %o, %lse = slapo.flash_attention %n, %n, %n keep %mask {masked_score = -3.4028234663852886E+38 : f64, scale = 0.35355339059327379 : f64, slapo.module = "attn"} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<1x1x4x4xi1>) -> (tensor<2x2x4x8xf32>, tensor<2x2x4xf32>)
    %l = slapo.sum %o {dims = array<i64: 0, 1, 2, 3>, keepdim = false} : tensor<2x2x4x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK: // "norm": rms_norm
// CHECK: rmsNorm(ctx, arg0, t{{[0-9]+}}_get_param, [[N:t[0-9]+_rms_norm]], 9.9999999999999995e-07);
// CHECK: // "attn": flash_attention
// CHECK: flashAttention(ctx, [[N]], [[N]], [[N]], [[MASK:t[0-9]+_get_param]], Tensor(), [[O:t[0-9]+_flash_attention]], [[LSE:t[0-9]+_flash_attention]], 0.35355339059327379, -3.4028234663852886e+38, AttentionLayout::Bhsd);
// CHECK: // "attn": flash_attention_grad
// CHECK: flashAttentionGrad(ctx, [[N]], [[N]], [[N]], [[MASK]], Tensor(), [[O]], [[LSE]], t{{[0-9]+}}_{{[a-z_]+}}, t{{[0-9]+}}_flash_attention_grad, t{{[0-9]+}}_flash_attention_grad, t{{[0-9]+}}_flash_attention_grad, 0.35355339059327379, -3.4028234663852886e+38, AttentionLayout::Bhsd);
// CHECK-NOT: rmsNorm(
