// RUN: slapo-opt --slapo-fuse-elementwise %s | FileCheck %s
// RUN: slapo-opt --slapo-fuse-elementwise=modules=m.chain %s | FileCheck %s --check-prefix=MODULE
// RUN: slapo-opt --slapo-fuse-elementwise --slapo-plan-memory %s | FileCheck %s --check-prefix=PLAN
// RUN: echo 'module {}' | not slapo-opt --slapo-fuse-elementwise 2>&1 | FileCheck %s --check-prefix=NO-STEP

// Each case starts from the step's arguments and ends in the concat that
// the loss sums, so that the groups of one case do not reach into another.
module {
  func.func @train_step(%x: tensor<2x4xf32>, %y: tensor<2x4xf32>, %b: tensor<4xf32>, %c: tensor<2x1xf32>, %w: tensor<4x4xf32>, %step: tensor<i64>, %total: tensor<i64>) -> (tensor<f32>, tensor<f64>) {
    // A chain with a bias row, a column and a scalar: one group, one result.
    // Its module path is the longest that holds all its ops.
    // CHECK-LABEL: func.func @train_step
    // CHECK: %[[CHAIN:.*]] = slapo.fused %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {slapo.module = "m.chain"} : (tensor<2x4xf32>, tensor<4xf32>, tensor<2x1xf32>, tensor<f32>) -> tensor<2x4xf32> {
    // CHECK-NEXT: ^bb0(%[[A0:.*]]: tensor<2x4xf32>, %[[A1:.*]]: tensor<4xf32>, %[[A2:.*]]: tensor<2x1xf32>, %[[A3:.*]]: tensor<f32>):
    // CHECK-NEXT: %[[V0:.*]] = slapo.add %[[A0]], %[[A1]] {slapo.module = "m.chain"}
    // CHECK-NEXT: %[[V1:.*]] = slapo.gelu %[[V0]] <tanh> {slapo.module = "m.chain.act"}
    // CHECK-NEXT: %[[V2:.*]] = slapo.mul %[[V1]], %[[A2]] {slapo.module = "m.chain"}
    // CHECK-NEXT: %[[V3:.*]] = slapo.div %[[V2]], %[[A3]] {slapo.module = "m.chain"}
    // CHECK-NEXT: slapo.yield %[[V3]] : tensor<2x4xf32>
    // CHECK-NEXT: }
    %half = slapo.constant dense<5.000000e-01> : tensor<f32>
    %0 = slapo.add %x, %b {slapo.module = "m.chain"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %1 = slapo.gelu %0 <tanh> {slapo.module = "m.chain.act"} : tensor<2x4xf32>
    %2 = slapo.mul %1, %c {slapo.module = "m.chain"} : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
    %3 = slapo.div %2, %half {slapo.module = "m.chain"} : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>

    // A reduction in the middle that is not along the last dim: the sum
    // reads %4 before the mul that reads both, so the mul does not join the
    // exp: nothing fuses. (Reductions along the last dim join:
    // fuse-elementwise-rows.mlir.)
    // CHECK: %[[R4:.*]] = slapo.exp %[[X:arg0]] {slapo.module = "m.reduce"}
    // CHECK-NEXT: %[[R5:.*]] = slapo.sum %[[R4]]
    // CHECK-NEXT: %[[R6:.*]] = slapo.mul %[[R4]], %[[R5]] {slapo.module = "m.reduce"}
    %4 = slapo.exp %x {slapo.module = "m.reduce"} : tensor<2x4xf32>
    %5 = slapo.sum %4 {dims = array<i64: 0>, keepdim = true, slapo.module = "m.reduce"} : tensor<2x4xf32> -> tensor<1x4xf32>
    %6 = slapo.mul %4, %5 {slapo.module = "m.reduce"} : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>

    // A collective in the middle: the all-reduce reads %7 before the add, so
    // the groups end at it: {neg, tanh} before, {sqrt, add} after.
    // CHECK: %[[G1:.*]] = slapo.fused %[[Y:arg1]] {slapo.module = "m.sync"}
    // CHECK: slapo.neg
    // CHECK-NEXT: slapo.tanh
    // CHECK: %[[AR:.*]] = slapo.all_reduce %[[G1]] <tp>
    // CHECK-NEXT: %[[G2:.*]] = slapo.fused %[[AR]], %[[G1]] {slapo.module = "m.sync"}
    // CHECK: slapo.sqrt
    // CHECK-NEXT: slapo.add
    %n7 = slapo.neg %y {slapo.module = "m.sync"} : tensor<2x4xf32>
    %7 = slapo.tanh %n7 {slapo.module = "m.sync"} : tensor<2x4xf32>
    %8 = slapo.all_reduce %7 <tp> {slapo.module = "m.sync"} : tensor<2x4xf32>
    %9 = slapo.sqrt %8 {slapo.module = "m.sync"} : tensor<2x4xf32>
    %10 = slapo.add %9, %7 {slapo.module = "m.sync"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>

    // A value read by two groups: the linear reads %12 before the second
    // group's mul, which reads %11: the first group gives both as results.
    // CHECK: %[[T:.*]]:2 = slapo.fused %[[X]], %[[Y]] {slapo.module = "m.two"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
    // CHECK: slapo.yield %{{.*}}, %{{.*}} : tensor<2x4xf32>, tensor<2x4xf32>
    // CHECK: %[[LIN:.*]] = slapo.linear %[[T]]#1, %{{.*}}
    // CHECK-NEXT: %[[U:.*]] = slapo.fused %[[LIN]], %[[T]]#0 {slapo.module = "m.two.b"}
    %11 = slapo.sub %x, %y {slapo.module = "m.two.a"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %12 = slapo.relu %11 {slapo.module = "m.two.b"} : tensor<2x4xf32>
    %13 = slapo.linear %12, %w {slapo.module = "m.two"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %14 = slapo.mul %13, %11 {slapo.module = "m.two.b"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %15 = slapo.sigmoid %14 {slapo.module = "m.two.b"} : tensor<2x4xf32>

    // Phases do not mix: the backward's ops are a group of their own, and
    // the optimizer's maximum joins none.
    // CHECK: %[[BWD:.*]] = slapo.fused %[[X]] {slapo.module = "m.phase", slapo.phase = "backward"}
    // CHECK: slapo.maximum %[[BWD]], %[[X]] {slapo.module = "m.phase", slapo.phase = "optimizer"}
    %16 = slapo.silu %x {slapo.module = "m.phase", slapo.phase = "backward"} : tensor<2x4xf32>
    %17 = slapo.abs %16 {slapo.module = "m.phase", slapo.phase = "backward"} : tensor<2x4xf32>
    %18 = slapo.maximum %17, %x {slapo.module = "m.phase", slapo.phase = "optimizer"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>

    // Not fusible: a [2,1,4] operand of a [2,3,4] loop (the dims it keeps
    // are not one block of the loop's), and bf16 values (the loops compute
    // in f32 or f64).
    // CHECK: slapo.broadcast
    // CHECK-NEXT: slapo.add {{.*}} : (tensor<2x3x4xf32>, tensor<2x1x4xf32>)
    // CHECK-NEXT: slapo.exp
    // CHECK: slapo.cast
    // CHECK-NEXT: slapo.log {{.*}} : tensor<2x4xbf16>
    // CHECK-NEXT: slapo.cos {{.*}} : tensor<2x4xbf16>
    %r = slapo.reshape %y : tensor<2x4xf32> -> tensor<2x1x4xf32>
    %19 = slapo.broadcast %r : tensor<2x1x4xf32> -> tensor<2x3x4xf32>
    %20 = slapo.add %19, %r : (tensor<2x3x4xf32>, tensor<2x1x4xf32>) -> tensor<2x3x4xf32>
    %21 = slapo.exp %20 : tensor<2x3x4xf32>
    %22 = slapo.cast %y : tensor<2x4xf32> -> tensor<2x4xbf16>
    %23 = slapo.log %22 : tensor<2x4xbf16>
    %24 = slapo.cos %23 : tensor<2x4xbf16>
    %25 = slapo.cast %24 : tensor<2x4xbf16> -> tensor<2x4xf32>
    %26 = slapo.reshape %21 : tensor<2x3x4xf32> -> tensor<6x4xf32>

    // Microbatches do not mix: the chain of microbatch 0 and the one of
    // microbatch 1 that continues it are two groups (one group would keep
    // the first microbatch's values live until the second's ops). Each
    // group is its microbatch's, as its ops were.
    // CHECK: %[[MB0:.*]] = slapo.fused %[[X]] {slapo.microbatch = 0 : i64, slapo.module = "m.micro"}
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.exp {{.*}}slapo.microbatch = 0
    // CHECK-NEXT: slapo.neg {{.*}}slapo.microbatch = 0
    // CHECK-NEXT: slapo.yield
    // CHECK: slapo.fused %[[MB0]] {slapo.microbatch = 1 : i64, slapo.module = "m.micro"}
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.tanh {{.*}}slapo.microbatch = 1
    // CHECK-NEXT: slapo.abs {{.*}}slapo.microbatch = 1
    // CHECK-NEXT: slapo.yield
    %27 = slapo.exp %x {slapo.microbatch = 0 : i64, slapo.module = "m.micro"} : tensor<2x4xf32>
    %28 = slapo.neg %27 {slapo.microbatch = 0 : i64, slapo.module = "m.micro"} : tensor<2x4xf32>
    %29 = slapo.tanh %28 {slapo.microbatch = 1 : i64, slapo.module = "m.micro"} : tensor<2x4xf32>
    %30 = slapo.abs %29 {slapo.microbatch = 1 : i64, slapo.module = "m.micro"} : tensor<2x4xf32>

    // Blocks of a module list do not mix: block 0's chain and block 1's
    // that continues it are two groups, each within its block (the emitter
    // writes the blocks as one function); the submodules of one block join.
    // CHECK: %[[B0:.*]] = slapo.fused %[[X]] {slapo.module = "h.0"}
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.sqrt {{.*}}{slapo.module = "h.0.mlp"}
    // CHECK-NEXT: slapo.log {{.*}}{slapo.module = "h.0"}
    // CHECK-NEXT: slapo.yield
    // CHECK: slapo.fused %[[B0]] {slapo.module = "h.1"}
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.sin {{.*}}{slapo.module = "h.1.attn"}
    // CHECK-NEXT: slapo.cos {{.*}}{slapo.module = "h.1.mlp"}
    // CHECK-NEXT: slapo.yield
    %31 = slapo.sqrt %x {slapo.module = "h.0.mlp"} : tensor<2x4xf32>
    %32 = slapo.log %31 {slapo.module = "h.0"} : tensor<2x4xf32>
    %33 = slapo.sin %32 {slapo.module = "h.1.attn"} : tensor<2x4xf32>
    %34 = slapo.cos %33 {slapo.module = "h.1.mlp"} : tensor<2x4xf32>

    // A where joins the chain, its bool condition an operand of the group
    // (broadcast as a row), as attention's scale and causal mask do.
    // CHECK: %[[CMP:.*]] = slapo.compare <gt>
    // CHECK: slapo.fused %[[X]], %{{.*}}, %[[CMP]], %{{.*}} {slapo.module = "m.mask"} : (tensor<2x4xf32>, tensor<f32>, tensor<4xi1>, tensor<f32>) -> tensor<2x4xf32>
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.div
    // CHECK-NEXT: slapo.where
    // CHECK-NEXT: slapo.exp
    // CHECK-NEXT: slapo.yield
    %low = slapo.constant dense<-1.000000e+04> : tensor<f32>
    %row = slapo.slice %y {dim = 0 : i64, start = 0 : i64, end = 1 : i64, step = 1 : i64} : tensor<2x4xf32> -> tensor<1x4xf32>
    %row1 = slapo.reshape %row : tensor<1x4xf32> -> tensor<4xf32>
    %xrow = slapo.slice %x {dim = 0 : i64, start = 0 : i64, end = 1 : i64, step = 1 : i64} : tensor<2x4xf32> -> tensor<1x4xf32>
    %xrow1 = slapo.reshape %xrow : tensor<1x4xf32> -> tensor<4xf32>
    %mask = slapo.compare <gt> %xrow1, %row1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
    %35 = slapo.div %x, %half {slapo.module = "m.mask"} : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
    %36 = slapo.where %mask, %35, %low {slapo.module = "m.mask"} : (tensor<4xi1>, tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
    %37 = slapo.exp %36 {slapo.module = "m.mask"} : tensor<2x4xf32>

    // HF's Conv1D: the bias row added to the [B*T, N] product that the
    // model views as [B, T, N] for the gelu. The add moves after the reshape
    // (which keeps the last dim) and joins the gelu's loop.
    // CHECK: %[[PROD:.*]] = slapo.matmul %[[X]], %[[W:arg4]] {slapo.module = "m.conv"}
    // CHECK-NEXT: %[[VIEW:[0-9]+]] = slapo.reshape %[[PROD]] {slapo.module = "m.conv"} : tensor<2x4xf32> -> tensor<1x2x4xf32>
    // CHECK-NEXT: slapo.fused %[[B:arg2]], %[[VIEW]] {slapo.module = "m.conv"} : (tensor<4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.add {{.*}} : (tensor<4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
    // CHECK-NEXT: slapo.gelu
    // CHECK-NEXT: slapo.yield
    %38 = slapo.matmul %x, %w {slapo.module = "m.conv"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %39 = slapo.add %b, %38 {slapo.module = "m.conv"} : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %40 = slapo.reshape %39 {slapo.module = "m.conv"} : tensor<2x4xf32> -> tensor<1x2x4xf32>
    %41 = slapo.gelu %40 <tanh> {slapo.module = "m.conv.act"} : tensor<1x2x4xf32>
    %42 = slapo.reshape %41 : tensor<1x2x4xf32> -> tensor<2x4xf32>

    // Not moved: a bias add that an op besides the reshape reads (the add
    // joins that op's loop instead), and one whose reshape changes the last
    // dim (the row would fall on other elements).
    // CHECK: %[[PROD2:.*]] = slapo.matmul %[[X]], %[[W]] {slapo.module = "m.two_readers"}
    // CHECK-NEXT: %[[SUM:.*]]:2 = slapo.fused %[[B]], %[[PROD2]] {slapo.module = "m.two_readers"}
    // CHECK: slapo.add
    // CHECK-NEXT: slapo.neg
    // CHECK: slapo.reshape %[[SUM]]#0 {{.*}} -> tensor<1x2x4xf32>
    // CHECK: %[[PROD3:.*]] = slapo.matmul %[[X]], %[[W]] {slapo.module = "m.last_dim"}
    // CHECK-NEXT: slapo.add %[[B]], %[[PROD3]]
    // CHECK-NEXT: slapo.reshape {{.*}} -> tensor<4x2xf32>
    %43 = slapo.matmul %x, %w {slapo.module = "m.two_readers"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %44 = slapo.add %b, %43 {slapo.module = "m.two_readers"} : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %45 = slapo.neg %44 {slapo.module = "m.two_readers"} : tensor<2x4xf32>
    %46 = slapo.reshape %44 {slapo.module = "m.two_readers"} : tensor<2x4xf32> -> tensor<1x2x4xf32>
    %47 = slapo.exp %46 {slapo.module = "m.two_readers"} : tensor<1x2x4xf32>
    %48 = slapo.reshape %47 : tensor<1x2x4xf32> -> tensor<2x4xf32>
    %49 = slapo.matmul %x, %w {slapo.module = "m.last_dim"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %50 = slapo.add %b, %49 {slapo.module = "m.last_dim"} : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %51 = slapo.reshape %50 {slapo.module = "m.last_dim"} : tensor<2x4xf32> -> tensor<4x2xf32>
    %52 = slapo.exp %51 {slapo.module = "m.last_dim"} : tensor<4x2xf32>
    %53 = slapo.reshape %52 : tensor<4x2xf32> -> tensor<2x4xf32>

    // Mixed precision's product is bf16, widened for the bias add: the
    // reshape moves the bf16 product and the widening joins the gelu's loop.
    // CHECK: %[[PROD4:.*]] = slapo.matmul {{.*}} {slapo.module = "m.bf16"} : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    // CHECK-NEXT: %[[VIEW4:[0-9]+]] = slapo.reshape %[[PROD4]] {slapo.module = "m.bf16"} : tensor<2x4xbf16> -> tensor<1x2x4xbf16>
    // CHECK-NEXT: slapo.fused %[[VIEW4]], %[[B]] {slapo.module = "m.bf16"} : (tensor<1x2x4xbf16>, tensor<4xf32>) -> tensor<1x2x4xf32>
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.cast {{.*}} : tensor<1x2x4xbf16> -> tensor<1x2x4xf32>
    // CHECK-NEXT: slapo.add {{.*}} : (tensor<4xf32>, tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
    // CHECK-NEXT: slapo.gelu
    // CHECK-NEXT: slapo.yield
    %xb = slapo.cast %x : tensor<2x4xf32> -> tensor<2x4xbf16>
    %wb = slapo.cast %w : tensor<4x4xf32> -> tensor<4x4xbf16>
    %54 = slapo.matmul %xb, %wb {slapo.module = "m.bf16"} : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    %55 = slapo.cast %54 {slapo.module = "m.bf16"} : tensor<2x4xbf16> -> tensor<2x4xf32>
    %56 = slapo.add %b, %55 {slapo.module = "m.bf16"} : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %57 = slapo.reshape %56 {slapo.module = "m.bf16"} : tensor<2x4xf32> -> tensor<1x2x4xf32>
    %58 = slapo.gelu %57 <tanh> {slapo.module = "m.bf16.act"} : tensor<1x2x4xf32>
    %59 = slapo.reshape %58 : tensor<1x2x4xf32> -> tensor<2x4xf32>

    // Two chains that meet in one op, each read by nothing else before it:
    // one loop, placed at the op that joins them, after the matmul between
    // them (which reads neither), so that it also holds the add of the
    // matmul's result.
    // CHECK: %[[PROD6:.*]] = slapo.matmul %[[X]], %[[W]] {slapo.module = "m.meet"}
    // CHECK-NEXT: slapo.fused %[[Y:arg1]], %[[X]], %[[PROD6]] {slapo.module = "m.meet"}
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.neg
    // CHECK-NEXT: slapo.exp
    // CHECK-NEXT: slapo.mul
    // CHECK-NEXT: slapo.add
    // CHECK-NEXT: slapo.yield
    %60 = slapo.exp %x {slapo.module = "m.meet"} : tensor<2x4xf32>
    %61 = slapo.matmul %x, %w {slapo.module = "m.meet"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %62 = slapo.neg %y {slapo.module = "m.meet"} : tensor<2x4xf32>
    %63 = slapo.mul %60, %62 {slapo.module = "m.meet"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %64 = slapo.add %61, %63 {slapo.module = "m.meet"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>

    // A widened bf16 product that the backward reads too: the backward
    // widens it again in its own loop, and the forward's group does not
    // write the f32 copy (it writes the exp alone).
    // CHECK: %[[PROD5:.*]] = slapo.matmul {{.*}} {slapo.module = "m.widen"}
    // CHECK-NEXT: %[[FWD:.*]] = slapo.fused %[[PROD5]] {slapo.module = "m.widen"} : (tensor<2x4xbf16>) -> tensor<2x4xf32>
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.cast
    // CHECK-NEXT: slapo.exp
    // CHECK-NEXT: slapo.yield
    // CHECK: slapo.fused %[[PROD5]], %[[FWD]] {slapo.module = "m.widen", slapo.phase = "backward"} : (tensor<2x4xbf16>, tensor<2x4xf32>) -> tensor<2x4xf32>
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.cast
    // CHECK-NEXT: slapo.mul
    // CHECK-NEXT: slapo.yield
    %65 = slapo.matmul %xb, %wb {slapo.module = "m.widen"} : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    %66 = slapo.cast %65 {slapo.module = "m.widen"} : tensor<2x4xbf16> -> tensor<2x4xf32>
    %67 = slapo.exp %66 {slapo.module = "m.widen"} : tensor<2x4xf32>
    %68 = slapo.mul %67, %66 {slapo.module = "m.widen", slapo.phase = "backward"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>

    // A widened product plus a bias row (a linear layer's output before its
    // activation) that the backward reads too: the backward computes it
    // again from the bf16 product and the row in its own loop, and the
    // forward's group writes the gelu alone.
    // CHECK: %[[PROD6:.*]] = slapo.matmul {{.*}} {slapo.module = "m.bias"}
    // CHECK-NEXT: %[[GELU:.*]] = slapo.fused %[[PROD6]], %arg2 {slapo.module = "m.bias"} : (tensor<2x4xbf16>, tensor<4xf32>) -> tensor<2x4xf32>
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.cast
    // CHECK-NEXT: slapo.add
    // CHECK-NEXT: slapo.gelu
    // CHECK-NEXT: slapo.yield
    // CHECK: slapo.fused {{.*}}%[[PROD6]]{{.*}} {slapo.module = "m.bias", slapo.phase = "backward"} : ({{.*}}) -> tensor<2x4xf32>
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.cast
    // CHECK-NEXT: slapo.add
    // CHECK-NEXT: slapo.gelu_grad
    // CHECK-NEXT: slapo.yield
    %69 = slapo.matmul %xb, %wb {slapo.module = "m.bias"} : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
    %70 = slapo.cast %69 {slapo.module = "m.bias"} : tensor<2x4xbf16> -> tensor<2x4xf32>
    %71 = slapo.add %70, %b {slapo.module = "m.bias"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %72 = slapo.gelu %71 <tanh> {slapo.module = "m.bias"} : tensor<2x4xf32>
    %73 = slapo.gelu_grad %72, %71 <tanh> {slapo.module = "m.bias", slapo.phase = "backward"} : tensor<2x4xf32>

    %all = slapo.concat %3, %6, %10, %15, %18, %25, %26, %30, %34, %37, %42, %45, %48, %53, %59, %64, %68, %73 {dim = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<6x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<40x4xf32>
    %loss = slapo.sum %all {dims = array<i64: 0, 1>, keepdim = false} : tensor<40x4xf32> -> tensor<f32>
    %lr = slapo.constant dense<1.000000e-03> : tensor<f64>
    return %loss, %lr : tensor<f32>, tensor<f64>
  }
}

// fuse() of one module fuses only its ops, and a widened product of
// another module that no group reads is not widened again for the backward
// (a cast of its own would be one more pass): the backward reads the
// forward's f32 tensor.
// MODULE: slapo.fused {{.*}}{slapo.module = "m.chain"}
// MODULE-NOT: slapo.fused
// MODULE: %[[WIDE:.*]] = slapo.cast %{{.*}} {slapo.module = "m.widen"}
// MODULE-NEXT: %[[EXP:.*]] = slapo.exp %[[WIDE]]
// MODULE-NEXT: slapo.mul %[[EXP]], %[[WIDE]] {slapo.module = "m.widen", slapo.phase = "backward"}
// MODULE-NOT: slapo.fused

// Values a group keeps to itself are not planned: the chain's add, gelu
// and mul get no bytes, only its result does.
// PLAN: slapo.fused {{.*}} {slapo.module = "m.chain", slapo.offsets = array<i64: {{[0-9]+}}>}
// PLAN-NEXT: ^bb0
// PLAN-NEXT: slapo.add %{{.*}}, %{{.*}} {slapo.module = "m.chain"} :

// NO-STEP: error: slapo-fuse-elementwise needs @train_step (run slapo-optimizer first)
