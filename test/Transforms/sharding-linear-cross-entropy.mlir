// RUN: slapo-opt --slapo-propagate-sharding=tp=2 --split-input-file --verify-diagnostics %s | FileCheck %s

// The sharding rule of slapo.linear_cross_entropy
// (dialects/lib/ShardingNN.cpp): replicated operands give replicated
// results; a split weight (the vocabulary over the ranks), as a shard()
// after replace("cross_entropy") in the schedule makes it, is an error.
module {
  slapo.param @w : tensor<16x8xf32>
  func.func @forward(%h: tensor<6x8xf32>, %t: tensor<6xi64>) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<16x8xf32>
    %loss, %dh, %dw = slapo.linear_cross_entropy %h, %w, %t {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>)
    return %loss : tensor<f32>
  }
}
// CHECK: slapo.linear_cross_entropy {{.*}} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>)

// -----

module {
  slapo.param @w : tensor<16x8xf32> {shard_axis = 0 : i64}
  func.func @forward(%h: tensor<6x8xf32>, %t: tensor<6xi64>) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<16x8xf32>
    // expected-error @+1 {{tensor parallelism: 'linear_cross_entropy' (replace("cross_entropy")) needs its hidden rows, weight and bias whole on every rank, but an operand is}}
    %loss, %dh, %dw = slapo.linear_cross_entropy %h, %w, %t {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>)
    return %loss : tensor<f32>
  }
}
