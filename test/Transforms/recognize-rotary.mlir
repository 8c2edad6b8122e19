// RUN: slapo-opt --slapo-recognize-rotary --split-input-file %s | FileCheck %s

// Hugging Face's apply_rotary_pos_emb as it imports (q * cos +
// rotate_half(q) * sin, rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2])):
// one slapo.rotary_embedding, the slices, negation, concat and products
// gone.
// CHECK-LABEL: func.func @llama
// CHECK-NEXT: %[[R:.*]] = slapo.rotary_embedding %arg0, %arg1, %arg2 {slapo.module = "attn"} : (tensor<2x4x5x8xf32>, tensor<1x1x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x4x5x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @llama(%q: tensor<2x4x5x8xf32>, %cos: tensor<1x1x5x8xf32>, %sin: tensor<1x1x5x8xf32>) -> tensor<2x4x5x8xf32> {
  %0 = slapo.mul %q, %cos {slapo.module = "attn"} : (tensor<2x4x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x4x5x8xf32>
  %1 = slapo.slice %q {dim = 3 : i64, start = 0 : i64, end = 4 : i64, step = 1 : i64, slapo.module = "attn"} : tensor<2x4x5x8xf32> -> tensor<2x4x5x4xf32>
  %2 = slapo.slice %q {dim = 3 : i64, start = 4 : i64, end = 8 : i64, step = 1 : i64, slapo.module = "attn"} : tensor<2x4x5x8xf32> -> tensor<2x4x5x4xf32>
  %3 = slapo.neg %2 {slapo.module = "attn"} : tensor<2x4x5x4xf32>
  %4 = slapo.concat %3, %1 {dim = 3 : i64, slapo.module = "attn"} : (tensor<2x4x5x4xf32>, tensor<2x4x5x4xf32>) -> tensor<2x4x5x8xf32>
  %5 = slapo.mul %4, %sin {slapo.module = "attn"} : (tensor<2x4x5x8xf32>, tensor<1x1x5x8xf32>) -> tensor<2x4x5x8xf32>
  %6 = slapo.add %0, %5 {slapo.module = "attn"} : (tensor<2x4x5x8xf32>, tensor<2x4x5x8xf32>) -> tensor<2x4x5x8xf32>
  return %6 : tensor<2x4x5x8xf32>
}

// -----

// Each product and the sum with their operands the other way round; the
// rotated half is read elsewhere too, so it and what feeds it stay.
// CHECK-LABEL: func.func @commuted_and_shared
// CHECK: %[[ROT:.*]] = slapo.concat
// CHECK-NEXT: %[[R:.*]] = slapo.rotary_embedding %arg0, %arg1, %arg2 : (tensor<3x6xf32>, tensor<3x6xf32>, tensor<6xf32>) -> tensor<3x6xf32>
// CHECK-NEXT: return %[[R]], %[[ROT]]
func.func @commuted_and_shared(%x: tensor<3x6xf32>, %cos: tensor<3x6xf32>, %sin: tensor<6xf32>) -> (tensor<3x6xf32>, tensor<3x6xf32>) {
  %0 = slapo.mul %cos, %x : (tensor<3x6xf32>, tensor<3x6xf32>) -> tensor<3x6xf32>
  %1 = slapo.slice %x {dim = 1 : i64, start = 0 : i64, end = 3 : i64, step = 1 : i64} : tensor<3x6xf32> -> tensor<3x3xf32>
  %2 = slapo.slice %x {dim = 1 : i64, start = 3 : i64, end = 6 : i64, step = 1 : i64} : tensor<3x6xf32> -> tensor<3x3xf32>
  %3 = slapo.neg %2 : tensor<3x3xf32>
  %4 = slapo.concat %3, %1 {dim = 1 : i64} : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x6xf32>
  %5 = slapo.mul %sin, %4 : (tensor<6xf32>, tensor<3x6xf32>) -> tensor<3x6xf32>
  %6 = slapo.add %5, %0 : (tensor<3x6xf32>, tensor<3x6xf32>) -> tensor<3x6xf32>
  return %6, %4 : tensor<3x6xf32>, tensor<3x6xf32>
}

// -----

// What is no rotate_half stays as it is: the halves the other way round
// (cat(-x[..., :D/2], x[..., D/2:])), and the angles stretched along the
// last dim ([3, 1]: its halves would meet one angle, which the op, made
// for per-dim angles, does not take).
// CHECK-LABEL: func.func @not_rotary
// CHECK-NOT: slapo.rotary_embedding
// CHECK: return
func.func @not_rotary(%x: tensor<3x6xf32>, %cos: tensor<3x6xf32>, %sin: tensor<3x6xf32>, %column: tensor<3x1xf32>) -> (tensor<3x6xf32>, tensor<3x6xf32>) {
  %0 = slapo.mul %x, %cos : (tensor<3x6xf32>, tensor<3x6xf32>) -> tensor<3x6xf32>
  %1 = slapo.slice %x {dim = 1 : i64, start = 0 : i64, end = 3 : i64, step = 1 : i64} : tensor<3x6xf32> -> tensor<3x3xf32>
  %2 = slapo.slice %x {dim = 1 : i64, start = 3 : i64, end = 6 : i64, step = 1 : i64} : tensor<3x6xf32> -> tensor<3x3xf32>
  %3 = slapo.neg %1 : tensor<3x3xf32>
  %4 = slapo.concat %3, %2 {dim = 1 : i64} : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x6xf32>
  %5 = slapo.mul %4, %sin : (tensor<3x6xf32>, tensor<3x6xf32>) -> tensor<3x6xf32>
  %6 = slapo.add %0, %5 : (tensor<3x6xf32>, tensor<3x6xf32>) -> tensor<3x6xf32>
  %n = slapo.neg %2 : tensor<3x3xf32>
  %r = slapo.concat %n, %1 {dim = 1 : i64} : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x6xf32>
  %c = slapo.mul %x, %column : (tensor<3x6xf32>, tensor<3x1xf32>) -> tensor<3x6xf32>
  %s = slapo.mul %r, %sin : (tensor<3x6xf32>, tensor<3x6xf32>) -> tensor<3x6xf32>
  %7 = slapo.add %c, %s : (tensor<3x6xf32>, tensor<3x6xf32>) -> tensor<3x6xf32>
  return %6, %7 : tensor<3x6xf32>, tensor<3x6xf32>
}

// -----

// Angles computed from a trained parameter would need a gradient, which the
// op does not give them: the ops stay. From a buffer (Hugging Face's
// inv_freq), they are angles.
// CHECK-LABEL: func.func @forward
// CHECK: %[[LEARNED:.*]] = slapo.get_param @learned
// CHECK: slapo.concat
// CHECK: %[[FREQ:.*]] = slapo.get_param @inv_freq
// CHECK-NEXT: slapo.rotary_embedding %arg0, %[[FREQ]], %[[FREQ]]
module {
  slapo.param @learned : tensor<6xf32>
  slapo.param buffer @inv_freq : tensor<6xf32>
  func.func @forward(%x: tensor<3x6xf32>) -> (tensor<3x6xf32>, tensor<3x6xf32>) {
    %w = slapo.get_param @learned : tensor<6xf32>
    %0 = slapo.mul %x, %w : (tensor<3x6xf32>, tensor<6xf32>) -> tensor<3x6xf32>
    %1 = slapo.slice %x {dim = 1 : i64, start = 0 : i64, end = 3 : i64, step = 1 : i64} : tensor<3x6xf32> -> tensor<3x3xf32>
    %2 = slapo.slice %x {dim = 1 : i64, start = 3 : i64, end = 6 : i64, step = 1 : i64} : tensor<3x6xf32> -> tensor<3x3xf32>
    %3 = slapo.neg %2 : tensor<3x3xf32>
    %4 = slapo.concat %3, %1 {dim = 1 : i64} : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x6xf32>
    %5 = slapo.mul %4, %w : (tensor<3x6xf32>, tensor<6xf32>) -> tensor<3x6xf32>
    %6 = slapo.add %0, %5 : (tensor<3x6xf32>, tensor<3x6xf32>) -> tensor<3x6xf32>
    %f = slapo.get_param @inv_freq : tensor<6xf32>
    %7 = slapo.mul %x, %f : (tensor<3x6xf32>, tensor<6xf32>) -> tensor<3x6xf32>
    %8 = slapo.mul %4, %f : (tensor<3x6xf32>, tensor<6xf32>) -> tensor<3x6xf32>
    %9 = slapo.add %7, %8 : (tensor<3x6xf32>, tensor<3x6xf32>) -> tensor<3x6xf32>
    return %6, %9 : tensor<3x6xf32>, tensor<3x6xf32>
  }
}
