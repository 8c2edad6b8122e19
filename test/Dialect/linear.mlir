// RUN: slapo-opt %s | slapo-opt | FileCheck %s
// RUN: slapo-opt %s --split-input-file --verify-diagnostics --mlir-print-op-generic > /dev/null

// CHECK-LABEL: func.func @linear
// CHECK: slapo.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8xf32>
func.func @linear(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %y = slapo.linear %x, %w, %b : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
