// RUN: slapo-opt --slapo-autodiff --slapo-optimizer --slapo-fuse-elementwise --slapo-plan-memory %s | slapo-translate --slapo-to-cpp > %t.cpp
// RUN: FileCheck %s < %t.cpp
// RUN: c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Werror -I%runtime_include %t.cpp
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer --slapo-fuse-elementwise --slapo-plan-memory %s | slapo-translate --slapo-to-cpp --slapo-target=cuda > %t.cu
// RUN: FileCheck %s --check-prefix=CUDA < %t.cu
// RUN: %if cuda %{ nvcc -std=c++17 --fmad=false -x cu -c -Werror all-warnings -I%runtime_include %t.cu -o %t.o %}

// GPT-2's attention scores: divided by a scalar, then the causal buffer's
// where; in the backward the where's gradient and the division's join the
// softmax gradient's elementwise ops. The bool condition is an operand the
// loop reads as bytes (GCC vectorizes no loop that loads `bool`s), the
// [1,1,4,4] mask in runs of its 16 elements; the select is a ternary the
// simd loop vectorizes as a blend. CUDA reads bools. The softmax is
// along dim 2, not the last, so that it stays out of the loop (along the
// last dim the three are one row group: cpp-fused-rows.mlir).
module {
  slapo.param @attn.key : tensor<4x4xf32>
  slapo.param buffer @attn.bias : tensor<1x1x4x4xi1>
  func.func @forward(%q: tensor<2x2x4x4xf32> {slapo.name = "q"}) -> tensor<f32> {
    %k = slapo.get_param @attn.key {slapo.module = "attn"} : tensor<4x4xf32>
    %s = slapo.linear %q, %k {slapo.module = "attn"} : (tensor<2x2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x2x4x4xf32>
    %c = slapo.constant dense<2.0> : tensor<f32>
    %d = slapo.div %s, %c {slapo.module = "attn"} : (tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
    %mask = slapo.get_param @attn.bias {slapo.module = "attn"} : tensor<1x1x4x4xi1>
    %low = slapo.constant dense<-3.40282347E+38> : tensor<f32>
    %w = slapo.where %mask, %d, %low {slapo.module = "attn"} : (tensor<1x1x4x4xi1>, tensor<2x2x4x4xf32>, tensor<f32>) -> tensor<2x2x4x4xf32>
    %p = slapo.softmax %w {dim = 2 : i64, slapo.module = "attn"} : tensor<2x2x4x4xf32>
    %sq = slapo.mul %p, %p : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
    %l = slapo.sum %sq {dims = array<i64: 0, 1, 2, 3>, keepdim = false} : tensor<2x2x4x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK: // The loops of the fusion groups (slapo.fused).
// CHECK: /// div, where on each element, in registers.
// CHECK-NEXT: SLAPO_VECTOR_INLINE void [[FWD:FusedLoop[0-9]+]]Body(void *const *data, int64_t begin, int64_t end) {
// CHECK-NEXT:   const float *__restrict in0 = static_cast<const float *>(data[0]);
// CHECK-NEXT:   const float *__restrict in1 = static_cast<const float *>(data[1]);
// CHECK-NEXT:   const uint8_t *__restrict in2 = static_cast<const uint8_t *>(data[2]);
// CHECK-NEXT:   const float *__restrict in3 = static_cast<const float *>(data[3]);
// CHECK-NEXT:   float *__restrict out0 = static_cast<float *>(data[4]);
// CHECK-NEXT:   const float a1 = in1[0];
// CHECK-NEXT:   const float a3 = in3[0];
// CHECK-NEXT:   for (int64_t start = begin, stop; start < end; start = stop) {
// CHECK-NEXT:     stop = std::min<int64_t>(end, (start / 16 + 1) * 16);
// CHECK-NEXT:     const int64_t at2 = start % 16 - start;
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT:     for (int64_t i = start; i < stop; ++i) {
// CHECK-NEXT:       const float a0 = in0[i];
// CHECK-NEXT:       const bool a2 = (in2[at2 + i] != 0);
// CHECK-NEXT:       const float v0 = cpu::applyBinary<BinaryKind::Div>(a0, a1);
// CHECK-NEXT:       const float v1 = a2 ? v0 : a3;
// CHECK-NEXT:       out0[i] = v1;
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }

// The backward's group ends in the where's gradient (the mask selecting the
// incoming gradient or 0) and the division's.
// CHECK: /// {{.*}}where, div on each element, in registers.

// CHECK: void forward(
// CHECK: // "attn": fused (div, where)
// CHECK: runFusedLoop(ctx, k[[FWD]], std::array<void *, 5>{t{{[0-9]+}}_linear.data, t{{[0-9]+}}_constant.data, t{{[0-9]+}}_get_param.data, t{{[0-9]+}}_constant.data, t{{[0-9]+}}_fused.data}.data(), 64);
// CHECK-EMPTY:
// CHECK-NEXT: // "attn": softmax
// CHECK: void backward(
// CHECK: // "attn": fused ({{.*}}where, div)
// CHECK-NOT: where(ctx

// CUDA: static __global__ void FusedLoop{{[0-9]+}}Kernel(cuda::FusedOperands<5> operands, int64_t numElements) {
// CUDA-NEXT:   const float *__restrict in0 = static_cast<const float *>(operands.data[0]);
// CUDA-NEXT:   const float *__restrict in1 = static_cast<const float *>(operands.data[1]);
// CUDA-NEXT:   const bool *__restrict in2 = static_cast<const bool *>(operands.data[2]);
// CUDA: const bool a2 = in2[i % 16];
// CUDA: const float v1 = a2 ? v0 : a3;
