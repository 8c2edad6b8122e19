// RUN: slapo-opt --slapo-autodiff --slapo-optimizer --slapo-plan-memory --mlir-print-debuginfo %s | slapo-translate --slapo-to-cpp > %t.out
// RUN: FileCheck %s < %t.out
// RUN: rm -rf %t && split-file %t.out %t
// RUN: c++ -std=c++17 -fsyntax-only -Wall -Werror -I%runtime_include %t/step.cpp
// RUN: c++ -std=c++17 -fsyntax-only -Wall -Werror -I%runtime_include %t/blocks.cpp

// Blocks whose dropouts differ only in their streams share their functions:
// each block's streams are in its row of the table, beside its offsets
// (layers.0 draws from stream 5, layers.1 from 9, layers.3 from 17). A
// dropout of another probability is another computation: layers.2 keeps its
// own code. (In the backward, layers.0 computes no input gradient: it
// differs too.)
module {
  slapo.param @layers.0.fc.weight : tensor<4x4xf32>
  slapo.param @layers.1.fc.weight : tensor<4x4xf32>
  slapo.param @layers.2.fc.weight : tensor<4x4xf32>
  slapo.param @layers.3.fc.weight : tensor<4x4xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %w_0 = slapo.get_param @layers.0.fc.weight {slapo.module = "layers.0.fc"} : tensor<4x4xf32> loc(#fc_0)
    %h_0 = slapo.linear %x, %w_0 {slapo.module = "layers.0.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc(#fc_0)
    %g_0 = slapo.gelu %h_0 <tanh> {slapo.module = "layers.0.fc"} : tensor<2x4xf32> loc(#fc_0)
    %d_0 = slapo.dropout %g_0 {p = 1.000000e-01 : f64, stream = 5 : i64, slapo.module = "layers.0.drop"} : tensor<2x4xf32> loc(#drop_0)
    %y_0 = slapo.add %x, %d_0 {slapo.module = "layers.0"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#block_0)
    %w_1 = slapo.get_param @layers.1.fc.weight {slapo.module = "layers.1.fc"} : tensor<4x4xf32> loc(#fc_1)
    %h_1 = slapo.linear %y_0, %w_1 {slapo.module = "layers.1.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc(#fc_1)
    %g_1 = slapo.gelu %h_1 <tanh> {slapo.module = "layers.1.fc"} : tensor<2x4xf32> loc(#fc_1)
    %d_1 = slapo.dropout %g_1 {p = 1.000000e-01 : f64, stream = 9 : i64, slapo.module = "layers.1.drop"} : tensor<2x4xf32> loc(#drop_1)
    %y_1 = slapo.add %y_0, %d_1 {slapo.module = "layers.1"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#block_1)
    %w_2 = slapo.get_param @layers.2.fc.weight {slapo.module = "layers.2.fc"} : tensor<4x4xf32> loc(#fc_2)
    %h_2 = slapo.linear %y_1, %w_2 {slapo.module = "layers.2.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc(#fc_2)
    %g_2 = slapo.gelu %h_2 <tanh> {slapo.module = "layers.2.fc"} : tensor<2x4xf32> loc(#fc_2)
    %d_2 = slapo.dropout %g_2 {p = 2.000000e-01 : f64, stream = 13 : i64, slapo.module = "layers.2.drop"} : tensor<2x4xf32> loc(#drop_2)
    %y_2 = slapo.add %y_1, %d_2 {slapo.module = "layers.2"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#block_2)
    %w_3 = slapo.get_param @layers.3.fc.weight {slapo.module = "layers.3.fc"} : tensor<4x4xf32> loc(#fc_3)
    %h_3 = slapo.linear %y_2, %w_3 {slapo.module = "layers.3.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc(#fc_3)
    %g_3 = slapo.gelu %h_3 <tanh> {slapo.module = "layers.3.fc"} : tensor<2x4xf32> loc(#fc_3)
    %d_3 = slapo.dropout %g_3 {p = 1.000000e-01 : f64, stream = 17 : i64, slapo.module = "layers.3.drop"} : tensor<2x4xf32> loc(#drop_3)
    %y_3 = slapo.add %y_2, %d_3 {slapo.module = "layers.3"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc(#block_3)
    %l = slapo.sum %y_3 {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32> loc(#src)
    return %l : tensor<f32>
  }
}
#src = loc("model.py":7:0)
#block_0 = loc(#src)
#fc_0 = loc(#src)
#drop_0 = loc(#src)
#block_1 = loc(#src)
#fc_1 = loc(#src)
#drop_1 = loc(#src)
#block_2 = loc(#src)
#fc_2 = loc(#src)
#drop_2 = loc(#src)
#block_3 = loc(#src)
#fc_3 = loc(#src)
#drop_3 = loc(#src)

// CHECK-LABEL: //--- step.cpp
// CHECK-LABEL: const int64_t kForwardBlock0[3][
// CHECK-NEXT: // "layers.0"
// CHECK-NEXT: {{[{]([0-9]+, )*}}5{{(, [0-9]+)*[}],$}}
// CHECK-NEXT: // "layers.1"
// CHECK-NEXT: {{[{]([0-9]+, )*}}9{{(, [0-9]+)*[}],$}}
// CHECK-NEXT: // "layers.3"
// CHECK-NEXT: {{[{]([0-9]+, )*}}17{{(, [0-9]+)*[}],$}}
// CHECK-LABEL: void forward(
// CHECK: forwardBlock0(ctx, mesh, arena, step, kForwardBlock0[0]);
// CHECK: forwardBlock0(ctx, mesh, arena, step, kForwardBlock0[1]);
// CHECK: // "layers.2.drop": dropout
// CHECK: dropout(ctx, {{.*}}, 0.20000000000000001, {kSeed, step, /*stream=*/13, /*rankStream=*/0}, {mesh.getDpRank()});
// CHECK: forwardBlock0(ctx, mesh, arena, step, kForwardBlock0[2]);
// CHECK-LABEL: const int64_t kBackwardBlock0[2][
// CHECK-NEXT: // "layers.3"
// CHECK-NEXT: {{[{]([0-9]+, )*}}17,
// CHECK: // "layers.1"
// CHECK-NEXT: {{[{]([0-9]+, )*}}9,
// CHECK-LABEL: void backward(
// CHECK: backwardBlock0(ctx, mesh, arena, step, kBackwardBlock0[0]);
// CHECK: // "layers.2.drop": dropout
// CHECK: backwardBlock0(ctx, mesh, arena, step, kBackwardBlock0[1]);
// CHECK: // "layers.0.drop": dropout
// CHECK: dropout(ctx, {{.*}}, 0.10000000000000001, {kSeed, step, /*stream=*/5, /*rankStream=*/0}, {mesh.getDpRank()});

// CHECK-LABEL: //--- blocks.cpp
// CHECK-LABEL: void forwardBlock0(
// CHECK: // "drop": dropout
// CHECK: dropout(ctx, {{.*}}, 0.10000000000000001, {kSeed, step, /*stream=*/at[{{[0-9]+}}], /*rankStream=*/0}, {mesh.getDpRank()});
// CHECK-LABEL: void backwardBlock0(
// CHECK: // "drop": dropout
// CHECK: dropout(ctx, {{.*}}, 0.10000000000000001, {kSeed, step, /*stream=*/at[{{[0-9]+}}], /*rankStream=*/0}, {mesh.getDpRank()});
