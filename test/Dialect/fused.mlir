// RUN: slapo-opt %s | slapo-opt | FileCheck %s

// A fusion group: operands broadcast to the loop's shape as one block of its
// dims (a bias row, a column, a scalar); yield names its results.
// CHECK-LABEL: func.func @group
// CHECK: %[[R:.*]]:2 = slapo.fused %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4xf32>, tensor<4xf32>, tensor<2x1xf32>, tensor<f32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<2x4xf32>, %[[B:.*]]: tensor<4xf32>, %[[C:.*]]: tensor<2x1xf32>, %[[S:.*]]: tensor<f32>):
// CHECK-NEXT: %[[ADD:.*]] = slapo.add %[[A]], %[[B]]
// CHECK-NEXT: %[[MUL:.*]] = slapo.mul %[[ADD]], %[[C]]
// CHECK-NEXT: %[[DIV:.*]] = slapo.div %[[MUL]], %[[S]]
// CHECK-NEXT: slapo.yield %[[ADD]], %[[DIV]] : tensor<2x4xf32>, tensor<2x4xf32>
// CHECK: return %[[R]]#1
func.func @group(%x: tensor<2x4xf32>, %b: tensor<4xf32>, %c: tensor<2x1xf32>, %s: tensor<f32>) -> tensor<2x4xf32> {
  %r:2 = slapo.fused %x, %b, %c, %s : (tensor<2x4xf32>, tensor<4xf32>, tensor<2x1xf32>, tensor<f32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  ^bb0(%a0: tensor<2x4xf32>, %a1: tensor<4xf32>, %a2: tensor<2x1xf32>, %a3: tensor<f32>):
    %0 = slapo.add %a0, %a1 : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %1 = slapo.mul %0, %a2 : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
    %2 = slapo.div %1, %a3 : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
    slapo.yield %0, %2 : tensor<2x4xf32>, tensor<2x4xf32>
  }
  return %r#1 : tensor<2x4xf32>
}
