// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=adamw lr=0.01" --slapo-plan-memory --mlir-print-debuginfo %s | slapo-translate --slapo-to-cpp > %t.out
// RUN: FileCheck %s < %t.out
// RUN: rm -rf %t && split-file %t.out %t
// RUN: c++ -std=c++17 -fsyntax-only -Wall -Werror -I%runtime_include %t/step.cpp
// RUN: c++ -std=c++17 -fsyntax-only -Wall -Werror -I%runtime_include %t/blocks.cpp
// RUN: %if cuda %{ slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=adamw lr=0.01" --slapo-plan-memory %s | slapo-translate --slapo-to-cpp --slapo-target=cuda > %t-cu.out %}
// RUN: %if cuda %{ rm -rf %t-cu && split-file %t-cu.out %t-cu %}
// RUN: %if cuda %{ nvcc -std=c++17 -c -I%runtime_include %t-cu/step.cu -o %t-step.o %}
// RUN: %if cuda %{ nvcc -std=c++17 -c -I%runtime_include %t-cu/blocks.cu -o %t-blocks.o %}

// Six residual MLP blocks: layers.0, layers.1 and extra.0 compute the same
// thing (gelu tanh, hidden 8), layers.2 and layers.3 differ from them in an
// attribute (gelu erf), layers.4 in its shapes (hidden 6). Each distinct body
// of a phase that runs for more than one block becomes one function of
// blocks.cpp, called per block with its row of a table of offsets in
// step.cpp; a body no other block shares stays inline.
module {
  slapo.param @layers.0.fc1.weight : tensor<8x4xf32>
  slapo.param @layers.0.fc1.bias : tensor<8xf32>
  slapo.param @layers.0.fc2.weight : tensor<4x8xf32>
  slapo.param @layers.0.fc2.bias : tensor<4xf32>
  slapo.param @layers.1.fc1.weight : tensor<8x4xf32>
  slapo.param @layers.1.fc1.bias : tensor<8xf32>
  slapo.param @layers.1.fc2.weight : tensor<4x8xf32>
  slapo.param @layers.1.fc2.bias : tensor<4xf32>
  slapo.param @layers.2.fc1.weight : tensor<8x4xf32>
  slapo.param @layers.2.fc1.bias : tensor<8xf32>
  slapo.param @layers.2.fc2.weight : tensor<4x8xf32>
  slapo.param @layers.2.fc2.bias : tensor<4xf32>
  slapo.param @layers.3.fc1.weight : tensor<8x4xf32>
  slapo.param @layers.3.fc1.bias : tensor<8xf32>
  slapo.param @layers.3.fc2.weight : tensor<4x8xf32>
  slapo.param @layers.3.fc2.bias : tensor<4xf32>
  slapo.param @layers.4.fc1.weight : tensor<6x4xf32>
  slapo.param @layers.4.fc1.bias : tensor<6xf32>
  slapo.param @layers.4.fc2.weight : tensor<4x6xf32>
  slapo.param @layers.4.fc2.bias : tensor<4xf32>
  slapo.param @extra.0.fc1.weight : tensor<8x4xf32>
  slapo.param @extra.0.fc1.bias : tensor<8xf32>
  slapo.param @extra.0.fc2.weight : tensor<4x8xf32>
  slapo.param @extra.0.fc2.bias : tensor<4xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %w1_0 = slapo.get_param @layers.0.fc1.weight {slapo.module = "layers.0.fc1"} : tensor<8x4xf32> loc(#fc1_0)
    %b1_0 = slapo.get_param @layers.0.fc1.bias {slapo.module = "layers.0.fc1"} : tensor<8xf32> loc(#fc1_0)
    %h_0 = slapo.linear %x, %w1_0, %b1_0 {slapo.module = "layers.0.fc1"} : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32> loc(#fc1_0)
    %g_0 = slapo.gelu %h_0 <tanh> {slapo.module = "layers.0.act"} : tensor<2x8xf32> loc(#act_0)
    %w2_0 = slapo.get_param @layers.0.fc2.weight {slapo.module = "layers.0.fc2"} : tensor<4x8xf32> loc(#fc2_0)
    %b2_0 = slapo.get_param @layers.0.fc2.bias {slapo.module = "layers.0.fc2"} : tensor<4xf32> loc(#fc2_0)
    %o_0 = slapo.linear %g_0, %w2_0, %b2_0 {slapo.module = "layers.0.fc2"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc(#fc2_0)
    %y_0 = slapo.add %x, %o_0 {slapo.module = "layers.0"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#block_0)
    %w1_1 = slapo.get_param @layers.1.fc1.weight {slapo.module = "layers.1.fc1"} : tensor<8x4xf32> loc(#fc1_1)
    %b1_1 = slapo.get_param @layers.1.fc1.bias {slapo.module = "layers.1.fc1"} : tensor<8xf32> loc(#fc1_1)
    %h_1 = slapo.linear %y_0, %w1_1, %b1_1 {slapo.module = "layers.1.fc1"} : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32> loc(#fc1_1)
    %g_1 = slapo.gelu %h_1 <tanh> {slapo.module = "layers.1.act"} : tensor<2x8xf32> loc(#act_1)
    %w2_1 = slapo.get_param @layers.1.fc2.weight {slapo.module = "layers.1.fc2"} : tensor<4x8xf32> loc(#fc2_1)
    %b2_1 = slapo.get_param @layers.1.fc2.bias {slapo.module = "layers.1.fc2"} : tensor<4xf32> loc(#fc2_1)
    %o_1 = slapo.linear %g_1, %w2_1, %b2_1 {slapo.module = "layers.1.fc2"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc(#fc2_1)
    %y_1 = slapo.add %y_0, %o_1 {slapo.module = "layers.1"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#block_1)
    %w1_2 = slapo.get_param @layers.2.fc1.weight {slapo.module = "layers.2.fc1"} : tensor<8x4xf32> loc(#fc1_2)
    %b1_2 = slapo.get_param @layers.2.fc1.bias {slapo.module = "layers.2.fc1"} : tensor<8xf32> loc(#fc1_2)
    %h_2 = slapo.linear %y_1, %w1_2, %b1_2 {slapo.module = "layers.2.fc1"} : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32> loc(#fc1_2)
    %g_2 = slapo.gelu %h_2 <erf> {slapo.module = "layers.2.act"} : tensor<2x8xf32> loc(#act_2)
    %w2_2 = slapo.get_param @layers.2.fc2.weight {slapo.module = "layers.2.fc2"} : tensor<4x8xf32> loc(#fc2_2)
    %b2_2 = slapo.get_param @layers.2.fc2.bias {slapo.module = "layers.2.fc2"} : tensor<4xf32> loc(#fc2_2)
    %o_2 = slapo.linear %g_2, %w2_2, %b2_2 {slapo.module = "layers.2.fc2"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc(#fc2_2)
    %y_2 = slapo.add %y_1, %o_2 {slapo.module = "layers.2"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#block_2)
    %w1_3 = slapo.get_param @layers.3.fc1.weight {slapo.module = "layers.3.fc1"} : tensor<8x4xf32> loc(#fc1_3)
    %b1_3 = slapo.get_param @layers.3.fc1.bias {slapo.module = "layers.3.fc1"} : tensor<8xf32> loc(#fc1_3)
    %h_3 = slapo.linear %y_2, %w1_3, %b1_3 {slapo.module = "layers.3.fc1"} : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32> loc(#fc1_3)
    %g_3 = slapo.gelu %h_3 <erf> {slapo.module = "layers.3.act"} : tensor<2x8xf32> loc(#act_3)
    %w2_3 = slapo.get_param @layers.3.fc2.weight {slapo.module = "layers.3.fc2"} : tensor<4x8xf32> loc(#fc2_3)
    %b2_3 = slapo.get_param @layers.3.fc2.bias {slapo.module = "layers.3.fc2"} : tensor<4xf32> loc(#fc2_3)
    %o_3 = slapo.linear %g_3, %w2_3, %b2_3 {slapo.module = "layers.3.fc2"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc(#fc2_3)
    %y_3 = slapo.add %y_2, %o_3 {slapo.module = "layers.3"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#block_3)
    %w1_4 = slapo.get_param @layers.4.fc1.weight {slapo.module = "layers.4.fc1"} : tensor<6x4xf32> loc(#fc1_4)
    %b1_4 = slapo.get_param @layers.4.fc1.bias {slapo.module = "layers.4.fc1"} : tensor<6xf32> loc(#fc1_4)
    %h_4 = slapo.linear %y_3, %w1_4, %b1_4 {slapo.module = "layers.4.fc1"} : (tensor<2x4xf32>, tensor<6x4xf32>, tensor<6xf32>) -> tensor<2x6xf32> loc(#fc1_4)
    %g_4 = slapo.gelu %h_4 <tanh> {slapo.module = "layers.4.act"} : tensor<2x6xf32> loc(#act_4)
    %w2_4 = slapo.get_param @layers.4.fc2.weight {slapo.module = "layers.4.fc2"} : tensor<4x6xf32> loc(#fc2_4)
    %b2_4 = slapo.get_param @layers.4.fc2.bias {slapo.module = "layers.4.fc2"} : tensor<4xf32> loc(#fc2_4)
    %o_4 = slapo.linear %g_4, %w2_4, %b2_4 {slapo.module = "layers.4.fc2"} : (tensor<2x6xf32>, tensor<4x6xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc(#fc2_4)
    %y_4 = slapo.add %y_3, %o_4 {slapo.module = "layers.4"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#block_4)
    %w1_5 = slapo.get_param @extra.0.fc1.weight {slapo.module = "extra.0.fc1"} : tensor<8x4xf32> loc(#fc1_5)
    %b1_5 = slapo.get_param @extra.0.fc1.bias {slapo.module = "extra.0.fc1"} : tensor<8xf32> loc(#fc1_5)
    %h_5 = slapo.linear %y_4, %w1_5, %b1_5 {slapo.module = "extra.0.fc1"} : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32> loc(#fc1_5)
    %g_5 = slapo.gelu %h_5 <tanh> {slapo.module = "extra.0.act"} : tensor<2x8xf32> loc(#act_5)
    %w2_5 = slapo.get_param @extra.0.fc2.weight {slapo.module = "extra.0.fc2"} : tensor<4x8xf32> loc(#fc2_5)
    %b2_5 = slapo.get_param @extra.0.fc2.bias {slapo.module = "extra.0.fc2"} : tensor<4xf32> loc(#fc2_5)
    %o_5 = slapo.linear %g_5, %w2_5, %b2_5 {slapo.module = "extra.0.fc2"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc(#fc2_5)
    %y_5 = slapo.add %y_4, %o_5 {slapo.module = "extra.0"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#block_5)
    %l = slapo.sum %y_5 {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32> loc(#src)
    return %l : tensor<f32>
  }
}
#src = loc("model.py":7:0)
#block_0 = loc(#src)
#fc1_0 = loc(#src)
#act_0 = loc(#src)
#fc2_0 = loc(#src)
#block_1 = loc(#src)
#fc1_1 = loc(#src)
#act_1 = loc(#src)
#fc2_1 = loc(#src)
#block_2 = loc(#src)
#fc1_2 = loc(#src)
#act_2 = loc(#src)
#fc2_2 = loc(#src)
#block_3 = loc(#src)
#fc1_3 = loc(#src)
#act_3 = loc(#src)
#fc2_3 = loc(#src)
#block_4 = loc(#src)
#fc1_4 = loc(#src)
#act_4 = loc(#src)
#fc2_4 = loc(#src)
#block_5 = loc(#src)
#fc1_5 = loc(#src)
#act_5 = loc(#src)
#fc2_5 = loc(#src)

// The same forward in three blocks, whatever their list is called: one
// function. Each row holds one block's offsets; layers.0's output (the last
// slot, its add) is layers.1's input.
// CHECK-LABEL: //--- step.cpp
// CHECK: #include "step.h"
// CHECK-LABEL: const int64_t kForwardBlock0[3][9] = {
// CHECK-NEXT: // "layers.0"
// CHECK-NEXT: {{[{]([0-9]+, )+}}[[OUT0:[0-9]+]]},
// CHECK-NEXT: // "layers.1"
// CHECK-NEXT: {{[{].*}}, [[OUT0]], {{.*[}],$}}
// CHECK-NEXT: // "extra.0"
// CHECK-NEXT: {{[{]([0-9]+, )+[0-9]+[}],$}}
// CHECK-NEXT: };

// Another attribute, another function.
// CHECK-LABEL: const int64_t kForwardBlock1[2][9] = {
// CHECK-NEXT: // "layers.2"
// CHECK-NEXT: {{[{]}}
// CHECK-NEXT: // "layers.3"

// layers.4 (other shapes) is alone: its calls stay inline.
// CHECK-LABEL: void forward(Device &device, ProcessMesh &mesh, uint8_t *arena, int64_t step) {
// CHECK: // "layers.0"
// CHECK-NEXT: forwardBlock0(ctx, mesh, arena, step, kForwardBlock0[0]);
// CHECK: // "layers.1"
// CHECK-NEXT: forwardBlock0(ctx, mesh, arena, step, kForwardBlock0[1]);
// CHECK: // "layers.2"
// CHECK-NEXT: forwardBlock1(ctx, mesh, arena, step, kForwardBlock1[0]);
// CHECK: // "layers.3"
// CHECK-NEXT: forwardBlock1(ctx, mesh, arena, step, kForwardBlock1[1]);
// CHECK: // "layers.4.fc1": linear
// CHECK: const Tensor {{t[0-9]+_linear}} = view(arena, {{[0-9]+}}, DType::F32, {2, 6});
// CHECK: // "layers.4": add
// CHECK: // "extra.0"
// CHECK-NEXT: forwardBlock0(ctx, mesh, arena, step, kForwardBlock0[2]);
// CHECK: // (root): sum
// CHECK-NOT: Block
// CHECK: }

// In the backward, layers.0 differs too: nothing needs its input's gradient.
// CHECK-LABEL: const int64_t kBackwardBlock0[2][
// CHECK-NEXT: // "extra.0"
// CHECK: // "layers.1"
// CHECK-LABEL: const int64_t kBackwardBlock1[2][
// CHECK-NEXT: // "layers.3"
// CHECK: // "layers.2"
// CHECK-LABEL: void backward(
// CHECK: backwardBlock0(ctx, mesh, arena, step, kBackwardBlock0[0]);
// CHECK: // "layers.4.fc2": matmul
// CHECK: backwardBlock1(ctx, mesh, arena, step, kBackwardBlock1[0]);
// CHECK: backwardBlock1(ctx, mesh, arena, step, kBackwardBlock1[1]);
// CHECK: backwardBlock0(ctx, mesh, arena, step, kBackwardBlock0[1]);
// CHECK: // "layers.0.fc2": matmul

// The updates of the blocks' parameters are alike but for layers.4's shapes.
// CHECK-LABEL: const int64_t kOptimizerBlock0[5][
// CHECK-LABEL: void optimizer(
// CHECK: // "layers.3"
// CHECK-NEXT: optimizerBlock0(ctx, mesh, arena, step, kOptimizerBlock0[3]);
// CHECK: // "layers.4.fc1.weight": adamw_update
// CHECK: // "extra.0"
// CHECK-NEXT: optimizerBlock0(ctx, mesh, arena, step, kOptimizerBlock0[4]);
// CHECK: int main(int argc, char **argv) {

// step.h declares what both files use, the shared functions among them.
// CHECK-LABEL: //--- step.h
// CHECK: inline Tensor view(uint8_t *arena, int64_t offset, DType dtype, Shape shape) {
// CHECK: void forwardBlock0(Context &ctx, ProcessMesh &mesh, uint8_t *arena, int64_t step, const int64_t *at);
// CHECK-NEXT: void forwardBlock1(
// CHECK-NEXT: void backwardBlock0(
// CHECK-NEXT: void backwardBlock1(
// CHECK-NEXT: void optimizerBlock0(

// A shared body names the block's own tensors after their ops, its inputs
// in<slot>, and its comments give paths within the block.
// CHECK-LABEL: //--- blocks.cpp
// CHECK-LABEL: void forwardBlock0(Context &ctx, ProcessMesh &mesh, uint8_t *arena, int64_t step, const int64_t *at) {
// CHECK-NEXT: // "fc1": linear
// CHECK-DAG: const Tensor [[H:t[0-9]+_linear]] = view(arena, at[{{[0-9]+}}], DType::F32, {2, 8});
// CHECK-DAG: const Tensor [[W1:t[0-9]+_get_param]] = view(arena, at[{{[0-9]+}}], DType::F32, {8, 4});
// CHECK-DAG: const Tensor [[B1:t[0-9]+_get_param]] = view(arena, at[{{[0-9]+}}], DType::F32, {8});
// CHECK-DAG: const Tensor [[X:in[0-9]+]] = view(arena, at[{{[0-9]+}}], DType::F32, {2, 4});
// CHECK: linear(ctx, [[X]], [[W1]], [[B1]], [[H]]);
// CHECK: // "act": gelu
// CHECK: unary(ctx, UnaryKind::GeluTanh, [[H]], [[G:t[0-9]+_gelu]]);
// CHECK: // "fc2": linear
// CHECK: linear(ctx, [[G]], {{.*}}, [[O:t[0-9]+_linear]]);
// CHECK: // (block): add
// CHECK-NEXT: const Tensor [[Y:t8_add]] = view(arena, at[8], DType::F32, {2, 4});
// CHECK-NEXT: binary(ctx, BinaryKind::Add, [[X]], [[O]], [[Y]]);
// CHECK-NEXT: }
// CHECK-LABEL: void forwardBlock1(
// CHECK: unary(ctx, UnaryKind::GeluErf,
// CHECK-LABEL: void backwardBlock0(
// CHECK: binary(ctx, BinaryKind::GeluTanhGrad,
// CHECK-LABEL: void backwardBlock1(
// CHECK: binary(ctx, BinaryKind::GeluErfGrad,
// CHECK-LABEL: void optimizerBlock0(
// CHECK: // "fc1.weight": adamw_update
// CHECK: // "fc2.bias": adamw_update
