// RUN: slapo-opt --slapo-fold-logits-slice --split-input-file %s | FileCheck %s

// A causal LM's shifted loss: logits[:, :-1] against labels[:, 1:]. The loss
// reads all the logits; the last position's label of each sequence is the
// ignore_index, joined after the shifted labels.
// CHECK-LABEL: func.func @shifted
// CHECK-NOT: slapo.slice %arg0
// CHECK: %[[L:.*]] = slapo.slice %arg1 {dim = 1 : i64, end = 4 : i64, start = 1 : i64, step = 1 : i64}
// CHECK: %[[T:.*]] = slapo.reshape %[[L]] : tensor<2x3xi64> -> tensor<6xi64>
// CHECK: %[[KEPT:.*]] = slapo.reshape %[[T]] : tensor<6xi64> -> tensor<2x3xi64>
// CHECK: %[[IGNORED:.*]] = slapo.constant dense<-100> : tensor<2x1xi64>
// CHECK: %[[PADDED:.*]] = slapo.concat %[[KEPT]], %[[IGNORED]] {dim = 1 : i64} : (tensor<2x3xi64>, tensor<2x1xi64>) -> tensor<2x4xi64>
// CHECK: %[[ROWS:.*]] = slapo.reshape %arg0 : tensor<2x4x16xf32> -> tensor<8x16xf32>
// CHECK: %[[TARGETS:.*]] = slapo.reshape %[[PADDED]] : tensor<2x4xi64> -> tensor<8xi64>
// CHECK: %[[LOSS:.*]] = slapo.cross_entropy %[[ROWS]], %[[TARGETS]] {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<8x16xf32>, tensor<8xi64>) -> tensor<f32>
// CHECK-NEXT: return %[[LOSS]]
func.func @shifted(%logits: tensor<2x4x16xf32>, %labels: tensor<2x4xi64>) -> tensor<f32> {
  %shift = slapo.slice %logits {dim = 1 : i64, end = 3 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x4x16xf32> -> tensor<2x3x16xf32>
  %rows = slapo.reshape %shift : tensor<2x3x16xf32> -> tensor<6x16xf32>
  %l = slapo.slice %labels {dim = 1 : i64, end = 4 : i64, start = 1 : i64, step = 1 : i64} : tensor<2x4xi64> -> tensor<2x3xi64>
  %t = slapo.reshape %l : tensor<2x3xi64> -> tensor<6xi64>
  %loss = slapo.cross_entropy %rows, %t {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<6x16xf32>, tensor<6xi64>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Rows dropped on both sides and every other one kept (step 2), i32 targets,
// a sum: the ignore_index before, between and after the kept targets.
// CHECK-LABEL: func.func @strided_rows
// CHECK-NOT: slapo.slice
// CHECK: %[[GAPS:.*]] = slapo.constant dense<-1> : tensor<2x1xi32>
// CHECK: %[[SPREAD:.*]] = slapo.concat %{{.*}}, %[[GAPS]] {dim = 1 : i64} : (tensor<2x1xi32>, tensor<2x1xi32>) -> tensor<2x2xi32>
// CHECK: %[[BEFORE:.*]] = slapo.constant dense<-1> : tensor<1xi32>
// CHECK: %[[AFTER:.*]] = slapo.constant dense<-1> : tensor<4xi32>
// CHECK: %[[PADDED:.*]] = slapo.concat %[[BEFORE]], %{{.*}}, %[[AFTER]] {dim = 0 : i64} : (tensor<1xi32>, tensor<4xi32>, tensor<4xi32>) -> tensor<9xi32>
// CHECK: slapo.cross_entropy %arg0, %{{.*}} {ignore_index = -1 : i64, reduction = #slapo.reduction<sum>} : (tensor<9x16xf32>, tensor<9xi32>) -> tensor<f32>
func.func @strided_rows(%logits: tensor<9x16xf32>, %t: tensor<2xi32>) -> tensor<f32> {
  %kept = slapo.slice %logits {dim = 0 : i64, end = 4 : i64, start = 1 : i64, step = 2 : i64} : tensor<9x16xf32> -> tensor<2x16xf32>
  %loss = slapo.cross_entropy %kept, %t {ignore_index = -1 : i64, reduction = #slapo.reduction<sum>} : (tensor<2x16xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Left alone: a loss per row (reduction none: its result has the slice's
// rows), a slice of the classes, a slice read elsewhere too, a reshape that
// regroups the classes, an ignore_index the i32 targets cannot hold, one
// that names a class (its rows' gradient is not zeros by the kernel's rule).
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-6: slapo.slice %arg0
// CHECK-NOT: slapo.concat
func.func @kept(%logits: tensor<2x4x16xf32>, %t6: tensor<6xi64>, %t8: tensor<8xi64>, %t6i32: tensor<6xi32>) -> (tensor<6xf32>, tensor<f32>, tensor<f32>, tensor<2x3x16xf32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %shift = slapo.slice %logits {dim = 1 : i64, end = 3 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x4x16xf32> -> tensor<2x3x16xf32>
  %rows = slapo.reshape %shift : tensor<2x3x16xf32> -> tensor<6x16xf32>
  %each = slapo.cross_entropy %rows, %t6 {ignore_index = -100 : i64, reduction = #slapo.reduction<none>} : (tensor<6x16xf32>, tensor<6xi64>) -> tensor<6xf32>

  %classes = slapo.slice %logits {dim = 2 : i64, end = 8 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x4x16xf32> -> tensor<2x4x8xf32>
  %rows8 = slapo.reshape %classes : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %byClasses = slapo.cross_entropy %rows8, %t8 {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<8x8xf32>, tensor<8xi64>) -> tensor<f32>

  %shared = slapo.slice %logits {dim = 1 : i64, end = 3 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x4x16xf32> -> tensor<2x3x16xf32>
  %sharedRows = slapo.reshape %shared : tensor<2x3x16xf32> -> tensor<6x16xf32>
  %readElsewhere = slapo.cross_entropy %sharedRows, %t6 {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<6x16xf32>, tensor<6xi64>) -> tensor<f32>

  %regroup = slapo.slice %logits {dim = 0 : i64, end = 1 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x4x16xf32> -> tensor<1x4x16xf32>
  %halves = slapo.reshape %regroup : tensor<1x4x16xf32> -> tensor<8x8xf32>
  %regrouped = slapo.cross_entropy %halves, %t8 {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<8x8xf32>, tensor<8xi64>) -> tensor<f32>

  %narrow = slapo.slice %logits {dim = 1 : i64, end = 3 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x4x16xf32> -> tensor<2x3x16xf32>
  %narrowRows = slapo.reshape %narrow : tensor<2x3x16xf32> -> tensor<6x16xf32>
  %wideIgnore = slapo.cross_entropy %narrowRows, %t6i32 {ignore_index = 4294967296 : i64, reduction = #slapo.reduction<mean>} : (tensor<6x16xf32>, tensor<6xi32>) -> tensor<f32>

  %named = slapo.slice %logits {dim = 1 : i64, end = 3 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x4x16xf32> -> tensor<2x3x16xf32>
  %namedRows = slapo.reshape %named : tensor<2x3x16xf32> -> tensor<6x16xf32>
  %ignoreAClass = slapo.cross_entropy %namedRows, %t6 {ignore_index = 15 : i64, reduction = #slapo.reduction<mean>} : (tensor<6x16xf32>, tensor<6xi64>) -> tensor<f32>
  return %each, %byClasses, %readElsewhere, %shared, %regrouped, %wideIgnore, %ignoreAClass : tensor<6xf32>, tensor<f32>, tensor<f32>, tensor<2x3x16xf32>, tensor<f32>, tensor<f32>, tensor<f32>
}
