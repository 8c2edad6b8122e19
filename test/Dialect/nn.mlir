// RUN: slapo-opt %s | slapo-opt | FileCheck %s
// RUN: slapo-opt %s --mlir-print-op-generic | slapo-opt | FileCheck %s
// RUN: slapo-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// embedding, layer_norm, softmax, log_softmax and cross_entropy.

// CHECK-LABEL: func.func @embedding
func.func @embedding(%w: tensor<100x32xf32>, %ids: tensor<2x5xi64>, %ids32: tensor<7xi32>,
                     %one: tensor<i64>, %h: tensor<10x4xbf16>) {
  // CHECK-NEXT: slapo.embedding %{{.*}}, %{{.*}} : (tensor<100x32xf32>, tensor<2x5xi64>) -> tensor<2x5x32xf32>
  // CHECK-NEXT: slapo.embedding %{{.*}}, %{{.*}} {padding_idx = 0 : i64} : (tensor<100x32xf32>, tensor<7xi32>) -> tensor<7x32xf32>
  // CHECK-NEXT: slapo.embedding %{{.*}}, %{{.*}} {padding_idx = 99 : i64} : (tensor<100x32xf32>, tensor<i64>) -> tensor<32xf32>
  // CHECK-NEXT: slapo.embedding %{{.*}}, %{{.*}} : (tensor<10x4xbf16>, tensor<2x5xi64>) -> tensor<2x5x4xbf16>
  // GENERIC: "slapo.embedding"(%{{.*}}, %{{.*}}) {padding_idx = 0 : i64} : (tensor<100x32xf32>, tensor<7xi32>) -> tensor<7x32xf32>
  %0 = slapo.embedding %w, %ids : (tensor<100x32xf32>, tensor<2x5xi64>) -> tensor<2x5x32xf32>
  %1 = slapo.embedding %w, %ids32 {padding_idx = 0} : (tensor<100x32xf32>, tensor<7xi32>) -> tensor<7x32xf32>
  %2 = slapo.embedding %w, %one {padding_idx = 99} : (tensor<100x32xf32>, tensor<i64>) -> tensor<32xf32>
  %3 = slapo.embedding %h, %ids : (tensor<10x4xbf16>, tensor<2x5xi64>) -> tensor<2x5x4xbf16>
  return
}

// CHECK-LABEL: func.func @layer_norm
func.func @layer_norm(%x: tensor<2x5x32xf32>, %g: tensor<32xf32>, %b: tensor<32xf32>, %g2: tensor<5x32xf32>) {
  // CHECK-NEXT: slapo.layer_norm %{{.*}} weight %{{.*}} bias %{{.*}} {eps = 1.000000e-05 : f64, normalized_rank = 1 : i64} : (tensor<2x5x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x5x32xf32>
  // CHECK-NEXT: slapo.layer_norm %{{.*}} {eps = 9.9999999999999995E-7 : f64, normalized_rank = 3 : i64} : (tensor<2x5x32xf32>) -> tensor<2x5x32xf32>
  // CHECK-NEXT: slapo.layer_norm %{{.*}} weight %{{.*}} {eps = 1.000000e-05 : f64, normalized_rank = 2 : i64} : (tensor<2x5x32xf32>, tensor<5x32xf32>) -> tensor<2x5x32xf32>
  // CHECK-NEXT: slapo.layer_norm %{{.*}} bias %{{.*}} {eps = 1.000000e-05 : f64, normalized_rank = 1 : i64} : (tensor<2x5x32xf32>, tensor<32xf32>) -> tensor<2x5x32xf32>
  // GENERIC: "slapo.layer_norm"(%{{.*}}, %{{.*}}, %{{.*}}) {eps = 1.000000e-05 : f64, normalized_rank = 1 : i64, operand_segment_sizes = array<i32: 1, 1, 1>}
  // GENERIC: "slapo.layer_norm"(%{{.*}}) {eps = 9.9999999999999995E-7 : f64, normalized_rank = 3 : i64, operand_segment_sizes = array<i32: 1, 0, 0>}
  // GENERIC: "slapo.layer_norm"(%{{.*}}, %{{.*}}) {eps = 1.000000e-05 : f64, normalized_rank = 2 : i64, operand_segment_sizes = array<i32: 1, 1, 0>}
  // GENERIC: "slapo.layer_norm"(%{{.*}}, %{{.*}}) {eps = 1.000000e-05 : f64, normalized_rank = 1 : i64, operand_segment_sizes = array<i32: 1, 0, 1>}
  %0 = slapo.layer_norm %x weight %g bias %b {normalized_rank = 1, eps = 1.0e-5} : (tensor<2x5x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x5x32xf32>
  %1 = slapo.layer_norm %x {normalized_rank = 3, eps = 1.0e-6} : (tensor<2x5x32xf32>) -> tensor<2x5x32xf32>
  %2 = slapo.layer_norm %x weight %g2 {normalized_rank = 2, eps = 1.0e-5} : (tensor<2x5x32xf32>, tensor<5x32xf32>) -> tensor<2x5x32xf32>
  %3 = slapo.layer_norm %x bias %b {normalized_rank = 1, eps = 1.0e-5} : (tensor<2x5x32xf32>, tensor<32xf32>) -> tensor<2x5x32xf32>
  return
}

// CHECK-LABEL: func.func @layer_norm_grad
func.func @layer_norm_grad(%dy: tensor<2x5x32xf32>, %x: tensor<2x5x32xf32>, %g: tensor<5x32xf32>) {
  // CHECK-NEXT: slapo.layer_norm_grad %{{.*}}, %{{.*}} weight %{{.*}} {eps = 1.000000e-05 : f64, normalized_rank = 2 : i64} : (tensor<2x5x32xf32>, tensor<2x5x32xf32>, tensor<5x32xf32>) -> (tensor<2x5x32xf32>, tensor<5x32xf32>, tensor<5x32xf32>)
  // CHECK-NEXT: slapo.layer_norm_grad %{{.*}}, %{{.*}} {eps = 1.000000e-05 : f64, normalized_rank = 1 : i64} : (tensor<2x5x32xf32>, tensor<2x5x32xf32>) -> (tensor<2x5x32xf32>, tensor<32xf32>, tensor<32xf32>)
  %0:3 = slapo.layer_norm_grad %dy, %x weight %g {normalized_rank = 2, eps = 1.0e-5} : (tensor<2x5x32xf32>, tensor<2x5x32xf32>, tensor<5x32xf32>) -> (tensor<2x5x32xf32>, tensor<5x32xf32>, tensor<5x32xf32>)
  // CHECK-NEXT: slapo.layer_norm_grad %{{.*}}, %{{.*}} weight %{{.*}} addend %{{.*}} {eps = 1.000000e-05 : f64, normalized_rank = 2 : i64} : (tensor<2x5x32xf32>, tensor<2x5x32xf32>, tensor<5x32xf32>, tensor<2x5x32xf32>) -> (tensor<2x5x32xf32>, tensor<5x32xf32>, tensor<5x32xf32>)
  // CHECK-NEXT: slapo.layer_norm_grad %{{.*}}, %{{.*}} addend %{{.*}} {eps = 1.000000e-05 : f64, normalized_rank = 1 : i64} : (tensor<2x5x32xf32>, tensor<2x5x32xf32>, tensor<2x5x32xf32>) -> (tensor<2x5x32xf32>, tensor<32xf32>, tensor<32xf32>)
  %1:3 = slapo.layer_norm_grad %dy, %x {normalized_rank = 1, eps = 1.0e-5} : (tensor<2x5x32xf32>, tensor<2x5x32xf32>) -> (tensor<2x5x32xf32>, tensor<32xf32>, tensor<32xf32>)
  %2:3 = slapo.layer_norm_grad %dy, %x weight %g addend %dy {normalized_rank = 2, eps = 1.0e-5} : (tensor<2x5x32xf32>, tensor<2x5x32xf32>, tensor<5x32xf32>, tensor<2x5x32xf32>) -> (tensor<2x5x32xf32>, tensor<5x32xf32>, tensor<5x32xf32>)
  %3:3 = slapo.layer_norm_grad %dy, %x addend %dy {normalized_rank = 1, eps = 1.0e-5} : (tensor<2x5x32xf32>, tensor<2x5x32xf32>, tensor<2x5x32xf32>) -> (tensor<2x5x32xf32>, tensor<32xf32>, tensor<32xf32>)
  return
}

// CHECK-LABEL: func.func @rms_norm_grad
func.func @rms_norm_grad(%dy: tensor<2x5x32xf32>, %x: tensor<2x5x32xf32>, %g: tensor<32xf32>) {
  // CHECK-NEXT: slapo.rms_norm_grad %{{.*}}, %{{.*}} weight %{{.*}} {eps = 1.000000e-05 : f64} : (tensor<2x5x32xf32>, tensor<2x5x32xf32>, tensor<32xf32>) -> (tensor<2x5x32xf32>, tensor<32xf32>)
  // CHECK-NEXT: slapo.rms_norm_grad %{{.*}}, %{{.*}} {eps = 0.000000e+00 : f64} : (tensor<2x5x32xf32>, tensor<2x5x32xf32>) -> (tensor<2x5x32xf32>, tensor<32xf32>)
  %0:2 = slapo.rms_norm_grad %dy, %x weight %g {eps = 1.0e-5} : (tensor<2x5x32xf32>, tensor<2x5x32xf32>, tensor<32xf32>) -> (tensor<2x5x32xf32>, tensor<32xf32>)
  // CHECK-NEXT: slapo.rms_norm_grad %{{.*}}, %{{.*}} weight %{{.*}} addend %{{.*}} {eps = 1.000000e-05 : f64} : (tensor<2x5x32xf32>, tensor<2x5x32xf32>, tensor<32xf32>, tensor<2x5x32xf32>) -> (tensor<2x5x32xf32>, tensor<32xf32>)
  %1:2 = slapo.rms_norm_grad %dy, %x {eps = 0.0} : (tensor<2x5x32xf32>, tensor<2x5x32xf32>) -> (tensor<2x5x32xf32>, tensor<32xf32>)
  %2:2 = slapo.rms_norm_grad %dy, %x weight %g addend %dy {eps = 1.0e-5} : (tensor<2x5x32xf32>, tensor<2x5x32xf32>, tensor<32xf32>, tensor<2x5x32xf32>) -> (tensor<2x5x32xf32>, tensor<32xf32>)
  return
}

// CHECK-LABEL: func.func @softmax
func.func @softmax(%x: tensor<2x4x16x16xf32>, %h: tensor<8xbf16>) {
  // CHECK-NEXT: slapo.softmax %{{.*}} {dim = 3 : i64} : tensor<2x4x16x16xf32>
  // CHECK-NEXT: slapo.softmax %{{.*}} {dim = 0 : i64} : tensor<8xbf16>
  // CHECK-NEXT: slapo.log_softmax %{{.*}} {dim = 1 : i64} : tensor<2x4x16x16xf32>
  // CHECK-NEXT: slapo.log_softmax %{{.*}} {dim = 0 : i64} : tensor<8xbf16>
  // GENERIC: "slapo.softmax"(%{{.*}}) {dim = 3 : i64} : (tensor<2x4x16x16xf32>) -> tensor<2x4x16x16xf32>
  %0 = slapo.softmax %x {dim = 3} : tensor<2x4x16x16xf32>
  %1 = slapo.softmax %h {dim = 0} : tensor<8xbf16>
  %2 = slapo.log_softmax %x {dim = 1} : tensor<2x4x16x16xf32>
  %3 = slapo.log_softmax %h {dim = 0} : tensor<8xbf16>
  return
}

// CHECK-LABEL: func.func @cross_entropy
func.func @cross_entropy(%logits: tensor<10x50xf32>, %target: tensor<10xi64>, %t32: tensor<10xi32>) {
  // CHECK-NEXT: slapo.cross_entropy %{{.*}}, %{{.*}} {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<10x50xf32>, tensor<10xi64>) -> tensor<f32>
  // CHECK-NEXT: slapo.cross_entropy %{{.*}}, %{{.*}} {ignore_index = 0 : i64, reduction = #slapo.reduction<sum>} : (tensor<10x50xf32>, tensor<10xi32>) -> tensor<f32>
  // CHECK-NEXT: slapo.cross_entropy %{{.*}}, %{{.*}} {ignore_index = -100 : i64, reduction = #slapo.reduction<none>} : (tensor<10x50xf32>, tensor<10xi64>) -> tensor<10xf32>
  // GENERIC: "slapo.cross_entropy"(%{{.*}}, %{{.*}}) {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<10x50xf32>, tensor<10xi64>) -> tensor<f32>
  %0 = slapo.cross_entropy %logits, %target {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<10x50xf32>, tensor<10xi64>) -> tensor<f32>
  %1 = slapo.cross_entropy %logits, %t32 {ignore_index = 0, reduction = #slapo.reduction<sum>} : (tensor<10x50xf32>, tensor<10xi32>) -> tensor<f32>
  %2 = slapo.cross_entropy %logits, %target {ignore_index = -100, reduction = #slapo.reduction<none>} : (tensor<10x50xf32>, tensor<10xi64>) -> tensor<10xf32>
  return
}

// CHECK-LABEL: func.func @cross_entropy_grad
func.func @cross_entropy_grad(%logits: tensor<10x50xf32>, %target: tensor<10xi32>, %w: tensor<10xf32>) {
  // CHECK-NEXT: slapo.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<10x50xf32>, tensor<10xi32>, tensor<10xf32>) -> tensor<10x50xf32>
  %0 = slapo.cross_entropy_grad %logits, %target, %w : (tensor<10x50xf32>, tensor<10xi32>, tensor<10xf32>) -> tensor<10x50xf32>
  return
}

// conv2d (with and without bias), its two gradients, max_pool2d and its
// gradient.

// CHECK-LABEL: func.func @convolution
func.func @convolution(%x: tensor<2x4x8x8xf32>, %w: tensor<6x2x3x3xf32>, %b: tensor<6xf32>,
                       %g: tensor<2x6x4x4xf32>) {
  // CHECK-NEXT: slapo.conv2d %{{.*}}, %{{.*}}, %{{.*}} {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<2x6x4x4xf32>
  // CHECK-NEXT: slapo.conv2d %{{.*}}, %{{.*}} {dilation = array<i64: 2, 2>, groups = 2 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<2x6x4x4xf32>
  // CHECK-NEXT: slapo.conv2d_grad_input %{{.*}}, %{{.*}} {{.*}} : (tensor<2x6x4x4xf32>, tensor<6x2x3x3xf32>) -> tensor<2x4x8x8xf32>
  // CHECK-NEXT: slapo.conv2d_grad_weight %{{.*}}, %{{.*}} {{.*}} : (tensor<2x6x4x4xf32>, tensor<2x4x8x8xf32>) -> tensor<6x2x3x3xf32>
  // GENERIC: "slapo.conv2d"(%{{.*}}, %{{.*}}, %{{.*}}) {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>}
  %0 = slapo.conv2d %x, %w, %b {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2} : (tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<2x6x4x4xf32>
  %1 = slapo.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 2, 2>, groups = 2} : (tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<2x6x4x4xf32>
  %2 = slapo.conv2d_grad_input %g, %w {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2} : (tensor<2x6x4x4xf32>, tensor<6x2x3x3xf32>) -> tensor<2x4x8x8xf32>
  %3 = slapo.conv2d_grad_weight %g, %x {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2} : (tensor<2x6x4x4xf32>, tensor<2x4x8x8xf32>) -> tensor<6x2x3x3xf32>
  return
}

// CHECK-LABEL: func.func @pooling
func.func @pooling(%x: tensor<2x3x5x5xf32>, %g: tensor<2x3x2x2xf32>, %h: tensor<2x3x3x3xf32>) {
  // Floor and ceil_mode output sizes.
  // CHECK-NEXT: slapo.max_pool2d %{{.*}} {dilation = array<i64: 1, 1>, kernel_size = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<2x3x5x5xf32> -> tensor<2x3x2x2xf32>
  // CHECK-NEXT: slapo.max_pool2d %{{.*}} {{.*}} : tensor<2x3x5x5xf32> -> tensor<2x3x3x3xf32>
  // CHECK-NEXT: slapo.max_pool2d_grad %{{.*}}, %{{.*}} {{.*}} : (tensor<2x3x2x2xf32>, tensor<2x3x5x5xf32>) -> tensor<2x3x5x5xf32>
  %0 = slapo.max_pool2d %x {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<2x3x5x5xf32> -> tensor<2x3x2x2xf32>
  %1 = slapo.max_pool2d %x {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<2x3x5x5xf32> -> tensor<2x3x3x3xf32>
  %2 = slapo.max_pool2d_grad %g, %x {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : (tensor<2x3x2x2xf32>, tensor<2x3x5x5xf32>) -> tensor<2x3x5x5xf32>
  return
}

// The norms' bf16 rows of f32 inputs (slapo-propagate-casts folds mixed
// precision's casts into them): results stored narrow, gradients read
// narrow; the input's gradient and the affine ones keep the input's type.
// CHECK-LABEL: func.func @norms_narrow_rows
func.func @norms_narrow_rows(%x: tensor<2x5x32xf32>, %g: tensor<32xf32>, %dy: tensor<2x5x32xbf16>) {
  // CHECK-NEXT: slapo.layer_norm {{.*}} -> tensor<2x5x32xbf16>
  // CHECK-NEXT: slapo.rms_norm {{.*}} -> tensor<2x5x32xf16>
  // CHECK-NEXT: slapo.layer_norm_grad {{.*}} : (tensor<2x5x32xbf16>, tensor<2x5x32xf32>, tensor<32xf32>) -> (tensor<2x5x32xf32>, tensor<32xf32>, tensor<32xf32>)
  // CHECK-NEXT: slapo.rms_norm_grad {{.*}} : (tensor<2x5x32xbf16>, tensor<2x5x32xf32>) -> (tensor<2x5x32xf32>, tensor<32xf32>)
  %0 = slapo.layer_norm %x weight %g {normalized_rank = 1, eps = 1.0e-5} : (tensor<2x5x32xf32>, tensor<32xf32>) -> tensor<2x5x32xbf16>
  %1 = slapo.rms_norm %x {eps = 1.0e-6} : (tensor<2x5x32xf32>) -> tensor<2x5x32xf16>
  %2:3 = slapo.layer_norm_grad %dy, %x weight %g {normalized_rank = 1, eps = 1.0e-5} : (tensor<2x5x32xbf16>, tensor<2x5x32xf32>, tensor<32xf32>) -> (tensor<2x5x32xf32>, tensor<32xf32>, tensor<32xf32>)
  %3:2 = slapo.rms_norm_grad %dy, %x {eps = 1.0e-6} : (tensor<2x5x32xbf16>, tensor<2x5x32xf32>) -> (tensor<2x5x32xf32>, tensor<32xf32>)
  return
}

// The rotary embedding of a [B, H, T, D] query with [1, 1, T, D] angles,
// and its transposed map (the gradient).
// CHECK-LABEL: func.func @rotary_embedding
func.func @rotary_embedding(%q: tensor<2x4x5x8xf32>, %cos: tensor<1x1x5x8xf32>, %sin: tensor<1x1x5x8xf32>) {
  // CHECK-NEXT: slapo.rotary_embedding %arg0, %arg1, %arg2 : (tensor<2x4x5x8xf32>, tensor<1x1x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x4x5x8xf32>
  // CHECK-NEXT: slapo.rotary_embedding %arg0, %arg1, %arg2 {transposed} : (tensor<2x4x5x8xf32>, tensor<1x1x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x4x5x8xf32>
  %0 = slapo.rotary_embedding %q, %cos, %sin : (tensor<2x4x5x8xf32>, tensor<1x1x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x4x5x8xf32>
  %1 = slapo.rotary_embedding %q, %cos, %sin {transposed} : (tensor<2x4x5x8xf32>, tensor<1x1x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x4x5x8xf32>
  return
}

// Mixed precision's casts folded in: an f32 rotary embedding rounded once
// to bf16, and the transposed map of a bf16 gradient into f32.
// CHECK-LABEL: func.func @rotary_embedding_narrow
func.func @rotary_embedding_narrow(%q: tensor<2x4x5x8xf32>, %g: tensor<2x4x5x8xbf16>, %a: tensor<1x1x5x8xf32>) {
  // CHECK-NEXT: slapo.rotary_embedding %arg0, %arg2, %arg2 : (tensor<2x4x5x8xf32>, tensor<1x1x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x4x5x8xbf16>
  // CHECK-NEXT: slapo.rotary_embedding %arg1, %arg2, %arg2 {transposed} : (tensor<2x4x5x8xbf16>, tensor<1x1x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x4x5x8xf32>
  %0 = slapo.rotary_embedding %q, %a, %a : (tensor<2x4x5x8xf32>, tensor<1x1x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x4x5x8xbf16>
  %1 = slapo.rotary_embedding %g, %a, %a {transposed} : (tensor<2x4x5x8xbf16>, tensor<1x1x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x4x5x8xf32>
  return
}
