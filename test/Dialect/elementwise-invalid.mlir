// RUN: slapo-opt %s --split-input-file --verify-diagnostics

func.func @exp_int(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = slapo.exp %x : tensor<4xi32>
  return
}

// -----

func.func @tanh_bool(%x: tensor<4xi1>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi1>'}}
  %0 = slapo.tanh %x : tensor<4xi1>
  return
}

// -----

func.func @relu_unranked(%x: tensor<*xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<*xf32>'}}
  %0 = slapo.relu %x : tensor<*xf32>
  return
}

// -----

func.func @log_i16(%x: tensor<4xi16>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of}}
  %0 = slapo.log %x : tensor<4xi16>
  return
}

// -----

func.func @rsqrt_not_float(%x: tensor<4xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi64>'}}
  %0 = slapo.rsqrt %x : tensor<4xi64>
  return
}

// -----

func.func @silu_not_float(%x: tensor<4xi8>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi8>'}}
  %0 = slapo.silu %x : tensor<4xi8>
  return
}

// -----

func.func @sin_not_float(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = slapo.sin %x : tensor<4xi32>
  return
}

// -----

func.func @cos_not_float(%x: tensor<4xi1>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi1>'}}
  %0 = slapo.cos %x : tensor<4xi1>
  return
}

// -----

func.func @neg_bool(%x: tensor<4xi1>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 8-bit signless integer or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = slapo.neg %x : tensor<4xi1>
  return
}

// -----

func.func @abs_bool(%x: tensor<4xi1>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 8-bit signless integer or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = slapo.abs %x : tensor<4xi1>
  return
}

// -----

func.func @neg_unranked(%x: tensor<*xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of}}
  %0 = slapo.neg %x : tensor<*xi64>
  return
}

// -----

func.func @unary_type_changes(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "slapo.sqrt"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

func.func @unary_shape_changes(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "slapo.sigmoid"(%x) : (tensor<4xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @gelu_int(%x: tensor<4xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi64>'}}
  %0 = slapo.gelu %x <erf> : tensor<4xi64>
  return
}

// -----

func.func @gelu_bad_approximation(%x: tensor<4xf32>) {
  // expected-error @+2 {{expected ::slapo::GeluApproximation to be one of: erf, tanh}}
  // expected-error @+1 {{failed to parse Slapo_GeluApproximationAttr parameter 'value'}}
  %0 = slapo.gelu %x <sigmoid> : tensor<4xf32>
  return
}

// -----

func.func @gelu_type_changes(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "slapo.gelu"(%x) {approximation = #slapo.gelu<tanh>} : (tensor<4xf32>) -> tensor<4xbf16>
  return
}

// -----

func.func @cast_changes_shape(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{result shape [8, 4] differs from [4, 8], the input shape}}
  %0 = slapo.cast %x : tensor<4x8xf32> -> tensor<8x4xbf16>
  return
}

// -----

func.func @cast_changes_rank(%x: tensor<4xf32>) {
  // expected-error @+1 {{result shape [1, 4] differs from [4], the input shape}}
  %0 = slapo.cast %x : tensor<4xf32> -> tensor<1x4xf32>
  return
}

// -----

func.func @cast_unranked(%x: tensor<*xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of}}
  %0 = slapo.cast %x : tensor<*xf32> -> tensor<4xf16>
  return
}

// -----

func.func @cast_to_i16(%x: tensor<4xf32>) {
  // expected-error @+1 {{result #0 must be statically shaped tensor of}}
  %0 = slapo.cast %x : tensor<4xf32> -> tensor<4xi16>
  return
}

// -----

func.func @add_no_broadcast(%a: tensor<4x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{operand #1 shape [4] does not broadcast with [4, 8]}}
  %0 = slapo.add %a, %b : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @sub_wrong_result_shape(%a: tensor<4x1xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{result shape [4, 1] is not the broadcast shape [4, 8]}}
  %0 = slapo.sub %a, %b : (tensor<4x1xf32>, tensor<8xf32>) -> tensor<4x1xf32>
  return
}

// -----

func.func @mul_result_rank(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{result shape [1, 4] is not the broadcast shape [4]}}
  %0 = slapo.mul %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<1x4xf32>
  return
}

// -----

func.func @div_mixed_element_types(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{operand #1 element type 'f16' differs from the result element type 'f32'}}
  %0 = slapo.div %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @maximum_result_element_type(%a: tensor<4xi64>, %b: tensor<4xi64>) {
  // expected-error @+1 {{operand #0 element type 'i64' differs from the result element type 'i32'}}
  %0 = slapo.maximum %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi32>
  return
}

// -----

func.func @minimum_empty_dim(%a: tensor<0xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{operand #1 shape [2] does not broadcast with [0]}}
  %0 = slapo.minimum %a, %b : (tensor<0xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @sub_bool(%a: tensor<4xi1>, %b: tensor<4xi1>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 8-bit signless integer or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi1>'}}
  %0 = slapo.sub %a, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  return
}

// -----

func.func @pow_int(%a: tensor<4xi64>, %b: tensor<4xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi64>'}}
  %0 = slapo.pow %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return
}

// -----

func.func @add_unranked(%a: tensor<*xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of}}
  %0 = slapo.add %a, %b : (tensor<*xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @compare_element_types(%a: tensor<4xf32>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{lhs element type 'f32' differs from the rhs element type 'bf16'}}
  %0 = slapo.compare <lt> %a, %b : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xi1>
  return
}

// -----

func.func @compare_result_not_bool(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = slapo.compare <eq> %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @compare_no_broadcast(%a: tensor<3xi64>, %b: tensor<4xi64>) {
  // expected-error @+1 {{operand #1 shape [4] does not broadcast with [3]}}
  %0 = slapo.compare <eq> %a, %b : (tensor<3xi64>, tensor<4xi64>) -> tensor<4xi1>
  return
}

// -----

func.func @compare_result_shape(%a: tensor<3x1xi64>, %b: tensor<4xi64>) {
  // expected-error @+1 {{result shape [3] is not the broadcast shape [3, 4]}}
  %0 = slapo.compare <ge> %a, %b : (tensor<3x1xi64>, tensor<4xi64>) -> tensor<3xi1>
  return
}

// -----

func.func @compare_bad_predicate(%a: tensor<3xi64>) {
  // expected-error @+2 {{expected ::slapo::ComparePredicate to be one of: eq, ne, lt, le, gt, ge}}
  // expected-error @+1 {{failed to parse Slapo_ComparePredicateAttr parameter 'value'}}
  %0 = slapo.compare <approx> %a, %a : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
  return
}

// -----

func.func @where_condition_not_bool(%c: tensor<4xf32>, %a: tensor<4xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = slapo.where %c, %a, %a : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @where_on_true_element_type(%c: tensor<4xi1>, %a: tensor<4xf16>, %b: tensor<4xf32>) {
  // expected-error @+1 {{on_true element type 'f16' differs from the result element type 'f32'}}
  %0 = slapo.where %c, %a, %b : (tensor<4xi1>, tensor<4xf16>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @where_on_false_element_type(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<f64>) {
  // expected-error @+1 {{on_false element type 'f64' differs from the result element type 'f32'}}
  %0 = slapo.where %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<f64>) -> tensor<4xf32>
  return
}

// -----

// The third operand is checked against the broadcast of the first two.
func.func @where_no_broadcast(%c: tensor<4x1xi1>, %a: tensor<8xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{operand #2 shape [3] does not broadcast with [4, 8]}}
  %0 = slapo.where %c, %a, %b : (tensor<4x1xi1>, tensor<8xf32>, tensor<3xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @where_result_shape(%c: tensor<4x1xi1>, %a: tensor<8xf32>) {
  // expected-error @+1 {{result shape [8] is not the broadcast shape [4, 8]}}
  %0 = slapo.where %c, %a, %a : (tensor<4x1xi1>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @dropout_p_zero(%x: tensor<4xf32>) {
  // expected-error @+1 {{p must be in (0, 1), got 0}}
  %0 = slapo.dropout %x {p = 0.0, stream = 0} : tensor<4xf32>
  return
}

// -----

func.func @dropout_p_one(%x: tensor<4xf32>) {
  // expected-error @+1 {{p must be in (0, 1), got 1}}
  %0 = slapo.dropout %x {p = 1.0, stream = 0} : tensor<4xf32>
  return
}

// -----

func.func @dropout_p_negative(%x: tensor<4xf32>) {
  // expected-error @+1 {{p must be in (0, 1), got -0.25}}
  %0 = slapo.dropout %x {p = -0.25, stream = 0} : tensor<4xf32>
  return
}

// -----

func.func @dropout_p_nan(%x: tensor<4xf32>) {
  // expected-error @+1 {{p must be in (0, 1), got nan}}
  %0 = slapo.dropout %x {p = 0x7FF8000000000000 : f64, stream = 0} : tensor<4xf32>
  return
}

// -----

func.func @dropout_p_f32(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'p' failed to satisfy constraint: 64-bit float attribute}}
  %0 = slapo.dropout %x {p = 0.5 : f32, stream = 0} : tensor<4xf32>
  return
}

// -----

func.func @dropout_missing_p(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires attribute 'p'}}
  %0 = slapo.dropout %x {stream = 0} : tensor<4xf32>
  return
}

// -----

func.func @dropout_missing_stream(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires attribute 'stream'}}
  %0 = slapo.dropout %x {p = 0.5} : tensor<4xf32>
  return
}

// -----

// expected-note @+1 {{prior use here}}
func.func @dropout_step_f64(%x: tensor<4xf32>, %step: tensor<f64>) {
  // expected-error @+1 {{use of value '%step' expects different type than prior uses: 'tensor<i64>' vs 'tensor<f64>'}}
  %0 = slapo.dropout %x step %step {p = 0.5, stream = 0} : tensor<4xf32>
  return
}

// -----

func.func @dropout_shard_axis(%x: tensor<4xf32>) {
  // expected-error @+1 {{shard_axis 1 is not a dim of 'tensor<4xf32>'}}
  %0 = slapo.dropout %x {p = 0.5, stream = 0, shard_axis = 1} : tensor<4xf32>
  return
}

// -----

func.func @dropout_shard_chunks(%x: tensor<4xf32>) {
  // expected-error @+1 {{shard_chunks needs shard_axis and must be positive}}
  %0 = slapo.dropout %x {p = 0.5, stream = 0, shard_chunks = 2} : tensor<4xf32>
  return
}

// -----

func.func @dropout_int(%x: tensor<4xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4xi64>'}}
  %0 = slapo.dropout %x {p = 0.5, stream = 0} : tensor<4xi64>
  return
}

// -----

func.func @triangular_rank_1(%x: tensor<16xf32>) {
  // expected-error @+1 {{input must have rank >= 2, got shape [16]}}
  %0 = slapo.triangular %x {lower = true, diagonal = 0} : tensor<16xf32>
  return
}

// -----

func.func @triangular_type_changes(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "slapo.triangular"(%x) {lower = true, diagonal = 0} : (tensor<4x4xf32>) -> tensor<4x4xi1>
  return
}

// -----

func.func @triangular_missing_lower(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{requires attribute 'lower'}}
  %0 = slapo.triangular %x {diagonal = 0} : tensor<4x4xf32>
  return
}

// -----

func.func @gelu_grad_types_differ(%g: tensor<4xf32>, %x: tensor<4xbf16>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "slapo.gelu_grad"(%g, %x) {approximation = #slapo.gelu<tanh>} : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  return
}
