// RUN: slapo-opt --slapo-propagate-casts --split-input-file %s | FileCheck %s
// RUN: slapo-opt --slapo-propagate-casts --slapo-fold-permutes --split-input-file %s | FileCheck %s --check-prefix=FOLD

// A product's operand cast to bf16 behind a reshape: the cast moves before
// it, where slapo-fuse-elementwise can join it to the chain computing x.
// CHECK-LABEL: func.func @narrowing_before_reshape
// CHECK-NEXT: %[[G:.*]] = slapo.gelu %arg0 <tanh> : tensor<2x3x4xf32>
// CHECK-NEXT: %[[B:.*]] = slapo.cast %[[G]] {slapo.module = "mlp.c_proj"} : tensor<2x3x4xf32> -> tensor<2x3x4xbf16>
// CHECK-NEXT: %[[R:.*]] = slapo.reshape %[[B]] : tensor<2x3x4xbf16> -> tensor<6x4xbf16>
// CHECK-NEXT: return %[[R]]
func.func @narrowing_before_reshape(%x: tensor<2x3x4xf32>) -> tensor<6x4xbf16> {
  %g = slapo.gelu %x <tanh> : tensor<2x3x4xf32>
  %r = slapo.reshape %g : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %b = slapo.cast %r {slapo.module = "mlp.c_proj"} : tensor<6x4xf32> -> tensor<6x4xbf16>
  return %b : tensor<6x4xbf16>
}

// -----

// A reshape that others read too is cloned (a view costs nothing), the
// cast placed before it and its other readers.
// CHECK-LABEL: func.func @narrowing_before_shared_reshape
// CHECK-NEXT: %[[B:.*]] = slapo.cast %arg0 : tensor<2x3x4xf32> -> tensor<2x3x4xbf16>
// CHECK-NEXT: %[[RB:.*]] = slapo.reshape %[[B]] : tensor<2x3x4xbf16> -> tensor<6x4xbf16>
// CHECK-NEXT: %[[R:.*]] = slapo.reshape %arg0 : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT: %[[S:.*]] = slapo.sum %[[R]]
// CHECK-NEXT: return %[[S]], %[[RB]]
func.func @narrowing_before_shared_reshape(%x: tensor<2x3x4xf32>) -> (tensor<4xf32>, tensor<6x4xbf16>) {
  %r = slapo.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %s = slapo.sum %r {dims = array<i64: 0>, keepdim = false} : tensor<6x4xf32> -> tensor<4xf32>
  %b = slapo.cast %r : tensor<6x4xf32> -> tensor<6x4xbf16>
  return %s, %b : tensor<4xf32>, tensor<6x4xbf16>
}

// -----

// Attention's query, key and value: three slices of one tensor, each cast
// to bf16 behind its reshape. The tensor is cast once and the slices copy
// bf16.
// CHECK-LABEL: func.func @narrowing_before_slices
// CHECK-NEXT: %[[B:.*]] = slapo.cast %arg0 : tensor<2x3x12xf32> -> tensor<2x3x12xbf16>
// CHECK-NEXT: %[[Q:.*]] = slapo.slice %[[B]] {dim = 2 : i64, end = 4 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x3x12xbf16> -> tensor<2x3x4xbf16>
// CHECK-NEXT: %[[K:.*]] = slapo.slice %[[B]] {dim = 2 : i64, end = 8 : i64, start = 4 : i64, step = 1 : i64} : tensor<2x3x12xbf16> -> tensor<2x3x4xbf16>
// CHECK-NEXT: %[[V:.*]] = slapo.slice %[[B]] {dim = 2 : i64, end = 12 : i64, start = 8 : i64, step = 1 : i64} : tensor<2x3x12xbf16> -> tensor<2x3x4xbf16>
// CHECK-NEXT: %[[QR:.*]] = slapo.reshape %[[Q]] : tensor<2x3x4xbf16> -> tensor<2x3x2x2xbf16>
// CHECK-NEXT: %[[KR:.*]] = slapo.reshape %[[K]] : tensor<2x3x4xbf16> -> tensor<2x3x2x2xbf16>
// CHECK-NEXT: %[[VR:.*]] = slapo.reshape %[[V]] : tensor<2x3x4xbf16> -> tensor<2x3x2x2xbf16>
// CHECK-NEXT: return %[[QR]], %[[KR]], %[[VR]]
func.func @narrowing_before_slices(%x: tensor<2x3x12xf32>) -> (tensor<2x3x2x2xbf16>, tensor<2x3x2x2xbf16>, tensor<2x3x2x2xbf16>) {
  %q = slapo.slice %x {dim = 2 : i64, start = 0 : i64, end = 4 : i64, step = 1 : i64} : tensor<2x3x12xf32> -> tensor<2x3x4xf32>
  %k = slapo.slice %x {dim = 2 : i64, start = 4 : i64, end = 8 : i64, step = 1 : i64} : tensor<2x3x12xf32> -> tensor<2x3x4xf32>
  %v = slapo.slice %x {dim = 2 : i64, start = 8 : i64, end = 12 : i64, step = 1 : i64} : tensor<2x3x12xf32> -> tensor<2x3x4xf32>
  %qr = slapo.reshape %q : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
  %kr = slapo.reshape %k : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
  %vr = slapo.reshape %v : tensor<2x3x4xf32> -> tensor<2x3x2x2xf32>
  %qb = slapo.cast %qr : tensor<2x3x2x2xf32> -> tensor<2x3x2x2xbf16>
  %kb = slapo.cast %kr : tensor<2x3x2x2xf32> -> tensor<2x3x2x2xbf16>
  %vb = slapo.cast %vr : tensor<2x3x2x2xf32> -> tensor<2x3x2x2xbf16>
  return %qb, %kb, %vb : tensor<2x3x2x2xbf16>, tensor<2x3x2x2xbf16>, tensor<2x3x2x2xbf16>
}

// -----

// One slice is read in f32 too: casting the whole tensor would convert
// elements no bf16 reader needs, so the casts stay after the slices.
// CHECK-LABEL: func.func @slices_read_in_f32
// CHECK-NEXT: %[[Q:.*]] = slapo.slice %arg0
// CHECK-NEXT: %[[K:.*]] = slapo.slice %arg0
// CHECK-NEXT: %[[QB:.*]] = slapo.cast %[[Q]] : tensor<2x3x4xf32> -> tensor<2x3x4xbf16>
// CHECK-NEXT: %[[KB:.*]] = slapo.cast %[[K]] : tensor<2x3x4xf32> -> tensor<2x3x4xbf16>
// CHECK-NEXT: return %[[QB]], %[[KB]], %[[K]]
func.func @slices_read_in_f32(%x: tensor<2x3x8xf32>) -> (tensor<2x3x4xbf16>, tensor<2x3x4xbf16>, tensor<2x3x4xf32>) {
  %q = slapo.slice %x {dim = 2 : i64, start = 0 : i64, end = 4 : i64, step = 1 : i64} : tensor<2x3x8xf32> -> tensor<2x3x4xf32>
  %k = slapo.slice %x {dim = 2 : i64, start = 4 : i64, end = 8 : i64, step = 1 : i64} : tensor<2x3x8xf32> -> tensor<2x3x4xf32>
  %qb = slapo.cast %q : tensor<2x3x4xf32> -> tensor<2x3x4xbf16>
  %kb = slapo.cast %k : tensor<2x3x4xf32> -> tensor<2x3x4xbf16>
  return %qb, %kb, %k : tensor<2x3x4xbf16>, tensor<2x3x4xbf16>, tensor<2x3x4xf32>
}

// -----

// Slices of half the tensor: casting all of it would convert elements
// nobody reads, so each slice keeps its cast.
// CHECK-LABEL: func.func @slices_of_part
// CHECK-NEXT: %[[A:.*]] = slapo.slice %arg0
// CHECK-NEXT: %[[B:.*]] = slapo.slice %arg0
// CHECK-NEXT: %[[AB:.*]] = slapo.cast %[[A]] : tensor<2x3x2xf32> -> tensor<2x3x2xbf16>
// CHECK-NEXT: %[[BB:.*]] = slapo.cast %[[B]] : tensor<2x3x2xf32> -> tensor<2x3x2xbf16>
// CHECK-NEXT: return %[[AB]], %[[BB]]
func.func @slices_of_part(%x: tensor<2x3x8xf32>) -> (tensor<2x3x2xbf16>, tensor<2x3x2xbf16>) {
  %a = slapo.slice %x {dim = 2 : i64, start = 0 : i64, end = 2 : i64, step = 1 : i64} : tensor<2x3x8xf32> -> tensor<2x3x2xf32>
  %b = slapo.slice %x {dim = 2 : i64, start = 4 : i64, end = 6 : i64, step = 1 : i64} : tensor<2x3x8xf32> -> tensor<2x3x2xf32>
  %ab = slapo.cast %a : tensor<2x3x2xf32> -> tensor<2x3x2xbf16>
  %bb = slapo.cast %b : tensor<2x3x2xf32> -> tensor<2x3x2xbf16>
  return %ab, %bb : tensor<2x3x2xbf16>, tensor<2x3x2xbf16>
}

// -----

// Attention's bf16 output widened, its heads merged and narrowed again for
// the output projection: the round trip goes, the permute copies bf16.
// CHECK-LABEL: func.func @round_trip
// CHECK-NEXT: %[[P:.*]] = slapo.permute %arg0 {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x2x3x4xbf16> -> tensor<2x3x2x4xbf16>
// CHECK-NEXT: %[[R:.*]] = slapo.reshape %[[P]] : tensor<2x3x2x4xbf16> -> tensor<6x8xbf16>
// CHECK-NEXT: return %[[R]]
func.func @round_trip(%attention: tensor<2x2x3x4xbf16>) -> tensor<6x8xbf16> {
  %w = slapo.cast %attention : tensor<2x2x3x4xbf16> -> tensor<2x2x3x4xf32>
  %p = slapo.permute %w {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x2x3x4xf32> -> tensor<2x3x2x4xf32>
  %r = slapo.reshape %p : tensor<2x3x2x4xf32> -> tensor<6x8xf32>
  %b = slapo.cast %r : tensor<6x8xf32> -> tensor<6x8xbf16>
  return %b : tensor<6x8xbf16>
}

// -----

// The gradients of query, key and value (bf16) widened, their heads merged
// and concatenated: one cast after the concat, whose bf16 the products read
// directly, and which the bias gradient's sum then takes in: it sums the
// bf16 concat into f32.
// CHECK-LABEL: func.func @widening_after_concat
// CHECK-NEXT: %[[QP:.*]] = slapo.permute %arg0 {permutation = array<i64: 0, 2, 1, 3>, slapo.phase = "backward"} : tensor<2x2x3x4xbf16> -> tensor<2x3x2x4xbf16>
// CHECK-NEXT: %[[QR:.*]] = slapo.reshape %[[QP]] {slapo.phase = "backward"} : tensor<2x3x2x4xbf16> -> tensor<2x3x8xbf16>
// CHECK-NEXT: %[[KP:.*]] = slapo.permute %arg1 {permutation = array<i64: 0, 2, 1, 3>, slapo.phase = "backward"} : tensor<2x2x3x4xbf16> -> tensor<2x3x2x4xbf16>
// CHECK-NEXT: %[[KR:.*]] = slapo.reshape %[[KP]] {slapo.phase = "backward"} : tensor<2x3x2x4xbf16> -> tensor<2x3x8xbf16>
// CHECK-NEXT: %[[C:.*]] = slapo.concat %[[QR]], %[[KR]] {dim = 2 : i64, slapo.phase = "backward"} : (tensor<2x3x8xbf16>, tensor<2x3x8xbf16>) -> tensor<2x3x16xbf16>
// CHECK-NEXT: %[[S:.*]] = slapo.sum %[[C]] {dims = array<i64: 0, 1>, keepdim = false, slapo.phase = "backward"} : tensor<2x3x16xbf16> -> tensor<16xf32>
// CHECK-NEXT: return %[[S]], %[[C]]
func.func @widening_after_concat(%dq: tensor<2x2x3x4xbf16>, %dk: tensor<2x2x3x4xbf16>) -> (tensor<16xf32>, tensor<2x3x16xbf16>) {
  %qw = slapo.cast %dq {slapo.module = "attn", slapo.phase = "backward"} : tensor<2x2x3x4xbf16> -> tensor<2x2x3x4xf32>
  %kw = slapo.cast %dk {slapo.module = "attn", slapo.phase = "backward"} : tensor<2x2x3x4xbf16> -> tensor<2x2x3x4xf32>
  %qp = slapo.permute %qw {permutation = array<i64: 0, 2, 1, 3>, slapo.phase = "backward"} : tensor<2x2x3x4xf32> -> tensor<2x3x2x4xf32>
  %qr = slapo.reshape %qp {slapo.phase = "backward"} : tensor<2x3x2x4xf32> -> tensor<2x3x8xf32>
  %kp = slapo.permute %kw {permutation = array<i64: 0, 2, 1, 3>, slapo.phase = "backward"} : tensor<2x2x3x4xf32> -> tensor<2x3x2x4xf32>
  %kr = slapo.reshape %kp {slapo.phase = "backward"} : tensor<2x3x2x4xf32> -> tensor<2x3x8xf32>
  %c = slapo.concat %qr, %kr {dim = 2 : i64, slapo.phase = "backward"} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x16xf32>
  %s = slapo.sum %c {dims = array<i64: 0, 1>, keepdim = false, slapo.phase = "backward"} : tensor<2x3x16xf32> -> tensor<16xf32>
  %b = slapo.cast %c {slapo.phase = "backward"} : tensor<2x3x16xf32> -> tensor<2x3x16xbf16>
  return %s, %b : tensor<16xf32>, tensor<2x3x16xbf16>
}

// -----

// A bias gradient's column sum of a widened tensor sums the bf16 one into
// f32; a sum along the last dim (a row of slapo-fuse-elementwise's loops)
// keeps reading the f32 cast.
// CHECK-LABEL: func.func @sums_of_widened
// CHECK-NEXT: %[[W:.*]] = slapo.cast %arg0 : tensor<6x4xbf16> -> tensor<6x4xf32>
// CHECK-NEXT: %[[C:.*]] = slapo.sum %arg0 {dims = array<i64: 0>, keepdim = false} : tensor<6x4xbf16> -> tensor<4xf32>
// CHECK-NEXT: %[[R:.*]] = slapo.sum %[[W]] {dims = array<i64: 1>, keepdim = true} : tensor<6x4xf32> -> tensor<6x1xf32>
// CHECK-NEXT: %[[O:.*]] = slapo.sum %arg1 {dims = array<i64: 0>, keepdim = false} : tensor<6x4xbf16> -> tensor<4xf32>
// CHECK-NEXT: return %[[C]], %[[R]], %[[O]]
func.func @sums_of_widened(%g: tensor<6x4xbf16>, %h: tensor<6x4xbf16>) -> (tensor<4xf32>, tensor<6x1xf32>, tensor<4xf32>) {
  %w = slapo.cast %g : tensor<6x4xbf16> -> tensor<6x4xf32>
  %c = slapo.sum %w {dims = array<i64: 0>, keepdim = false} : tensor<6x4xf32> -> tensor<4xf32>
  %r = slapo.sum %w {dims = array<i64: 1>, keepdim = true} : tensor<6x4xf32> -> tensor<6x1xf32>
  %v = slapo.cast %h : tensor<6x4xbf16> -> tensor<6x4xf32>
  %o = slapo.sum %v {dims = array<i64: 0>, keepdim = false} : tensor<6x4xf32> -> tensor<4xf32>
  return %c, %r, %o : tensor<4xf32>, tensor<6x1xf32>, tensor<4xf32>
}

// -----

// What must stay: f32 -> bf16 -> f32 rounds (the LM head's gradient as
// autocast gives it); a permute read in f32 too would be copied twice; a
// widening cast read twice would be cast twice; casts between bf16 and f16
// (each holds values the other lacks) move nowhere; a cast does not move
// into another phase.
// CHECK-LABEL: func.func @stays
// CHECK-NEXT: slapo.cast %arg0 : tensor<4x6xf32> -> tensor<4x6xbf16>
// CHECK-NEXT: slapo.cast %{{.*}} : tensor<4x6xbf16> -> tensor<4x6xf32>
// CHECK-NEXT: %[[P:.*]] = slapo.permute %arg0
// CHECK-NEXT: slapo.cast %[[P]] : tensor<6x4xf32> -> tensor<6x4xbf16>
// CHECK-NEXT: %[[W:.*]] = slapo.cast %arg1 : tensor<4x6xbf16> -> tensor<4x6xf32>
// CHECK-NEXT: slapo.permute %[[W]]
// CHECK-NEXT: slapo.reshape %[[W]]
// CHECK-NEXT: %[[R:.*]] = slapo.reshape %arg1 : tensor<4x6xbf16> -> tensor<24xbf16>
// CHECK-NEXT: slapo.cast %[[R]] : tensor<24xbf16> -> tensor<24xf16>
// CHECK-NEXT: %[[F:.*]] = slapo.reshape %arg0 : tensor<4x6xf32> -> tensor<24xf32>
// CHECK-NEXT: slapo.cast %[[F]] {slapo.phase = "backward"} : tensor<24xf32> -> tensor<24xbf16>
func.func @stays(%x: tensor<4x6xf32>, %y: tensor<4x6xbf16>) -> (tensor<4x6xf32>, tensor<6x4xbf16>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<24xf32>, tensor<24xf16>, tensor<24xbf16>) {
  %rounded = slapo.cast %x : tensor<4x6xf32> -> tensor<4x6xbf16>
  %back = slapo.cast %rounded : tensor<4x6xbf16> -> tensor<4x6xf32>
  %p = slapo.permute %x {permutation = array<i64: 1, 0>} : tensor<4x6xf32> -> tensor<6x4xf32>
  %pb = slapo.cast %p : tensor<6x4xf32> -> tensor<6x4xbf16>
  %w = slapo.cast %y : tensor<4x6xbf16> -> tensor<4x6xf32>
  %wp = slapo.permute %w {permutation = array<i64: 1, 0>} : tensor<4x6xf32> -> tensor<6x4xf32>
  %wr = slapo.reshape %w : tensor<4x6xf32> -> tensor<24xf32>
  %yr = slapo.reshape %y : tensor<4x6xbf16> -> tensor<24xbf16>
  %h = slapo.cast %yr : tensor<24xbf16> -> tensor<24xf16>
  %xr = slapo.reshape %x : tensor<4x6xf32> -> tensor<24xf32>
  %later = slapo.cast %xr {slapo.phase = "backward"} : tensor<24xf32> -> tensor<24xbf16>
  return %back, %pb, %p, %wp, %wr, %h, %later : tensor<4x6xf32>, tensor<6x4xbf16>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<24xf32>, tensor<24xf16>, tensor<24xbf16>
}

// -----

// The operands of a product, cast to bf16 behind the permutes that split
// heads (and transpose k): the casts move first, then the permutes fold
// into the matmul, k's two composed (slapo-fold-permutes).
// FOLD-LABEL: func.func @fold_after_hoist
// FOLD-NEXT: %[[QB:.*]] = slapo.cast %arg0 : tensor<2x5x3x4xf32> -> tensor<2x5x3x4xbf16>
// FOLD-NEXT: %[[KB:.*]] = slapo.cast %arg1 : tensor<2x5x3x4xf32> -> tensor<2x5x3x4xbf16>
// FOLD-NEXT: %[[S:.*]] = slapo.matmul %[[QB]], %[[KB]] {lhs_permutation = array<i64: 0, 2, 1, 3>, rhs_permutation = array<i64: 0, 2, 3, 1>} : (tensor<2x5x3x4xbf16>, tensor<2x5x3x4xbf16>) -> tensor<2x3x5x5xf32>
// FOLD-NEXT: return %[[S]]
func.func @fold_after_hoist(%q: tensor<2x5x3x4xf32>, %k: tensor<2x5x3x4xf32>) -> tensor<2x3x5x5xf32> {
  %qh = slapo.permute %q {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %kh = slapo.permute %k {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x5x3x4xf32> -> tensor<2x3x5x4xf32>
  %kt = slapo.permute %kh {permutation = array<i64: 0, 1, 3, 2>} : tensor<2x3x5x4xf32> -> tensor<2x3x4x5xf32>
  %qb = slapo.cast %qh : tensor<2x3x5x4xf32> -> tensor<2x3x5x4xbf16>
  %kb = slapo.cast %kt : tensor<2x3x4x5xf32> -> tensor<2x3x4x5xbf16>
  %s = slapo.matmul %qb, %kb : (tensor<2x3x5x4xbf16>, tensor<2x3x4x5xbf16>) -> tensor<2x3x5x5xf32>
  return %s : tensor<2x3x5x5xf32>
}

// -----

// A layer norm whose f32 rows only the next product's bf16 cast reads
// writes bf16 rows (computed in f32, rounded once, as the cast rounds
// them); its gradient reads the product's bf16 input gradient and widens
// it itself. Where the f32 rows are read too (the residual), or the norm
// runs in another phase (recomputed), the cast stays.
// CHECK-LABEL: func.func @norms
// CHECK-NEXT: %[[N:.*]] = slapo.layer_norm %arg0 weight %arg1 {eps = 1.000000e-05 : f64, normalized_rank = 1 : i64} : (tensor<6x4xf32>, tensor<4xf32>) -> tensor<6x4xbf16>
// CHECK-NEXT: %[[R:.*]] = slapo.rms_norm %arg0 {eps = 9.9999999999999995E-7 : f64} : (tensor<6x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT: %[[RB:.*]] = slapo.cast %[[R]] : tensor<6x4xf32> -> tensor<6x4xbf16>
// CHECK-NEXT: %[[M:.*]] = slapo.rms_norm %arg0 {eps = 9.9999999999999995E-7 : f64, slapo.recomputed} : (tensor<6x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT: %[[MB:.*]] = slapo.cast %[[M]] : tensor<6x4xf32> -> tensor<6x4xbf16>
// CHECK-NEXT: %[[W:.*]] = slapo.cast %arg2 : tensor<6x4xbf16> -> tensor<6x4xf32>
// CHECK-NEXT: %[[G:[a-z_0-9]+]], %{{.*}} = slapo.layer_norm_grad %arg2, %arg0 weight %arg1 {eps = 1.000000e-05 : f64, normalized_rank = 1 : i64} : (tensor<6x4xbf16>, tensor<6x4xf32>, tensor<4xf32>) -> (tensor<6x4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT: %[[H:[a-z_0-9]+]], %{{.*}} = slapo.rms_norm_grad %arg2, %[[W]] {eps = 9.9999999999999995E-7 : f64} : (tensor<6x4xbf16>, tensor<6x4xf32>) -> (tensor<6x4xf32>, tensor<4xf32>)
// CHECK-NEXT: return %[[N]], %[[RB]], %[[R]], %[[MB]], %[[G]], %[[H]]
func.func @norms(%x: tensor<6x4xf32>, %w: tensor<4xf32>, %dy: tensor<6x4xbf16>) -> (tensor<6x4xbf16>, tensor<6x4xbf16>, tensor<6x4xf32>, tensor<6x4xbf16>, tensor<6x4xf32>, tensor<6x4xf32>) {
  %n = slapo.layer_norm %x weight %w {normalized_rank = 1, eps = 1.0e-5} : (tensor<6x4xf32>, tensor<4xf32>) -> tensor<6x4xf32>
  %nb = slapo.cast %n : tensor<6x4xf32> -> tensor<6x4xbf16>
  %r = slapo.rms_norm %x {eps = 1.0e-6} : (tensor<6x4xf32>) -> tensor<6x4xf32>
  %rb = slapo.cast %r : tensor<6x4xf32> -> tensor<6x4xbf16>
  %m = slapo.rms_norm %x {eps = 1.0e-6, slapo.recomputed} : (tensor<6x4xf32>) -> tensor<6x4xf32>
  %mb = slapo.cast %m : tensor<6x4xf32> -> tensor<6x4xbf16>
  %dyw = slapo.cast %dy : tensor<6x4xbf16> -> tensor<6x4xf32>
  %g:3 = slapo.layer_norm_grad %dyw, %x weight %w {normalized_rank = 1, eps = 1.0e-5} : (tensor<6x4xf32>, tensor<6x4xf32>, tensor<4xf32>) -> (tensor<6x4xf32>, tensor<4xf32>, tensor<4xf32>)
  // The widened tensor is also this gradient's input: the cast stays for
  // it, the grad is read narrow.
  %h:2 = slapo.rms_norm_grad %dyw, %dyw {eps = 1.0e-6} : (tensor<6x4xf32>, tensor<6x4xf32>) -> (tensor<6x4xf32>, tensor<4xf32>)
  return %nb, %rb, %r, %mb, %g#0, %h#0 : tensor<6x4xbf16>, tensor<6x4xbf16>, tensor<6x4xf32>, tensor<6x4xbf16>, tensor<6x4xf32>, tensor<6x4xf32>
}

// -----

// A rotary embedding whose f32 result only the attention's bf16 cast reads
// writes bf16 (computed in f32, rounded once, as the cast rounds it); its
// transposed map (the gradient) reads the attention's bf16 gradient and
// widens it itself. The angles stay f32: the type computed in.
// CHECK-LABEL: func.func @rotary
// CHECK-NEXT: %[[Q:.*]] = slapo.rotary_embedding %arg0, %arg1, %arg1 : (tensor<2x3x5x8xf32>, tensor<5x8xf32>, tensor<5x8xf32>) -> tensor<2x3x5x8xbf16>
// CHECK-NEXT: %[[G:.*]] = slapo.rotary_embedding %arg2, %arg1, %arg1 {transposed} : (tensor<2x3x5x8xbf16>, tensor<5x8xf32>, tensor<5x8xf32>) -> tensor<2x3x5x8xf32>
// CHECK-NEXT: return %[[Q]], %[[G]]
func.func @rotary(%x: tensor<2x3x5x8xf32>, %angles: tensor<5x8xf32>, %dq: tensor<2x3x5x8xbf16>) -> (tensor<2x3x5x8xbf16>, tensor<2x3x5x8xf32>) {
  %q = slapo.rotary_embedding %x, %angles, %angles : (tensor<2x3x5x8xf32>, tensor<5x8xf32>, tensor<5x8xf32>) -> tensor<2x3x5x8xf32>
  %qb = slapo.cast %q : tensor<2x3x5x8xf32> -> tensor<2x3x5x8xbf16>
  %dqw = slapo.cast %dq : tensor<2x3x5x8xbf16> -> tensor<2x3x5x8xf32>
  %g = slapo.rotary_embedding %dqw, %angles, %angles {transposed} : (tensor<2x3x5x8xf32>, tensor<5x8xf32>, tensor<5x8xf32>) -> tensor<2x3x5x8xf32>
  return %qb, %g : tensor<2x3x5x8xbf16>, tensor<2x3x5x8xf32>
}

// -----

// The bf16 gradients of f32 weights (mixed precision's products): the
// optimizer's update and the gradient's mark read them narrow, and the casts
// back to f32, a pass over each gradient, are gone. A gradient that clipping
// also reads keeps its cast (for the norm and the scaled update); the mark
// still reads it narrow. An f16 gradient keeps its cast: the update widens
// bf16 only.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: slapo.cast %arg0
// CHECK: %[[CLIPPED:.*]] = slapo.cast %arg1 {slapo.phase = "backward"} : tensor<3x4xbf16> -> tensor<3x4xf32>
// CHECK: %[[HALF:.*]] = slapo.cast %arg2 {slapo.phase = "backward"} : tensor<4xf16> -> tensor<4xf32>
// CHECK: slapo.param_grad @w, %arg0 {slapo.phase = "backward"} : tensor<3x4xbf16>
// CHECK-NEXT: slapo.param_grad @v, %arg1 {slapo.phase = "backward"} : tensor<3x4xbf16>
// CHECK-NEXT: slapo.param_grad @b, %[[HALF]] {slapo.phase = "backward"} : tensor<4xf32>
// CHECK: slapo.adamw_update @w, %arg0, %{{.*}}, %arg3 {{.*}} : tensor<3x4xbf16>
// CHECK: %[[SCALED:.*]] = slapo.mul %[[CLIPPED]]
// CHECK: slapo.sgd_update @v, %[[SCALED]], %{{.*}} {{.*}} : tensor<3x4xf32>
// CHECK: slapo.sgd_update @b, %[[HALF]], %{{.*}} {{.*}} : tensor<4xf32>
module {
  slapo.param @w : tensor<3x4xf32>
  slapo.optimizer_state @w.exp_avg of @w : tensor<3x4xf32>
  slapo.optimizer_state @w.exp_avg_sq of @w : tensor<3x4xf32>
  slapo.param @v : tensor<3x4xf32>
  slapo.param @b : tensor<4xf32>
  func.func @train_step(%dw: tensor<3x4xbf16>, %dv: tensor<3x4xbf16>, %db: tensor<4xf16>, %step: tensor<i64>) {
    %w = slapo.cast %dw {slapo.phase = "backward"} : tensor<3x4xbf16> -> tensor<3x4xf32>
    %v = slapo.cast %dv {slapo.phase = "backward"} : tensor<3x4xbf16> -> tensor<3x4xf32>
    %b = slapo.cast %db {slapo.phase = "backward"} : tensor<4xf16> -> tensor<4xf32>
    slapo.param_grad @w, %w {slapo.phase = "backward"} : tensor<3x4xf32>
    slapo.param_grad @v, %v {slapo.phase = "backward"} : tensor<3x4xf32>
    slapo.param_grad @b, %b {slapo.phase = "backward"} : tensor<4xf32>
    %lr = slapo.constant dense<1.000000e-02> : tensor<f64> {slapo.phase = "optimizer"}
    slapo.adamw_update @w, %w, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, exp_avg = @w.exp_avg, exp_avg_sq = @w.exp_avg_sq, slapo.phase = "optimizer", weight_decay = 0.1 : f64} : tensor<3x4xf32>
    %coefficient = slapo.constant dense<5.000000e-01> : tensor<f32> {slapo.phase = "optimizer"}
    %scaled = slapo.mul %v, %coefficient {slapo.phase = "optimizer"} : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
    slapo.sgd_update @v, %scaled, %lr {momentum = 0.0 : f64, slapo.phase = "optimizer", weight_decay = 0.0 : f64} : tensor<3x4xf32>
    slapo.sgd_update @b, %b, %lr {momentum = 0.0 : f64, slapo.phase = "optimizer", weight_decay = 0.0 : f64} : tensor<4xf32>
    return
  }
}
