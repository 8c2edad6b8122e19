// RUN: slapo-opt --slapo-recognize-gelu --split-input-file %s | FileCheck %s

// Hugging Face's NewGELUActivation as it imports: one slapo.gelu, the chain
// and its constants gone.
// CHECK-LABEL: func.func @gelu_new
// CHECK-NEXT: %[[G:.*]] = slapo.gelu %arg0 <tanh> : tensor<2x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @gelu_new(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = slapo.constant dense<5.000000e-01> : tensor<f32>
  %0 = slapo.mul %x, %half : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %three = slapo.constant dense<3.000000e+00> : tensor<f32>
  %1 = slapo.pow %x, %three : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %kappa = slapo.constant dense<4.471500e-02> : tensor<f32>
  %2 = slapo.mul %1, %kappa : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %3 = slapo.add %x, %2 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %beta = slapo.constant dense<0.797884583> : tensor<f32>
  %4 = slapo.mul %3, %beta : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %5 = slapo.tanh %4 : tensor<2x8xf32>
  %one = slapo.constant dense<1.000000e+00> : tensor<f32>
  %6 = slapo.add %5, %one : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %7 = slapo.mul %0, %6 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %7 : tensor<2x8xf32>
}

// -----

// Each product and sum with its operands the other way round; the tanh is
// read elsewhere too, so it and what feeds it stay.
// CHECK-LABEL: func.func @commuted_and_shared
// CHECK: %[[T:.*]] = slapo.tanh
// CHECK-NEXT: %[[G:.*]] = slapo.gelu %arg0 <tanh> : tensor<4xf32>
// CHECK-NEXT: return %[[G]], %[[T]]
func.func @commuted_and_shared(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %half = slapo.constant dense<5.000000e-01> : tensor<f32>
  %0 = slapo.mul %half, %x : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %three = slapo.constant dense<3.000000e+00> : tensor<f32>
  %1 = slapo.pow %x, %three : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %kappa = slapo.constant dense<4.471500e-02> : tensor<f32>
  %2 = slapo.mul %kappa, %1 : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = slapo.add %2, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %beta = slapo.constant dense<0.797884583> : tensor<f32>
  %4 = slapo.mul %beta, %3 : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %5 = slapo.tanh %4 : tensor<4xf32>
  %one = slapo.constant dense<1.000000e+00> : tensor<f32>
  %6 = slapo.add %one, %5 : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %7 = slapo.mul %6, %0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %7, %5 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Another constant is another function: nothing changes.
// CHECK-LABEL: func.func @not_gelu
// CHECK-NOT: slapo.gelu
// CHECK: slapo.tanh
func.func @not_gelu(%x: tensor<4xf32>) -> tensor<4xf32> {
  %half = slapo.constant dense<5.000000e-01> : tensor<f32>
  %0 = slapo.mul %x, %half : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %three = slapo.constant dense<3.000000e+00> : tensor<f32>
  %1 = slapo.pow %x, %three : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %kappa = slapo.constant dense<5.000000e-02> : tensor<f32>
  %2 = slapo.mul %1, %kappa : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %3 = slapo.add %x, %2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %beta = slapo.constant dense<0.797884583> : tensor<f32>
  %4 = slapo.mul %3, %beta : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %5 = slapo.tanh %4 : tensor<4xf32>
  %one = slapo.constant dense<1.000000e+00> : tensor<f32>
  %6 = slapo.add %5, %one : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %7 = slapo.mul %0, %6 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %7 : tensor<4xf32>
}
