// RUN: slapo-opt --slapo-propagate-sharding=tp=2 --split-input-file --verify-diagnostics %s | FileCheck %s

// The sharding rule of slapo.conv2d (dialects/lib/ShardingNN.cpp), Megatron's
// MLP with convolutions: conv1 column-parallel (its output channels and bias
// split alike), batch_norm-like per-channel ops on the split channels, conv2
// row-parallel (its input channels split), a partial sum completed by the
// all_reduce.
module {
  slapo.param @conv1.weight : tensor<8x4x3x3xf32> {shard_axis = 0 : i64}
  slapo.param @conv1.bias : tensor<8xf32> {shard_axis = 0 : i64}
  slapo.param @conv2.weight : tensor<4x8x1x1xf32> {shard_axis = 1 : i64}
  func.func @forward(%x: tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32> {
    %w1 = slapo.get_param @conv1.weight : tensor<8x4x3x3xf32>
    %b1 = slapo.get_param @conv1.bias : tensor<8xf32>
    %h = slapo.conv2d %x, %w1, %b1 {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1} : (tensor<2x4x6x6xf32>, tensor<8x4x3x3xf32>, tensor<8xf32>) -> tensor<2x8x6x6xf32>
    %a = slapo.relu %h : tensor<2x8x6x6xf32>
    %w2 = slapo.get_param @conv2.weight : tensor<4x8x1x1xf32>
    %y = slapo.conv2d %a, %w2 {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1} : (tensor<2x8x6x6xf32>, tensor<4x8x1x1xf32>) -> tensor<2x4x6x6xf32>
    %r = slapo.all_reduce %y <tp> : tensor<2x4x6x6xf32>
    return %r : tensor<2x4x6x6xf32>
  }
}
// CHECK: slapo.param @conv1.weight : tensor<4x4x3x3xf32> {shard_axis = 0 : i64}
// CHECK: slapo.param @conv1.bias : tensor<4xf32> {shard_axis = 0 : i64}
// CHECK: slapo.param @conv2.weight : tensor<4x4x1x1xf32> {shard_axis = 1 : i64}
// CHECK: slapo.conv2d %arg0, %{{.*}}, %{{.*}} {{.*}} : (tensor<2x4x6x6xf32>, tensor<4x4x3x3xf32>, tensor<4xf32>) -> tensor<2x4x6x6xf32>
// CHECK-NEXT: slapo.relu %{{.*}} : tensor<2x4x6x6xf32>
// CHECK: %[[Y:.*]] = slapo.conv2d %{{.*}}, %{{.*}} {{.*}} : (tensor<2x4x6x6xf32>, tensor<4x4x1x1xf32>) -> tensor<2x4x6x6xf32>
// CHECK-NEXT: slapo.all_reduce %[[Y]] <tp> : tensor<2x4x6x6xf32>

// -----

// A batch split passes through a replicated convolution.
func.func @forward(%x: tensor<4x3x5x5xf32>, %w: tensor<6x3x3x3xf32>) -> tensor<4x6x3x3xf32> {
  %xs = slapo.scatter %x <tp> {dim = 0 : i64} : tensor<4x3x5x5xf32> -> tensor<4x3x5x5xf32>
  %y = slapo.conv2d %xs, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1} : (tensor<4x3x5x5xf32>, tensor<6x3x3x3xf32>) -> tensor<4x6x3x3xf32>
  %g = slapo.all_gather %y <tp> {dim = 0 : i64} : tensor<4x6x3x3xf32> -> tensor<4x6x3x3xf32>
  return %g : tensor<4x6x3x3xf32>
}
// CHECK: // {{-+}}
// CHECK: slapo.conv2d %{{.*}}, %arg1 {{.*}} : (tensor<2x3x5x5xf32>, tensor<6x3x3x3xf32>) -> tensor<2x6x3x3xf32>

// -----

// What a rank could not compute alone is an error at the convolution.
func.func @forward(%x: tensor<2x4x5x5xf32>, %w: tensor<6x4x3x3xf32>) -> tensor<2x6x3x3xf32> {
  %xs = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x4x5x5xf32> -> tensor<2x4x5x5xf32>
  // expected-error @+1 {{tensor parallelism: convolves an input split along dim 1 by a weight replicated ([out channels, in channels, kH, kW])}}
  %y = slapo.conv2d %xs, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1} : (tensor<2x4x5x5xf32>, tensor<6x4x3x3xf32>) -> tensor<2x6x3x3xf32>
  return %y : tensor<2x6x3x3xf32>
}

// -----

module {
  slapo.param @conv.weight : tensor<8x2x3x3xf32> {shard_axis = 0 : i64}
  func.func @forward(%x: tensor<2x4x5x5xf32>) -> tensor<2x8x3x3xf32> {
    %w = slapo.get_param @conv.weight : tensor<8x2x3x3xf32>
    // expected-error @+1 {{tensor parallelism: a convolution in 2 groups with a weight split along dim 0: only a convolution of one group may split its weight}}
    %y = slapo.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 2} : (tensor<2x4x5x5xf32>, tensor<8x2x3x3xf32>) -> tensor<2x8x3x3xf32>
    %g = slapo.all_gather %y <tp> {dim = 1 : i64} : tensor<2x8x3x3xf32> -> tensor<2x8x3x3xf32>
    return %g : tensor<2x8x3x3xf32>
  }
}

// -----

module {
  slapo.param @conv.weight : tensor<6x4x1x1xf32> {shard_axis = 1 : i64}
  slapo.param @conv.bias : tensor<6xf32>
  func.func @forward(%x: tensor<2x4x5x5xf32>) -> tensor<2x6x5x5xf32> {
    %xs = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x4x5x5xf32> -> tensor<2x4x5x5xf32>
    %w = slapo.get_param @conv.weight : tensor<6x4x1x1xf32>
    %b = slapo.get_param @conv.bias : tensor<6xf32>
    // expected-error @+1 {{tensor parallelism: a row-parallel convolution (weight split along dim 1) with a bias}}
    %y = slapo.conv2d %xs, %w, %b {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1} : (tensor<2x4x5x5xf32>, tensor<6x4x1x1xf32>, tensor<6xf32>) -> tensor<2x6x5x5xf32>
    %r = slapo.all_reduce %y <tp> : tensor<2x6x5x5xf32>
    return %r : tensor<2x6x5x5xf32>
  }
}

// -----

// Max pooling pools each plane alone: a channel split passes through, a
// split of the image's rows is an error.
func.func @forward(%x: tensor<2x4x6x6xf32>) -> tensor<2x4x3x3xf32> {
  %xs = slapo.scatter %x <tp> {dim = 1 : i64} : tensor<2x4x6x6xf32> -> tensor<2x4x6x6xf32>
  %p = slapo.max_pool2d %xs {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<2x4x6x6xf32> -> tensor<2x4x3x3xf32>
  %g = slapo.all_gather %p <tp> {dim = 1 : i64} : tensor<2x4x3x3xf32> -> tensor<2x4x3x3xf32>
  return %g : tensor<2x4x3x3xf32>
}
// CHECK: // {{-+}}
// CHECK: slapo.max_pool2d %{{.*}} : tensor<2x2x6x6xf32> -> tensor<2x2x3x3xf32>

// -----

func.func @forward(%x: tensor<2x4x6x6xf32>) -> tensor<2x4x3x3xf32> {
  %xs = slapo.scatter %x <tp> {dim = 2 : i64} : tensor<2x4x6x6xf32> -> tensor<2x4x6x6xf32>
  // expected-error @+1 {{tensor parallelism: 'max_pool2d' along dim 2, which is split over the ranks}}
  %p = slapo.max_pool2d %xs {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<2x4x6x6xf32> -> tensor<2x4x3x3xf32>
  return %p : tensor<2x4x3x3xf32>
}

// -----

// A buffer keeps the sharding of the values the step gives it.
module {
  slapo.param buffer @bn.running_mean : tensor<4xf32>
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    %xs = slapo.scatter %x <tp> {dim = 0 : i64} : tensor<4xf32> -> tensor<4xf32>
    // expected-error @+1 {{tensor parallelism: the new value of buffer 'bn.running_mean' is split along dim 0 and the buffer is replicated: shard the buffer as the value it is given}}
    slapo.update_buffer @bn.running_mean, %xs : tensor<4xf32>
    return %x : tensor<4xf32>
  }
}

// -----

module {
  slapo.param buffer @bn.running_mean : tensor<4xf32> {shard_axis = 0 : i64}
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    %xs = slapo.scatter %x <tp> {dim = 0 : i64} : tensor<4xf32> -> tensor<4xf32>
    slapo.update_buffer @bn.running_mean, %xs : tensor<4xf32>
    return %x : tensor<4xf32>
  }
}
// CHECK: // {{-+}}
// CHECK: slapo.param buffer @bn.running_mean : tensor<2xf32> {shard_axis = 0 : i64}
// CHECK: slapo.update_buffer @bn.running_mean, %{{.*}} : tensor<2xf32>
