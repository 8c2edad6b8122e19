// RUN: slapo-opt %s --split-input-file --verify-diagnostics

func.func @reshape_element_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{reshape from [2, 3] to [2, 4] changes the element count from 6 to 8}}
  %0 = slapo.reshape %x : tensor<2x3xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @reshape_to_empty(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{reshape from [2, 3] to [0, 6] changes the element count from 6 to 0}}
  %0 = slapo.reshape %x : tensor<2x3xf32> -> tensor<0x6xf32>
  return
}

// -----

func.func @reshape_element_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{input element type 'f32' differs from the result element type 'i32'}}
  %0 = slapo.reshape %x : tensor<2x3xf32> -> tensor<6xi32>
  return
}

// -----

func.func @reshape_unranked(%x: tensor<*xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of}}
  %0 = slapo.reshape %x : tensor<*xf32> -> tensor<6xf32>
  return
}

// -----

func.func @permute_wrong_size(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{permutation [1, 0] has 2 entries for a tensor of rank 3}}
  %0 = slapo.permute %x {permutation = array<i64: 1, 0>} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  return
}

// -----

func.func @permute_out_of_range(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{permutation entry 2 is out of range for rank 2}}
  %0 = slapo.permute %x {permutation = array<i64: 2, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

func.func @permute_negative(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{permutation entry -1 is out of range for rank 2}}
  %0 = slapo.permute %x {permutation = array<i64: -1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

func.func @permute_repeated(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{permutation [0, 2, 0] repeats 0}}
  %0 = slapo.permute %x {permutation = array<i64: 0, 2, 0>} : tensor<2x3x4xf32> -> tensor<2x4x2xf32>
  return
}

// -----

func.func @permute_result_shape(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{result shape [2, 4, 3] differs from [4, 2, 3], the expected shape}}
  %0 = slapo.permute %x {permutation = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  return
}

// -----

func.func @permute_element_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{input element type 'f32' differs from the result element type 'f16'}}
  %0 = slapo.permute %x {permutation = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf16>
  return
}

// -----

func.func @slice_dim_out_of_range(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = slapo.slice %x {dim = 2, start = 0, end = 1, step = 1} : tensor<4x10xf32> -> tensor<4x10xf32>
  return
}

// -----

func.func @slice_step_zero(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{step must be positive, got 0}}
  %0 = slapo.slice %x {dim = 1, start = 0, end = 10, step = 0} : tensor<4x10xf32> -> tensor<4x10xf32>
  return
}

// -----

func.func @slice_step_negative(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{step must be positive, got -1}}
  %0 = slapo.slice %x {dim = 1, start = 9, end = 0, step = -1} : tensor<4x10xf32> -> tensor<4x9xf32>
  return
}

// -----

// The frontend normalizes negative starts and clamps ends.
func.func @slice_negative_start(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{needs 0 <= start <= end <= 10 (the size of dim 1), got start -2 and end 10}}
  %0 = slapo.slice %x {dim = 1, start = -2, end = 10, step = 1} : tensor<4x10xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @slice_start_after_end(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{needs 0 <= start <= end <= 10 (the size of dim 1), got start 6 and end 5}}
  %0 = slapo.slice %x {dim = 1, start = 6, end = 5, step = 1} : tensor<4x10xf32> -> tensor<4x0xf32>
  return
}

// -----

func.func @slice_end_past_size(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{needs 0 <= start <= end <= 4 (the size of dim 0), got start 0 and end 9223372036854775807}}
  %0 = slapo.slice %x {dim = 0, start = 0, end = 9223372036854775807, step = 1} : tensor<4x10xf32> -> tensor<4x10xf32>
  return
}

// -----

func.func @slice_result_shape(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{result shape [4, 2] differs from [4, 3], the expected shape}}
  %0 = slapo.slice %x {dim = 1, start = 1, end = 6, step = 2} : tensor<4x10xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @slice_element_type(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{input element type 'f32' differs from the result element type 'bf16'}}
  %0 = slapo.slice %x {dim = 1, start = 0, end = 10, step = 1} : tensor<4x10xf32> -> tensor<4x10xbf16>
  return
}

// -----

func.func @slice_missing_step(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{requires attribute 'step'}}
  %0 = slapo.slice %x {dim = 1, start = 0, end = 10} : tensor<4x10xf32> -> tensor<4x10xf32>
  return
}

// -----

func.func @concat_no_inputs() {
  // expected-error @+1 {{needs at least one input}}
  %0 = slapo.concat {dim = 0} : () -> tensor<4xf32>
  return
}

// -----

func.func @concat_dim_out_of_range(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = slapo.concat %a, %a {dim = 2} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @concat_element_type(%a: tensor<2x3xf32>, %b: tensor<2x3xf16>) {
  // expected-error @+1 {{input #1 element type 'f16' differs from the result element type 'f32'}}
  %0 = slapo.concat %a, %b {dim = 0} : (tensor<2x3xf32>, tensor<2x3xf16>) -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{input #1 must have rank 2, got shape [3]}}
  %0 = slapo.concat %a, %b {dim = 0} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3x3xf32>
  return
}

// -----

func.func @concat_other_dim(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+1 {{input #1 shape [2, 4] differs from the result shape [4, 3] in dim 1, which is not the concatenated dim 0}}
  %0 = slapo.concat %a, %b {dim = 0} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_total(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) {
  // expected-error @+1 {{result shape [2, 9] differs from [2, 8], the expected shape}}
  %0 = slapo.concat %a, %b {dim = 1} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x9xf32>
  return
}

// -----

func.func @broadcast_rank_down(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot broadcast [2, 3] to [3]}}
  %0 = slapo.broadcast %x : tensor<2x3xf32> -> tensor<3xf32>
  return
}

// -----

func.func @broadcast_non_unit(%x: tensor<2xf32>) {
  // expected-error @+1 {{cannot broadcast [2] to [3]}}
  %0 = slapo.broadcast %x : tensor<2xf32> -> tensor<3xf32>
  return
}

// -----

// Size-1 dims expand; the result never has a 1 where the input has more.
func.func @broadcast_shrinks(%x: tensor<4x3xf32>) {
  // expected-error @+1 {{cannot broadcast [4, 3] to [4, 1]}}
  %0 = slapo.broadcast %x : tensor<4x3xf32> -> tensor<4x1xf32>
  return
}

// -----

// Broadcasting aligns trailing dims: [3] cannot become [3, 2].
func.func @broadcast_leading(%x: tensor<3xf32>) {
  // expected-error @+1 {{cannot broadcast [3] to [3, 2]}}
  %0 = slapo.broadcast %x : tensor<3xf32> -> tensor<3x2xf32>
  return
}

// -----

func.func @broadcast_element_type(%x: tensor<3xi1>) {
  // expected-error @+1 {{input element type 'i1' differs from the result element type 'f32'}}
  %0 = slapo.broadcast %x : tensor<3xi1> -> tensor<2x3xf32>
  return
}

// -----

// Shapes are static everywhere in slapo IR.
func.func @dynamic_dim(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  // expected-error @+1 {{operand #0 must be statically shaped tensor}}
  %y = slapo.exp %x : tensor<?x4xf32>
  return %y : tensor<?x4xf32>
}
