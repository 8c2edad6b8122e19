// RUN: slapo-opt %s | slapo-opt | FileCheck %s
// RUN: slapo-opt %s --mlir-print-op-generic | slapo-opt | FileCheck %s
// RUN: slapo-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Parameters, buffers, constants and arange.

// CHECK: slapo.param @transformer.wte.weight : tensor<128x32xf32> {aliases = ["lm_head.weight"]}
// GENERIC: "slapo.param"() {aliases = ["lm_head.weight"], sym_name = "transformer.wte.weight", type = tensor<128x32xf32>} : () -> ()
slapo.param @"transformer.wte.weight" : tensor<128x32xf32> {aliases = ["lm_head.weight"]}
// CHECK: slapo.param buffer @attn.bias : tensor<1x1x16x16xi1>{{$}}
// GENERIC: "slapo.param"() {buffer, sym_name = "attn.bias", type = tensor<1x1x16x16xi1>} : () -> ()
slapo.param buffer @"attn.bias" : tensor<1x1x16x16xi1>
// CHECK: slapo.param @"0.weight" : tensor<8x4xbf16>{{$}}
slapo.param @"0.weight" : tensor<8x4xbf16>
// CHECK: slapo.param buffer @step : tensor<i64>{{$}}
slapo.param buffer @step : tensor<i64>
// CHECK: slapo.param @tied.a : tensor<4xf16> {aliases = ["tied.b", "tied.c"]}
slapo.param @"tied.a" : tensor<4xf16> {aliases = ["tied.b", "tied.c"]}

// CHECK-LABEL: func.func @get_param
func.func @get_param() -> (tensor<128x32xf32>, tensor<1x1x16x16xi1>, tensor<8x4xbf16>, tensor<i64>) {
  // CHECK: slapo.get_param @transformer.wte.weight : tensor<128x32xf32>
  // GENERIC: "slapo.get_param"() {name = @transformer.wte.weight} : () -> tensor<128x32xf32>
  %0 = slapo.get_param @"transformer.wte.weight" : tensor<128x32xf32>
  // CHECK: slapo.get_param @attn.bias : tensor<1x1x16x16xi1>
  %1 = slapo.get_param @"attn.bias" : tensor<1x1x16x16xi1>
  // CHECK: slapo.get_param @"0.weight" : tensor<8x4xbf16>
  %2 = slapo.get_param @"0.weight" : tensor<8x4xbf16>
  // CHECK: slapo.get_param @step : tensor<i64>
  %3 = slapo.get_param @step : tensor<i64>
  return %0, %1, %2, %3 : tensor<128x32xf32>, tensor<1x1x16x16xi1>, tensor<8x4xbf16>, tensor<i64>
}

// CHECK-LABEL: func.func @constant
func.func @constant() -> (tensor<2x2xf32>, tensor<3xi64>, tensor<2xi1>, tensor<bf16>, tensor<0x4xf32>) {
  // CHECK: slapo.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
  // GENERIC: "slapo.constant"() {value = dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %0 = slapo.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  // CHECK: slapo.constant dense<[1, -2, 3]> : tensor<3xi64>
  %1 = slapo.constant dense<[1, -2, 3]> : tensor<3xi64>
  // CHECK: slapo.constant dense<[true, false]> : tensor<2xi1>
  %2 = slapo.constant dense<[true, false]> : tensor<2xi1>
  // CHECK: slapo.constant dense<5.000000e-01> : tensor<bf16>
  %3 = slapo.constant dense<0.5> : tensor<bf16>
  // CHECK: slapo.constant dense<> : tensor<0x4xf32>
  %4 = slapo.constant dense<> : tensor<0x4xf32>
  return %0, %1, %2, %3, %4 : tensor<2x2xf32>, tensor<3xi64>, tensor<2xi1>, tensor<bf16>, tensor<0x4xf32>
}

// CHECK-LABEL: func.func @arange
func.func @arange() -> (tensor<16xi64>, tensor<5xf32>, tensor<4xbf16>, tensor<0xi32>) {
  // CHECK: slapo.arange {start = 0.000000e+00 : f64, step = 1.000000e+00 : f64} : tensor<16xi64>
  // GENERIC: "slapo.arange"() {start = 0.000000e+00 : f64, step = 1.000000e+00 : f64} : () -> tensor<16xi64>
  %0 = slapo.arange {start = 0.0, step = 1.0} : tensor<16xi64>
  // CHECK: slapo.arange {start = 2.000000e+00 : f64, step = -5.000000e-01 : f64} : tensor<5xf32>
  %1 = slapo.arange {start = 2.0, step = -0.5} : tensor<5xf32>
  // CHECK: slapo.arange {start = -1.000000e+00 : f64, step = 2.500000e-01 : f64} : tensor<4xbf16>
  %2 = slapo.arange {start = -1.0, step = 0.25} : tensor<4xbf16>
  // CHECK: slapo.arange {start = 3.000000e+00 : f64, step = 1.000000e+00 : f64} : tensor<0xi32>
  %3 = slapo.arange {start = 3.0, step = 1.0} : tensor<0xi32>
  return %0, %1, %2, %3 : tensor<16xi64>, tensor<5xf32>, tensor<4xbf16>, tensor<0xi32>
}

// A buffer's new value, written by the step.
// CHECK-LABEL: func.func @update_buffer
func.func @update_buffer(%m: tensor<i64>) {
  // CHECK: slapo.update_buffer @step, %{{.*}} : tensor<i64>
  // GENERIC: "slapo.update_buffer"(%{{.*}}) {buffer = @step} : (tensor<i64>) -> ()
  slapo.update_buffer @step, %m : tensor<i64>
  return
}

// The gradient of an f32 parameter in bf16 (a bf16 product's, which the
// update widens as it reads it), scaled by clipping's coefficient or not.
// CHECK-LABEL: func.func @bf16_gradient
func.func @bf16_gradient(%narrow: tensor<128x32xbf16>, %lr: tensor<f64>, %coefficient: tensor<f32>) {
  // CHECK: slapo.param_grad @transformer.wte.weight, %{{.*}} : tensor<128x32xbf16>
  slapo.param_grad @"transformer.wte.weight", %narrow : tensor<128x32xbf16>
  // CHECK: slapo.sgd_update @transformer.wte.weight, %{{.*}}, %{{.*}} {{{.*}}} : tensor<128x32xbf16>
  // GENERIC: "slapo.sgd_update"(%{{.*}}, %{{.*}}) {
  slapo.sgd_update @"transformer.wte.weight", %narrow, %lr {momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<128x32xbf16>
  // CHECK: slapo.sgd_update @transformer.wte.weight, %{{.*}}, %{{.*}} scaled %arg2 {{{.*}}} : tensor<128x32xbf16>
  // GENERIC: "slapo.sgd_update"(%{{.*}}, %{{.*}}, %{{.*}}) {
  slapo.sgd_update @"transformer.wte.weight", %narrow, %lr scaled %coefficient {momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<128x32xbf16>
  return
}
