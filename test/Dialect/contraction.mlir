// RUN: slapo-opt %s | slapo-opt | FileCheck %s
// RUN: slapo-opt %s --mlir-print-op-generic | slapo-opt | FileCheck %s
// RUN: slapo-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// linear and matmul.

// CHECK-LABEL: func.func @linear
func.func @linear(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>, %b: tensor<8xf32>,
                  %seq: tensor<2x5x16xf32>, %v: tensor<16xf32>) {
  // CHECK-NEXT: slapo.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: slapo.linear %{{.*}}, %{{.*}} : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: slapo.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x5x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  // CHECK-NEXT: slapo.linear %{{.*}}, %{{.*}} : (tensor<16xf32>, tensor<8x16xf32>) -> tensor<8xf32>
  // GENERIC: "slapo.linear"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // GENERIC: "slapo.linear"(%{{.*}}, %{{.*}}) : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %0 = slapo.linear %x, %w, %b : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = slapo.linear %x, %w : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %2 = slapo.linear %seq, %w, %b : (tensor<2x5x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %3 = slapo.linear %v, %w : (tensor<16xf32>, tensor<8x16xf32>) -> tensor<8xf32>
  return
}

// CHECK-LABEL: func.func @linear_bf16
func.func @linear_bf16(%x: tensor<3x4xbf16>, %w: tensor<6x4xbf16>, %b: tensor<6xbf16>) -> tensor<3x6xbf16> {
  // CHECK-NEXT: slapo.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<3x4xbf16>, tensor<6x4xbf16>, tensor<6xbf16>) -> tensor<3x6xbf16>
  %0 = slapo.linear %x, %w, %b : (tensor<3x4xbf16>, tensor<6x4xbf16>, tensor<6xbf16>) -> tensor<3x6xbf16>
  return %0 : tensor<3x6xbf16>
}

// CHECK-LABEL: func.func @matmul
func.func @matmul(%a: tensor<4x16xf32>, %b: tensor<16x8xf32>, %q: tensor<2x3x5x16xf32>,
                  %k: tensor<2x3x16x5xf32>, %one: tensor<1x16x8xf32>, %h: tensor<7x2x3xf16>,
                  %g: tensor<3x4xf16>) {
  // CHECK-NEXT: slapo.matmul %{{.*}}, %{{.*}} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: slapo.matmul %{{.*}}, %{{.*}} : (tensor<2x3x5x16xf32>, tensor<2x3x16x5xf32>) -> tensor<2x3x5x5xf32>
  // CHECK-NEXT: slapo.matmul %{{.*}}, %{{.*}} : (tensor<2x3x5x16xf32>, tensor<16x8xf32>) -> tensor<2x3x5x8xf32>
  // CHECK-NEXT: slapo.matmul %{{.*}}, %{{.*}} : (tensor<2x3x5x16xf32>, tensor<1x16x8xf32>) -> tensor<2x3x5x8xf32>
  // CHECK-NEXT: slapo.matmul %{{.*}}, %{{.*}} : (tensor<7x2x3xf16>, tensor<3x4xf16>) -> tensor<7x2x4xf16>
  // GENERIC: "slapo.matmul"(%{{.*}}, %{{.*}}) : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %0 = slapo.matmul %a, %b : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %1 = slapo.matmul %q, %k : (tensor<2x3x5x16xf32>, tensor<2x3x16x5xf32>) -> tensor<2x3x5x5xf32>
  %2 = slapo.matmul %q, %b : (tensor<2x3x5x16xf32>, tensor<16x8xf32>) -> tensor<2x3x5x8xf32>
  %3 = slapo.matmul %q, %one : (tensor<2x3x5x16xf32>, tensor<1x16x8xf32>) -> tensor<2x3x5x8xf32>
  %4 = slapo.matmul %h, %g : (tensor<7x2x3xf16>, tensor<3x4xf16>) -> tensor<7x2x4xf16>
  return
}

// Permuted operands and result: the shapes are checked after the operands'
// permutations and before the result's.
// CHECK-LABEL: func.func @matmul_permuted
func.func @matmul_permuted(%gradT: tensor<6x4xf32>, %x: tensor<6x3xf32>, %q: tensor<2x5x3x16xf32>,
                           %k: tensor<2x5x3x16xf32>) {
  // CHECK-NEXT: slapo.matmul %{{.*}}, %{{.*}} {lhs_permutation = array<i64: 1, 0>} : (tensor<6x4xf32>, tensor<6x3xf32>) -> tensor<4x3xf32>
  // CHECK-NEXT: slapo.matmul %{{.*}}, %{{.*}} {lhs_permutation = array<i64: 0, 2, 1, 3>, result_permutation = array<i64: 0, 2, 1, 3>, rhs_permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x5x3x16xf32>, tensor<2x5x3x16xf32>) -> tensor<2x5x3x5xf32>
  %0 = slapo.matmul %gradT, %x {lhs_permutation = array<i64: 1, 0>} : (tensor<6x4xf32>, tensor<6x3xf32>) -> tensor<4x3xf32>
  %1 = slapo.matmul %q, %k {lhs_permutation = array<i64: 0, 2, 1, 3>, rhs_permutation = array<i64: 0, 2, 3, 1>, result_permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x5x3x16xf32>, tensor<2x5x3x16xf32>) -> tensor<2x5x3x5xf32>
  return
}
