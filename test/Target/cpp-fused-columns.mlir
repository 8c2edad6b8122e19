// RUN: slapo-opt --slapo-autodiff --slapo-optimizer --slapo-fuse-elementwise --slapo-plan-memory %s | slapo-translate --slapo-to-cpp > %t.cpp
// RUN: FileCheck %s < %t.cpp
// RUN: c++ -std=c++17 -fopenmp -fsyntax-only -Wall -Werror -I%runtime_include %t.cpp
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer --slapo-fuse-elementwise --slapo-plan-memory %s | slapo-translate --slapo-to-cpp --slapo-target=cuda > %t.cu
// RUN: FileCheck %s --check-prefix=CUDA < %t.cu
// RUN: %if cuda %{ nvcc -std=c++17 --fmad=false -x cu -c -Werror all-warnings -I%runtime_include %t.cu -o %t.o %}

// Column sums: the bias gradient of fc (the sum over the [2, 3] tokens of
// the gradient of its add) joins the backward's gelu-gradient group, so the
// f32 gradient the matmuls read is written once and no reduce reads it
// back. The loop runs over blocks of columns (cpu::getColumnBlock, the
// reduce kernel's), each block over the 6 rows in order: a row's columns of
// the block in one vectorized pass that writes the values and adds them to
// the block's f64 sums; the sums are written after the rows.
module {
  slapo.param @fc.weight : tensor<8x8xf32>
  slapo.param @fc.bias : tensor<8xf32>
  slapo.param @proj.weight : tensor<8x8xf32>
  func.func @forward(%x: tensor<2x3x8xf32> {slapo.name = "x"}) -> tensor<f32> {
    %w = slapo.get_param @fc.weight {slapo.module = "fc"} : tensor<8x8xf32>
    %b = slapo.get_param @fc.bias {slapo.module = "fc"} : tensor<8xf32>
    %h = slapo.linear %x, %w {slapo.module = "fc"} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %a = slapo.add %h, %b {slapo.module = "fc"} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
    %g = slapo.gelu %a <tanh> {slapo.module = "act"} : tensor<2x3x8xf32>
    %p = slapo.get_param @proj.weight {slapo.module = "proj"} : tensor<8x8xf32>
    %y = slapo.linear %g, %p {slapo.module = "proj"} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
    %l = slapo.sum %y {dims = array<i64: 0, 1, 2>, keepdim = false} : tensor<2x3x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK: /// gelu_grad, sum by blocks of columns, each over the 6 rows of 8 elements in order, in registers; the column sums in the reduce kernel's order.
// CHECK-NEXT: SLAPO_VECTOR_INLINE void [[LOOP:FusedLoop[0-9]+]]Body(void *const *data, int64_t begin, int64_t end) {
// CHECK-NEXT:   const float *__restrict in0 = static_cast<const float *>(data[0]);
// CHECK-NEXT:   const float *__restrict in1 = static_cast<const float *>(data[1]);
// CHECK-NEXT:   float *__restrict out0 = static_cast<float *>(data[2]);
// CHECK-NEXT:   float *__restrict out1 = static_cast<float *>(data[3]);
// CHECK-NEXT:   for (int64_t block = begin; block < end; ++block) {
// CHECK-NEXT:     const cpu::ColumnBlock columns = cpu::getColumnBlock(block, 8);
// CHECK-NEXT:     const int64_t first = columns.first;
// CHECK-NEXT:     const int64_t stop = first + columns.width;
// CHECK-NEXT:     double acc1[cpu::kColumnBlock] = {};
// CHECK-NEXT:     for (int64_t row = 0; row < 6; ++row) {
// CHECK-NEXT:       const float *__restrict row0 = in0 + row * 8;
// CHECK-NEXT:       const float *__restrict row1 = in1 + row * 8;
// CHECK-NEXT: #pragma omp simd
// CHECK-NEXT:       for (int64_t j = first; j < stop; ++j) {
// CHECK-NEXT:         const float a0 = row0[j];
// CHECK-NEXT:         const float a1 = row1[j];
// CHECK-NEXT:         const float v0 = cpu::applyBinary<BinaryKind::GeluTanhGrad>(a0, a1);
// CHECK-NEXT:         out0[(row * 8 + j)] = v0;
// CHECK-NEXT:         acc1[j - first] += double(v0);
// CHECK-NEXT:       }
// CHECK-NEXT:     }
// CHECK-NEXT:     for (int64_t j = first; j < stop; ++j)
// CHECK-NEXT:       out1[j] = float(acc1[j - first]);
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-NEXT: SLAPO_CPU_FUSED_LOOP(k[[LOOP]], [[LOOP]]Body)

// The call names the group's modules and runs it over the column blocks of
// 6 rows of 8; the bias's update reads the group's [8] result.
// CHECK: void backward(
// CHECK: // (root): fused (gelu_grad, sum)
// CHECK: [[BIAS:t[0-9]+_fused]] = view(arena, {{[0-9]+}}, DType::F32, {8});
// CHECK-NEXT: runFusedColumns(ctx, k[[LOOP]], std::array<void *, 4>{{{.*}}, [[BIAS]].data}.data(), 6, 8);
// CHECK-NOT: reduce(ctx
// CHECK: void optimizer(
// CHECK: // "fc.bias": adamw_update
// CHECK: adamwUpdate(ctx, {{.*}}, [[BIAS]],

// On the GPU a block takes tiles of 32 columns (BlockReduce.cuh's column
// order: the reduce kernel's): a thread one column, its slice of the rows
// in order, sums in f32 as the reduce kernel's; the slices' sums are then
// combined and written.
// CUDA: /// gelu_grad, sum by blocks of columns, each over the 6 rows of 8 elements in order, in registers; the column sums in the reduce kernel's order.
// CUDA-NEXT: static __global__ void [[LOOP:FusedLoop[0-9]+]]Kernel(cuda::FusedOperands<4> operands, int64_t numRows, char *partials) {
// CUDA:        constexpr int64_t kPartialBytes = 32;
// CUDA-NEXT:   // The rows of this split (blockIdx.y).
// CUDA-NEXT:   int64_t begin, end;
// CUDA-NEXT:   cuda::getSplitRange(numRows, gridDim.y, blockIdx.y, begin, end);
// CUDA-NEXT:   for (int64_t tile = blockIdx.x; tile * cuda::kColumnTile < 8; tile += gridDim.x) {
// CUDA-NEXT:     const int64_t j = tile * cuda::kColumnTile + cuda::getColumnLane();
// CUDA-NEXT:     float acc1 = 0;
// CUDA-NEXT:     for (int64_t row = begin + cuda::getColumnSlice(); j < 8 && row < end; row += cuda::kColumnSlices) {
// CUDA:              const float v0 = cuda::applyBinary<BinaryKind::GeluTanhGrad>(a0, a1);
// CUDA-NEXT:         out0[(row * 8 + j)] = v0;
// CUDA-NEXT:         acc1 += float(v0);
// CUDA-NEXT:       }
// CUDA-NEXT:     }
// CUDA-NEXT:     acc1 = cuda::sumColumnSlices(acc1);
// CUDA-NEXT:     if (cuda::getColumnSlice() == 0 && j < 8) {
// CUDA-NEXT:       if (gridDim.y == 1)
// CUDA-NEXT:         out1[j] = float(acc1);
// CUDA-NEXT:       else
// CUDA-NEXT:         reinterpret_cast<float *>(partials + int64_t(blockIdx.y) * kPartialBytes + 0)[j] = acc1;
// CUDA-NEXT:     }
// CUDA-NEXT:   }
// CUDA-NEXT: }
// The splits' partial sums (where the reduce kernel would split the rows,
// so does this one), added in split order as its finishing kernel does.
// CUDA-NEXT: /// [[LOOP]]Kernel's splits' partial sums, added in split order.
// CUDA-NEXT: static __global__ void [[LOOP]]Finish(cuda::FusedOperands<4> operands, int splits, const char *partials) {
// CUDA-NEXT:   float *__restrict out1 = static_cast<float *>(operands.data[3]);
// CUDA-NEXT:   constexpr int64_t kPartialBytes = 32;
// CUDA-NEXT:   for (int64_t j = cuda::getFusedLoopStart(); j < 8; j += cuda::getFusedLoopStride()) {
// CUDA-NEXT:     float acc1 = reinterpret_cast<const float *>(partials + 0 + 0)[j];
// CUDA-NEXT:     for (int split = 1; split < splits; ++split)
// CUDA-NEXT:       acc1 += reinterpret_cast<const float *>(partials + split * kPartialBytes + 0)[j];
// CUDA-NEXT:     out1[j] = float(acc1);
// CUDA-NEXT:   }
// CUDA-NEXT: }
// CUDA-NEXT: SLAPO_CUDA_FUSED_COLUMNS(k[[LOOP]], [[LOOP]]Kernel, [[LOOP]]Finish, 4, 32)
// CUDA: runFusedColumns(ctx, k[[LOOP]], std::array<void *, 4>{{{.*}}}.data(), 6, 8);
