// RUN: slapo-opt --slapo-mixed-precision --slapo-autodiff --slapo-optimizer --slapo-fuse-elementwise --slapo-plan-memory %s | slapo-translate --slapo-to-cpp > %t.cpp
// RUN: FileCheck %s < %t.cpp
// RUN: c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Werror -I%runtime_include %t.cpp
// RUN: slapo-opt --slapo-mixed-precision --slapo-autodiff --slapo-optimizer --slapo-fuse-elementwise --slapo-plan-memory %s | slapo-translate --slapo-to-cpp --slapo-target=cuda > %t.cu
// RUN: FileCheck %s --check-prefix=CUDA < %t.cu
// RUN: %if cuda %{ nvcc -std=c++17 --fmad=false -x cu -c -Werror all-warnings -I%runtime_include %t.cu -o %t.o %}

// Mixed precision (train(precision="bf16")): the chain before a bf16
// product ends with the cast of its input, the chain after one starts with
// the cast of its (bf16) result, and each is one loop that writes or reads that
// tensor in bf16 with the cast kernel's conversion (BFloat16 on the CPU,
// cuda_bf16.h on the GPU): the f32 gelu output is never stored, and the bf16
// gradient is widened as it is read. The gelu's f32 input (the bf16 product
// widened, plus the bias) is not stored either: the backward's loop computes
// it again from the product, which the backward keeps in half the bytes.
module {
  slapo.param @fc1.weight : tensor<4x4xf32>
  slapo.param @fc1.bias : tensor<4xf32>
  slapo.param @fc2.weight : tensor<4x4xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %w1 = slapo.get_param @fc1.weight {slapo.module = "fc1"} : tensor<4x4xf32>
    %b1 = slapo.get_param @fc1.bias {slapo.module = "fc1"} : tensor<4xf32>
    %h = slapo.linear %x, %w1 {slapo.module = "fc1"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %a = slapo.add %h, %b1 {slapo.module = "fc1"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %g = slapo.gelu %a <tanh> {slapo.module = "act"} : tensor<2x4xf32>
    %w2 = slapo.get_param @fc2.weight {slapo.module = "fc2"} : tensor<4x4xf32>
    %y = slapo.linear %g, %w2 {slapo.module = "fc2"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %l = slapo.sum %y {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK: /// cast, add, gelu, cast on each element, in registers.
// CHECK-NEXT: SLAPO_VECTOR_INLINE void FusedLoop0Body(void *const *data, int64_t begin, int64_t end) {
// CHECK-NEXT:   const BFloat16 *__restrict in0 = static_cast<const BFloat16 *>(data[0]);
// CHECK-NEXT:   const float *__restrict in1 = static_cast<const float *>(data[1]);
// CHECK-NEXT:   BFloat16 *__restrict out0 = static_cast<BFloat16 *>(data[2]);
// CHECK:          const float a0 = in0[i].toFloat();
// CHECK:          const float v1 = cpu::applyBinary<BinaryKind::Add>(v0, a1);
// CHECK-NEXT:     const float v2 = cpu::applyUnary<UnaryKind::GeluTanh>(v1);
// CHECK-NEXT:     const float v3 = BFloat16::fromFloat(v2).toFloat();
// CHECK-NEXT:     out0[i] = BFloat16::fromFloat(v3);
// The backward's group also sums fc1's bias gradient (test/Target/
// cpp-fused-columns.mlir): a loop over column blocks.
// CHECK: /// cast, add, cast, gelu_grad, sum by blocks of columns, each over the 2 rows of 4 elements in order, in registers; the column sums in the reduce kernel's order.
// CHECK-NEXT: SLAPO_VECTOR_INLINE void FusedLoop1Body(void *const *data, int64_t begin, int64_t end) {
// CHECK-NEXT:   const BFloat16 *__restrict in0 = static_cast<const BFloat16 *>(data[0]);
// CHECK-NEXT:   const float *__restrict in1 = static_cast<const float *>(data[1]);
// CHECK-NEXT:   const BFloat16 *__restrict in2 = static_cast<const BFloat16 *>(data[2]);
// CHECK:            const float a0 = row0[j].toFloat();
// CHECK-NEXT:       const float a1 = row1[j];
// CHECK-NEXT:       const float a2 = row2[j].toFloat();
// CHECK-NEXT:       const float v0 = a0;
// CHECK-NEXT:       const float v1 = cpu::applyBinary<BinaryKind::Add>(v0, a1);
// CHECK-NEXT:       const float v2 = a2;
// CHECK-NEXT:       const float v3 = cpu::applyBinary<BinaryKind::GeluTanhGrad>(v2, v1);

// The group reads fc1's bf16 product and the product of fc2 reads the
// group's bf16 result; the weight's cast, alone, stays the cast kernel.
// CHECK: void forward(
// CHECK: // (root): fused (cast, add, gelu, cast)
// CHECK: [[INPUT:t[0-9]+_fused]] = view(arena, {{[0-9]+}}, DType::BF16, {2, 4});
// CHECK-NEXT: runFusedLoop(ctx, kFusedLoop0, std::array<void *, 3>{{{.*}}, [[INPUT]].data}.data(), 8);
// CHECK: // "fc2": cast
// CHECK: cast(ctx,
// CHECK: linear(ctx, [[INPUT]],

// CUDA: static __global__ void FusedLoop0Kernel(cuda::FusedOperands<3> operands, int64_t numElements) {
// CUDA:   __nv_bfloat16 *__restrict out0 = static_cast<__nv_bfloat16 *>(operands.data[2]);
// CUDA:     const float a0 = __bfloat162float(in0[i]);
// CUDA:     const float v3 = __bfloat162float(__float2bfloat16_rn(v2));
// CUDA:     out0[i] = __float2bfloat16_rn(v3);
// CUDA: static __global__ void FusedLoop1Kernel(cuda::FusedOperands<5> operands, int64_t numRows, char *partials) {
// CUDA:       const float a0 = __bfloat162float(row0[j]);
