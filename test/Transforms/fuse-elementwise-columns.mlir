// RUN: slapo-opt --slapo-fuse-elementwise --split-input-file %s | FileCheck %s

// Column sums: a slapo.sum over every dim but the last of a value that a
// group without row ops computes (a bias gradient) joins the group, directly
// or through a reshape that keeps the last dim; the summed value stays a
// result only where something else reads it. Each case is a @train_step of
// its own.

// A sum of the group's value: the f32 gelu gradient is no longer a result,
// only its bf16 cast (which a product reads) and the [C] sums are.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[F:.*]]:2 = slapo.fused %arg0, %arg1 {slapo.module = "mlp", slapo.phase = "backward"} : (tensor<2x3x8xbf16>, tensor<2x3x8xf32>) -> (tensor<2x3x8xbf16>, tensor<8xf32>) {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: slapo.cast
// CHECK-NEXT: %[[GRAD:.*]] = slapo.gelu_grad
// CHECK-NEXT: %[[CAST:.*]] = slapo.cast %[[GRAD]]
// CHECK-NEXT: %[[SUM:.*]] = slapo.sum %[[GRAD]] {dims = array<i64: 0, 1>, keepdim = false, slapo.module = "mlp.c_fc", slapo.phase = "backward"} : tensor<2x3x8xf32> -> tensor<8xf32>
// CHECK-NEXT: slapo.yield %[[CAST]], %[[SUM]] : tensor<2x3x8xbf16>, tensor<8xf32>
// CHECK-NEXT: }
// CHECK-NOT: slapo.sum
// CHECK: return %[[F]]#0, %[[F]]#1
module {
  func.func @train_step(%g: tensor<2x3x8xbf16>, %x: tensor<2x3x8xf32>) -> (tensor<2x3x8xbf16>, tensor<8xf32>) {
    %0 = slapo.cast %g {slapo.module = "mlp.c_proj", slapo.phase = "backward"} : tensor<2x3x8xbf16> -> tensor<2x3x8xf32>
    %1 = slapo.gelu_grad %0, %x <tanh> {slapo.module = "mlp", slapo.phase = "backward"} : tensor<2x3x8xf32>
    %2 = slapo.cast %1 {slapo.module = "mlp.c_fc", slapo.phase = "backward"} : tensor<2x3x8xf32> -> tensor<2x3x8xbf16>
    %3 = slapo.sum %1 {dims = array<i64: 0, 1>, keepdim = false, slapo.module = "mlp.c_fc", slapo.phase = "backward"} : tensor<2x3x8xf32> -> tensor<8xf32>
    return %2, %3 : tensor<2x3x8xbf16>, tensor<8xf32>
  }
}

// -----

// Through a reshape that merges the leading dims (HF's Conv1D: [B*T, N]):
// the group sums its value over both leading dims, and the reshape, which
// only the sum read, is gone. The product between the group and the sum
// reads the group's other result, so the group is built before it.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[F:.*]]:2 = slapo.fused %arg0, %arg1 {slapo.module = "mlp", slapo.phase = "backward"} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> (tensor<2x3x8xbf16>, tensor<8xf32>) {
// CHECK: slapo.sum %{{.*}} {dims = array<i64: 0, 1>, keepdim = false, {{.*}}} : tensor<2x3x8xf32> -> tensor<8xf32>
// CHECK: slapo.reshape %[[F]]#0 {{.*}} -> tensor<6x8xbf16>
// CHECK-NEXT: slapo.matmul
// CHECK-NOT: slapo.reshape
// CHECK-NOT: slapo.sum
// CHECK: return {{.*}}, %[[F]]#1
module {
  func.func @train_step(%g: tensor<2x3x8xf32>, %x: tensor<2x3x8xf32>, %w: tensor<8x4xbf16>) -> (tensor<6x4xbf16>, tensor<8xf32>) {
    %0 = slapo.gelu_grad %g, %x <tanh> {slapo.module = "mlp", slapo.phase = "backward"} : tensor<2x3x8xf32>
    %1 = slapo.cast %0 {slapo.module = "mlp.c_fc", slapo.phase = "backward"} : tensor<2x3x8xf32> -> tensor<2x3x8xbf16>
    %2 = slapo.reshape %1 {slapo.module = "mlp.c_fc", slapo.phase = "backward"} : tensor<2x3x8xbf16> -> tensor<6x8xbf16>
    %3 = slapo.matmul %2, %w {slapo.module = "mlp.c_fc", slapo.phase = "backward"} : (tensor<6x8xbf16>, tensor<8x4xbf16>) -> tensor<6x4xbf16>
    %4 = slapo.reshape %0 {slapo.module = "mlp.c_fc", slapo.phase = "backward"} : tensor<2x3x8xf32> -> tensor<6x8xf32>
    %5 = slapo.sum %4 {dims = array<i64: 0>, keepdim = false, slapo.module = "mlp.c_fc", slapo.phase = "backward"} : tensor<6x8xf32> -> tensor<8xf32>
    return %3, %5 : tensor<6x4xbf16>, tensor<8xf32>
  }
}

// -----

// A summed value that another op also reads (the residual gradient the next
// block reads) stays a result, and the sum still joins; so does a sum
// through a reshape that something else reads too, which stays (reading the
// result).
// CHECK-LABEL: func.func @train_step
// CHECK: %[[F:.*]]:3 = slapo.fused %arg0, %arg1 {slapo.module = "h", slapo.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[ADD:.*]] = slapo.add
// CHECK-NEXT: %[[SUM:.*]] = slapo.sum %[[ADD]] {dims = array<i64: 0>, keepdim = false
// CHECK-NEXT: %[[SUM2:.*]] = slapo.sum %[[ADD]] {dims = array<i64: 0>, keepdim = false
// CHECK-NEXT: slapo.yield %[[ADD]], %[[SUM]], %[[SUM2]]
// CHECK: %[[R:.*]] = slapo.reshape %[[F]]#0 {{.*}} -> tensor<2x2x8xf32>
// CHECK-NOT: slapo.sum
// CHECK: return %[[F]]#0, %[[F]]#1, %[[F]]#2, %[[R]]
module {
  func.func @train_step(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x2x8xf32>) {
    %0 = slapo.add %a, %b {slapo.module = "h", slapo.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %1 = slapo.sum %0 {dims = array<i64: 0>, keepdim = false, slapo.module = "h.attn.c_proj", slapo.phase = "backward"} : tensor<4x8xf32> -> tensor<8xf32>
    %2 = slapo.reshape %0 {slapo.module = "h.mlp", slapo.phase = "backward"} : tensor<4x8xf32> -> tensor<2x2x8xf32>
    %3 = slapo.sum %2 {dims = array<i64: 0, 1>, keepdim = false, slapo.module = "h.mlp.c_proj", slapo.phase = "backward"} : tensor<2x2x8xf32> -> tensor<8xf32>
    return %0, %1, %3, %2 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x2x8xf32>
  }
}

// -----

// Sums that do not join: along the last dim (without keepdim: no row op
// either), along a middle dim, with keepdim, through a reshape that changes
// the last dim, in another phase than the group's, and of a row group's
// value; the group stays as it was, the sums outside it.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[F:.*]] = slapo.fused %arg0, %arg1 {slapo.phase = "backward"} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: slapo.mul
// CHECK-NEXT: slapo.neg
// CHECK-NEXT: slapo.yield
// CHECK-NEXT: }
// CHECK-NEXT: slapo.sum %[[F]] {dims = array<i64: 2>, keepdim = false
// CHECK-NEXT: slapo.sum %[[F]] {dims = array<i64: 1>, keepdim = false
// CHECK-NEXT: slapo.sum %[[F]] {dims = array<i64: 0, 1>, keepdim = true
// CHECK-NEXT: slapo.reshape %[[F]]
// CHECK-NEXT: slapo.sum %{{.*}} {dims = array<i64: 0>, keepdim = false
// CHECK-NEXT: slapo.sum %[[F]] {dims = array<i64: 0, 1>, keepdim = false, slapo.phase = "optimizer"}
// CHECK: %[[ROWS:.*]] = slapo.fused
// CHECK: slapo.softmax
// CHECK: slapo.yield
// CHECK-NEXT: }
// CHECK-NEXT: slapo.sum %[[ROWS]] {dims = array<i64: 0, 1>, keepdim = false
module {
  func.func @train_step(%a: tensor<2x3x8xf32>, %b: tensor<2x3x8xf32>) -> (tensor<2x3xf32>, tensor<2x8xf32>, tensor<1x1x8xf32>, tensor<4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x3x8xf32>) {
    %m = slapo.mul %a, %b {slapo.phase = "backward"} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
    %0 = slapo.neg %m {slapo.phase = "backward"} : tensor<2x3x8xf32>
    %1 = slapo.sum %0 {dims = array<i64: 2>, keepdim = false, slapo.phase = "backward"} : tensor<2x3x8xf32> -> tensor<2x3xf32>
    %2 = slapo.sum %0 {dims = array<i64: 1>, keepdim = false, slapo.phase = "backward"} : tensor<2x3x8xf32> -> tensor<2x8xf32>
    %3 = slapo.sum %0 {dims = array<i64: 0, 1>, keepdim = true, slapo.phase = "backward"} : tensor<2x3x8xf32> -> tensor<1x1x8xf32>
    %4 = slapo.reshape %0 {slapo.phase = "backward"} : tensor<2x3x8xf32> -> tensor<12x4xf32>
    %5 = slapo.sum %4 {dims = array<i64: 0>, keepdim = false, slapo.phase = "backward"} : tensor<12x4xf32> -> tensor<4xf32>
    %6 = slapo.sum %0 {dims = array<i64: 0, 1>, keepdim = false, slapo.phase = "optimizer"} : tensor<2x3x8xf32> -> tensor<8xf32>
    %7 = slapo.exp %a {slapo.phase = "backward"} : tensor<2x3x8xf32>
    %8 = slapo.softmax %7 {dim = 2 : i64, slapo.phase = "backward"} : tensor<2x3x8xf32>
    %9 = slapo.sum %8 {dims = array<i64: 0, 1>, keepdim = false, slapo.phase = "backward"} : tensor<2x3x8xf32> -> tensor<8xf32>
    return %1, %2, %3, %5, %6, %9, %8 : tensor<2x3xf32>, tensor<2x8xf32>, tensor<1x1x8xf32>, tensor<4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x3x8xf32>
  }
}

// -----

// A widening sum (slapo-propagate-casts: the bf16 gradient summed into f32,
// as the attention's c_attn bias gradient): it joins the group that casts
// the value to bf16 and sums the bf16 values into f32.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[F:.*]]:2 = slapo.fused %arg0, %arg1 {slapo.module = "attn", slapo.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xbf16>, tensor<8xf32>) {
// CHECK-NEXT: ^bb0
// CHECK-NEXT: slapo.mul
// CHECK-NEXT: %[[CAST:.*]] = slapo.cast
// CHECK-NEXT: %[[SUM:.*]] = slapo.sum %[[CAST]] {dims = array<i64: 0>, keepdim = false, {{.*}}} : tensor<4x8xbf16> -> tensor<8xf32>
// CHECK-NEXT: slapo.yield %[[CAST]], %[[SUM]]
// CHECK-NOT: slapo.sum
module {
  func.func @train_step(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xbf16>, tensor<8xf32>) {
    %0 = slapo.mul %a, %b {slapo.module = "attn", slapo.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %1 = slapo.cast %0 {slapo.module = "attn", slapo.phase = "backward"} : tensor<4x8xf32> -> tensor<4x8xbf16>
    %2 = slapo.sum %1 {dims = array<i64: 0>, keepdim = false, slapo.module = "attn.c_attn", slapo.phase = "backward"} : tensor<4x8xbf16> -> tensor<8xf32>
    return %1, %2 : tensor<4x8xbf16>, tensor<8xf32>
  }
}

// -----

// A sum of a group's input (the residual stream's gradient, which the block's
// last product reads in bf16 and its bias sums): a lone cast and the sum
// through a reshape are one loop, which reads the gradient once. A sum that
// comes before the group's last op, or of an input that a row group reads,
// stays outside.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[F:.*]]:2 = slapo.fused %arg0 {slapo.module = "h.mlp.c_proj", slapo.phase = "backward"} : (tensor<2x3x8xf32>) -> (tensor<2x3x8xbf16>, tensor<8xf32>) {
// CHECK-NEXT: ^bb0(%[[G:.*]]: tensor<2x3x8xf32>
// CHECK-NEXT: %[[CAST:.*]] = slapo.cast %[[G]]
// CHECK-NEXT: %[[SUM:.*]] = slapo.sum %[[G]] {dims = array<i64: 0, 1>, keepdim = false, {{.*}}} : tensor<2x3x8xf32> -> tensor<8xf32>
// CHECK-NEXT: slapo.yield %[[CAST]], %[[SUM]]
// CHECK-NEXT: }
// CHECK-NEXT: slapo.sum %arg1 {dims = array<i64: 0>
// CHECK-NEXT: slapo.fused %arg1
// CHECK: slapo.softmax
// CHECK: slapo.yield
// CHECK-NEXT: }
// CHECK-NEXT: slapo.sum %arg2 {dims = array<i64: 0>
// CHECK-NOT: slapo.reshape
// CHECK: return %[[F]]#0, %[[F]]#1
module {
  func.func @train_step(%g: tensor<2x3x8xf32>, %a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<2x3x8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<4x8xbf16>, tensor<4x8xf32>, tensor<8xf32>) {
    %0 = slapo.cast %g {slapo.module = "h.mlp.c_proj", slapo.phase = "backward"} : tensor<2x3x8xf32> -> tensor<2x3x8xbf16>
    %1 = slapo.reshape %g {slapo.module = "h.mlp.c_proj", slapo.phase = "backward"} : tensor<2x3x8xf32> -> tensor<6x8xf32>
    %2 = slapo.sum %1 {dims = array<i64: 0>, keepdim = false, slapo.module = "h.mlp.c_proj", slapo.phase = "backward"} : tensor<6x8xf32> -> tensor<8xf32>
    %3 = slapo.sum %a {dims = array<i64: 0>, keepdim = false, slapo.phase = "backward"} : tensor<4x8xf32> -> tensor<8xf32>
    %4 = slapo.neg %a {slapo.phase = "backward"} : tensor<4x8xf32>
    %5 = slapo.cast %4 {slapo.phase = "backward"} : tensor<4x8xf32> -> tensor<4x8xbf16>
    %6 = slapo.exp %b {slapo.phase = "backward"} : tensor<4x8xf32>
    %7 = slapo.softmax %6 {dim = 1 : i64, slapo.phase = "backward"} : tensor<4x8xf32>
    %8 = slapo.sum %b {dims = array<i64: 0>, keepdim = false, slapo.phase = "backward"} : tensor<4x8xf32> -> tensor<8xf32>
    return %0, %2, %3, %5, %7, %8 : tensor<2x3x8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<4x8xbf16>, tensor<4x8xf32>, tensor<8xf32>
  }
}
