// RUN: slapo-opt %s | slapo-opt | FileCheck %s
// RUN: slapo-opt %s --mlir-print-op-generic | slapo-opt | FileCheck %s
// RUN: slapo-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// reshape, permute, slice, concat and broadcast.

// CHECK-LABEL: func.func @reshape
func.func @reshape(%x: tensor<2x3x4xf32>, %s: tensor<f32>, %e: tensor<0x5xi64>) {
  // CHECK-NEXT: slapo.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<6x4xf32>
  // CHECK-NEXT: slapo.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<24xf32>
  // CHECK-NEXT: slapo.reshape %{{.*}} : tensor<f32> -> tensor<1x1xf32>
  // CHECK-NEXT: slapo.reshape %{{.*}} : tensor<0x5xi64> -> tensor<5x0xi64>
  // GENERIC: "slapo.reshape"(%{{.*}}) : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %0 = slapo.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = slapo.reshape %x : tensor<2x3x4xf32> -> tensor<24xf32>
  %2 = slapo.reshape %s : tensor<f32> -> tensor<1x1xf32>
  %3 = slapo.reshape %e : tensor<0x5xi64> -> tensor<5x0xi64>
  return
}

// CHECK-LABEL: func.func @permute
func.func @permute(%x: tensor<2x3x4xf32>, %s: tensor<i1>) {
  // CHECK-NEXT: slapo.permute %{{.*}} {permutation = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  // CHECK-NEXT: slapo.permute %{{.*}} {permutation = array<i64: 0, 1, 2>} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  // CHECK-NEXT: slapo.permute %{{.*}} {permutation = array<i64>} : tensor<i1> -> tensor<i1>
  // GENERIC: "slapo.permute"(%{{.*}}) {permutation = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %0 = slapo.permute %x {permutation = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %1 = slapo.permute %x {permutation = array<i64: 0, 1, 2>} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %2 = slapo.permute %s {permutation = array<i64>} : tensor<i1> -> tensor<i1>
  return
}

// CHECK-LABEL: func.func @slice
func.func @slice(%x: tensor<4x10xf32>) {
  // CHECK-NEXT: slapo.slice %{{.*}} {dim = 1 : i64, end = 10 : i64, start = 0 : i64, step = 1 : i64} : tensor<4x10xf32> -> tensor<4x10xf32>
  // CHECK-NEXT: slapo.slice %{{.*}} {dim = 1 : i64, end = 6 : i64, start = 1 : i64, step = 2 : i64} : tensor<4x10xf32> -> tensor<4x3xf32>
  // CHECK-NEXT: slapo.slice %{{.*}} {dim = 0 : i64, end = 4 : i64, start = 3 : i64, step = 1 : i64} : tensor<4x10xf32> -> tensor<1x10xf32>
  // CHECK-NEXT: slapo.slice %{{.*}} {dim = 1 : i64, end = 5 : i64, start = 5 : i64, step = 1 : i64} : tensor<4x10xf32> -> tensor<4x0xf32>
  // CHECK-NEXT: slapo.slice %{{.*}} {dim = 1 : i64, end = 10 : i64, start = 0 : i64, step = 9223372036854775807 : i64} : tensor<4x10xf32> -> tensor<4x1xf32>
  // GENERIC: "slapo.slice"(%{{.*}}) {dim = 1 : i64, end = 10 : i64, start = 0 : i64, step = 1 : i64} : (tensor<4x10xf32>) -> tensor<4x10xf32>
  %0 = slapo.slice %x {dim = 1, start = 0, end = 10, step = 1} : tensor<4x10xf32> -> tensor<4x10xf32>
  %1 = slapo.slice %x {dim = 1, start = 1, end = 6, step = 2} : tensor<4x10xf32> -> tensor<4x3xf32>
  %2 = slapo.slice %x {dim = 0, start = 3, end = 4, step = 1} : tensor<4x10xf32> -> tensor<1x10xf32>
  %3 = slapo.slice %x {dim = 1, start = 5, end = 5, step = 1} : tensor<4x10xf32> -> tensor<4x0xf32>
  %4 = slapo.slice %x {dim = 1, start = 0, end = 10, step = 9223372036854775807} : tensor<4x10xf32> -> tensor<4x1xf32>
  return
}

// CHECK-LABEL: func.func @concat
func.func @concat(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>, %c: tensor<4x3xf32>, %i: tensor<7xi64>) {
  // CHECK-NEXT: slapo.concat %{{.*}}, %{{.*}} {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  // CHECK-NEXT: slapo.concat %{{.*}}, %{{.*}}, %{{.*}} {dim = 0 : i64} : (tensor<2x3xf32>, tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<8x3xf32>
  // CHECK-NEXT: slapo.concat %{{.*}} {dim = 0 : i64} : (tensor<7xi64>) -> tensor<7xi64>
  // GENERIC: "slapo.concat"(%{{.*}}, %{{.*}}) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  %0 = slapo.concat %a, %b {dim = 1} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  %1 = slapo.concat %a, %c, %a {dim = 0} : (tensor<2x3xf32>, tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<8x3xf32>
  %2 = slapo.concat %i {dim = 0} : (tensor<7xi64>) -> tensor<7xi64>
  return
}

// CHECK-LABEL: func.func @broadcast
func.func @broadcast(%row: tensor<3xf32>, %col: tensor<4x1xf32>, %m: tensor<2x1x3xi1>, %s: tensor<f32>) {
  // CHECK-NEXT: slapo.broadcast %{{.*}} : tensor<3xf32> -> tensor<2x3xf32>
  // CHECK-NEXT: slapo.broadcast %{{.*}} : tensor<4x1xf32> -> tensor<4x3xf32>
  // CHECK-NEXT: slapo.broadcast %{{.*}} : tensor<2x1x3xi1> -> tensor<6x2x5x3xi1>
  // CHECK-NEXT: slapo.broadcast %{{.*}} : tensor<f32> -> tensor<2x2xf32>
  // CHECK-NEXT: slapo.broadcast %{{.*}} : tensor<3xf32> -> tensor<3xf32>
  // CHECK-NEXT: slapo.broadcast %{{.*}} : tensor<4x1xf32> -> tensor<4x0xf32>
  // GENERIC: "slapo.broadcast"(%{{.*}}) : (tensor<3xf32>) -> tensor<2x3xf32>
  %0 = slapo.broadcast %row : tensor<3xf32> -> tensor<2x3xf32>
  %1 = slapo.broadcast %col : tensor<4x1xf32> -> tensor<4x3xf32>
  %2 = slapo.broadcast %m : tensor<2x1x3xi1> -> tensor<6x2x5x3xi1>
  %3 = slapo.broadcast %s : tensor<f32> -> tensor<2x2xf32>
  %4 = slapo.broadcast %row : tensor<3xf32> -> tensor<3xf32>
  %5 = slapo.broadcast %col : tensor<4x1xf32> -> tensor<4x0xf32>
  return
}
