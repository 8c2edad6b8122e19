// RUN: slapo-opt %s --split-input-file --verify-diagnostics

// slapo.linear_cross_entropy's verifier: what replace("cross_entropy")
// makes has f32 operands (hidden and weight bf16 under precision="bf16"),
// f32 results, a scalar loss, and a grad_bias exactly with a bias.

func.func @weight_features(%h: tensor<6x8xf32>, %w: tensor<16x4xf32>, %t: tensor<6xi64>) {
  // expected-error @+1 {{weight shape [16, 4] differs from [16, 8], the [classes, features of hidden]}}
  %l, %dh, %dw = slapo.linear_cross_entropy %h, %w, %t {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<6x8xf32>, tensor<16x4xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x4xf32>)
  return
}

// -----

func.func @target_rows(%h: tensor<6x8xf32>, %w: tensor<16x8xf32>, %t: tensor<5xi64>) {
  // expected-error @+1 {{target shape [5] differs from [6], the rows of hidden}}
  %l, %dh, %dw = slapo.linear_cross_entropy %h, %w, %t {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<5xi64>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>)
  return
}

// -----

func.func @bf16_operands(%h: tensor<6x8xbf16>, %w: tensor<16x8xbf16>, %t: tensor<6xi64>) {
  %l, %dh, %dw = slapo.linear_cross_entropy %h, %w, %t {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<6x8xbf16>, tensor<16x8xbf16>, tensor<6xi64>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>)
  return
}

// -----

func.func @f16(%h: tensor<6x8xf16>, %w: tensor<16x8xf16>, %t: tensor<6xi64>) {
  // expected-error @+1 {{hidden and weight must be f32 or bf16, got 'f16'}}
  %l, %dh, %dw = slapo.linear_cross_entropy %h, %w, %t {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<6x8xf16>, tensor<16x8xf16>, tensor<6xi64>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>)
  return
}

// -----

func.func @mixed_operands(%h: tensor<6x8xbf16>, %w: tensor<16x8xf32>, %t: tensor<6xi64>) {
  // expected-error @+1 {{weight element type 'f32' differs from the hidden element type 'bf16'}}
  %l, %dh, %dw = slapo.linear_cross_entropy %h, %w, %t {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<6x8xbf16>, tensor<16x8xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>)
  return
}

// -----

func.func @bf16_bias(%h: tensor<6x8xbf16>, %w: tensor<16x8xbf16>, %t: tensor<6xi64>, %b: tensor<16xbf16>) {
  // expected-error @+1 {{operands other than hidden and weight must be f32, got 'tensor<16xbf16>'}}
  %l, %dh, %dw, %db = slapo.linear_cross_entropy %h, %w, %t bias %b {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<6x8xbf16>, tensor<16x8xbf16>, tensor<6xi64>, tensor<16xbf16>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
  return
}

// -----

func.func @bf16_loss(%h: tensor<6x8xbf16>, %w: tensor<16x8xbf16>, %t: tensor<6xi64>) {
  // expected-error @+1 {{loss must be f32, got 'tensor<bf16>'}}
  %l, %dh, %dw = slapo.linear_cross_entropy %h, %w, %t {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<6x8xbf16>, tensor<16x8xbf16>, tensor<6xi64>) -> (tensor<bf16>, tensor<6x8xf32>, tensor<16x8xf32>)
  return
}

// -----

func.func @bf16_gradient(%h: tensor<6x8xbf16>, %w: tensor<16x8xbf16>, %t: tensor<6xi64>) {
  // expected-error @+1 {{gradients must be f32, got 'tensor<6x8xbf16>'}}
  %l, %dh, %dw = slapo.linear_cross_entropy %h, %w, %t {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<6x8xbf16>, tensor<16x8xbf16>, tensor<6xi64>) -> (tensor<f32>, tensor<6x8xbf16>, tensor<16x8xf32>)
  return
}

// -----

func.func @reduction_none(%h: tensor<6x8xf32>, %w: tensor<16x8xf32>, %t: tensor<6xi64>) {
  // expected-error @+1 {{reduction none is not supported: the gradients are computed in the forward, for a scalar loss}}
  %l, %dh, %dw = slapo.linear_cross_entropy %h, %w, %t {ignore_index = -100, reduction = #slapo.reduction<none>} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6xi64>) -> (tensor<6xf32>, tensor<6x8xf32>, tensor<16x8xf32>)
  return
}

// -----

func.func @grad_weight_shape(%h: tensor<6x8xf32>, %w: tensor<16x8xf32>, %t: tensor<6xi64>) {
  // expected-error @+1 {{grad_weight shape [8, 16] differs from [16, 8], the weight's shape}}
  %l, %dh, %dw = slapo.linear_cross_entropy %h, %w, %t {ignore_index = -100, reduction = #slapo.reduction<sum>} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x8xf32>, tensor<8x16xf32>)
  return
}

// -----

func.func @bias_shape(%h: tensor<6x8xf32>, %w: tensor<16x8xf32>, %t: tensor<6xi64>, %b: tensor<8xf32>) {
  // expected-error @+1 {{bias shape [8] differs from [16], the classes}}
  %l, %dh, %dw, %db = slapo.linear_cross_entropy %h, %w, %t bias %b {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6xi64>, tensor<8xf32>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @grad_bias_without_bias(%h: tensor<6x8xf32>, %w: tensor<16x8xf32>, %t: tensor<6xi64>) {
  // expected-error @+1 {{has a grad_bias result if and only if it has a bias}}
  %l, %dh, %dw, %db = slapo.linear_cross_entropy %h, %w, %t {ignore_index = -100, reduction = #slapo.reduction<mean>} : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
  return
}

// -----

// slapo.linear_log_sum_exp and its gradient: one value per row of hidden.

func.func @log_sum_exp_rows(%h: tensor<6x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error @+1 {{logsumexp shape [16] differs from [6], the rows of hidden}}
  %l = slapo.linear_log_sum_exp %h, %w : (tensor<6x8xf32>, tensor<16x8xf32>) -> tensor<16xf32>
  return
}

// -----

func.func @log_sum_exp_f16(%h: tensor<6x8xf16>, %w: tensor<16x8xf16>) {
  // expected-error @+1 {{hidden and weight must be f32 or bf16, got 'f16'}}
  %l = slapo.linear_log_sum_exp %h, %w : (tensor<6x8xf16>, tensor<16x8xf16>) -> tensor<6xf32>
  return
}

// -----

func.func @log_sum_exp_bf16_result(%h: tensor<6x8xbf16>, %w: tensor<16x8xbf16>) {
  // expected-error @+1 {{logsumexp must be f32, got 'tensor<6xbf16>'}}
  %l = slapo.linear_log_sum_exp %h, %w : (tensor<6x8xbf16>, tensor<16x8xbf16>) -> tensor<6xbf16>
  return
}

// -----

func.func @log_sum_exp_grad_bf16_gradient(%h: tensor<6x8xbf16>, %w: tensor<16x8xbf16>, %l: tensor<6xf32>, %g: tensor<6xf32>) {
  // expected-error @+1 {{gradients must be f32, got 'tensor<16x8xbf16>'}}
  %dh, %dw = slapo.linear_log_sum_exp_grad %h, %w logsumexp %l grad %g : (tensor<6x8xbf16>, tensor<16x8xbf16>, tensor<6xf32>, tensor<6xf32>) -> (tensor<6x8xf32>, tensor<16x8xbf16>)
  return
}

// -----

func.func @log_sum_exp_grad_rows(%h: tensor<6x8xf32>, %w: tensor<16x8xf32>, %l: tensor<6xf32>, %g: tensor<5xf32>) {
  // expected-error @+1 {{grad shape [5] differs from [6], the rows of hidden}}
  %dh, %dw = slapo.linear_log_sum_exp_grad %h, %w logsumexp %l grad %g : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<6xf32>, tensor<5xf32>) -> (tensor<6x8xf32>, tensor<16x8xf32>)
  return
}

// -----

func.func @log_sum_exp_grad_bias(%h: tensor<6x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>, %l: tensor<6xf32>, %g: tensor<6xf32>) {
  // expected-error @+1 {{has a grad_bias result if and only if it has a bias}}
  %dh, %dw = slapo.linear_log_sum_exp_grad %h, %w bias %b logsumexp %l grad %g : (tensor<6x8xf32>, tensor<16x8xf32>, tensor<16xf32>, tensor<6xf32>, tensor<6xf32>) -> (tensor<6x8xf32>, tensor<16x8xf32>)
  return
}
