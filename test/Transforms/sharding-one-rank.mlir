// RUN: slapo-opt --slapo-propagate-sharding=tp=1 %s | FileCheck %s
// RUN: slapo-opt --slapo-propagate-sharding=tp=2 %s | FileCheck %s --check-prefix=TWO

// A schedule checks alike on one rank and on several: attention heads split
// from a hidden size split along its last dim ([B, T, C] -> [B, T, H, d])
// are the heads on one rank too, not the sequence (whose chunks of one row
// each would be whole parts for one rank), so q k^T keeps one split.
func.func @forward(%x: tensor<2x3x8xf32>) -> tensor<2x4x3x3xf32> {
  %s = slapo.scatter %x <tp> {dim = 2 : i64} : tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  %heads = slapo.reshape %s : tensor<2x3x8xf32> -> tensor<2x3x4x2xf32>
  %q = slapo.permute %heads {permutation = array<i64: 0, 2, 1, 3>} : tensor<2x3x4x2xf32> -> tensor<2x4x3x2xf32>
  %kt = slapo.permute %heads {permutation = array<i64: 0, 2, 3, 1>} : tensor<2x3x4x2xf32> -> tensor<2x4x2x3xf32>
  %scores = slapo.matmul %q, %kt : (tensor<2x4x3x2xf32>, tensor<2x4x2x3xf32>) -> tensor<2x4x3x3xf32>
  %g = slapo.all_gather %scores <tp> {dim = 1 : i64} : tensor<2x4x3x3xf32> -> tensor<2x4x3x3xf32>
  return %g : tensor<2x4x3x3xf32>
}
// CHECK: slapo.matmul %{{.*}}, %{{.*}} : (tensor<2x4x3x2xf32>, tensor<2x4x2x3xf32>) -> tensor<2x4x3x3xf32>
// CHECK-NEXT: slapo.all_gather %{{.*}} <tp> {dim = 1 : i64} : tensor<2x4x3x3xf32> -> tensor<2x4x3x3xf32>
// TWO: slapo.matmul %{{.*}}, %{{.*}} : (tensor<2x2x3x2xf32>, tensor<2x2x2x3xf32>) -> tensor<2x2x3x3xf32>
// TWO-NEXT: slapo.all_gather %{{.*}} <tp> {dim = 1 : i64} : tensor<2x2x3x3xf32> -> tensor<2x4x3x3xf32>
