// RUN: slapo-opt --slapo-autodiff --slapo-optimizer --slapo-plan-memory --mlir-print-debuginfo %s | slapo-translate --slapo-to-cpp > %t.cpp
// RUN: FileCheck %s < %t.cpp
// RUN: c++ -std=c++17 -fsyntax-only -Wall -Werror -I%runtime_include %t.cpp

// A dropout's kernel call names what its mask is drawn from: the run's seed,
// the step's number (an argument of the step), the op's stream and the rank
// stream (the tp rank inside fork_rng()), and where the rank's operand lies
// in the whole tensor (its rows of the batch, its part of a split). The
// backward's dropout of the gradient draws the forward's mask.
module {
  slapo.param @fc1.weight : tensor<4x4xf32> {shard_axis = 0 : i64}
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %in = slapo.dropout %x {p = 1.000000e-01 : f64, stream = 0 : i64, slapo.module = "drop"} : tensor<2x4xf32> loc(#drop)
    %w1 = slapo.get_param @fc1.weight {slapo.module = "fc1"} : tensor<4x4xf32> loc(#fc1)
    %h = slapo.linear %in, %w1 {slapo.module = "fc1"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc(#fc1)
    %d = slapo.dropout %h {fork_rng, p = 2.500000e-01 : f64, shard_axis = 1 : i64, shard_chunks = 2 : i64, stream = 1 : i64, slapo.module = "fc1.drop"} : tensor<2x4xf32> loc(#fc1drop)
    %l = slapo.sum %d {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
#src = loc("model.py":3:0)
#drop = loc(#src)
#fc1 = loc(#src)
#fc1drop = loc(#src)

// CHECK: constexpr uint64_t kSeed = 0u;
// CHECK-LABEL: void forward(Device &device, ProcessMesh &mesh, uint8_t *arena, int64_t step) {
// CHECK: // "drop": dropout
// CHECK-DAG: const Tensor [[IN:t[0-9]+_dropout]] = view(arena, {{[0-9]+}}, DType::F32, {2, 4});
// CHECK: dropout(ctx, arg0, [[IN]], 0.10000000000000001, {kSeed, step, /*stream=*/0, /*rankStream=*/0}, {mesh.getDpRank()});
// CHECK: // "fc1.drop": dropout
// CHECK: dropout(ctx, {{t[0-9]+}}_linear, {{t[0-9]+}}_dropout, 0.25, {kSeed, step, /*stream=*/1, /*rankStream=*/mesh.getTpRank()}, {mesh.getDpRank(), {/*axis=*/1, /*chunks=*/2, mesh.getTp()}, mesh.getTpRank()});
// CHECK-LABEL: void backward(Device &device, ProcessMesh &mesh, uint8_t *arena, int64_t step) {
// CHECK: // "fc1.drop": dropout
// CHECK: dropout(ctx, {{t[0-9]+}}_broadcast, {{t[0-9]+}}_dropout, 0.25, {kSeed, step, /*stream=*/1, /*rankStream=*/mesh.getTpRank()}, {mesh.getDpRank(), {/*axis=*/1, /*chunks=*/2, mesh.getTp()}, mesh.getTpRank()});
// CHECK-NOT: dropout(
// CHECK-LABEL: void optimizer(
