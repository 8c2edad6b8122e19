// RUN: slapo-opt --slapo-autodiff --slapo-optimizer=optimizer=sgd --slapo-cse "--slapo-fuse-elementwise=kind=bias_gelu modules=b.0.mlp,b.1.mlp" %s --split-input-file | FileCheck %s --check-prefix=GELU
// RUN: slapo-opt --slapo-autodiff --slapo-optimizer=optimizer=sgd --slapo-cse "--slapo-checkpoint=modules=b.0" "--slapo-fuse-elementwise=kind=bias_gelu modules=b.0.mlp" %s --split-input-file | FileCheck %s --check-prefix=CKPT

// bias_gelu on two modules: b.0's nn.Linear with a bias, and b.1's HF
// Conv1D (a product plus a bias row, viewed [6, 8] -> [2, 3, 8]).
module {
  slapo.param @b.0.mlp.fc.weight : tensor<8x4xf32>
  slapo.param @b.0.mlp.fc.bias : tensor<8xf32>
  slapo.param @b.0.mlp.proj.weight : tensor<4x8xf32>
  slapo.param @b.1.mlp.fc.weight : tensor<4x8xf32>
  slapo.param @b.1.mlp.fc.bias : tensor<8xf32>
  func.func @forward(%x: tensor<2x3x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %w0 = slapo.get_param @b.0.mlp.fc.weight {slapo.module = "b.0.mlp.fc"} : tensor<8x4xf32>
    %b0 = slapo.get_param @b.0.mlp.fc.bias {slapo.module = "b.0.mlp.fc"} : tensor<8xf32>
    %h0 = slapo.linear %x, %w0, %b0 {slapo.module = "b.0.mlp.fc"} : (tensor<2x3x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
    %g0 = slapo.gelu %h0 <tanh> {slapo.module = "b.0.mlp.act"} : tensor<2x3x8xf32>
    %p0 = slapo.get_param @b.0.mlp.proj.weight {slapo.module = "b.0.mlp.proj"} : tensor<4x8xf32>
    %y0 = slapo.linear %g0, %p0 {slapo.module = "b.0.mlp.proj"} : (tensor<2x3x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4xf32>
    %r1 = slapo.reshape %y0 {slapo.module = "b.1.mlp.fc"} : tensor<2x3x4xf32> -> tensor<6x4xf32>
    %w1 = slapo.get_param @b.1.mlp.fc.weight {slapo.module = "b.1.mlp.fc"} : tensor<4x8xf32>
    %m1 = slapo.matmul %r1, %w1 {slapo.module = "b.1.mlp.fc"} : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
    %b1 = slapo.get_param @b.1.mlp.fc.bias {slapo.module = "b.1.mlp.fc"} : tensor<8xf32>
    %a1 = slapo.add %b1, %m1 {slapo.module = "b.1.mlp.fc"} : (tensor<8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
    %v1 = slapo.reshape %a1 {slapo.module = "b.1.mlp.fc"} : tensor<6x8xf32> -> tensor<2x3x8xf32>
    %g1 = slapo.gelu %v1 <tanh> {slapo.module = "b.1.mlp"} : tensor<2x3x8xf32>
    %l = slapo.sum %g1 {dims = array<i64: 0, 1, 2>, keepdim = false, slapo.module = "loss"} : tensor<2x3x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// GELU-LABEL: func.func @train_step
// The linear loses its bias; the bias add and the gelu are one group that
// writes the gelu alone.
// GELU: %[[P0:.*]] = slapo.linear %{{.*}}, %{{.*}} {slapo.module = "b.0.mlp.fc"} : (tensor<2x3x4xf32>, tensor<8x4xf32>) -> tensor<2x3x8xf32>
// GELU-NEXT: %[[G0:.*]] = slapo.fused %[[P0]], %[[B0:.*]] {kind = "bias_gelu", slapo.module = "b.0.mlp"} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32> {
// GELU-NEXT: ^bb0(%[[X0:.*]]: tensor<2x3x8xf32>, %[[X1:.*]]: tensor<8xf32>):
// GELU-NEXT: %[[S0:.*]] = slapo.add %[[X0]], %[[X1]] {slapo.module = "b.0.mlp.fc"}
// GELU-NEXT: %[[T0:.*]] = slapo.gelu %[[S0]] <tanh> {slapo.module = "b.0.mlp.act"}
// GELU-NEXT: slapo.yield %[[T0]] : tensor<2x3x8xf32>
// GELU-NEXT: }
// GELU: slapo.linear %[[G0]]
// Conv1D: the reshape moves before the bias add.
// GELU: %[[M1:.*]] = slapo.matmul %{{.*}}, %{{.*}} {slapo.module = "b.1.mlp.fc"} : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
// GELU: %[[V1:.*]] = slapo.reshape %[[M1]] {slapo.module = "b.1.mlp.fc"} : tensor<6x8xf32> -> tensor<2x3x8xf32>
// GELU-NEXT: %[[G1:.*]] = slapo.fused %[[B1:.*]], %[[V1]] {kind = "bias_gelu", slapo.module = "b.1.mlp"} : (tensor<8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
// GELU-NEXT: ^bb0(%[[Y0:.*]]: tensor<8xf32>, %[[Y1:.*]]: tensor<2x3x8xf32>):
// GELU-NEXT: %[[S1:.*]] = slapo.add %[[Y0]], %[[Y1]] {slapo.module = "b.1.mlp.fc"} : (tensor<8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
// GELU-NEXT: %[[T1:.*]] = slapo.gelu %[[S1]] <tanh> {slapo.module = "b.1.mlp"}
// GELU-NEXT: slapo.yield %[[T1]] : tensor<2x3x8xf32>
// The backward adds the bias again in gelu's gradient's group: b.1's,
// then b.0's.
// GELU: slapo.fused %[[B1]], %[[V1]], %{{.*}} {kind = "bias_gelu", slapo.module = "b.1.mlp", slapo.phase = "backward"}
// GELU-NEXT: ^bb0
// GELU-NEXT: slapo.add {{.*}} {slapo.module = "b.1.mlp", slapo.phase = "backward"}
// GELU-NEXT: slapo.gelu_grad {{.*}} {slapo.module = "b.1.mlp", slapo.phase = "backward"}
// GELU-NEXT: slapo.yield
// The bias add computed again for the gradient is placed as its reader is
// (b.0.mlp.act, where b.1's gelu has no module of its own).
// GELU: slapo.fused %[[P0]], %[[B0]], %{{.*}} {kind = "bias_gelu", slapo.module = "b.0.mlp.act", slapo.phase = "backward"}
// GELU-NEXT: ^bb0
// GELU-NEXT: slapo.add {{.*}} {slapo.module = "b.0.mlp.act", slapo.phase = "backward"}
// GELU-NEXT: slapo.gelu_grad {{.*}} {slapo.module = "b.0.mlp.act", slapo.phase = "backward"}
// GELU-NEXT: slapo.yield
// GELU-NOT: slapo.fused

// With b.0 checkpointed, its recomputation is a group of its own too.
// CKPT-LABEL: func.func @train_step
// CKPT: slapo.fused {{.*}} {kind = "bias_gelu", slapo.module = "b.0.mlp"}
// CKPT: slapo.fused {{.*}} {kind = "bias_gelu", slapo.module = "b.0.mlp", slapo.phase = "backward", slapo.recomputed}
// CKPT: slapo.fused {{.*}} {kind = "bias_gelu", slapo.module = "b.0.mlp.act", slapo.phase = "backward"}
// CKPT-NEXT: ^bb0
// CKPT-NEXT: slapo.add
// CKPT-NEXT: slapo.gelu_grad
