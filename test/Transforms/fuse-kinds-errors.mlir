// RUN: slapo-opt --slapo-autodiff --slapo-optimizer=optimizer=sgd "--slapo-fuse-elementwise=kind=bias_gelu modules=m" %s --split-input-file --verify-diagnostics
// RUN: not slapo-opt --slapo-autodiff --slapo-optimizer=optimizer=sgd "--slapo-fuse-elementwise=kind=gelu modules=m" %s --split-input-file 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not slapo-opt --slapo-autodiff --slapo-optimizer=optimizer=sgd "--slapo-fuse-elementwise=kind=silu_mul" %s --split-input-file 2>&1 | FileCheck %s --check-prefix=NO-MODULES
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer=optimizer=sgd "--slapo-fuse-elementwise=kind=silu_mul modules=nowhere" %s --split-input-file | FileCheck %s --check-prefix=NO-OPS

// bias_gelu on a module whose linear layer is followed by relu: the relu
// is the op that differs; the error is at the linear layer (with a
// schedule, at the primitive's line).
module {
  slapo.param @m.fc.weight : tensor<8x4xf32>
  slapo.param @m.fc.bias : tensor<8xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = slapo.get_param @m.fc.weight {slapo.module = "m.fc"} : tensor<8x4xf32>
    %b = slapo.get_param @m.fc.bias {slapo.module = "m.fc"} : tensor<8xf32>
    // expected-error@+1 {{fuse("bias_gelu"): module 'm' does not compute gelu(x W^T + b): the linear layer's result is read by 'slapo.relu', not by 'slapo.gelu'}}
    %h = slapo.linear %x, %w, %b {slapo.module = "m.fc"} : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    // expected-note@+1 {{the op that differs}}
    %r = slapo.relu %h {slapo.module = "m.act"} : tensor<2x8xf32>
    %l = slapo.sum %r {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A gelu of a product without bias: the product differs.
module {
  slapo.param @m.fc.weight : tensor<8x4xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = slapo.get_param @m.fc.weight {slapo.module = "m.fc"} : tensor<8x4xf32>
    // expected-note@+1 {{the op that differs}}
    %h = slapo.linear %x, %w {slapo.module = "m.fc"} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    // expected-error@+1 {{module 'm' does not compute gelu(x W^T + b): the gelu reads 'slapo.linear', not a linear layer with a bias (x W^T + b)}}
    %g = slapo.gelu %h <erf> {slapo.module = "m.act"} : tensor<2x8xf32>
    %l = slapo.sum %g {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// The biased product is also read before its reshape: the bias add cannot
// move after the reshape.
module {
  slapo.param @m.fc.weight : tensor<4x8xf32>
  slapo.param @m.fc.bias : tensor<8xf32>
  func.func @forward(%x: tensor<6x4xf32>) -> tensor<f32> {
    %w = slapo.get_param @m.fc.weight {slapo.module = "m.fc"} : tensor<4x8xf32>
    %p = slapo.matmul %x, %w {slapo.module = "m.fc"} : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
    %b = slapo.get_param @m.fc.bias {slapo.module = "m.fc"} : tensor<8xf32>
    %a = slapo.add %b, %p {slapo.module = "m.fc"} : (tensor<8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
    %v = slapo.reshape %a {slapo.module = "m.fc"} : tensor<6x8xf32> -> tensor<2x3x8xf32>
    // expected-error@+1 {{the linear layer's result is also read by 'slapo.sum', not only by the reshape the gelu reads}}
    %g = slapo.gelu %v <tanh> {slapo.module = "m"} : tensor<2x3x8xf32>
    %l = slapo.sum %g {dims = array<i64: 0, 1, 2>, keepdim = false} : tensor<2x3x8xf32> -> tensor<f32>
    // expected-note@+1 {{the op that differs}}
    %k = slapo.sum %a {dims = array<i64: 0, 1>, keepdim = false} : tensor<6x8xf32> -> tensor<f32>
    %t = slapo.add %l, %k : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %t : tensor<f32>
  }
}

// -----

// A module with neither a gelu nor a linear layer with a bias.
module {
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    // expected-error@+1 {{module 'm' does not compute gelu(x W^T + b): it computes no linear layer with a bias}}
    %t = slapo.tanh %x {slapo.module = "m"} : tensor<2x4xf32>
    %l = slapo.sum %t {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// UNKNOWN: error: slapo-fuse-elementwise: unknown kind 'gelu' (known: bias_gelu, bias_dropout_add, silu_mul)
// NO-MODULES: error: slapo-fuse-elementwise: kind=silu_mul needs the modules that compute it
// A module without ops in the step (on another pipeline stage) has nothing
// to fuse.
// NO-OPS: func.func @train_step
// NO-OPS-NOT: slapo.fused
