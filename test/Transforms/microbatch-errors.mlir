// RUN: not slapo-opt --split-input-file --slapo-autodiff --slapo-microbatch=microbatches=2 %s 2>&1 | FileCheck %s

// Dropout draws its mask for the whole batch: refused, naming its module.
module {
  slapo.param @fc.weight : tensor<3x4xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = slapo.get_param @fc.weight {slapo.module = "fc"} : tensor<3x4xf32>
    %y = slapo.linear %x, %w {slapo.module = "fc"} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
    %d = slapo.dropout %y {p = 1.000000e-01 : f64, stream = 0 : i64, slapo.module = "drop"} : tensor<2x3xf32>
    %l = slapo.mean %d {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
// CHECK: error: microbatches=2: the dropout in module 'drop' draws its mask for the whole batch, and a microbatch would draw another block of it; train without dropout (p=0, or eval mode at export) or with microbatches=1

// -----

// So does an attention dropout inside flash_attention (replace()).
module {
  slapo.param @attn.weight : tensor<2x2x4x4xf32>
  func.func @forward(%x: tensor<2x2x4x4xf32>) -> tensor<f32> {
    %w = slapo.get_param @attn.weight {slapo.module = "attn"} : tensor<2x2x4x4xf32>
    %q = slapo.mul %x, %w {slapo.module = "attn"} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
    %o, %lse = slapo.flash_attention %q, %q, %q {dropout_p = 1.000000e-01 : f64, dropout_stream = 0 : i64, masked_score = 0.0 : f64, scale = 0.5 : f64, slapo.module = "attn"} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4xf32>)
    %l = slapo.mean %o {dims = array<i64: 0, 1, 2, 3>, keepdim = false} : tensor<2x2x4x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
// CHECK: error: microbatches=2: the dropout in module 'attn' draws its mask for the whole batch, and a microbatch would draw another block of it; train without dropout (p=0, or eval mode at export) or with microbatches=1

// -----

// An input without a batch dim cannot be split.
module {
  slapo.param @w : tensor<4xf32>
  func.func @forward(%s: tensor<f32>) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<4xf32>
    %y = slapo.mul %w, %s : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    %l = slapo.mean %y {dims = array<i64: 0>, keepdim = false} : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
// CHECK: error: microbatches=2: input #0 is a scalar: microbatches split dim 0 (the batch) of every input
