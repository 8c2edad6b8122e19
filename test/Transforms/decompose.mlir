// RUN: slapo-opt "--slapo-decompose=modules=fc1" %s | FileCheck %s
// RUN: not slapo-opt "--slapo-decompose=modules=act" %s 2>&1 | FileCheck %s --check-prefix=NONE

// decompose() splits the selected module's linear into its product and its
// bias add, both in the linear's module; other modules' linears stay whole.
module {
  slapo.param @fc1.weight : tensor<8x4xf32>
  slapo.param @fc1.bias : tensor<8xf32>
  slapo.param @fc2.weight : tensor<4x8xf32>
  slapo.param @fc2.bias : tensor<4xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %w1 = slapo.get_param @fc1.weight {slapo.module = "fc1"} : tensor<8x4xf32>
    %b1 = slapo.get_param @fc1.bias {slapo.module = "fc1"} : tensor<8xf32>
    %h = slapo.linear %x, %w1, %b1 {slapo.module = "fc1"} : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %a = slapo.relu %h {slapo.module = "act"} : tensor<2x8xf32>
    %w2 = slapo.get_param @fc2.weight {slapo.module = "fc2"} : tensor<4x8xf32>
    %b2 = slapo.get_param @fc2.bias {slapo.module = "fc2"} : tensor<4xf32>
    %y = slapo.linear %a, %w2, %b2 {slapo.module = "fc2"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}
// CHECK: %[[W1:.*]] = slapo.get_param @fc1.weight
// CHECK-NEXT: %[[B1:.*]] = slapo.get_param @fc1.bias
// CHECK-NEXT: %[[P:.*]] = slapo.linear %arg0, %[[W1]] {slapo.module = "fc1"} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[H:.*]] = slapo.add %[[P]], %[[B1]] {slapo.module = "fc1"} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: slapo.relu %[[H]]
// CHECK: slapo.linear %{{.*}}, %{{.*}}, %{{.*}} {slapo.module = "fc2"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// NONE: error: decompose(): module 'act' computes no linear layer with a bias
