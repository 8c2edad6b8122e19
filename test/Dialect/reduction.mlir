// RUN: slapo-opt %s | slapo-opt | FileCheck %s
// RUN: slapo-opt %s --mlir-print-op-generic | slapo-opt | FileCheck %s
// RUN: slapo-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// sum, mean and max over dims, with and without keepdim; running sums.

// CHECK-LABEL: func.func @sum
func.func @sum(%x: tensor<2x3x4xf32>, %i: tensor<5x6xi64>, %s: tensor<f32>) {
  // CHECK-NEXT: slapo.sum %{{.*}} {dims = array<i64: 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<2x3xf32>
  // CHECK-NEXT: slapo.sum %{{.*}} {dims = array<i64: 2, 0>, keepdim = true} : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
  // CHECK-NEXT: slapo.sum %{{.*}} {dims = array<i64: 0, 1, 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<f32>
  // CHECK-NEXT: slapo.sum %{{.*}} {dims = array<i64: 1>, keepdim = false} : tensor<5x6xi64> -> tensor<5xi64>
  // CHECK-NEXT: slapo.sum %{{.*}} {dims = array<i64>, keepdim = false} : tensor<f32> -> tensor<f32>
  // GENERIC: "slapo.sum"(%{{.*}}) {dims = array<i64: 2>, keepdim = false} : (tensor<2x3x4xf32>) -> tensor<2x3xf32>
  %0 = slapo.sum %x {dims = array<i64: 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<2x3xf32>
  %1 = slapo.sum %x {dims = array<i64: 2, 0>, keepdim = true} : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
  %2 = slapo.sum %x {dims = array<i64: 0, 1, 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<f32>
  %3 = slapo.sum %i {dims = array<i64: 1>, keepdim = false} : tensor<5x6xi64> -> tensor<5xi64>
  %4 = slapo.sum %s {dims = array<i64>, keepdim = false} : tensor<f32> -> tensor<f32>
  return
}

// CHECK-LABEL: func.func @mean
func.func @mean(%x: tensor<2x3x4xbf16>) {
  // CHECK-NEXT: slapo.mean %{{.*}} {dims = array<i64: 1>, keepdim = true} : tensor<2x3x4xbf16> -> tensor<2x1x4xbf16>
  // CHECK-NEXT: slapo.mean %{{.*}} {dims = array<i64: 0, 2>, keepdim = false} : tensor<2x3x4xbf16> -> tensor<3xbf16>
  %0 = slapo.mean %x {dims = array<i64: 1>, keepdim = true} : tensor<2x3x4xbf16> -> tensor<2x1x4xbf16>
  %1 = slapo.mean %x {dims = array<i64: 0, 2>, keepdim = false} : tensor<2x3x4xbf16> -> tensor<3xbf16>
  return
}

// CHECK-LABEL: func.func @max
func.func @max(%x: tensor<2x3xf32>, %b: tensor<4x4xi1>, %i: tensor<7xi32>) {
  // CHECK-NEXT: slapo.max %{{.*}} {dims = array<i64: 1>, keepdim = true} : tensor<2x3xf32> -> tensor<2x1xf32>
  // CHECK-NEXT: slapo.max %{{.*}} {dims = array<i64: 0, 1>, keepdim = true} : tensor<4x4xi1> -> tensor<1x1xi1>
  // CHECK-NEXT: slapo.max %{{.*}} {dims = array<i64: 0>, keepdim = false} : tensor<7xi32> -> tensor<i32>
  %0 = slapo.max %x {dims = array<i64: 1>, keepdim = true} : tensor<2x3xf32> -> tensor<2x1xf32>
  %1 = slapo.max %b {dims = array<i64: 0, 1>, keepdim = true} : tensor<4x4xi1> -> tensor<1x1xi1>
  %2 = slapo.max %i {dims = array<i64: 0>, keepdim = false} : tensor<7xi32> -> tensor<i32>
  return
}

// CHECK-LABEL: func.func @cumsum
func.func @cumsum(%x: tensor<2x3xf32>, %i: tensor<2x16xi64>) {
  // CHECK-NEXT: slapo.cumsum %{{.*}} {dim = 1 : i64} : tensor<2x3xf32>
  // CHECK-NEXT: slapo.cumsum %{{.*}} {dim = 0 : i64, reverse} : tensor<2x3xf32>
  // CHECK-NEXT: slapo.cumsum %{{.*}} {dim = 1 : i64} : tensor<2x16xi64>
  // GENERIC: "slapo.cumsum"(%{{.*}}) {dim = 0 : i64, reverse} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %0 = slapo.cumsum %x {dim = 1 : i64} : tensor<2x3xf32>
  %1 = slapo.cumsum %x {dim = 0 : i64, reverse} : tensor<2x3xf32>
  %2 = slapo.cumsum %i {dim = 1 : i64} : tensor<2x16xi64>
  return
}
