// RUN: slapo-opt %s --split-input-file --verify-diagnostics

func.func @not_fusible(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{holds 'slapo.cumsum', which is not a fusible elementwise op}}
  %r = slapo.fused %x : (tensor<2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    %0 = slapo.cumsum %a {dim = 1 : i64} : tensor<2x4xf32>
    slapo.yield %0 : tensor<2x4xf32>
  }
  return %r : tensor<2x4xf32>
}

// -----

// Row ops only along the loop's last dim.
func.func @softmax_other_dim(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{holds 'slapo.softmax', which is not along the last dim of the loop's [2, 4]}}
  %r = slapo.fused %x : (tensor<2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    %0 = slapo.softmax %a {dim = 0 : i64} : tensor<2x4xf32>
    slapo.yield %0 : tensor<2x4xf32>
  }
  return %r : tensor<2x4xf32>
}

// -----

func.func @sum_without_keepdim(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{holds 'slapo.sum', which is not along the last dim of the loop's [2, 4]}}
  %r = slapo.fused %x : (tensor<2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    %0 = slapo.sum %a {dims = array<i64: 1>, keepdim = false} : tensor<2x4xf32> -> tensor<2xf32>
    %1 = slapo.exp %a : tensor<2x4xf32>
    slapo.yield %1 : tensor<2x4xf32>
  }
  return %r : tensor<2x4xf32>
}

// -----

// Ops of the rows' shape only in a group with row ops.
func.func @rows_without_row_ops(%x: tensor<2x4xf32>, %c: tensor<2x1xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>) {
  // expected-error @+1 {{holds 'slapo.exp' of shape [2, 1], not the loop's [2, 4]}}
  %r:2 = slapo.fused %x, %c : (tensor<2x4xf32>, tensor<2x1xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>) {
  ^bb0(%a: tensor<2x4xf32>, %b: tensor<2x1xf32>):
    %0 = slapo.exp %b : tensor<2x1xf32>
    %1 = slapo.mul %a, %0 : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
    slapo.yield %1, %0 : tensor<2x4xf32>, tensor<2x1xf32>
  }
  return %r#0, %r#1 : tensor<2x4xf32>, tensor<2x1xf32>
}

// -----

func.func @split_block(%x: tensor<2x3x4xf32>, %y: tensor<2x1x4xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{operand #1 shape [2, 1, 4] does not broadcast to the loop's [2, 3, 4] as one block of its dims}}
  %r = slapo.fused %x, %y : (tensor<2x3x4xf32>, tensor<2x1x4xf32>) -> tensor<2x3x4xf32> {
  ^bb0(%a: tensor<2x3x4xf32>, %b: tensor<2x1x4xf32>):
    %0 = slapo.add %a, %b : (tensor<2x3x4xf32>, tensor<2x1x4xf32>) -> tensor<2x3x4xf32>
    slapo.yield %0 : tensor<2x3x4xf32>
  }
  return %r : tensor<2x3x4xf32>
}

// -----

func.func @other_shape(%x: tensor<2x4xf32>, %b: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{holds 'slapo.exp' of shape [4], not the loop's [2, 4]}}
  %r = slapo.fused %x, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a0: tensor<2x4xf32>, %a1: tensor<4xf32>):
    %0 = slapo.exp %a1 : tensor<4xf32>
    %1 = slapo.add %a0, %0 : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    slapo.yield %1 : tensor<2x4xf32>
  }
  return %r : tensor<2x4xf32>
}
