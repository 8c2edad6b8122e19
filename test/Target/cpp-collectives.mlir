// RUN: slapo-opt --slapo-autodiff --slapo-data-parallel --slapo-optimizer="optimizer=sgd lr=0.1" --slapo-plan-memory %s | slapo-translate --slapo-to-cpp > %t.cpp
// RUN: FileCheck %s < %t.cpp
// RUN: c++ -std=c++17 -fsyntax-only -Wall -Werror -I%runtime_include %t.cpp

// The data-parallel all-reduce of a bucket is one runtime call over the dp
// group with every tensor of the bucket, in the backward.
module {
  slapo.param @w : tensor<3x4xf32>
  slapo.param @b : tensor<3xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<3x4xf32>
    %b = slapo.get_param @b : tensor<3xf32>
    %y = slapo.linear %x, %w, %b : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %l = slapo.mean %y {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK-LABEL: void backward(Device &device, ProcessMesh &mesh, uint8_t *arena, int64_t step) {
// CHECK: // (root): all_reduce
// CHECK: allReduce(ctx, mesh.getDataParallel(), std::array<Tensor, 2>{[[DW:t[0-9]+_matmul]], [[DB:t[0-9]+_sum]]}.data(), std::array<Tensor, 2>{[[RW:t[0-9]+_all_reduce]], [[RB:t[0-9]+_all_reduce]]}.data(), 2, /*mean=*/true);
// CHECK: allReduce(ctx, mesh.getDataParallel(), std::array<Tensor, 1>{[[LOSS:t[0-9]+_mean]]}.data(), std::array<Tensor, 1>{[[MEAN:t[0-9]+_all_reduce]]}.data(), 1, /*mean=*/true);
// CHECK-LABEL: void optimizer(
// CHECK: sgdUpdate(ctx, {{s[0-9]+}}, [[RW]],
// CHECK: sgdUpdate(ctx, {{s[0-9]+}}, [[RB]],
