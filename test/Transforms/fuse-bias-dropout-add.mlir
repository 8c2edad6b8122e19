// RUN: slapo-opt --slapo-autodiff --slapo-optimizer=optimizer=sgd --slapo-cse "--slapo-fuse-elementwise=kind=bias_dropout_add modules=b" %s --split-input-file --verify-diagnostics | FileCheck %s

// A block: attention-like probabilities with their own dropout (not the
// pattern's: it reads no linear layer), then a Conv1D projection with a
// bias, its dropout and the residual add.
module {
  slapo.param @b.proj.weight : tensor<4x4xf32>
  slapo.param @b.proj.bias : tensor<4xf32>
  func.func @forward(%x: tensor<2x3x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %sm = slapo.softmax %x {dim = 2 : i64, slapo.module = "b.attn"} : tensor<2x3x4xf32>
    %pd = slapo.dropout %sm {p = 1.000000e-01 : f64, stream = 0 : i64, slapo.module = "b.attn.drop"} : tensor<2x3x4xf32>
    %r = slapo.reshape %pd {slapo.module = "b.proj"} : tensor<2x3x4xf32> -> tensor<6x4xf32>
    %w = slapo.get_param @b.proj.weight {slapo.module = "b.proj"} : tensor<4x4xf32>
    %m = slapo.matmul %r, %w {slapo.module = "b.proj"} : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
    %bias = slapo.get_param @b.proj.bias {slapo.module = "b.proj"} : tensor<4xf32>
    %a = slapo.add %bias, %m {slapo.module = "b.proj"} : (tensor<4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
    %v = slapo.reshape %a {slapo.module = "b.proj"} : tensor<6x4xf32> -> tensor<2x3x4xf32>
    %d = slapo.dropout %v {p = 1.000000e-01 : f64, stream = 1 : i64, slapo.module = "b.resid_drop"} : tensor<2x3x4xf32>
    %h = slapo.add %d, %x {slapo.module = "b"} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
    %l = slapo.sum %h {dims = array<i64: 0, 1, 2>, keepdim = false, slapo.module = "loss"} : tensor<2x3x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// The bias add, the dropout (with the step's number) and the residual add
// are one group that writes the sum alone; the probabilities' dropout is
// not in a group.
// CHECK-LABEL: func.func @train_step
// CHECK: slapo.dropout %{{.*}} step %{{.*}} {p = 1.000000e-01 : f64, slapo.module = "b.attn.drop", stream = 0 : i64}
// CHECK: %[[M:.*]] = slapo.matmul
// CHECK: %[[V:.*]] = slapo.reshape %[[M]] {slapo.module = "b.proj"} : tensor<6x4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[H:.*]] = slapo.fused %{{.*}}, %[[V]], %{{.*}}, %{{.*}} {kind = "bias_dropout_add", slapo.module = "b"} : (tensor<4xf32>, tensor<2x3x4xf32>, tensor<i64>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: slapo.add {{.*}} {slapo.module = "b.proj"} : (tensor<4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: slapo.dropout {{.*}} {p = 1.000000e-01 : f64, slapo.module = "b.resid_drop", stream = 1 : i64}
// CHECK-NEXT: slapo.add {{.*}} {slapo.module = "b"}
// CHECK-NEXT: slapo.yield %{{.*}} : tensor<2x3x4xf32>
// CHECK-NEXT: }
// CHECK-NOT: slapo.fused

// -----

// In eval mode the importer drops the dropout: the projection's result goes
// to the residual add.
module {
  slapo.param @b.proj.weight : tensor<4x4xf32>
  slapo.param @b.proj.bias : tensor<4xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = slapo.get_param @b.proj.weight {slapo.module = "b.proj"} : tensor<4x4xf32>
    %bias = slapo.get_param @b.proj.bias {slapo.module = "b.proj"} : tensor<4xf32>
    // expected-error@+1 {{fuse("bias_dropout_add"): module 'b' does not compute dropout(x W^T + b) + residual: the linear layer's result is read by 'slapo.add', not by 'slapo.dropout' (a dropout in train mode with p > 0: the importer drops others)}}
    %p = slapo.linear %x, %w, %bias {slapo.module = "b.proj"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    // expected-note@+1 {{the op that differs}}
    %h = slapo.add %p, %x {slapo.module = "b"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %l = slapo.sum %h {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// The residual add is outside the selected module.
module {
  slapo.param @b.proj.weight : tensor<4x4xf32>
  slapo.param @b.proj.bias : tensor<4xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = slapo.get_param @b.proj.weight {slapo.module = "b.proj"} : tensor<4x4xf32>
    %bias = slapo.get_param @b.proj.bias {slapo.module = "b.proj"} : tensor<4xf32>
    %p = slapo.linear %x, %w, %bias {slapo.module = "b.proj"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    // expected-error@+1 {{the residual add is in module 'outer', outside 'b': select the module that holds both}}
    %d = slapo.dropout %p {p = 1.000000e-01 : f64, stream = 0 : i64, slapo.module = "b.drop"} : tensor<2x4xf32>
    // expected-note@+1 {{the op that differs}}
    %h = slapo.add %d, %x {slapo.module = "outer"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %l = slapo.sum %h {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// The dropout's result is scaled, not added to a residual.
module {
  slapo.param @b.proj.weight : tensor<4x4xf32>
  slapo.param @b.proj.bias : tensor<4xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = slapo.get_param @b.proj.weight {slapo.module = "b.proj"} : tensor<4x4xf32>
    %bias = slapo.get_param @b.proj.bias {slapo.module = "b.proj"} : tensor<4xf32>
    %p = slapo.linear %x, %w, %bias {slapo.module = "b.proj"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    // expected-error@+1 {{the dropout's result is read by 'slapo.mul', not by the residual add}}
    %d = slapo.dropout %p {p = 1.000000e-01 : f64, stream = 0 : i64, slapo.module = "b.drop"} : tensor<2x4xf32>
    // expected-note@+1 {{the op that differs}}
    %h = slapo.mul %d, %x {slapo.module = "b"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %l = slapo.sum %h {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
