// RUN: slapo-opt --slapo-autodiff --mlir-print-debuginfo %s | FileCheck %s

// linear + relu + cross_entropy: the backward of each op follows its forward
// in reverse, located at the forward op and in its module (slapo.module), and
// the gradients are returned in the order of the params in the module.

module {
  slapo.param @fc1.weight : tensor<8x4xf32>
  slapo.param @fc1.bias : tensor<8xf32>
  slapo.param @fc2.weight : tensor<3x8xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"},
                     %target: tensor<2xi64> {slapo.name = "target"}) -> tensor<f32> {
    %w1 = slapo.get_param @fc1.weight {slapo.module = "fc1"} : tensor<8x4xf32> loc(#fc1)
    %b1 = slapo.get_param @fc1.bias {slapo.module = "fc1"} : tensor<8xf32> loc(#fc1)
    %h = slapo.linear %x, %w1, %b1 {slapo.module = "fc1"} : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32> loc(#fc1)
    %r = slapo.relu %h {slapo.module = "act"} : tensor<2x8xf32> loc(#act)
    %w2 = slapo.get_param @fc2.weight {slapo.module = "fc2"} : tensor<3x8xf32> loc(#fc2)
    %logits = slapo.linear %r, %w2 {slapo.module = "fc2"} : (tensor<2x8xf32>, tensor<3x8xf32>) -> tensor<2x3xf32> loc(#fc2)
    %loss = slapo.cross_entropy %logits, %target {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32> loc(#loss)
    return %loss : tensor<f32>
  }
}
#src = loc("model.py":7:0)
#fc1 = loc("fc1"(#src))
#act = loc("act"(#src))
#fc2 = loc("fc2"(#src))
#loss = loc("model.py":9:0)

// The forward stays as it was.
// CHECK-LABEL: func.func @forward(
// CHECK: return %{{.*}} : tensor<f32>

// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x4xf32> {slapo.name = "x"}{{.*}}, %[[T:arg[0-9]+]]: tensor<2xi64> {slapo.name = "target"}
// CHECK-SAME: -> (tensor<f32>, tensor<8x4xf32> {slapo.grad_of = @fc1.weight}, tensor<8xf32> {slapo.grad_of = @fc1.bias}, tensor<3x8xf32> {slapo.grad_of = @fc2.weight})
// CHECK: %[[W1:.*]] = slapo.get_param @fc1.weight
// CHECK: %[[H:.*]] = slapo.linear %[[X]], %[[W1]]
// CHECK: %[[R:.*]] = slapo.relu %[[H]]
// CHECK: %[[W2:.*]] = slapo.get_param @fc2.weight
// CHECK: %[[LOGITS:.*]] = slapo.linear %[[R]], %[[W2]]
// CHECK: %[[LOSS:.*]] = slapo.cross_entropy %[[LOGITS]], %[[T]]

// cross_entropy: (softmax(logits) - one_hot(target)) * grad / count per row
// (0 for ignored targets), by cross_entropy_grad.
// CHECK: %[[ONE:.*]] = slapo.constant dense<1.000000e+00> : tensor<f32> {slapo.phase = "backward"}
// CHECK: %[[KEPT:.*]] = slapo.compare <ne> %[[T]], %{{.*}} {slapo.phase = "backward"} : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1> loc(#[[LOSS_LOC:loc[0-9]*]])
// CHECK: %[[KEPTF:.*]] = slapo.cast %[[KEPT]]
// CHECK: %[[COUNT:.*]] = slapo.sum %[[KEPTF]]
// CHECK: %[[PER:.*]] = slapo.div %[[ONE]], %[[COUNT]]
// CHECK: %[[WEIGHT:.*]] = slapo.mul %[[KEPTF]], %[[PER]] {slapo.phase = "backward"} : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
// CHECK: %[[DLOGITS:.*]] = slapo.cross_entropy_grad %[[LOGITS]], %[[T]], %[[WEIGHT]] {slapo.phase = "backward"} : (tensor<2x3xf32>, tensor<2xi64>, tensor<2xf32>) -> tensor<2x3xf32> loc(#[[LOSS_LOC]])

// fc2 (no bias): only the weight gradient reaches a result; the gradient of
// its input flows on into relu.
// CHECK: %[[DR:.*]] = slapo.matmul %[[DLOGITS]], %[[W2]] {slapo.module = "fc2", slapo.phase = "backward"} : (tensor<2x3xf32>, tensor<3x8xf32>) -> tensor<2x8xf32> loc(#[[FC2_LOC:loc[0-9]*]])
// CHECK: %[[DLOGITS_T:.*]] = slapo.permute %[[DLOGITS]] {permutation = array<i64: 1, 0>, slapo.module = "fc2", slapo.phase = "backward"}
// CHECK: %[[DW2:.*]] = slapo.matmul %[[DLOGITS_T]], %[[R]] {slapo.module = "fc2", slapo.phase = "backward"} : (tensor<3x2xf32>, tensor<2x8xf32>) -> tensor<3x8xf32> loc(#[[FC2_LOC]])

// relu: the gradient passes where the output is positive.
// CHECK: %[[POS:.*]] = slapo.compare <gt> %[[R]], %{{.*}} {slapo.module = "act", slapo.phase = "backward"} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xi1> loc(#[[ACT_LOC:loc[0-9]*]])
// CHECK: %[[DH:.*]] = slapo.where %[[POS]], %[[DR]], %{{.*}} {slapo.module = "act", slapo.phase = "backward"} : (tensor<2x8xi1>, tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32> loc(#[[ACT_LOC]])

// fc1: weight and bias gradients; the gradient of the input x is not built.
// CHECK-NOT: slapo.matmul %[[DH]], %[[W1]]
// CHECK: %[[DH_T:.*]] = slapo.permute %[[DH]] {permutation = array<i64: 1, 0>, slapo.module = "fc1", slapo.phase = "backward"}
// CHECK: %[[DW1:.*]] = slapo.matmul %[[DH_T]], %[[X]] {slapo.module = "fc1", slapo.phase = "backward"} : (tensor<8x2xf32>, tensor<2x4xf32>) -> tensor<8x4xf32> loc(#[[FC1_LOC:loc[0-9]*]])
// CHECK: %[[DB1:.*]] = slapo.sum %[[DH]] {dims = array<i64: 0>, keepdim = false, slapo.module = "fc1", slapo.phase = "backward"} : tensor<2x8xf32> -> tensor<8xf32> loc(#[[FC1_LOC]])
// CHECK: return %[[LOSS]], %[[DW1]], %[[DB1]], %[[DW2]] : tensor<f32>, tensor<8x4xf32>, tensor<8xf32>, tensor<3x8xf32>

// CHECK-DAG: #[[SRC:loc[0-9]*]] = loc("model.py":7:0)
// CHECK-DAG: #[[LOSS_LOC]] = loc("model.py":9:0)
// CHECK-DAG: #[[FC1_LOC]] = loc("fc1"(#[[SRC]]))
// CHECK-DAG: #[[ACT_LOC]] = loc("act"(#[[SRC]]))
// CHECK-DAG: #[[FC2_LOC]] = loc("fc2"(#[[SRC]]))
