// RUN: not slapo-opt --slapo-autodiff --split-input-file %s 2>&1 | FileCheck %s

// Errors name the module path of the op they are about, its slapo.module
// (their locations are the model's source lines, so they are checked with
// FileCheck rather than --verify-diagnostics).

// An op without a gradient rule on the path from a parameter to the loss.
// CHECK: model.py:12:0: error: 'func.call' in module 'blocks.0.mlp' has no gradient rule (VjpOpInterface), but the loss depends on a parameter through it
module {
  slapo.param @w : tensor<4xf32>
  func.func private @helper(tensor<4xf32>) -> tensor<4xf32>
  func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<4xf32>
    %y = func.call @helper(%w) {slapo.module = "blocks.0.mlp"} : (tensor<4xf32>) -> tensor<4xf32> loc(#mlp)
    %loss = slapo.sum %y {dims = array<i64: 0>, keepdim = false} : tensor<4xf32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
#mlp = loc("model.py":12:0)
