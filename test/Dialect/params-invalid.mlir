// RUN: slapo-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor of}}
slapo.param @p : tensor<*xf32>

// -----

// expected-error @+1 {{attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor of}}
slapo.param @p : f32

// -----

// expected-error @+1 {{attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor of}}
slapo.param @p : tensor<4xi16>

// -----

// expected-error @+1 {{attribute 'aliases' failed to satisfy constraint: string array attribute}}
"slapo.param"() {sym_name = "p", type = tensor<4xf32>, aliases = [1]} : () -> ()

// -----

// expected-error @+1 {{requires attribute 'type'}}
"slapo.param"() {sym_name = "p"} : () -> ()

// -----

// expected-error @+1 {{name must not be empty}}
slapo.param @"" : tensor<4xf32>

// -----

// expected-error @+1 {{aliases must not be empty}}
slapo.param @p : tensor<4xf32> {aliases = [""]}

// -----

// expected-error @+1 {{alias "p" is the parameter's own name}}
slapo.param @p : tensor<4xf32> {aliases = ["q", "p"]}

// -----

// expected-error @+1 {{alias "q" is listed twice}}
slapo.param @p : tensor<4xf32> {aliases = ["q", "r", "q"]}

// -----

// expected-error @+1 {{alias "q" is also the name of a 'slapo.param'}}
slapo.param @p : tensor<4xf32> {aliases = ["q"]}
slapo.param @q : tensor<4xf32>

// -----

func.func private @q()
// expected-error @+1 {{alias "q" is also the name of a 'func.func'}}
slapo.param @p : tensor<4xf32> {aliases = ["q"]}

// -----

// expected-note @+1 {{see existing symbol definition here}}
slapo.param @p : tensor<4xf32>
// expected-error @+1 {{redefinition of symbol named 'p'}}
slapo.param buffer @p : tensor<4xf32>

// -----

func.func @missing() {
  // expected-error @+1 {{there is no symbol named @missing_param}}
  %0 = slapo.get_param @missing_param : tensor<4xf32>
  return
}

// -----

slapo.param @"a\22b\0Ac*/\C3\A9" : tensor<4xf32>
func.func @missing_escaped() {
  // The message spells the name as the IR does, escapes included.
  // expected-error @+1 {{there is no symbol named @"a\22b\0Ac*/\C3\A8"}}
  %0 = slapo.get_param @"a\22b\0Ac*/\C3\A8" : tensor<4xf32>
  return
}

// -----

slapo.param @"a\22b\0Ac*/\C3\A9" : tensor<4xf32>
func.func @escaped_wrong_type() {
  // expected-error @+1 {{result type 'tensor<4xf16>' differs from the type 'tensor<4xf32>' of @"a\22b\0Ac*/\C3\A9"}}
  %0 = slapo.get_param @"a\22b\0Ac*/\C3\A9" : tensor<4xf16>
  return
}

// -----

// expected-error @+1 {{alias "x\22y\0A" is listed twice}}
slapo.param @p : tensor<4xf32> {aliases = ["x\22y\0A", "x\"y\0A"]}

// -----

func.func private @f()
func.func @not_a_param() {
  // expected-error @+1 {{@f is a 'func.func', not a 'slapo.param'}}
  %0 = slapo.get_param @f : tensor<4xf32>
  return
}

// -----

slapo.param @p : tensor<4x8xf32>
func.func @wrong_shape() {
  // expected-error @+1 {{result type 'tensor<8x4xf32>' differs from the type 'tensor<4x8xf32>' of @p}}
  %0 = slapo.get_param @p : tensor<8x4xf32>
  return
}

// -----

slapo.param @p : tensor<4x8xf32>
func.func @wrong_element_type() {
  // expected-error @+1 {{result type 'tensor<4x8xbf16>' differs from the type 'tensor<4x8xf32>' of @p}}
  %0 = slapo.get_param @p : tensor<4x8xbf16>
  return
}

// -----

slapo.param @p : tensor<4xf32>
func.func @unranked() {
  // expected-error @+1 {{result #0 must be statically shaped tensor of}}
  %0 = slapo.get_param @p : tensor<*xf32>
  return
}

// -----

func.func @constant_type_mismatch() {
  // expected-error @+1 {{failed to verify that all of {value, result} have same type}}
  %0 = "slapo.constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<3xf32>
  return
}

// -----

func.func @constant_element_type() {
  // expected-error @+1 {{result #0 must be statically shaped tensor of}}
  %0 = slapo.constant dense<1> : tensor<2xi16>
  return
}

// -----

func.func @constant_not_elements() {
  // expected-error @+1 {{attribute 'value' failed to satisfy constraint: constant vector/tensor attribute}}
  %0 = "slapo.constant"() {value = 1.0 : f32} : () -> tensor<f32>
  return
}

// -----

func.func @arange_2d() {
  // expected-error @+1 {{result must have rank 1, got shape [2, 3]}}
  %0 = slapo.arange {start = 0.0, step = 1.0} : tensor<2x3xf32>
  return
}

// -----

func.func @arange_0d() {
  // expected-error @+1 {{result must have rank 1, got shape []}}
  %0 = slapo.arange {start = 0.0, step = 1.0} : tensor<f32>
  return
}

// -----

func.func @arange_step_zero() {
  // expected-error @+1 {{step must not be zero}}
  %0 = slapo.arange {start = 0.0, step = 0.0} : tensor<4xi64>
  return
}

// -----

func.func @arange_infinite() {
  // expected-error @+1 {{start and step must be finite, got inf and 1}}
  %0 = slapo.arange {start = 0x7FF0000000000000 : f64, step = 1.0} : tensor<4xf32>
  return
}

// -----

func.func @arange_bool() {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 32-bit float or 64-bit float or bfloat16 type or 16-bit float or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = slapo.arange {start = 0.0, step = 1.0} : tensor<4xi1>
  return
}

// -----

func.func @arange_missing_step() {
  // expected-error @+1 {{requires attribute 'step'}}
  %0 = slapo.arange {start = 0.0} : tensor<4xf32>
  return
}

// -----

// Only buffers are updated this way: parameters are the optimizer's.
slapo.param @w : tensor<4xf32>
func.func @update_parameter(%v: tensor<4xf32>) {
  // expected-error @+1 {{@w is a trained parameter, not a buffer}}
  slapo.update_buffer @w, %v : tensor<4xf32>
  return
}

// -----

slapo.param buffer @m : tensor<4xf32>
func.func @update_buffer_type(%v: tensor<2xf32>) {
  // expected-error @+1 {{value type 'tensor<2xf32>' differs from the type 'tensor<4xf32>' of @m}}
  slapo.update_buffer @m, %v : tensor<2xf32>
  return
}

// -----

// A gradient in bf16 is an f32 parameter's only, of its shape.
slapo.param @w : tensor<4xf32>
func.func @gradient_shape(%short: tensor<2xbf16>) {
  // expected-error @+1 {{gradient type 'tensor<2xbf16>' differs from the type 'tensor<4xf32>' of @w (and is not its bf16 counterpart)}}
  slapo.param_grad @w, %short : tensor<2xbf16>
  return
}

// -----

slapo.param @h : tensor<4xf16>
func.func @gradient_of_half(%bf16: tensor<4xbf16>, %lr: tensor<f64>) {
  // expected-error @+1 {{gradient type 'tensor<4xbf16>' differs from the type 'tensor<4xf16>' of @h (and is not its bf16 counterpart)}}
  slapo.sgd_update @h, %bf16, %lr {momentum = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<4xbf16>
  return
}
