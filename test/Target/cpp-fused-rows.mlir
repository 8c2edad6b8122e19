// RUN: slapo-opt --slapo-autodiff --slapo-optimizer --slapo-fuse-elementwise --slapo-plan-memory %s | slapo-translate --slapo-to-cpp > %t.cpp
// RUN: FileCheck %s < %t.cpp
// RUN: c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Werror -I%runtime_include %t.cpp
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer --slapo-fuse-elementwise --slapo-plan-memory %s | slapo-translate --slapo-to-cpp --slapo-target=cuda > %t.cu
// RUN: FileCheck %s --check-prefix=CUDA < %t.cu
// RUN: %if cuda %{ nvcc -std=c++17 --fmad=false -x cu -c -Werror all-warnings -I%runtime_include %t.cu -o %t.o %}

// Row groups: GPT-2's attention scores divided by a scalar, the causal
// buffer's where and the softmax along the keys are one loop over the
// [2, 2, 5] rows of 5 keys; in the backward the softmax's gradient with its
// row sum, the where's and the division's gradients are another. A layer
// norm written out (means, the row ops on them) and a log-softmax whose
// row max the model subtracts first give the mean, max and log-softmax
// stages and a result of the rows' shape.
module {
  slapo.param @attn.key : tensor<5x5xf32>
  slapo.param buffer @attn.bias : tensor<1x1x5x5xi1>
  func.func @forward(%q: tensor<2x2x5x5xf32> {slapo.name = "q"}) -> tensor<f32> {
    %k = slapo.get_param @attn.key {slapo.module = "attn"} : tensor<5x5xf32>
    %s = slapo.linear %q, %k {slapo.module = "attn"} : (tensor<2x2x5x5xf32>, tensor<5x5xf32>) -> tensor<2x2x5x5xf32>
    %c = slapo.constant dense<2.0> : tensor<f32>
    %d = slapo.div %s, %c {slapo.module = "attn"} : (tensor<2x2x5x5xf32>, tensor<f32>) -> tensor<2x2x5x5xf32>
    %mask = slapo.get_param @attn.bias {slapo.module = "attn"} : tensor<1x1x5x5xi1>
    %low = slapo.constant dense<-3.40282347E+38> : tensor<f32>
    %w = slapo.where %mask, %d, %low {slapo.module = "attn"} : (tensor<1x1x5x5xi1>, tensor<2x2x5x5xf32>, tensor<f32>) -> tensor<2x2x5x5xf32>
    %p = slapo.softmax %w {dim = 3 : i64, slapo.module = "attn"} : tensor<2x2x5x5xf32>
    %o = slapo.linear %p, %k {slapo.module = "attn"} : (tensor<2x2x5x5xf32>, tensor<5x5xf32>) -> tensor<2x2x5x5xf32>

    %eps = slapo.constant dense<1.0e-05> : tensor<f32>
    %mean = slapo.mean %o {dims = array<i64: 3>, keepdim = true, slapo.module = "ln"} : tensor<2x2x5x5xf32> -> tensor<2x2x5x1xf32>
    %centered = slapo.sub %o, %mean {slapo.module = "ln"} : (tensor<2x2x5x5xf32>, tensor<2x2x5x1xf32>) -> tensor<2x2x5x5xf32>
    %squares = slapo.mul %centered, %centered {slapo.module = "ln"} : (tensor<2x2x5x5xf32>, tensor<2x2x5x5xf32>) -> tensor<2x2x5x5xf32>
    %var = slapo.mean %squares {dims = array<i64: 3>, keepdim = true, slapo.module = "ln"} : tensor<2x2x5x5xf32> -> tensor<2x2x5x1xf32>
    %shifted = slapo.add %var, %eps {slapo.module = "ln"} : (tensor<2x2x5x1xf32>, tensor<f32>) -> tensor<2x2x5x1xf32>
    %inv = slapo.rsqrt %shifted {slapo.module = "ln"} : tensor<2x2x5x1xf32>
    %normed = slapo.mul %centered, %inv {slapo.module = "ln"} : (tensor<2x2x5x5xf32>, tensor<2x2x5x1xf32>) -> tensor<2x2x5x5xf32>
    %h = slapo.linear %normed, %k {slapo.module = "head"} : (tensor<2x2x5x5xf32>, tensor<5x5xf32>) -> tensor<2x2x5x5xf32>

    %top = slapo.max %h {dims = array<i64: 3>, keepdim = true, slapo.module = "head"} : tensor<2x2x5x5xf32> -> tensor<2x2x5x1xf32>
    %z = slapo.sub %h, %top {slapo.module = "head"} : (tensor<2x2x5x5xf32>, tensor<2x2x5x1xf32>) -> tensor<2x2x5x5xf32>
    %lp = slapo.log_softmax %z {dim = 3 : i64, slapo.module = "head"} : tensor<2x2x5x5xf32>
    %l = slapo.sum %lp {dims = array<i64: 0, 1, 2, 3>, keepdim = false} : tensor<2x2x5x5xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// The forward's attention group: one row at a time, the row's pass for the
// softmax's maximum (its inputs to a scratch row), the exponentials and
// their sum in f64 in the kernels' row order (cpu::sumRow), then the pass
// that writes the probabilities.
// CHECK: // The loops of the fusion groups (slapo.fused).
// CHECK: /// div, where, softmax row by row (rows of 5 elements), in registers.
// CHECK-NEXT: SLAPO_VECTOR_INLINE void [[FWD:FusedLoop[0-9]+]]Body(void *const *data, int64_t begin, int64_t end) {
// CHECK-NEXT:   const float *__restrict in0 = static_cast<const float *>(data[0]);
// CHECK-NEXT:   const float *__restrict in1 = static_cast<const float *>(data[1]);
// CHECK-NEXT:   const uint8_t *__restrict in2 = static_cast<const uint8_t *>(data[2]);
// CHECK-NEXT:   const float *__restrict in3 = static_cast<const float *>(data[3]);
// CHECK-NEXT:   float *__restrict out0 = static_cast<float *>(data[4]);
// CHECK-NEXT:   const float a1 = in1[0];
// CHECK-NEXT:   const float a3 = in3[0];
// CHECK-NEXT:   std::vector<float> scratch2(5);
// CHECK-NEXT:   float *__restrict s2 = scratch2.data();
// CHECK-NEXT:   for (int64_t row = begin; row < end; ++row) {
// CHECK-NEXT:     const float *__restrict row0 = in0 + row * 5;
// CHECK-NEXT:     const uint8_t *__restrict row2 = in2 + row * 5 % 25;
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT:     for (int64_t j = 0; j < 5; ++j) {
// CHECK-NEXT:       const float a0 = row0[j];
// CHECK-NEXT:       const bool a2 = (row2[j] != 0);
// CHECK-NEXT:       const float v0 = cpu::applyBinary<BinaryKind::Div>(a0, a1);
// CHECK-NEXT:       const float v1 = a2 ? v0 : a3;
// CHECK-NEXT:       s2[j] = v1;
// CHECK-NEXT:     }
// CHECK-NEXT:     const float max2 = cpu::maxRow(s2, 5);
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT:     for (int64_t j = 0; j < 5; ++j) {
// CHECK-NEXT:       s2[j] = cpu::applyUnary<UnaryKind::Exp>(s2[j] - max2);
// CHECK-NEXT:     }
// CHECK-NEXT:     const double sum2 = cpu::sumRow(s2, 5);
// CHECK-NEXT:     const float scale2 = float(1.0 / sum2);
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT:     for (int64_t j = 0; j < 5; ++j) {
// CHECK-NEXT:       const float v2 = s2[j] * scale2;
// CHECK-NEXT:       out0[(row * 5 + j)] = v2;
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-NEXT: SLAPO_CPU_FUSED_LOOP(k[[FWD]], [[FWD]]Body)

// The layer norm: the means' stages, the row ops once per row, and the
// normalized rows.
// CHECK: /// mean, sub, mul, mean, add, rsqrt, mul row by row (rows of 5 elements), in registers.
// CHECK:     const double acc0 = cpu::sumRow(s0, 5);
// CHECK-NEXT:     const float v0 = float(acc0 / double(5));
// CHECK:     const float v4 = cpu::applyBinary<BinaryKind::Add>(v3, a1);
// CHECK-NEXT:     const float v5 = cpu::applyUnary<UnaryKind::Rsqrt>(v4);

// The head: the max's stage, then the log-softmax's (its inputs and its
// exponentials in two scratch rows).
// CHECK: /// max, sub, log_softmax row by row (rows of 5 elements), in registers.
// CHECK:     const float acc0 = cpu::maxRow(s0, 5);
// CHECK:       e2[j] = cpu::applyUnary<UnaryKind::Exp>(s2[j] - max2);
// CHECK:     const float logSum2 = float(std::log(sum2));
// CHECK:       const float v2 = s2[j] - max2 - logSum2;

// The softmax's backward: the row sum of grad * y in the middle.
// CHECK: /// mul, sum, sub, mul, where, div row by row (rows of 5 elements), in registers.
// CHECK:     const double acc1 = cpu::sumRow(s1, 5);
// CHECK-NEXT:     const float v1 = float(acc1);

// CHECK: void forward(
// CHECK: // "attn": fused (div, where, softmax)
// CHECK: runFusedRows(ctx, k[[FWD]], std::array<void *, 5>{t{{[0-9]+}}_linear.data, t{{[0-9]+}}_constant.data, t{{[0-9]+}}_get_param.data, t{{[0-9]+}}_constant.data, t{{[0-9]+}}_fused.data}.data(), 20, 5);
// CHECK-NOT: softmax(ctx
// CHECK: void backward(
// CHECK: // "attn": fused (mul, sum, sub, mul, where, div)
// CHECK-NOT: softmax
// CHECK-NOT: sum(ctx

// The kernel: a block per row, each stage's partial values combined across
// the block, the softmax's exponential computed again where it is read.
// CUDA: /// div, where, softmax row by row (rows of 5 elements), in registers.
// CUDA-NEXT: static __global__ void [[FWD:FusedLoop[0-9]+]]Kernel(cuda::FusedOperands<5> operands, int64_t numRows) {
// CUDA: for (int64_t row = blockIdx.x; row < numRows; row += gridDim.x) {
// CUDA: float max2 = -INFINITY;
// CUDA-NEXT: for (int64_t j = threadIdx.x; j < 5; j += blockDim.x) {
// CUDA: max2 = cuda::maxPropagatingNaN(v1, max2);
// CUDA-NEXT: }
// CUDA-NEXT: max2 = cuda::maxFusedRow(max2);
// CUDA-NEXT: double sum2 = 0;
// CUDA: sum2 += cuda::applyUnary<UnaryKind::Exp>(v1 - max2);
// CUDA-NEXT: }
// CUDA-NEXT: sum2 = cuda::sumFusedRow(sum2);
// CUDA-NEXT: const float scale2 = float(1.0 / sum2);
// CUDA: const float v2 = cuda::applyUnary<UnaryKind::Exp>(v1 - max2) * scale2;
// CUDA-NEXT: out0[(row * 5 + j)] = v2;
// CUDA: SLAPO_CUDA_FUSED_LOOP(k[[FWD]], [[FWD]]Kernel, 5)
// CUDA: if (threadIdx.x == 0)
// CUDA: runFusedRows(ctx, k[[FWD]],
