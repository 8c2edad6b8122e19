// RUN: slapo-opt %s --split-input-file --verify-diagnostics

func.func @embedding_weight_1d(%w: tensor<100xf32>, %ids: tensor<5xi64>) {
  // expected-error @+1 {{weight must have rank 2, got shape [100]}}
  %0 = slapo.embedding %w, %ids : (tensor<100xf32>, tensor<5xi64>) -> tensor<5xf32>
  return
}

// -----

func.func @embedding_float_indices(%w: tensor<100x32xf32>, %ids: tensor<5xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<5xf32>'}}
  %0 = slapo.embedding %w, %ids : (tensor<100x32xf32>, tensor<5xf32>) -> tensor<5x32xf32>
  return
}

// -----

func.func @embedding_int_weight(%w: tensor<100x32xi64>, %ids: tensor<5xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<100x32xi64>'}}
  %0 = slapo.embedding %w, %ids : (tensor<100x32xi64>, tensor<5xi64>) -> tensor<5x32xi64>
  return
}

// -----

func.func @embedding_result_shape(%w: tensor<100x32xf32>, %ids: tensor<2x5xi64>) {
  // expected-error @+1 {{result shape [10, 32] differs from [2, 5, 32], the expected shape}}
  %0 = slapo.embedding %w, %ids : (tensor<100x32xf32>, tensor<2x5xi64>) -> tensor<10x32xf32>
  return
}

// -----

func.func @embedding_result_uses_vocab(%w: tensor<100x32xf32>, %ids: tensor<5xi64>) {
  // expected-error @+1 {{result shape [5, 100] differs from [5, 32], the expected shape}}
  %0 = slapo.embedding %w, %ids : (tensor<100x32xf32>, tensor<5xi64>) -> tensor<5x100xf32>
  return
}

// -----

func.func @embedding_element_type(%w: tensor<100x32xf32>, %ids: tensor<5xi64>) {
  // expected-error @+1 {{weight element type 'f32' differs from the result element type 'bf16'}}
  %0 = slapo.embedding %w, %ids : (tensor<100x32xf32>, tensor<5xi64>) -> tensor<5x32xbf16>
  return
}

// -----

func.func @embedding_padding_idx_too_large(%w: tensor<100x32xf32>, %ids: tensor<5xi64>) {
  // expected-error @+1 {{padding_idx 100 is out of range for 100 embeddings}}
  %0 = slapo.embedding %w, %ids {padding_idx = 100} : (tensor<100x32xf32>, tensor<5xi64>) -> tensor<5x32xf32>
  return
}

// -----

// The frontend normalizes PyTorch's negative padding_idx.
func.func @embedding_padding_idx_negative(%w: tensor<100x32xf32>, %ids: tensor<5xi64>) {
  // expected-error @+1 {{padding_idx -1 is out of range for 100 embeddings}}
  %0 = slapo.embedding %w, %ids {padding_idx = -1} : (tensor<100x32xf32>, tensor<5xi64>) -> tensor<5x32xf32>
  return
}

// -----

func.func @layer_norm_grad_weight_grad_shape(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>) {
  // expected-error @+1 {{grad_weight shape [4, 8] differs from [8], the normalized shape}}
  %0:3 = slapo.layer_norm_grad %dy, %x {normalized_rank = 1, eps = 1.0e-5} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @layer_norm_grad_grad_type(%dy: tensor<4x4xf32>, %x: tensor<4x8xf32>) {
  // expected-error @+1 {{grad type 'tensor<4x4xf32>' is neither the input type 'tensor<4x8xf32>' nor of its shape with a narrower element type that 'f32' holds exactly}}
  %0:3 = slapo.layer_norm_grad %dy, %x {normalized_rank = 1, eps = 1.0e-5} : (tensor<4x4xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @layer_norm_grad_addend_type(%dy: tensor<4x8xbf16>, %x: tensor<4x8xf32>) {
  // expected-error @+1 {{addend type 'tensor<4x8xbf16>' differs from the input type 'tensor<4x8xf32>'}}
  %0:3 = slapo.layer_norm_grad %dy, %x addend %dy {normalized_rank = 1, eps = 1.0e-5} : (tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xbf16>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @rms_norm_grad_addend_shape(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %a: tensor<8xf32>) {
  // expected-error @+1 {{addend type 'tensor<8xf32>' differs from the input type 'tensor<4x8xf32>'}}
  %0:2 = slapo.rms_norm_grad %dy, %x addend %a {eps = 1.0e-6} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @rms_norm_grad_weight_grad_shape(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>) {
  // expected-error @+1 {{grad_weight shape [4] differs from [8], the last dim}}
  %0:2 = slapo.rms_norm_grad %dy, %x {eps = 1.0e-6} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>)
  return
}

// -----

func.func @rms_norm_grad_input_grad_type(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>) {
  // expected-error @+1 {{grad_input type 'tensor<4x8xbf16>' differs from the input type 'tensor<4x8xf32>'}}
  %0:2 = slapo.rms_norm_grad %dy, %x {eps = 1.0e-6} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xbf16>, tensor<8xf32>)
  return
}

// -----

func.func @rms_norm_grad_eps(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>) {
  // expected-error @+1 {{eps must be non-negative and finite, got -1}}
  %0:2 = slapo.rms_norm_grad %dy, %x {eps = -1.0} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @layer_norm_rank_zero(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{normalized_rank 0 is not in [1, 2] for input shape [4, 8]}}
  %0 = slapo.layer_norm %x {normalized_rank = 0, eps = 1.0e-5} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @layer_norm_rank_too_large(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{normalized_rank 3 is not in [1, 2] for input shape [4, 8]}}
  %0 = slapo.layer_norm %x {normalized_rank = 3, eps = 1.0e-5} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @layer_norm_0d(%x: tensor<f32>) {
  // expected-error @+1 {{normalized_rank 1 is not in [1, 0] for input shape []}}
  %0 = slapo.layer_norm %x {normalized_rank = 1, eps = 1.0e-5} : (tensor<f32>) -> tensor<f32>
  return
}

// -----

// A norm may store its rows narrower than its input (computed in f32,
// rounded once to bf16), never wider or in a type that loses the input's
// exponent range.
func.func @layer_norm_result_type(%x: tensor<4x8xbf16>) {
  // expected-error @+1 {{result type 'tensor<4x8xf32>' is neither the input type 'tensor<4x8xbf16>' nor of its shape with a narrower element type that 'bf16' holds exactly}}
  %0 = slapo.layer_norm %x {normalized_rank = 1, eps = 1.0e-5} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  return
}

// -----

func.func @rms_norm_result_f16_of_bf16(%x: tensor<4x8xbf16>) {
  // expected-error @+1 {{result type 'tensor<4x8xf16>' is neither the input type 'tensor<4x8xbf16>' nor of its shape with a narrower element type that 'bf16' holds exactly}}
  %0 = slapo.rms_norm %x {eps = 1.0e-6} : (tensor<4x8xbf16>) -> tensor<4x8xf16>
  return
}

// -----

// The gradient of a norm may read a narrower grad, not a wider one.
func.func @rms_norm_grad_wide_grad(%dy: tensor<4x8xf32>, %x: tensor<4x8xbf16>) {
  // expected-error @+1 {{grad type 'tensor<4x8xf32>' is neither the input type 'tensor<4x8xbf16>'}}
  %0:2 = slapo.rms_norm_grad %dy, %x {eps = 1.0e-6} : (tensor<4x8xf32>, tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<8xbf16>)
  return
}

// -----

func.func @layer_norm_result_shape(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{result type 'tensor<8x4xf32>' is neither the input type 'tensor<4x8xf32>'}}
  %0 = slapo.layer_norm %x {normalized_rank = 1, eps = 1.0e-5} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @layer_norm_weight_shape(%x: tensor<4x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{weight shape [4] differs from [8], the normalized shape}}
  %0 = slapo.layer_norm %x weight %g {normalized_rank = 1, eps = 1.0e-5} : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @layer_norm_bias_shape(%x: tensor<2x4x8xf32>, %g: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{bias shape [8] differs from [4, 8], the normalized shape}}
  %0 = slapo.layer_norm %x weight %g bias %b {normalized_rank = 2, eps = 1.0e-5} : (tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

func.func @layer_norm_weight_element_type(%x: tensor<4x8xbf16>, %g: tensor<8xf32>) {
  // expected-error @+1 {{weight element type 'f32' differs from the input element type 'bf16'}}
  %0 = slapo.layer_norm %x weight %g {normalized_rank = 1, eps = 1.0e-5} : (tensor<4x8xbf16>, tensor<8xf32>) -> tensor<4x8xbf16>
  return
}

// -----

func.func @layer_norm_bias_element_type(%x: tensor<4x8xf32>, %b: tensor<8xf16>) {
  // expected-error @+1 {{bias element type 'f16' differs from the input element type 'f32'}}
  %0 = slapo.layer_norm %x bias %b {normalized_rank = 1, eps = 1.0e-5} : (tensor<4x8xf32>, tensor<8xf16>) -> tensor<4x8xf32>
  return
}

// -----

func.func @layer_norm_eps_zero(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{eps must be positive and finite, got 0}}
  %0 = slapo.layer_norm %x {normalized_rank = 1, eps = 0.0} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @layer_norm_eps_negative(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{eps must be positive and finite, got -1e-05}}
  %0 = slapo.layer_norm %x {normalized_rank = 1, eps = -1.0e-5} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @layer_norm_eps_nan(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{eps must be positive and finite, got nan}}
  %0 = slapo.layer_norm %x {normalized_rank = 1, eps = 0x7FF8000000000000 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @layer_norm_int(%x: tensor<4x8xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4x8xi64>'}}
  %0 = slapo.layer_norm %x {normalized_rank = 1, eps = 1.0e-5} : (tensor<4x8xi64>) -> tensor<4x8xi64>
  return
}

// -----

func.func @layer_norm_missing_eps(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{requires attribute 'eps'}}
  %0 = slapo.layer_norm %x {normalized_rank = 1} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @softmax_dim_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = slapo.softmax %x {dim = 2} : tensor<4x8xf32>
  return
}

// -----

// Dims in attributes are normalized: -1 is not accepted.
func.func @softmax_negative_dim(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dim -1 is out of range for rank 2}}
  %0 = slapo.softmax %x {dim = -1} : tensor<4x8xf32>
  return
}

// -----

func.func @softmax_int(%x: tensor<4x8xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<4x8xi32>'}}
  %0 = slapo.softmax %x {dim = 1} : tensor<4x8xi32>
  return
}

// -----

func.func @softmax_type_changes(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "slapo.softmax"(%x) {dim = 1} : (tensor<4x8xf32>) -> tensor<4x8xf16>
  return
}

// -----

func.func @log_softmax_dim_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dim 5 is out of range for rank 2}}
  %0 = slapo.log_softmax %x {dim = 5} : tensor<4x8xf32>
  return
}

// -----

func.func @log_softmax_unranked(%x: tensor<*xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of}}
  %0 = slapo.log_softmax %x {dim = 0} : tensor<*xf32>
  return
}

// -----

func.func @cross_entropy_logits_1d(%l: tensor<50xf32>, %t: tensor<10xi64>) {
  // expected-error @+1 {{logits must have rank 2, got shape [50]}}
  %0 = slapo.cross_entropy %l, %t {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<50xf32>, tensor<10xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_logits_3d(%l: tensor<2x10x50xf32>, %t: tensor<2x10xi64>) {
  // expected-error @+1 {{logits must have rank 2, got shape [2, 10, 50]}}
  %0 = slapo.cross_entropy %l, %t {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<2x10x50xf32>, tensor<2x10xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_target_2d(%l: tensor<10x50xf32>, %t: tensor<10x1xi64>) {
  // expected-error @+1 {{target must have rank 1, got shape [10, 1]}}
  %0 = slapo.cross_entropy %l, %t {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<10x50xf32>, tensor<10x1xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_batch_mismatch(%l: tensor<10x50xf32>, %t: tensor<8xi64>) {
  // expected-error @+1 {{target shape [8] differs from [10], the batch shape of the logits}}
  %0 = slapo.cross_entropy %l, %t {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<10x50xf32>, tensor<8xi64>) -> tensor<f32>
  return
}

// -----

// Probabilities as targets (soft labels) are not represented.
func.func @cross_entropy_float_target(%l: tensor<10x50xf32>, %t: tensor<10xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<10xf32>'}}
  %0 = slapo.cross_entropy %l, %t {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<10x50xf32>, tensor<10xf32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_none_scalar(%l: tensor<10x50xf32>, %t: tensor<10xi64>) {
  // expected-error @+1 {{result shape [] differs from [10], the expected shape for reduction none}}
  %0 = slapo.cross_entropy %l, %t {ignore_index = -100, reduction = #slapo.reduction<none>} : (tensor<10x50xf32>, tensor<10xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_mean_not_scalar(%l: tensor<10x50xf32>, %t: tensor<10xi64>) {
  // expected-error @+1 {{result shape [10] differs from [], the expected shape for reduction mean}}
  %0 = slapo.cross_entropy %l, %t {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<10x50xf32>, tensor<10xi64>) -> tensor<10xf32>
  return
}

// -----

func.func @cross_entropy_sum_keeps_dim(%l: tensor<10x50xf32>, %t: tensor<10xi64>) {
  // expected-error @+1 {{result shape [1] differs from [], the expected shape for reduction sum}}
  %0 = slapo.cross_entropy %l, %t {ignore_index = -100, reduction = #slapo.reduction<sum>} : (tensor<10x50xf32>, tensor<10xi64>) -> tensor<1xf32>
  return
}

// -----

func.func @cross_entropy_element_type(%l: tensor<10x50xbf16>, %t: tensor<10xi64>) {
  // expected-error @+1 {{logits element type 'bf16' differs from the result element type 'f32'}}
  %0 = slapo.cross_entropy %l, %t {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<10x50xbf16>, tensor<10xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_missing_reduction(%l: tensor<10x50xf32>, %t: tensor<10xi64>) {
  // expected-error @+1 {{requires attribute 'reduction'}}
  %0 = slapo.cross_entropy %l, %t {ignore_index = -100} : (tensor<10x50xf32>, tensor<10xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_grad_weight_shape(%l: tensor<10x50xf32>, %t: tensor<10xi64>, %w: tensor<10x1xf32>) {
  // expected-error @+1 {{row_weight shape [10, 1] differs from [10], the batch shape of the logits}}
  %0 = slapo.cross_entropy_grad %l, %t, %w : (tensor<10x50xf32>, tensor<10xi64>, tensor<10x1xf32>) -> tensor<10x50xf32>
  return
}

// -----

func.func @cross_entropy_grad_result_shape(%l: tensor<10x50xf32>, %t: tensor<10xi64>, %w: tensor<10xf32>) {
  // expected-error @+1 {{result shape [10] differs from [10, 50], the logits' shape}}
  %0 = slapo.cross_entropy_grad %l, %t, %w : (tensor<10x50xf32>, tensor<10xi64>, tensor<10xf32>) -> tensor<10xf32>
  return
}

// -----

func.func @conv2d_channels(%x: tensor<2x4x8x8xf32>, %w: tensor<6x3x3x3xf32>) {
  // expected-error @+1 {{weight [6, 3, 3, 3] expects 3 input channels in 1 groups, input [2, 4, 8, 8] has 4}}
  %0 = slapo.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1} : (tensor<2x4x8x8xf32>, tensor<6x3x3x3xf32>) -> tensor<2x6x8x8xf32>
  return
}

// -----

func.func @conv2d_groups(%x: tensor<2x4x8x8xf32>, %w: tensor<6x2x3x3xf32>) {
  // expected-error @+1 {{groups 4 must divide the input's 4 channels and the weight's 6 outputs}}
  %0 = slapo.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 4} : (tensor<2x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<2x6x8x8xf32>
  return
}

// -----

func.func @conv2d_output_size(%x: tensor<2x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{result [2, 6, 8, 8] has 8 rows, the window over the input [2, 4, 8, 8] gives 4}}
  %0 = slapo.conv2d %x, %w {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1} : (tensor<2x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<2x6x8x8xf32>
  return
}

// -----

func.func @conv2d_stride(%x: tensor<2x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{stride [0, 1] must be positive}}
  %0 = slapo.conv2d %x, %w {stride = array<i64: 0, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1} : (tensor<2x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<2x6x8x8xf32>
  return
}

// -----

func.func @max_pool2d_padding(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{padding [2, 2] exceeds half the kernel [3, 3]}}
  %0 = slapo.max_pool2d %x {kernel_size = array<i64: 3, 3>, stride = array<i64: 1, 1>, padding = array<i64: 2, 2>, dilation = array<i64: 1, 1>} : tensor<2x3x8x8xf32> -> tensor<2x3x10x10xf32>
  return
}

// -----

func.func @max_pool2d_channels(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{result [2, 4, 4, 4] must have the batch and channels of [2, 3, 8, 8]}}
  %0 = slapo.max_pool2d %x {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<2x3x8x8xf32> -> tensor<2x4x4x4xf32>
  return
}

// -----

func.func @max_pool2d_rank(%x: tensor<3x8x8xf32>) {
  // expected-error @+1 {{input must have rank 4, got shape [3, 8, 8]}}
  %0 = slapo.max_pool2d %x {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<3x8x8xf32> -> tensor<3x4x4xf32>
  return
}

// -----

// The halves of the last dim are rotated: it has an even size.
func.func @rotary_odd(%x: tensor<2x5xf32>) {
  // expected-error @+1 {{rotates the halves of the last dim, which has odd size 5}}
  %0 = slapo.rotary_embedding %x, %x, %x : (tensor<2x5xf32>, tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

// The angles are not stretched along the last dim: its halves meet
// different ones.
func.func @rotary_angles_last_dim(%x: tensor<2x4xf32>, %c: tensor<2x1xf32>) {
  // expected-error @+1 {{cos shape [2, 1] does not end in the last dim of the input, 4}}
  %0 = slapo.rotary_embedding %x, %c, %x : (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @rotary_angles_broadcast(%x: tensor<2x4xf32>, %s: tensor<3x4xf32>) {
  // expected-error @+1 {{operand #2 shape [3, 4] does not broadcast with [2, 4]}}
  %0 = slapo.rotary_embedding %x, %x, %s : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @rotary_angles_type(%x: tensor<2x4xf32>, %s: tensor<2x4xbf16>) {
  // expected-error @+1 {{cos element type 'f32' differs from the sin element type 'bf16'}}
  %0 = slapo.rotary_embedding %x, %x, %s : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xbf16>) -> tensor<2x4xf32>
  return
}

// -----

// The angles' type is the one computed in: the input and the result may be
// narrower (a cast folded in), not wider.
func.func @rotary_wide_input(%x: tensor<2x4xf32>, %a: tensor<2x4xbf16>) {
  // expected-error @+1 {{input element type 'f32' is neither the angles' 'bf16' nor a narrower type that it holds exactly}}
  %0 = slapo.rotary_embedding %x, %a, %a : (tensor<2x4xf32>, tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xbf16>
  return
}

// -----

func.func @rotary_f16_result(%x: tensor<2x4xbf16>) {
  // expected-error @+1 {{result element type 'f16' is neither the angles' 'bf16' nor a narrower type that it holds exactly}}
  %0 = slapo.rotary_embedding %x, %x, %x : (tensor<2x4xbf16>, tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xf16>
  return
}
