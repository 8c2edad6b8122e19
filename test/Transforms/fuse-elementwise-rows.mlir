// RUN: slapo-opt --slapo-fuse-elementwise %s | FileCheck %s
// RUN: slapo-opt --slapo-fuse-elementwise --slapo-plan-memory %s | FileCheck %s --check-prefix=PLAN

// Row groups: reductions (sum, mean, max) along the loop's last dim with
// keepdim, softmaxes along it and the elementwise ops on their row values
// join the chains they end. Each case starts from the step's arguments and
// ends in a linear or the concat that the loss sums, so that the groups of
// one case do not reach into another.
module {
  func.func @train_step(%s: tensor<2x2x5x5xf32>, %g: tensor<2x2x5x5xf32>, %y: tensor<2x2x5x5xf32>, %mask: tensor<5x5xi1>, %w: tensor<5x5xf32>, %step: tensor<i64>, %total: tensor<i64>) -> (tensor<f32>, tensor<f64>) {
    %scale = slapo.constant dense<2.000000e+00> : tensor<f32>
    %low = slapo.constant dense<0xFF800000> : tensor<f32>
    %zero = slapo.constant dense<0.000000e+00> : tensor<f32>

    // Attention's forward: scale, causal mask and softmax are one group, the
    // probabilities its result.
    // CHECK-LABEL: func.func @train_step
    // CHECK: %[[P:.*]] = slapo.fused %[[S:arg0]], %{{.*}}, %[[MASK:arg3]], %{{.*}} {slapo.module = "attn"} : (tensor<2x2x5x5xf32>, tensor<f32>, tensor<5x5xi1>, tensor<f32>) -> tensor<2x2x5x5xf32> {
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.div
    // CHECK-NEXT: slapo.where
    // CHECK-NEXT: slapo.softmax {{.*}}{dim = 3 : i64
    // CHECK-NEXT: slapo.yield {{.*}} : tensor<2x2x5x5xf32>
    // CHECK-NEXT: }
    // CHECK-NEXT: slapo.linear %[[P]]
    %0 = slapo.div %s, %scale {slapo.module = "attn"} : (tensor<2x2x5x5xf32>, tensor<f32>) -> tensor<2x2x5x5xf32>
    %1 = slapo.where %mask, %0, %low {slapo.module = "attn"} : (tensor<5x5xi1>, tensor<2x2x5x5xf32>, tensor<f32>) -> tensor<2x2x5x5xf32>
    %2 = slapo.softmax %1 {dim = 3 : i64, slapo.module = "attn"} : tensor<2x2x5x5xf32>
    %3 = slapo.linear %2, %w {slapo.module = "attn"} : (tensor<2x2x5x5xf32>, tensor<5x5xf32>) -> tensor<2x2x5x5xf32>

    // Its backward: y * (g - sum(g * y)), the mask's and the scale's
    // gradients; the row sum in the middle, one group.
    // CHECK: %[[DS:.*]] = slapo.fused %[[G:arg1]], %[[Y:arg2]], %[[MASK]], %{{.*}}, %{{.*}} {slapo.module = "attn", slapo.phase = "backward"} : (tensor<2x2x5x5xf32>, tensor<2x2x5x5xf32>, tensor<5x5xi1>, tensor<f32>, tensor<f32>) -> tensor<2x2x5x5xf32> {
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.mul
    // CHECK-NEXT: slapo.sum {{.*}}{dims = array<i64: 3>, keepdim = true
    // CHECK-NEXT: slapo.sub
    // CHECK-NEXT: slapo.mul
    // CHECK-NEXT: slapo.where
    // CHECK-NEXT: slapo.div
    // CHECK-NEXT: slapo.yield {{.*}} : tensor<2x2x5x5xf32>
    // CHECK-NEXT: }
    %4 = slapo.mul %g, %y {slapo.module = "attn", slapo.phase = "backward"} : (tensor<2x2x5x5xf32>, tensor<2x2x5x5xf32>) -> tensor<2x2x5x5xf32>
    %5 = slapo.sum %4 {dims = array<i64: 3>, keepdim = true, slapo.module = "attn", slapo.phase = "backward"} : tensor<2x2x5x5xf32> -> tensor<2x2x5x1xf32>
    %6 = slapo.sub %g, %5 {slapo.module = "attn", slapo.phase = "backward"} : (tensor<2x2x5x5xf32>, tensor<2x2x5x1xf32>) -> tensor<2x2x5x5xf32>
    %7 = slapo.mul %y, %6 {slapo.module = "attn", slapo.phase = "backward"} : (tensor<2x2x5x5xf32>, tensor<2x2x5x5xf32>) -> tensor<2x2x5x5xf32>
    %8 = slapo.where %mask, %7, %zero {slapo.module = "attn", slapo.phase = "backward"} : (tensor<5x5xi1>, tensor<2x2x5x5xf32>, tensor<f32>) -> tensor<2x2x5x5xf32>
    %9 = slapo.div %8, %scale {slapo.module = "attn", slapo.phase = "backward"} : (tensor<2x2x5x5xf32>, tensor<f32>) -> tensor<2x2x5x5xf32>

    // A layer norm written out: means, the row ops on them (add eps, rsqrt)
    // and the normalized rows; the row values another op reads are results
    // of the row shape.
    // CHECK: %[[LN:.*]]:2 = slapo.fused %[[S]], %{{.*}} {slapo.module = "ln"} : (tensor<2x2x5x5xf32>, tensor<f32>) -> (tensor<2x2x5x1xf32>, tensor<2x2x5x5xf32>) {
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.mean
    // CHECK-NEXT: slapo.sub
    // CHECK-NEXT: slapo.mul
    // CHECK-NEXT: slapo.mean
    // CHECK-NEXT: slapo.add {{.*}} -> tensor<2x2x5x1xf32>
    // CHECK-NEXT: slapo.rsqrt {{.*}} : tensor<2x2x5x1xf32>
    // CHECK-NEXT: slapo.mul
    // CHECK-NEXT: slapo.yield {{.*}} : tensor<2x2x5x1xf32>, tensor<2x2x5x5xf32>
    %eps = slapo.constant dense<1.000000e-05> : tensor<f32>
    %10 = slapo.mean %s {dims = array<i64: 3>, keepdim = true, slapo.module = "ln"} : tensor<2x2x5x5xf32> -> tensor<2x2x5x1xf32>
    %11 = slapo.sub %s, %10 {slapo.module = "ln"} : (tensor<2x2x5x5xf32>, tensor<2x2x5x1xf32>) -> tensor<2x2x5x5xf32>
    %12 = slapo.mul %11, %11 {slapo.module = "ln"} : (tensor<2x2x5x5xf32>, tensor<2x2x5x5xf32>) -> tensor<2x2x5x5xf32>
    %13 = slapo.mean %12 {dims = array<i64: 3>, keepdim = true, slapo.module = "ln"} : tensor<2x2x5x5xf32> -> tensor<2x2x5x1xf32>
    %14 = slapo.add %13, %eps {slapo.module = "ln"} : (tensor<2x2x5x1xf32>, tensor<f32>) -> tensor<2x2x5x1xf32>
    %15 = slapo.rsqrt %14 {slapo.module = "ln"} : tensor<2x2x5x1xf32>
    %16 = slapo.mul %11, %15 {slapo.module = "ln"} : (tensor<2x2x5x5xf32>, tensor<2x2x5x1xf32>) -> tensor<2x2x5x5xf32>
    %17 = slapo.linear %16, %w {slapo.module = "ln"} : (tensor<2x2x5x5xf32>, tensor<5x5xf32>) -> tensor<2x2x5x5xf32>

    // Not fused: a sum over another dim, and one along the last dim without
    // keepdim; the exps before them are groups of their own (one op each:
    // none).
    // CHECK: slapo.exp %[[S]] {slapo.module = "other_dim"}
    // CHECK-NEXT: slapo.sum {{.*}}{dims = array<i64: 2>, keepdim = true
    // CHECK-NEXT: slapo.mul {{.*}}{slapo.module = "other_dim"}
    // CHECK: slapo.exp %[[S]] {slapo.module = "no_keepdim"}
    // CHECK-NEXT: slapo.sum {{.*}}{dims = array<i64: 3>, keepdim = false
    %18 = slapo.exp %s {slapo.module = "other_dim"} : tensor<2x2x5x5xf32>
    %19 = slapo.sum %18 {dims = array<i64: 2>, keepdim = true, slapo.module = "other_dim"} : tensor<2x2x5x5xf32> -> tensor<2x2x1x5xf32>
    %20 = slapo.mul %18, %19 {slapo.module = "other_dim"} : (tensor<2x2x5x5xf32>, tensor<2x2x1x5xf32>) -> tensor<2x2x5x5xf32>
    %21 = slapo.exp %s {slapo.module = "no_keepdim"} : tensor<2x2x5x5xf32>
    %22 = slapo.sum %21 {dims = array<i64: 3>, keepdim = false, slapo.module = "no_keepdim"} : tensor<2x2x5x5xf32> -> tensor<2x2x5xf32>
    %r22 = slapo.reshape %22 : tensor<2x2x5xf32> -> tensor<2x2x5x1xf32>

    // A row value read by another op before the group ends: the loss's
    // total reads the sum before the mul, so the mul does not join; the
    // group {exp, sum} gives both.
    // CHECK: %[[EARLY:.*]]:2 = slapo.fused %[[S]] {slapo.module = "early"} : (tensor<2x2x5x5xf32>) -> (tensor<2x2x5x5xf32>, tensor<2x2x5x1xf32>) {
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.exp
    // CHECK-NEXT: slapo.sum
    // CHECK-NEXT: slapo.yield
    // CHECK-NEXT: }
    // CHECK-NEXT: slapo.sum %[[EARLY]]#1 {dims = array<i64: 0, 1, 2, 3>
    // CHECK-NEXT: slapo.mul %[[EARLY]]#0, %[[EARLY]]#1 {slapo.module = "early"}
    %23 = slapo.exp %s {slapo.module = "early"} : tensor<2x2x5x5xf32>
    %24 = slapo.sum %23 {dims = array<i64: 3>, keepdim = true, slapo.module = "early"} : tensor<2x2x5x5xf32> -> tensor<2x2x5x1xf32>
    %total24 = slapo.sum %24 {dims = array<i64: 0, 1, 2, 3>, keepdim = false} : tensor<2x2x5x1xf32> -> tensor<f32>
    %25 = slapo.mul %23, %24 {slapo.module = "early"} : (tensor<2x2x5x5xf32>, tensor<2x2x5x1xf32>) -> tensor<2x2x5x5xf32>

    // A collective in the chain (a tp-split row's partial sum): the group
    // ends at the sum, the ops after the all-reduce are another.
    // CHECK: %[[PART:.*]] = slapo.fused %[[G]], %[[Y]] {slapo.module = "tp", slapo.phase = "backward"}
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.mul
    // CHECK-NEXT: slapo.sum
    // CHECK-NEXT: slapo.yield
    // CHECK-NEXT: }
    // CHECK-NEXT: %[[AR:.*]] = slapo.all_reduce %[[PART]] <tp>
    // CHECK-NEXT: slapo.fused %[[G]], %[[AR]], %[[Y]] {slapo.module = "tp", slapo.phase = "backward"}
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.sub
    // CHECK-NEXT: slapo.mul
    // CHECK-NEXT: slapo.yield
    %26 = slapo.mul %g, %y {slapo.module = "tp", slapo.phase = "backward"} : (tensor<2x2x5x5xf32>, tensor<2x2x5x5xf32>) -> tensor<2x2x5x5xf32>
    %27 = slapo.sum %26 {dims = array<i64: 3>, keepdim = true, slapo.module = "tp", slapo.phase = "backward"} : tensor<2x2x5x5xf32> -> tensor<2x2x5x1xf32>
    %28 = slapo.all_reduce %27 <tp> {slapo.module = "tp", slapo.phase = "backward"} : tensor<2x2x5x1xf32>
    %29 = slapo.sub %g, %28 {slapo.module = "tp", slapo.phase = "backward"} : (tensor<2x2x5x5xf32>, tensor<2x2x5x1xf32>) -> tensor<2x2x5x5xf32>
    %30 = slapo.mul %y, %29 {slapo.module = "tp", slapo.phase = "backward"} : (tensor<2x2x5x5xf32>, tensor<2x2x5x5xf32>) -> tensor<2x2x5x5xf32>

    // A max and a log-softmax along the last dim join too.
    // CHECK: slapo.fused %[[S]] {slapo.module = "logits"} : (tensor<2x2x5x5xf32>) -> tensor<2x2x5x5xf32>
    // CHECK-NEXT: ^bb0
    // CHECK-NEXT: slapo.max {{.*}}{dims = array<i64: 3>, keepdim = true
    // CHECK-NEXT: slapo.sub
    // CHECK-NEXT: slapo.log_softmax
    // CHECK-NEXT: slapo.neg
    // CHECK-NEXT: slapo.yield
    %31 = slapo.max %s {dims = array<i64: 3>, keepdim = true, slapo.module = "logits"} : tensor<2x2x5x5xf32> -> tensor<2x2x5x1xf32>
    %32 = slapo.sub %s, %31 {slapo.module = "logits"} : (tensor<2x2x5x5xf32>, tensor<2x2x5x1xf32>) -> tensor<2x2x5x5xf32>
    %33 = slapo.log_softmax %32 {dim = 3 : i64, slapo.module = "logits"} : tensor<2x2x5x5xf32>
    %34 = slapo.neg %33 {slapo.module = "logits"} : tensor<2x2x5x5xf32>

    %all = slapo.concat %3, %9, %17, %15, %20, %r22, %25, %30, %34 {dim = 3 : i64} : (tensor<2x2x5x5xf32>, tensor<2x2x5x5xf32>, tensor<2x2x5x5xf32>, tensor<2x2x5x1xf32>, tensor<2x2x5x5xf32>, tensor<2x2x5x1xf32>, tensor<2x2x5x5xf32>, tensor<2x2x5x5xf32>, tensor<2x2x5x5xf32>) -> tensor<2x2x5x37xf32>
    %sum = slapo.sum %all {dims = array<i64: 0, 1, 2, 3>, keepdim = false} : tensor<2x2x5x37xf32> -> tensor<f32>
    %loss = slapo.add %sum, %total24 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %lr = slapo.constant dense<1.000000e-03> : tensor<f64>
    return %loss, %lr : tensor<f32>, tensor<f64>
  }
}

// The values a row group keeps to itself, rows included, get no bytes: the
// attention group's div, where and softmax only its result.
// PLAN: slapo.fused {{.*}} {slapo.module = "attn", slapo.offsets = array<i64: {{[0-9]+}}>}
// PLAN: slapo.fused {{.*}} {slapo.module = "attn", slapo.offsets = array<i64: {{[0-9]+}}>, slapo.phase = "backward"}
