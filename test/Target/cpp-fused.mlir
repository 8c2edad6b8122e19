// RUN: slapo-opt --slapo-autodiff --slapo-optimizer --slapo-fuse-elementwise --slapo-plan-memory %s | slapo-translate --slapo-to-cpp > %t.cpp
// RUN: FileCheck %s < %t.cpp
// RUN: c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Werror -I%runtime_include %t.cpp
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer --slapo-fuse-elementwise --slapo-plan-memory %s | slapo-translate --slapo-to-cpp --slapo-target=cuda > %t.cu
// RUN: FileCheck %s --check-prefix=CUDA < %t.cu
// RUN: %if cuda %{ nvcc -std=c++17 --fmad=false -x cu -c -Werror all-warnings -I%runtime_include %t.cu -o %t.o %}

// A fusion group is one loop: each operand's element read once, each op's
// scalar math (ElementMath.h) on registers, the results written. The bias
// row is read in runs of its 4 elements, where it is contiguous, so that the
// inner loop vectorizes (omp simd: rank programs are built with -fopenmp). The loop is defined once, built per instruction set
// by SLAPO_CPU_FUSED_LOOP, and run over the group's 8 elements.
module {
  slapo.param @fc.weight : tensor<4x4xf32>
  slapo.param @fc.bias : tensor<4xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %w = slapo.get_param @fc.weight {slapo.module = "fc"} : tensor<4x4xf32>
    %b = slapo.get_param @fc.bias {slapo.module = "fc"} : tensor<4xf32>
    %h = slapo.linear %x, %w {slapo.module = "fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %a = slapo.add %h, %b {slapo.module = "fc"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %g = slapo.gelu %a <tanh> {slapo.module = "fc.act"} : tensor<2x4xf32>
    %l = slapo.sum %g {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK: #include "slapo/runtime/cpu/FusedLoop.h"
// CHECK: // The loops of the fusion groups (slapo.fused).
// CHECK-NEXT: /// add, gelu on each element, in registers.
// CHECK-NEXT: SLAPO_VECTOR_INLINE void FusedLoop0Body(void *const *data, int64_t begin, int64_t end) {
// CHECK-NEXT:   const float *__restrict in0 = static_cast<const float *>(data[0]);
// CHECK-NEXT:   const float *__restrict in1 = static_cast<const float *>(data[1]);
// CHECK-NEXT:   float *__restrict out0 = static_cast<float *>(data[2]);
// CHECK-NEXT:   float *__restrict out1 = static_cast<float *>(data[3]);
// CHECK-NEXT:   for (int64_t start = begin, stop; start < end; start = stop) {
// CHECK-NEXT:     stop = std::min<int64_t>(end, (start / 4 + 1) * 4);
// CHECK-NEXT:     const int64_t at1 = start % 4 - start;
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT:     for (int64_t i = start; i < stop; ++i) {
// CHECK-NEXT:       const float a0 = in0[i];
// CHECK-NEXT:       const float a1 = in1[at1 + i];
// CHECK-NEXT:       const float v0 = cpu::applyBinary<BinaryKind::Add>(a0, a1);
// CHECK-NEXT:       const float v1 = cpu::applyUnary<UnaryKind::GeluTanh>(v0);
// CHECK-NEXT:       out0[i] = v0;
// CHECK-NEXT:       out1[i] = v1;
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-NEXT: SLAPO_CPU_FUSED_LOOP(kFusedLoop0, FusedLoop0Body)

// The backward's gelu gradient reads the add's result, which the group
// therefore writes beside the gelu's; its group also sums the bias gradient
// (test/Target/cpp-fused-columns.mlir).
// CHECK: void forward(
// CHECK: // "fc": fused (add, gelu)
// CHECK: runFusedLoop(ctx, kFusedLoop0, std::array<void *, 4>{t{{[0-9]+}}_linear.data, t{{[0-9]+}}_get_param.data, [[ADD:t[0-9]+_fused]].data, [[GELU:t[0-9]+_fused]].data}.data(), 8);
// CHECK: reduce(ctx, ReduceKind::Sum, [[GELU]],
// CHECK: void backward(
// CHECK: // "fc": fused (gelu_grad, sum)
// CHECK: runFusedColumns(ctx, kFusedLoop1, std::array<void *, 4>{{{.*}}, [[ADD]].data, {{.*}}}.data(), 2, 4);

// On the GPU the group is one kernel: a grid-stride loop, each thread one
// element per step, the bias row's element found by index; the same call
// runs it (cuda::runFusedLoop sizes the grid as the runtime's elementwise
// kernels). Static, as each translation unit of the program has its own.
// CUDA: #include "slapo/runtime/cuda/FusedLoop.cuh"
// CUDA: // The loops of the fusion groups (slapo.fused).
// CUDA-NEXT: /// add, gelu on each element, in registers.
// CUDA-NEXT: static __global__ void FusedLoop0Kernel(cuda::FusedOperands<4> operands, int64_t numElements) {
// CUDA-NEXT:   const float *__restrict in0 = static_cast<const float *>(operands.data[0]);
// CUDA-NEXT:   const float *__restrict in1 = static_cast<const float *>(operands.data[1]);
// CUDA-NEXT:   float *__restrict out0 = static_cast<float *>(operands.data[2]);
// CUDA-NEXT:   float *__restrict out1 = static_cast<float *>(operands.data[3]);
// CUDA-NEXT:   for (int64_t i = cuda::getFusedLoopStart(); i < numElements; i += cuda::getFusedLoopStride()) {
// CUDA-NEXT:     const float a0 = in0[i];
// CUDA-NEXT:     const float a1 = in1[i % 4];
// CUDA-NEXT:     const float v0 = cuda::applyBinary<BinaryKind::Add>(a0, a1);
// CUDA-NEXT:     const float v1 = cuda::applyUnary<UnaryKind::GeluTanh>(v0);
// CUDA-NEXT:     out0[i] = v0;
// CUDA-NEXT:     out1[i] = v1;
// CUDA-NEXT:   }
// CUDA-NEXT: }
// CUDA-NEXT: SLAPO_CUDA_FUSED_LOOP(kFusedLoop0, FusedLoop0Kernel, 4)
// CUDA: runFusedLoop(ctx, kFusedLoop0, std::array<void *, 4>{t{{[0-9]+}}_linear.data, t{{[0-9]+}}_get_param.data, {{t[0-9]+_fused}}.data, {{t[0-9]+_fused}}.data}.data(), 8);
