// RUN: slapo-opt --slapo-autodiff --split-input-file --verify-diagnostics %s

// An op without a gradient rule on the path from a parameter to the loss,
// in the root module.
module {
  slapo.param @w : tensor<4xf32>
  func.func private @helper(tensor<4xf32>) -> tensor<4xf32>
  func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<4xf32>
    // expected-error@+1 {{'func.call' in the root module has no gradient rule}}
    %y = func.call @helper(%w) : (tensor<4xf32>) -> tensor<4xf32>
    %loss = slapo.sum %y {dims = array<i64: 0>, keepdim = false} : tensor<4xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

module {
  // expected-error@+1 {{slapo-autodiff: the first result of @forward must be the loss, a 0-d float tensor, not 'tensor<4xf32>'}}
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

module {
  // expected-error@+1 {{slapo-autodiff: the first result of @forward must be the loss, a 0-d float tensor, not 'tensor<i64>'}}
  func.func @forward(%x: tensor<i64>) -> tensor<i64> {
    return %x : tensor<i64>
  }
}

// -----

module {
  // expected-error@+1 {{slapo-autodiff: @forward returns nothing}}
  func.func @forward() {
    return
  }
}

// -----

// expected-error@+1 {{slapo-autodiff: there is no func.func @forward}}
module {
  func.func @main(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
}

// -----

module {
  func.func @forward(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
  // expected-error@+1 {{slapo-autodiff: @forward_backward exists already}}
  func.func @forward_backward(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
}

// -----

// A matmul with permutations (slapo-fold-permutes' output) has no gradient
// rule: the fold runs after autodiff.
module {
  slapo.param @w : tensor<4x3xf32>
  func.func @forward(%x: tensor<4x2xf32>) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<4x3xf32>
    // expected-error@+1 {{'slapo.matmul' op with permutations has no gradient rule: slapo-fold-permutes must run after slapo-autodiff}}
    %y = slapo.matmul %x, %w {lhs_permutation = array<i64: 1, 0>} : (tensor<4x2xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %loss = slapo.sum %y {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x3xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
