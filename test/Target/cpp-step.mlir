// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=adamw lr=0.01" --slapo-plan-memory --mlir-print-debuginfo %s | slapo-translate --slapo-to-cpp > %t.cpp
// RUN: FileCheck %s < %t.cpp
// RUN: c++ -std=c++17 -fsyntax-only -Wall -Werror -I%runtime_include %t.cpp
// The same step for the GPU differs only in the backend it names.
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=adamw lr=0.01" --slapo-plan-memory --mlir-print-debuginfo %s | slapo-translate --slapo-to-cpp --slapo-target=cuda > %t.cu
// RUN: not diff %t.cpp %t.cu > %t.diff
// RUN: FileCheck %s --check-prefix=CUDA < %t.diff
// RUN: %if cuda %{ nvcc -std=c++17 -x cu -c -I%runtime_include %t.cu -o %t.o %}

// CUDA: < #include "slapo/runtime/cpu/Kernels.h"
// CUDA: > #include "slapo/runtime/cuda/Kernels.h"
// CUDA: < using slapo::rt::cpu::Context;
// CUDA: > using slapo::rt::cuda::Context;
// CUDA: < slapo::rt::cpu::createDevice,
// CUDA: > slapo::rt::cuda::createDevice,
// CUDA-NOT: {{^[<>]}}

// One function per phase; each kernel call follows a comment with its module
// path and declares the views it touches first; tables describe the arena.
module {
  slapo.param @w : tensor<3x4xf32>
  slapo.param @b : tensor<3xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %w = slapo.get_param @w {slapo.module = "layers.0.fc"} : tensor<3x4xf32> loc(#fc)
    %b = slapo.get_param @b {slapo.module = "layers.0.fc"} : tensor<3xf32> loc(#fc)
    %y = slapo.linear %x, %w, %b {slapo.module = "layers.0.fc"} : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32> loc(#fc)
    %r = slapo.gelu %y <tanh> {slapo.module = "layers.0.act"} : tensor<2x3xf32> loc(#act)
    %l = slapo.sum %r {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
#src = loc("model.py":7:0)
#fc = loc(#src)
#act = loc(#src)

// CHECK: #include "slapo/runtime/cpu/Kernels.h"
// CHECK: constexpr uint64_t kSeed = 0u;
// CHECK: void initialize(Device &device, ProcessMesh &mesh, uint8_t *arena, int64_t step) {
// CHECK: fill(ctx, t{{[0-9]+}}_constant, 1);
// CHECK: fill(ctx, t{{[0-9]+}}_constant, 0.01);

// CHECK-LABEL: void forward(Device &device, ProcessMesh &mesh, uint8_t *arena, int64_t step) {
// CHECK: // "layers.0.fc": linear
// CHECK-NEXT: const Tensor [[Y:t[0-9]+_linear]] = view(arena, {{[0-9]+}}, DType::F32, {2, 3});
// CHECK-DAG: const Tensor [[B:t[0-9]+_get_param]] = view(arena, 192, DType::F32, {3});
// CHECK-DAG: const Tensor [[W:t[0-9]+_get_param]] = view(arena, 0, DType::F32, {3, 4});
// CHECK-DAG: const Tensor [[X:arg0]] = view(arena, 384, DType::F32, {2, 4});
// CHECK: linear(ctx, [[X]], [[W]], [[B]], [[Y]]);
// CHECK: // "layers.0.act": gelu
// CHECK: unary(ctx, UnaryKind::GeluTanh, [[Y]], t{{[0-9]+}}_gelu);
// CHECK: // (root): sum
// CHECK: reduce(ctx, ReduceKind::Sum, t{{[0-9]+}}_gelu, [[LOSS:t[0-9]+_sum]], 3u);
// CHECK-NEXT: }

// Backward reads the forward's tensors through views of its own.
// CHECK-LABEL: void backward(Device &device, ProcessMesh &mesh, uint8_t *arena, int64_t step) {
// CHECK: matmul(ctx,
// CHECK-LABEL: void optimizer(Device &device, ProcessMesh &mesh, uint8_t *arena, int64_t step) {
// CHECK: // "w": adamw_update
// CHECK-DAG: const Tensor s0 = view(arena, 0, DType::F32, {3, 4});
// CHECK-DAG: const Tensor s64 = view(arena, 64, DType::F32, {3, 4});
// CHECK-DAG: const Tensor s128 = view(arena, 128, DType::F32, {3, 4});
// CHECK: adamwUpdate(ctx, s0, t{{[0-9]+}}_matmul, Tensor(), s64, s128, t{{[0-9]+}}_constant, step, 0.90000000000000002, 0.999, 1e-08, 0);

// CHECK: const ArenaSlot kParams[] = {
// CHECK-NEXT: {"w", DType::F32, {3, 4}, 0},
// CHECK-NEXT: {"b", DType::F32, {3}, 192},
// CHECK: const ArenaSlot kOptimizerState[] = {
// CHECK-NEXT: {"w.exp_avg", DType::F32, {3, 4},
// CHECK: const ArenaSlot kGradients[] = {
// CHECK-NEXT: {"w", DType::F32, {3, 4},
// CHECK-NEXT: {"b", DType::F32, {3},
// CHECK: const InputSlot kInputs[] = {
// CHECK-NEXT: {{[{][{]}}"x", DType::F32, {2, 4}, 384}, 0},
// CHECK: const ProgramDesc kProgram = {
// CHECK: /*dp=*/1, /*tp=*/1, /*pp=*/1, /*stage=*/0, /*seed=*/kSeed,
// CHECK: /*step=*/{"step", DType::I64, {}, 448},
// CHECK: /*loss=*/{"loss", DType::F32, {},
// CHECK: /*learningRate=*/{"lr", DType::F64, {},
// CHECK: int main(int argc, char **argv) {
// CHECK-NEXT: return slapo::rt::runTrainingMain(kProgram, argc, argv);
