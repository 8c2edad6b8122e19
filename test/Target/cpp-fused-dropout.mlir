// RUN: slapo-opt --slapo-autodiff --slapo-optimizer "--slapo-fuse-elementwise=kind=bias_dropout_add modules=b" --slapo-plan-memory %s | slapo-translate --slapo-to-cpp > %t.cpp
// RUN: FileCheck %s < %t.cpp
// RUN: c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Werror -I%runtime_include %t.cpp
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer "--slapo-fuse-elementwise=kind=bias_dropout_add modules=b" --slapo-plan-memory %s | slapo-translate --slapo-to-cpp --slapo-target=cuda > %t.cu
// RUN: FileCheck %s --check-prefix=CUDA < %t.cu
// RUN: %if cuda %{ nvcc -std=c++17 --fmad=false -x cu -c -Werror all-warnings -I%runtime_include %t.cu -o %t.o %}

// A group with a dropout (fuse("bias_dropout_add")): the loop draws the
// mask with the dropout kernels' rule (Random.h's keepsElement), element i
// of a tensor that is not split over tp ranks at counter first + i, with
// first = the dp rank's first element. The key and first are computed at the
// call, from the step and the dropout's stream, and passed after the
// tensors' addresses; the step number itself is no operand the loop reads.
module {
  slapo.param @b.proj.weight : tensor<4x4xf32>
  slapo.param @b.proj.bias : tensor<4xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %w = slapo.get_param @b.proj.weight {slapo.module = "b.proj"} : tensor<4x4xf32>
    %bias = slapo.get_param @b.proj.bias {slapo.module = "b.proj"} : tensor<4xf32>
    %p = slapo.linear %x, %w, %bias {slapo.module = "b.proj"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %d = slapo.dropout %p {p = 1.000000e-01 : f64, stream = 3 : i64, slapo.module = "b.drop"} : tensor<2x4xf32>
    %h = slapo.add %d, %x {slapo.module = "b"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %l = slapo.sum %h {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK: #include "slapo/runtime/cpu/FusedLoop.h"
// CHECK: /// add, dropout, add on each element, in registers.
// CHECK-NEXT: SLAPO_VECTOR_INLINE void FusedLoop0Body(void *const *data, int64_t begin, int64_t end) {
// CHECK-NEXT:   const float *__restrict in0 = static_cast<const float *>(data[0]);
// CHECK-NEXT:   const float *__restrict in1 = static_cast<const float *>(data[1]);
// CHECK-NEXT:   const float *__restrict in3 = static_cast<const float *>(data[3]);
// CHECK-NEXT:   const uint64_t key0 = reinterpret_cast<uintptr_t>(data[5]);
// CHECK-NEXT:   const uint64_t first0 = reinterpret_cast<uintptr_t>(data[6]);
// CHECK-NEXT:   float *__restrict out0 = static_cast<float *>(data[4]);
// CHECK:        const float v0 = cpu::applyBinary<BinaryKind::Add>(a0, a1);
// CHECK-NEXT:   const float v1 = v0 * (keepsElement(key0, first0 + uint64_t(i), dropoutThreshold(0.10000000000000001)) ? static_cast<float>(1.0 / (1.0 - 0.10000000000000001)) : float(0));
// CHECK-NEXT:   const float v2 = cpu::applyBinary<BinaryKind::Add>(v1, a3);
// CHECK-NEXT:   out0[i] = v2;
// CHECK: // "b": fused by fuse("bias_dropout_add") (add, dropout, add)
// CHECK: runFusedLoop(ctx, kFusedLoop0, std::array<void *, 7>{{.*}}, reinterpret_cast<void *>(uintptr_t(dropoutKey(kSeed, step, /*stream=*/3, /*rankStream=*/0))), reinterpret_cast<void *>(uintptr_t(mesh.getDpRank() * 8))}.data(), 8);
// The backward's dropout of the gradient is a dropout kernel, as before.
// CHECK: dropout(ctx, {{.*}} /*stream=*/3

// CUDA: static __global__ void FusedLoop0Kernel(cuda::FusedOperands<7> operands, int64_t numElements) {
// CUDA:   const uint64_t key0 = reinterpret_cast<uintptr_t>(operands.data[5]);
// CUDA:     const float v1 = v0 * (keepsElement(key0, first0 + uint64_t(i), dropoutThreshold(0.10000000000000001)) ? static_cast<float>(1.0 / (1.0 - 0.10000000000000001)) : float(0));
