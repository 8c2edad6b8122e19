// RUN: slapo-opt --slapo-autodiff --slapo-optimizer=optimizer=sgd --slapo-cse "--slapo-fuse-elementwise=kind=silu_mul modules=m" %s --split-input-file --verify-diagnostics | FileCheck %s

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
// The silu and the product are one group that writes the product alone.
// CHECK: %[[GATE:.*]] = slapo.linear %{{.*}} {slapo.module = "m.gate"}
// CHECK: %[[UP:.*]] = slapo.linear %{{.*}} {slapo.module = "m.up"}
// CHECK-NEXT: %[[P:.*]] = slapo.fused %[[GATE]], %[[UP]] {kind = "silu_mul", slapo.module = "m"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: slapo.silu
// CHECK-NEXT: slapo.mul
// CHECK-NEXT: slapo.yield %{{.*}} : tensor<2x8xf32>
// CHECK-NEXT: }
// CHECK: slapo.linear %[[P]]
// The backward: the product's gradient for up computes the silu again from
// the gate; the silu's gradient is a group of its own, which also computes
// the gradient for the silu (grad * up) that only it reads: two chains
// meeting in one product are one loop.
// CHECK: %[[GRAD:.*]] = slapo.matmul %{{.*}} {slapo.module = "m.down", slapo.phase = "backward"}
// CHECK: slapo.fused %[[GATE]], %[[GRAD]] {kind = "silu_mul", slapo.module = "m", slapo.phase = "backward"}
// CHECK-NEXT: ^bb0(%[[G:.*]]: tensor<2x8xf32>, %[[D:.*]]: tensor<2x8xf32>):
// CHECK-NEXT: %[[S:.*]] = slapo.silu %[[G]]
// CHECK-NEXT: %[[DUP:.*]] = slapo.mul %[[D]], %[[S]]
// CHECK-NEXT: slapo.yield %[[DUP]]
// CHECK: slapo.fused %[[GATE]], %{{.*}}, %[[GRAD]], %[[UP]] {kind = "silu_mul", slapo.module = "m", slapo.phase = "backward"}
// CHECK-NEXT: ^bb0(%{{.*}}: tensor<2x8xf32>, %{{.*}}: tensor<f32>, %[[D2:.*]]: tensor<2x8xf32>, %[[U2:.*]]: tensor<2x8xf32>):
// CHECK-NEXT: slapo.sigmoid
// CHECK-NEXT: slapo.sub
// CHECK-NEXT: slapo.mul
// CHECK-NEXT: slapo.add
// CHECK-NEXT: %[[DSIG:.*]] = slapo.mul
// CHECK-NEXT: %[[DSILU:.*]] = slapo.mul %[[D2]], %[[U2]]
// CHECK-NEXT: slapo.mul %[[DSILU]], %[[DSIG]]
// CHECK-NEXT: slapo.yield
// CHECK-NOT: slapo.fused

// -----

// A silu that feeds a linear layer, not a product.
module {
  slapo.param @m.down.weight : tensor<4x8xf32>
  func.func @forward(%x: tensor<2x8xf32>) -> tensor<f32> {
    // expected-error@+1 {{fuse("silu_mul"): module 'm' does not compute silu(gate) * up: the silu's result is read by 'slapo.linear', not by the product with the up projection}}
    %s = slapo.silu %x {slapo.module = "m"} : tensor<2x8xf32>
    %wd = slapo.get_param @m.down.weight {slapo.module = "m.down"} : tensor<4x8xf32>
    // expected-note@+1 {{the op that differs}}
    %y = slapo.linear %s, %wd {slapo.module = "m.down"} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %l = slapo.sum %y {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// The silu is read twice: the group would have to write it.
module {
  func.func @forward(%x: tensor<2x8xf32>, %u: tensor<2x8xf32>) -> tensor<f32> {
    // expected-error@+1 {{the silu's result is also read by 'slapo.exp': the group keeps it for the product with the up projection alone}}
    %s = slapo.silu %x {slapo.module = "m"} : tensor<2x8xf32>
    %p = slapo.mul %s, %u {slapo.module = "m"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    // expected-note@+1 {{the op that differs}}
    %e = slapo.exp %s {slapo.module = "m"} : tensor<2x8xf32>
    %t = slapo.add %p, %e : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %l = slapo.sum %t {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A module without a silu.
module {
  func.func @forward(%x: tensor<2x8xf32>, %u: tensor<2x8xf32>) -> tensor<f32> {
    // expected-error@+1 {{module 'm' does not compute silu(gate) * up: it computes no silu}}
    %s = slapo.sigmoid %x {slapo.module = "m"} : tensor<2x8xf32>
    %p = slapo.mul %s, %u {slapo.module = "m"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %l = slapo.sum %p {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x8xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
