// RUN: slapo-opt "--slapo-decompose=modules=fc1" %s | FileCheck %s
// RUN: not slapo-opt "--slapo-decompose=modules=act" %s 2>&1 | FileCheck %s --check-prefix=NONE

// decompose() splits the selected module's linear into its product and its
// bias add; other modules' linears stay whole.
module {
  slapo.param @fc1.weight : tensor<8x4xf32>
  slapo.param @fc1.bias : tensor<8xf32>
  slapo.param @fc2.weight : tensor<4x8xf32>
  slapo.param @fc2.bias : tensor<4xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %w1 = slapo.get_param @fc1.weight : tensor<8x4xf32> loc("fc1"(unknown))
    %b1 = slapo.get_param @fc1.bias : tensor<8xf32> loc("fc1"(unknown))
    %h = slapo.linear %x, %w1, %b1 : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32> loc("fc1"(unknown))
    %a = slapo.relu %h : tensor<2x8xf32> loc("act"(unknown))
    %w2 = slapo.get_param @fc2.weight : tensor<4x8xf32> loc("fc2"(unknown))
    %b2 = slapo.get_param @fc2.bias : tensor<4xf32> loc("fc2"(unknown))
    %y = slapo.linear %a, %w2, %b2 : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("fc2"(unknown))
    return %y : tensor<2x4xf32>
  }
}
// CHECK: %[[W1:.*]] = slapo.get_param @fc1.weight
// CHECK-NEXT: %[[B1:.*]] = slapo.get_param @fc1.bias
// CHECK-NEXT: %[[P:.*]] = slapo.linear %arg0, %[[W1]] : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[H:.*]] = slapo.add %[[P]], %[[B1]] : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: slapo.relu %[[H]]
// CHECK: slapo.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// NONE: error: decompose(): module 'act' computes no linear layer with a bias
