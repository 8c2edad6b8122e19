// RUN: slapo-opt %s --split-input-file --verify-diagnostics

func.func @sum_dim_out_of_range(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = slapo.sum %x {dims = array<i64: 0, 2>, keepdim = false} : tensor<2x3xf32> -> tensor<f32>
  return
}

// -----

// Dims in attributes are normalized: -1 is not accepted.
func.func @mean_negative_dim(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{dim -1 is out of range for rank 2}}
  %0 = slapo.mean %x {dims = array<i64: -1>, keepdim = false} : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

func.func @max_duplicate_dim(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{dim 1 appears twice in dims [1, 2, 1]}}
  %0 = slapo.max %x {dims = array<i64: 1, 2, 1>, keepdim = false} : tensor<2x3x4xf32> -> tensor<2xf32>
  return
}

// -----

func.func @sum_keepdim_shape(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{result shape [2, 4] differs from [2, 1, 4], the expected shape}}
  %0 = slapo.sum %x {dims = array<i64: 1>, keepdim = true} : tensor<2x3x4xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @sum_no_keepdim_shape(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{result shape [2, 1, 4] differs from [2, 4], the expected shape}}
  %0 = slapo.sum %x {dims = array<i64: 1>, keepdim = false} : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
  return
}

// -----

// An empty dims list reduces nothing (PyTorch's dim=None is all dims, spelled out).
func.func @sum_empty_dims(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{result shape [] differs from [2, 3], the expected shape}}
  %0 = slapo.sum %x {dims = array<i64>, keepdim = false} : tensor<2x3xf32> -> tensor<f32>
  return
}

// -----

func.func @mean_element_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{input element type 'f32' differs from the result element type 'f64'}}
  %0 = slapo.mean %x {dims = array<i64: 1>, keepdim = false} : tensor<2x3xf32> -> tensor<2xf64>
  return
}

// -----

// PyTorch's mean is defined only for floating-point inputs.
func.func @mean_int(%x: tensor<2x3xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<2x3xi64>'}}
  %0 = slapo.mean %x {dims = array<i64: 1>, keepdim = false} : tensor<2x3xi64> -> tensor<2xi64>
  return
}

// -----

// PyTorch sums bool tensors as int64: the frontend casts first.
func.func @sum_bool(%x: tensor<2x3xi1>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float or 8-bit signless integer or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2x3xi1>'}}
  %0 = slapo.sum %x {dims = array<i64: 1>, keepdim = false} : tensor<2x3xi1> -> tensor<2xi1>
  return
}

// -----

func.func @max_unranked(%x: tensor<*xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of}}
  %0 = slapo.max %x {dims = array<i64: 0>, keepdim = false} : tensor<*xf32> -> tensor<f32>
  return
}

// -----

func.func @sum_dims_not_array(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{attribute 'dims' failed to satisfy constraint: i64 dense array attribute}}
  %0 = slapo.sum %x {dims = [1], keepdim = false} : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

func.func @sum_missing_keepdim(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{requires attribute 'keepdim'}}
  %0 = slapo.sum %x {dims = array<i64: 1>} : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

func.func @cumsum_dim_out_of_range(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = slapo.cumsum %x {dim = 2 : i64} : tensor<2x3xf32>
  return
}

// -----

// PyTorch does not sum bools as bools: the importer casts them first.
func.func @cumsum_bool(%x: tensor<4xi1>) {
  // expected-error @+1 {{must be statically shaped tensor of}}
  %0 = slapo.cumsum %x {dim = 0 : i64} : tensor<4xi1>
  return
}

// -----

// A sum may widen (slapo-propagate-casts folds a widening cast into it), but
// only into a float type that holds the input's exactly.
func.func @sum_narrows(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{result element type 'bf16' must be the input's, 'f32', or a float type that holds it exactly}}
  %0 = slapo.sum %x {dims = array<i64: 0>, keepdim = false} : tensor<2x3xf32> -> tensor<3xbf16>
  return
}

// -----

func.func @sum_bf16_into_f16(%x: tensor<2x3xbf16>) {
  // expected-error @+1 {{result element type 'f16' must be the input's, 'bf16', or a float type that holds it exactly}}
  %0 = slapo.sum %x {dims = array<i64: 0>, keepdim = false} : tensor<2x3xbf16> -> tensor<3xf16>
  return
}

// -----

func.func @sum_integers_into_f32(%x: tensor<2x3xi32>) {
  // expected-error @+1 {{result element type 'f32' must be the input's, 'i32', or a float type that holds it exactly}}
  %0 = slapo.sum %x {dims = array<i64: 0>, keepdim = false} : tensor<2x3xi32> -> tensor<3xf32>
  return
}
