// RUN: slapo-opt %s --split-input-file --verify-diagnostics

func.func @linear_input_0d(%x: tensor<f32>, %w: tensor<8x16xf32>) {
  // expected-error @+1 {{input must have rank >= 1, got shape []}}
  %0 = slapo.linear %x, %w : (tensor<f32>, tensor<8x16xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @linear_weight_1d(%x: tensor<4x16xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{weight must have rank 2, got shape [16]}}
  %0 = slapo.linear %x, %w : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @linear_weight_3d(%x: tensor<4x16xf32>, %w: tensor<2x8x16xf32>) {
  // expected-error @+1 {{weight must have rank 2, got shape [2, 8, 16]}}
  %0 = slapo.linear %x, %w : (tensor<4x16xf32>, tensor<2x8x16xf32>) -> tensor<4x8xf32>
  return
}

// -----

// The weight is [out_features, in_features], as in torch.nn.Linear.
func.func @linear_feature_mismatch(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>) {
  // expected-error @+1 {{input [4, 16] has 16 features, weight [16, 8] expects 8}}
  %0 = slapo.linear %x, %w : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  return
}

// -----

// bf16 operands may sum into an f32 result (mixed precision), but the
// operands share one type.
func.func @linear_input_element_type(%x: tensor<4x16xbf16>, %w: tensor<8x16xf32>) {
  // expected-error @+1 {{weight element type 'f32' differs from the input element type 'bf16'}}
  %0 = slapo.linear %x, %w : (tensor<4x16xbf16>, tensor<8x16xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @linear_weight_element_type(%x: tensor<4x16xf32>, %w: tensor<8x16xf16>) {
  // expected-error @+1 {{weight element type 'f16' differs from the result element type 'f32'}}
  %0 = slapo.linear %x, %w : (tensor<4x16xf32>, tensor<8x16xf16>) -> tensor<4x8xf32>
  return
}

// -----

func.func @linear_bias_shape(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{bias shape [16] differs from [8], the expected shape}}
  %0 = slapo.linear %x, %w, %b : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @linear_bias_2d(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>, %b: tensor<1x8xf32>) {
  // expected-error @+1 {{bias shape [1, 8] differs from [8], the expected shape}}
  %0 = slapo.linear %x, %w, %b : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @linear_bias_element_type(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>, %b: tensor<8xf64>) {
  // expected-error @+1 {{bias element type 'f64' differs from the result element type 'f32'}}
  %0 = slapo.linear %x, %w, %b : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf64>) -> tensor<4x8xf32>
  return
}

// -----

func.func @linear_result_shape(%x: tensor<2x4x16xf32>, %w: tensor<8x16xf32>) {
  // expected-error @+1 {{result shape [8, 8] differs from [2, 4, 8], the expected shape}}
  %0 = slapo.linear %x, %w : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @linear_int(%x: tensor<4x16xi32>, %w: tensor<8x16xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4x16xi32>'}}
  %0 = slapo.linear %x, %w : (tensor<4x16xi32>, tensor<8x16xi32>) -> tensor<4x8xi32>
  return
}

// -----

func.func @linear_unranked_weight(%x: tensor<4x16xf32>, %w: tensor<*xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of}}
  %0 = slapo.linear %x, %w : (tensor<4x16xf32>, tensor<*xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @matmul_lhs_1d(%a: tensor<16xf32>, %b: tensor<16x8xf32>) {
  // expected-error @+1 {{lhs must have rank >= 2, got shape [16]}}
  %0 = slapo.matmul %a, %b : (tensor<16xf32>, tensor<16x8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @matmul_rhs_1d(%a: tensor<4x16xf32>, %b: tensor<16xf32>) {
  // expected-error @+1 {{rhs must have rank >= 2, got shape [16]}}
  %0 = slapo.matmul %a, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @matmul_contraction(%a: tensor<4x16xf32>, %b: tensor<8x16xf32>) {
  // expected-error @+1 {{contraction sizes differ: lhs [4, 16] has 16 columns, rhs [8, 16] has 8 rows}}
  %0 = slapo.matmul %a, %b : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x3x4x16xf32>, %b: tensor<4x16x8xf32>) {
  // expected-error @+1 {{batch dims [2, 3] of lhs and [4] of rhs do not broadcast}}
  %0 = slapo.matmul %a, %b : (tensor<2x3x4x16xf32>, tensor<4x16x8xf32>) -> tensor<2x3x4x8xf32>
  return
}

// -----

func.func @matmul_result_shape(%a: tensor<2x4x16xf32>, %b: tensor<16x8xf32>) {
  // expected-error @+1 {{result shape [4, 8] differs from [2, 4, 8], the expected shape}}
  %0 = slapo.matmul %a, %b : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @matmul_result_broadcast_batch(%a: tensor<1x4x16xf32>, %b: tensor<3x16x8xf32>) {
  // expected-error @+1 {{result shape [1, 4, 8] differs from [3, 4, 8], the expected shape}}
  %0 = slapo.matmul %a, %b : (tensor<1x4x16xf32>, tensor<3x16x8xf32>) -> tensor<1x4x8xf32>
  return
}

// -----

func.func @matmul_lhs_element_type(%a: tensor<4x16xbf16>, %b: tensor<16x8xf32>) {
  // expected-error @+1 {{rhs element type 'f32' differs from the lhs element type 'bf16'}}
  %0 = slapo.matmul %a, %b : (tensor<4x16xbf16>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @matmul_rhs_element_type(%a: tensor<4x16xf32>, %b: tensor<16x8xf16>) {
  // expected-error @+1 {{rhs element type 'f16' differs from the result element type 'f32'}}
  %0 = slapo.matmul %a, %b : (tensor<4x16xf32>, tensor<16x8xf16>) -> tensor<4x8xf32>
  return
}

// -----

func.func @matmul_int(%a: tensor<4x16xi64>, %b: tensor<16x8xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4x16xi64>'}}
  %0 = slapo.matmul %a, %b : (tensor<4x16xi64>, tensor<16x8xi64>) -> tensor<4x8xi64>
  return
}

// -----

// f32 operands do not sum into a bf16 result.
func.func @matmul_narrowing(%a: tensor<4x16xf32>, %b: tensor<16x8xf32>) {
  // expected-error @+1 {{lhs element type 'f32' differs from the result element type 'bf16'}}
  %0 = slapo.matmul %a, %b : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xbf16>
  return
}

// -----

func.func @matmul_permutation_rank(%a: tensor<6x4xf32>, %b: tensor<6x3xf32>) {
  // expected-error @+1 {{lhs_permutation [0, 2, 1] has 3 entries for a tensor of rank 2}}
  %0 = slapo.matmul %a, %b {lhs_permutation = array<i64: 0, 2, 1>} : (tensor<6x4xf32>, tensor<6x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @matmul_permutation_repeats(%a: tensor<4x6xf32>, %b: tensor<3x6xf32>) {
  // expected-error @+1 {{rhs_permutation [0, 0] repeats 0}}
  %0 = slapo.matmul %a, %b {rhs_permutation = array<i64: 0, 0>} : (tensor<4x6xf32>, tensor<3x6xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @matmul_permuted_contraction(%a: tensor<4x6xf32>, %b: tensor<6x3xf32>) {
  // expected-error @+1 {{contraction sizes differ: lhs [6, 4] has 4 columns, rhs [6, 3] has 6 rows}}
  %0 = slapo.matmul %a, %b {lhs_permutation = array<i64: 1, 0>} : (tensor<4x6xf32>, tensor<6x3xf32>) -> tensor<6x3xf32>
  return
}

// -----

func.func @matmul_permuted_result(%a: tensor<4x6xf32>, %b: tensor<6x3xf32>) {
  // expected-error @+1 {{result shape [4, 3] differs from [3, 4], the expected shape}}
  %0 = slapo.matmul %a, %b {result_permutation = array<i64: 1, 0>} : (tensor<4x6xf32>, tensor<6x3xf32>) -> tensor<4x3xf32>
  return
}
