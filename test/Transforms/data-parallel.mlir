// RUN: slapo-opt --slapo-autodiff --slapo-data-parallel %s | FileCheck %s --check-prefix=ONE
// RUN: slapo-opt --slapo-autodiff --slapo-data-parallel=bucket-bytes=100 %s | FileCheck %s --check-prefix=SPLIT
// RUN: not slapo-opt --slapo-data-parallel %s 2>&1 | FileCheck %s --check-prefix=ORDER

// Two linear layers: the backward finishes w2's gradient first (96 bytes),
// then w1's (128 bytes), then b1's (32 bytes).
module {
  slapo.param @w1 : tensor<8x4xf32>
  slapo.param @b1 : tensor<8xf32>
  slapo.param @w2 : tensor<3x8xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %w1 = slapo.get_param @w1 : tensor<8x4xf32>
    %b1 = slapo.get_param @b1 : tensor<8xf32>
    %w2 = slapo.get_param @w2 : tensor<3x8xf32>
    %h = slapo.linear %x, %w1, %b1 : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %y = slapo.linear %h, %w2 : (tensor<2x8xf32>, tensor<3x8xf32>) -> tensor<2x3xf32>
    %l = slapo.mean %y {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// Within the default 25 MiB, one bucket in the order the backward finishes
// the gradients, after the last of them; then the loss. The returned values
// are the means over the dp group.
// ONE-LABEL: func.func @forward_backward
// ONE: %[[LOSS:.*]] = slapo.mean
// ONE: %[[DW2:.*]] = slapo.matmul {{.*}} -> tensor<3x8xf32>
// ONE: %[[DW1:.*]] = slapo.matmul {{.*}} -> tensor<8x4xf32>
// ONE-NEXT: %[[DB1:.*]] = slapo.sum
// ONE-NEXT: %[[R:.*]]:3 = slapo.all_reduce %[[DW2]], %[[DW1]], %[[DB1]] <dp> mean {slapo.phase = "backward"} : tensor<3x8xf32>, tensor<8x4xf32>, tensor<8xf32>
// ONE-NEXT: %[[RL:.*]] = slapo.all_reduce %[[LOSS]] <dp> mean {slapo.phase = "backward"} : tensor<f32>
// ONE-NEXT: return %[[RL]], %[[R]]#1, %[[R]]#2, %[[R]]#0

// With 100-byte buckets, w2 and w1 fill the first, which is reduced as soon
// as w1's gradient exists, before b1's is computed.
// SPLIT-LABEL: func.func @forward_backward
// SPLIT: %[[DW1:.*]] = slapo.matmul {{.*}} -> tensor<8x4xf32>
// SPLIT-NEXT: %[[R:.*]]:2 = slapo.all_reduce %{{.*}}, %[[DW1]] <dp> mean
// SPLIT-NEXT: %[[DB1:.*]] = slapo.sum
// SPLIT-NEXT: %[[RB:.*]] = slapo.all_reduce %[[DB1]] <dp> mean
// SPLIT-NEXT: %[[RL:.*]] = slapo.all_reduce
// SPLIT-NEXT: return %[[RL]], %[[R]]#1, %[[RB]], %[[R]]#0

// ORDER: error: slapo-data-parallel needs @forward_backward (run slapo-autodiff first)
