// RUN: slapo-opt --slapo-fold-addends %s | FileCheck %s

// The residual streams' gradient sums become the norm gradients' addends:
// the norm's input gradient (read by the add alone) plus a value of its type
// computed before the norm's gradient, in the same phase and microbatch.

// CHECK-LABEL: func.func @train_step
module {
  func.func @train_step(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %w: tensor<8xf32>, %r: tensor<4x8xf32>, %row: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) {
    // Folded, the norm's gradient on either side of the add.
    // CHECK-NEXT: %[[A:[a-z_0-9]+]], %{{.*}}, %{{.*}} = slapo.layer_norm_grad %arg0, %arg1 weight %arg2 addend %arg3 {eps = 1.000000e-05 : f64, normalized_rank = 1 : i64, slapo.phase = "backward"}
    // CHECK-NEXT: %[[E:[a-z_0-9]+]] = slapo.exp %arg3
    // CHECK-NEXT: %[[B:[a-z_0-9]+]], %{{.*}} = slapo.rms_norm_grad %arg0, %arg1 weight %arg2 addend %[[E]] {eps = 9.9999999999999995E-7 : f64, slapo.phase = "backward"}
    %0:3 = slapo.layer_norm_grad %dy, %x weight %w {normalized_rank = 1, eps = 1.0e-5, slapo.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
    %1 = slapo.add %r, %0#0 {slapo.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %e = slapo.exp %r {slapo.phase = "backward"} : tensor<4x8xf32>
    %2:2 = slapo.rms_norm_grad %dy, %x weight %w {eps = 1.0e-6, slapo.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
    %3 = slapo.add %2#0, %e {slapo.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>

    // Not folded: the input gradient read by another op too; the other term
    // computed after the norm's gradient; a broadcast row; another phase.
    // CHECK-NEXT: %[[C:[a-z_0-9]+]], %{{.*}}, %{{.*}} = slapo.layer_norm_grad %arg0, %arg1 {
    // CHECK-NEXT: slapo.add %arg3, %[[C]]
    // CHECK-NEXT: %[[D:[a-z_0-9]+]], %{{.*}}, %{{.*}} = slapo.layer_norm_grad %arg0, %arg1 {
    // CHECK-NEXT: %[[L:[a-z_0-9]+]] = slapo.exp %arg1
    // CHECK-NEXT: slapo.add %[[D]], %[[L]]
    // CHECK-NEXT: %[[F:[a-z_0-9]+]], %{{.*}}, %{{.*}} = slapo.layer_norm_grad %arg0, %arg1 {
    // CHECK-NEXT: slapo.add %[[F]], %arg4
    // CHECK-NEXT: %[[G:[a-z_0-9]+]], %{{.*}}, %{{.*}} = slapo.layer_norm_grad %arg0, %arg1 {
    // CHECK-NEXT: slapo.add %[[G]], %arg3 {slapo.phase = "optimizer"}
    %4:3 = slapo.layer_norm_grad %dy, %x {normalized_rank = 1, eps = 1.0e-5, slapo.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
    %5 = slapo.add %r, %4#0 {slapo.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %6:3 = slapo.layer_norm_grad %dy, %x {normalized_rank = 1, eps = 1.0e-5, slapo.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
    %late = slapo.exp %x {slapo.phase = "backward"} : tensor<4x8xf32>
    %7 = slapo.add %6#0, %late {slapo.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %8:3 = slapo.layer_norm_grad %dy, %x {normalized_rank = 1, eps = 1.0e-5, slapo.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
    %9 = slapo.add %8#0, %row {slapo.phase = "backward"} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %10:3 = slapo.layer_norm_grad %dy, %x {normalized_rank = 1, eps = 1.0e-5, slapo.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
    %11 = slapo.add %10#0, %r {slapo.phase = "optimizer"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>

    // A second add of a folded norm's gradient stays.
    // CHECK: %[[H:[a-z_0-9]+]], %{{.*}}, %{{.*}} = slapo.layer_norm_grad %arg0, %arg1 addend %arg3
    // CHECK-NEXT: %[[S:[a-z_0-9]+]] = slapo.add %[[H]], %arg0
    %12:3 = slapo.layer_norm_grad %dy, %x {normalized_rank = 1, eps = 1.0e-5, slapo.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
    %13 = slapo.add %12#0, %r {slapo.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %14 = slapo.add %13, %dy {slapo.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>

    // CHECK: return %[[A]], %[[B]], {{.*}}, %[[S]], %{{[a-z_0-9]+}}
    return %1, %3, %5, %7, %9, %11, %4#0, %14, %0#1 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>
  }
}
