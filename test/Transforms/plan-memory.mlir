// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=sgd lr=0.5" --slapo-plan-memory %s | FileCheck %s
// RUN: not slapo-opt --slapo-plan-memory %s 2>&1 | FileCheck %s --check-prefix=ORDER

// Persistent tensors first, each at a 64-byte boundary: parameters (and
// optimizer state) in module order, then the step's arguments and constants.
// Transient tensors share bytes when their lifetimes do not overlap.
module {
  slapo.param @w : tensor<3x4xf32>
  slapo.param @b : tensor<3xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<3x4xf32>
    %b = slapo.get_param @b : tensor<3xf32>
    %y = slapo.linear %x, %w, %b : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %l = slapo.sum %y {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x3xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// Weights are 48 + 12 bytes; inputs the 32 bytes of x and two 8-byte step
// counters; constants the f32 seed of backward and the f64 learning rate.
// At the peak (the weight gradient's matmul) the 48-byte weight gradient is
// live with two 24-byte temporaries and the 4-byte loss (kept to the end: an
// activation).
// CHECK: module attributes {slapo.memory = {activations = 4 : i64, arena_bytes = 704 : i64, constants = 12 : i64, gradients = 48 : i64, inputs = 48 : i64, optimizer_state = 0 : i64, temporaries = 48 : i64, weights = 60 : i64, workspaces = 0 : i64}}
// CHECK: slapo.param @w : tensor<3x4xf32> {slapo.offset = 0 : i64}
// CHECK: slapo.param @b : tensor<3xf32> {slapo.offset = 64 : i64}
// CHECK: func.func @train_step(%{{.*}}: tensor<2x4xf32> {slapo.name = "x", slapo.offset = 128 : i64}, %{{.*}}: tensor<i64> {slapo.name = "step", slapo.offset = 192 : i64}, %{{.*}}: tensor<i64> {slapo.name = "total_steps", slapo.offset = 256 : i64})

// A get_param is its parameter's bytes.
// CHECK: slapo.get_param @w {slapo.offsets = array<i64: 0>}
// CHECK: slapo.get_param @b {slapo.offsets = array<i64: 64>}
// The linear's output dies at the loss: the weight gradient reuses it.
// CHECK: slapo.linear {{.*}}slapo.offsets = array<i64: [[Y:[0-9]+]]>
// CHECK: slapo.sum {{.*}}slapo.offsets = array<i64: [[LOSS:[0-9]+]]>
// A reshape is its input's bytes.
// CHECK: slapo.constant dense<1.000000e+00> : tensor<f32> {slapo.offsets = array<i64: [[SEED:[0-9]+]]>
// CHECK: slapo.reshape {{.*}}slapo.offsets = array<i64: [[SEED]]>
// CHECK: slapo.broadcast {{.*}}slapo.offsets = array<i64: [[SPREAD:[0-9]+]]>
// CHECK-NOT: slapo.offsets = array<i64: [[SPREAD]]>
// CHECK: slapo.matmul {{.*}}slapo.offsets = array<i64: [[Y]]>
// CHECK-NOT: slapo.offsets = array<i64: [[LOSS]]>
// CHECK: return

// ORDER: error: slapo-plan-memory: there is no one-block func.func @train_step (run slapo-optimizer first)
