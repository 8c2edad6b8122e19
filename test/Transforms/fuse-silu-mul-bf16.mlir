// RUN: slapo-opt --slapo-mixed-precision --slapo-autodiff --slapo-optimizer=optimizer=sgd --slapo-cse --slapo-propagate-casts "--slapo-fuse-elementwise=kind=silu_mul modules=m" %s | FileCheck %s

// fuse("silu_mul") in bf16: the kind's groups take mixed precision's casts
// at both ends, as fusion's other groups do. The forward group reads the
// bf16 gate and up products and writes the bf16 operand of the down
// projection (the f32 product is never stored); each backward group widens
// the bf16 gate itself (a copy of the cast for each reader: no f32 gate is
// written for another group), and the gradients for the up and gate
// projections are written in bf16.
// LLaMA's MLP: down(silu(gate(x)) * up(x)).
module {
  slapo.param @m.gate.weight : tensor<8x4xf32>
  slapo.param @m.up.weight : tensor<8x4xf32>
  slapo.param @m.down.weight : tensor<4x8xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %wg = slapo.get_param @m.gate.weight {slapo.module = "m.gate"} : tensor<8x4xf32>
    %g = slapo.linear %x, %wg {slapo.module = "m.gate"} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %s = slapo.silu %g {slapo.module = "m"} : tensor<2x8xf32>
    %wu = slapo.get_param @m.up.weight {slapo.module = "m.up"} : tensor<8x4xf32>
    %u = slapo.linear %x, %wu {slapo.module = "m.up"} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %p = slapo.mul %s, %u {slapo.module = "m"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %wd = slapo.get_param @m.down.weight {slapo.module = "m.down"} : tensor<4x8xf32>
    %y = slapo.linear %p, %wd {slapo.module = "m.down"} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %l = slapo.sum %y {dims = array<i64: 0, 1>, keepdim = false, slapo.module = "loss"} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK: slapo.fused %{{.*}}, %{{.*}} {kind = "silu_mul", slapo.module = "m"} : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<2x8xbf16> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: slapo.cast {{.*}} : tensor<2x8xbf16> -> tensor<2x8xf32>
// CHECK-NEXT: slapo.cast {{.*}} : tensor<2x8xbf16> -> tensor<2x8xf32>
// CHECK-NEXT: slapo.silu
// CHECK-NEXT: slapo.mul
// CHECK-NEXT: %[[DOWN:.*]] = slapo.cast {{.*}} {slapo.module = "m.down"} : tensor<2x8xf32> -> tensor<2x8xbf16>
// CHECK-NEXT: slapo.yield %[[DOWN]] : tensor<2x8xbf16>
// CHECK: slapo.fused {{.*}} {kind = "silu_mul", slapo.module = "m", slapo.phase = "backward"} : ({{.*}}) -> (tensor<2x8xf32>, tensor<2x8xbf16>) {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: slapo.cast {{.*}} {slapo.module = "m", slapo.phase = "backward"} : tensor<2x8xbf16> -> tensor<2x8xf32>
// CHECK-NEXT: slapo.silu
// CHECK: %[[UP:.*]] = slapo.cast {{.*}} {slapo.module = "m.up", slapo.phase = "backward"} : tensor<2x8xf32> -> tensor<2x8xbf16>
// CHECK-NEXT: slapo.yield %{{.*}}, %[[UP]]
// CHECK: slapo.fused {{.*}} {kind = "silu_mul", slapo.module = "m", slapo.phase = "backward"} : (tensor<2x8xbf16>, tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xbf16> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: slapo.cast {{.*}} {slapo.module = "m", slapo.phase = "backward"} : tensor<2x8xbf16> -> tensor<2x8xf32>
// CHECK: slapo.sigmoid
// CHECK: %[[GATE:.*]] = slapo.cast {{.*}} {slapo.module = "m.gate", slapo.phase = "backward"} : tensor<2x8xf32> -> tensor<2x8xbf16>
// CHECK-NEXT: slapo.yield %[[GATE]]
// CHECK-NOT: slapo.cast {{.*}} {slapo.module = "m{{(.gate|.up|.down)?}}", slapo.phase = "backward"} : tensor<2x8x
