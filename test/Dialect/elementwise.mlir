// RUN: slapo-opt %s | slapo-opt | FileCheck %s
// RUN: slapo-opt %s --mlir-print-op-generic | slapo-opt | FileCheck %s
// RUN: slapo-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Unary, binary, comparison, select, dropout and triangular ops.

// CHECK-LABEL: func.func @unary_float
func.func @unary_float(%x: tensor<4x8xf32>, %h: tensor<2xbf16>, %f: tensor<3xf16>, %d: tensor<f64>) {
  // CHECK-NEXT: slapo.exp %{{.*}} : tensor<4x8xf32>
  // CHECK-NEXT: slapo.log %{{.*}} : tensor<2xbf16>
  // CHECK-NEXT: slapo.sqrt %{{.*}} : tensor<3xf16>
  // CHECK-NEXT: slapo.rsqrt %{{.*}} : tensor<f64>
  // CHECK-NEXT: slapo.tanh %{{.*}} : tensor<4x8xf32>
  // CHECK-NEXT: slapo.sigmoid %{{.*}} : tensor<4x8xf32>
  // CHECK-NEXT: slapo.relu %{{.*}} : tensor<2xbf16>
  // CHECK-NEXT: slapo.silu %{{.*}} : tensor<3xf16>
  // CHECK-NEXT: slapo.sin %{{.*}} : tensor<4x8xf32>
  // CHECK-NEXT: slapo.cos %{{.*}} : tensor<4x8xf32>
  // CHECK-NEXT: slapo.neg %{{.*}} : tensor<4x8xf32>
  // CHECK-NEXT: slapo.abs %{{.*}} : tensor<f64>
  // GENERIC: "slapo.exp"(%{{.*}}) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %0 = slapo.exp %x : tensor<4x8xf32>
  %1 = slapo.log %h : tensor<2xbf16>
  %2 = slapo.sqrt %f : tensor<3xf16>
  %3 = slapo.rsqrt %d : tensor<f64>
  %4 = slapo.tanh %x : tensor<4x8xf32>
  %5 = slapo.sigmoid %x : tensor<4x8xf32>
  %6 = slapo.relu %h : tensor<2xbf16>
  %7 = slapo.silu %f : tensor<3xf16>
  %8 = slapo.sin %x : tensor<4x8xf32>
  %9 = slapo.cos %x : tensor<4x8xf32>
  %10 = slapo.neg %x : tensor<4x8xf32>
  %11 = slapo.abs %d : tensor<f64>
  return
}

// CHECK-LABEL: func.func @unary_int
func.func @unary_int(%i: tensor<4xi64>, %j: tensor<2x2xi8>) {
  // CHECK-NEXT: slapo.neg %{{.*}} : tensor<4xi64>
  // CHECK-NEXT: slapo.abs %{{.*}} : tensor<2x2xi8>
  %0 = slapo.neg %i : tensor<4xi64>
  %1 = slapo.abs %j : tensor<2x2xi8>
  return
}

// CHECK-LABEL: func.func @gelu
func.func @gelu(%x: tensor<4x8xf32>, %h: tensor<2xbf16>) {
  // CHECK-NEXT: slapo.gelu %{{.*}} <erf> : tensor<4x8xf32>
  // CHECK-NEXT: slapo.gelu %{{.*}} <tanh> : tensor<2xbf16>
  // GENERIC: "slapo.gelu"(%{{.*}}) {approximation = #slapo.gelu<erf>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %0 = slapo.gelu %x <erf> : tensor<4x8xf32>
  %1 = slapo.gelu %h <tanh> : tensor<2xbf16>
  // CHECK-NEXT: slapo.gelu_grad %{{.*}}, %{{.*}} <tanh> : tensor<4x8xf32>
  %2 = slapo.gelu_grad %x, %x <tanh> : tensor<4x8xf32>
  return
}

// CHECK-LABEL: func.func @cast
func.func @cast(%x: tensor<4x8xf32>, %m: tensor<2x2xi1>, %i: tensor<3xi64>) {
  // CHECK-NEXT: slapo.cast %{{.*}} : tensor<4x8xf32> -> tensor<4x8xbf16>
  // CHECK-NEXT: slapo.cast %{{.*}} : tensor<2x2xi1> -> tensor<2x2xf32>
  // CHECK-NEXT: slapo.cast %{{.*}} : tensor<3xi64> -> tensor<3xi32>
  // CHECK-NEXT: slapo.cast %{{.*}} : tensor<4x8xf32> -> tensor<4x8xf32>
  // GENERIC: "slapo.cast"(%{{.*}}) : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %0 = slapo.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
  %1 = slapo.cast %m : tensor<2x2xi1> -> tensor<2x2xf32>
  %2 = slapo.cast %i : tensor<3xi64> -> tensor<3xi32>
  %3 = slapo.cast %x : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// CHECK-LABEL: func.func @binary
func.func @binary(%a: tensor<4x8xf32>, %row: tensor<8xf32>, %col: tensor<4x1xf32>, %s: tensor<f32>,
                  %i: tensor<2x3xi64>, %b: tensor<2x3xi1>) {
  // CHECK-NEXT: slapo.add %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: slapo.sub %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: slapo.mul %{{.*}}, %{{.*}} : (tensor<4x1xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: slapo.div %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  // CHECK-NEXT: slapo.pow %{{.*}}, %{{.*}} : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  // CHECK-NEXT: slapo.maximum %{{.*}}, %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  // CHECK-NEXT: slapo.minimum %{{.*}}, %{{.*}} : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi64>
  // CHECK-NEXT: slapo.add %{{.*}}, %{{.*}} : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK-NEXT: slapo.mul %{{.*}}, %{{.*}} : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK-NEXT: slapo.sub %{{.*}}, %{{.*}} : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi64>
  // GENERIC: "slapo.add"(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %0 = slapo.add %a, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = slapo.sub %a, %row : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %2 = slapo.mul %col, %row : (tensor<4x1xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %3 = slapo.div %a, %s : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %4 = slapo.pow %s, %col : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %5 = slapo.maximum %s, %s : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %6 = slapo.minimum %i, %i : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi64>
  %7 = slapo.add %b, %b : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  %8 = slapo.mul %b, %b : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  %9 = slapo.sub %i, %i : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi64>
  return
}

// Broadcasting with size-0 dims follows PyTorch: 0 meets 1 or 0.
// CHECK-LABEL: func.func @broadcast_empty
func.func @broadcast_empty(%e: tensor<0x3xf32>, %r: tensor<1x3xf32>) -> tensor<0x3xf32> {
  // CHECK-NEXT: slapo.add %{{.*}}, %{{.*}} : (tensor<0x3xf32>, tensor<1x3xf32>) -> tensor<0x3xf32>
  %0 = slapo.add %e, %r : (tensor<0x3xf32>, tensor<1x3xf32>) -> tensor<0x3xf32>
  return %0 : tensor<0x3xf32>
}

// CHECK-LABEL: func.func @compare
func.func @compare(%a: tensor<4x8xf32>, %row: tensor<8xf32>, %i: tensor<3xi64>, %b: tensor<3xi1>) {
  // CHECK-NEXT: slapo.compare <eq> %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  // CHECK-NEXT: slapo.compare <ne> %{{.*}}, %{{.*}} : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
  // CHECK-NEXT: slapo.compare <lt> %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  // CHECK-NEXT: slapo.compare <le> %{{.*}}, %{{.*}} : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  // CHECK-NEXT: slapo.compare <gt> %{{.*}}, %{{.*}} : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
  // CHECK-NEXT: slapo.compare <ge> %{{.*}}, %{{.*}} : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
  // GENERIC: "slapo.compare"(%{{.*}}, %{{.*}}) {predicate = #slapo.cmp<eq>} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  %0 = slapo.compare <eq> %a, %row : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  %1 = slapo.compare <ne> %i, %i : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
  %2 = slapo.compare <lt> %a, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  %3 = slapo.compare <le> %row, %a : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  %4 = slapo.compare <gt> %b, %b : (tensor<3xi1>, tensor<3xi1>) -> tensor<3xi1>
  %5 = slapo.compare <ge> %i, %i : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
  return
}

// CHECK-LABEL: func.func @where
func.func @where(%mask: tensor<1x1x4x4xi1>, %x: tensor<2x3x4x4xf32>, %fill: tensor<f32>,
                 %c: tensor<3xi1>, %i: tensor<3xi64>) {
  // CHECK-NEXT: slapo.where %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1x1x4x4xi1>, tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  // CHECK-NEXT: slapo.where %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x4x4xf32>
  // CHECK-NEXT: slapo.where %{{.*}}, %{{.*}}, %{{.*}} : (tensor<3xi1>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  // GENERIC: "slapo.where"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<1x1x4x4xi1>, tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %0 = slapo.where %mask, %x, %fill : (tensor<1x1x4x4xi1>, tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
  %1 = slapo.where %mask, %fill, %fill : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<f32>) -> tensor<1x1x4x4xf32>
  %2 = slapo.where %c, %i, %i : (tensor<3xi1>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return
}

// CHECK-LABEL: func.func @dropout
func.func @dropout(%x: tensor<4x8xf32>, %h: tensor<2xbf16>, %step: tensor<i64>) {
  // CHECK-NEXT: slapo.dropout %{{.*}} {p = 1.000000e-01 : f64, stream = 0 : i64} : tensor<4x8xf32>
  // CHECK-NEXT: slapo.dropout %{{.*}} {p = 9.900000e-02 : f64, stream = 1 : i64} : tensor<2xbf16>
  // CHECK-NEXT: slapo.dropout %{{.*}} step %{{.*}} {fork_rng, p = 1.000000e-01 : f64, shard_axis = 1 : i64, shard_chunks = 2 : i64, stream = 0 : i64} : tensor<4x8xf32>
  // GENERIC: "slapo.dropout"(%{{.*}}) {p = 1.000000e-01 : f64, stream = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // GENERIC: "slapo.dropout"(%{{.*}}, %{{.*}}) {fork_rng, p = 1.000000e-01 : f64, shard_axis = 1 : i64, shard_chunks = 2 : i64, stream = 0 : i64} : (tensor<4x8xf32>, tensor<i64>) -> tensor<4x8xf32>
  %0 = slapo.dropout %x {p = 0.1, stream = 0} : tensor<4x8xf32>
  %1 = slapo.dropout %h {p = 0.099, stream = 1} : tensor<2xbf16>
  %2 = slapo.dropout %x step %step {p = 0.1, stream = 0, fork_rng, shard_axis = 1, shard_chunks = 2} : tensor<4x8xf32>
  return
}

// CHECK-LABEL: func.func @triangular
func.func @triangular(%x: tensor<16x16xi1>, %y: tensor<2x4x8xf32>) {
  // CHECK-NEXT: slapo.triangular %{{.*}} {diagonal = 0 : i64, lower = true} : tensor<16x16xi1>
  // CHECK-NEXT: slapo.triangular %{{.*}} {diagonal = 1 : i64, lower = false} : tensor<2x4x8xf32>
  // CHECK-NEXT: slapo.triangular %{{.*}} {diagonal = -3 : i64, lower = true} : tensor<2x4x8xf32>
  // GENERIC: "slapo.triangular"(%{{.*}}) {diagonal = 0 : i64, lower = true} : (tensor<16x16xi1>) -> tensor<16x16xi1>
  %0 = slapo.triangular %x {lower = true, diagonal = 0} : tensor<16x16xi1>
  %1 = slapo.triangular %y {lower = false, diagonal = 1} : tensor<2x4x8xf32>
  %2 = slapo.triangular %y {lower = true, diagonal = -3} : tensor<2x4x8xf32>
  return
}
