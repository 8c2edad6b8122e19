// RUN: slapo-opt %s --split-input-file --verify-diagnostics

// The dropout of flash_attention and its gradient: p in (0, 1), a stream,
// and nothing of it without p.

func.func @p_out_of_range(%q: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{dropout_p must be in (0, 1), got 1}}
  %o, %l = slapo.flash_attention %q, %q, %q {dropout_p = 1.0 : f64, dropout_stream = 0 : i64, masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @no_stream(%q: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{dropout_p needs dropout_stream (the stream of the dropout's masks)}}
  %o, %l = slapo.flash_attention %q, %q, %q {dropout_p = 0.1 : f64, masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @step_without_dropout(%q: tensor<1x2x4x4xf32>, %step: tensor<i64>) {
  // expected-error @+1 {{dropout_stream, fork_rng, shard_axis, shard_chunks and step need dropout_p}}
  %o, %l = slapo.flash_attention %q, %q, %q step %step {masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<i64>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @fork_without_dropout(%q: tensor<1x2x4x4xf32>, %g: tensor<1x2x4x4xf32>, %l: tensor<1x2x4xf32>) {
  // expected-error @+1 {{dropout_stream, fork_rng, shard_axis, shard_chunks and step need dropout_p}}
  %a, %b, %c = slapo.flash_attention_grad %q, %q, %q result %g, %l grad %g {fork_rng, masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>)
  return
}

// -----

// The kernels place a split of the batch or the heads, not of the rows.
func.func @split_rows(%q: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{shard_axis 2 is not the batch or the heads (0 or 1)}}
  %o, %l = slapo.flash_attention %q, %q, %q {dropout_p = 0.1 : f64, dropout_stream = 0 : i64, masked_score = 0.0 : f64, scale = 1.0 : f64, shard_axis = 2 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @grad_chunks_without_axis(%q: tensor<1x2x4x4xf32>, %g: tensor<1x2x4x4xf32>, %l: tensor<1x2x4xf32>) {
  // expected-error @+1 {{shard_chunks needs shard_axis and must be positive}}
  %a, %b, %c = slapo.flash_attention_grad %q, %q, %q result %g, %l grad %g {dropout_p = 0.1 : f64, dropout_stream = 0 : i64, masked_score = 0.0 : f64, scale = 1.0 : f64, shard_chunks = 2 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>)
  return
}

// -----

// The log-sum-exp is kept in the compute type: f32 for 16-bit operands (a
// bf16 one would be rounded by up to 0.03, and the probabilities the
// gradient recomputes from it off by up to 3%), f64 for f64 ones.
func.func @bf16_logsumexp(%q: tensor<1x2x4x4xbf16>) {
  // expected-error @+1 {{logsumexp element type 'bf16' is not 'f32', the compute type of the 'bf16' query (the log-sum-exp is kept in f32, f64 for f64 operands)}}
  %o, %l = slapo.flash_attention %q, %q, %q {masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x2x4x4xbf16>, tensor<1x2x4x4xbf16>, tensor<1x2x4x4xbf16>) -> (tensor<1x2x4x4xbf16>, tensor<1x2x4xbf16>)
  return
}

// -----

func.func @f64_logsumexp_of_f32(%q: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{logsumexp element type 'f64' is not 'f32', the compute type of the 'f32' query}}
  %o, %l = slapo.flash_attention %q, %q, %q {masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf64>)
  return
}

// -----

func.func @f16_grad_logsumexp(%q: tensor<1x2x4x4xf16>, %l: tensor<1x2x4xf16>) {
  // expected-error @+1 {{logsumexp element type 'f16' is not 'f32', the compute type of the 'f16' query}}
  %a, %b, %c = slapo.flash_attention_grad %q, %q, %q result %q, %l grad %q {masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x2x4x4xf16>, tensor<1x2x4x4xf16>, tensor<1x2x4x4xf16>, tensor<1x2x4x4xf16>, tensor<1x2x4xf16>, tensor<1x2x4x4xf16>) -> (tensor<1x2x4x4xf16>, tensor<1x2x4x4xf16>, tensor<1x2x4x4xf16>)
  return
}

// -----

// With bshd the operands are [B, T, H, D]: a key whose heads (dim 2) do not
// divide the query's is refused, as one of another length (dim 1) is not.
func.func @bshd_key_heads(%q: tensor<1x4x2x8xf32>, %k: tensor<1x6x3x8xf32>) {
  // expected-error @+1 {{key has 3 heads, which do not divide the query's 2 (grouped-query attention shares each key and value head among H / Hk query heads)}}
  %o, %l = slapo.flash_attention %q, %k, %k {bshd, masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x4x2x8xf32>, tensor<1x6x3x8xf32>, tensor<1x6x3x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// Grouped-query attention: key and value share their heads, fewer than the
// query's.
func.func @grouped_value_heads(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{value shape [1, 1, 4, 8] differs from [1, 2, 4, 8], the key's batch, heads and length}}
  %o, %l = slapo.flash_attention %q, %k, %v {masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>) -> (tensor<1x4x4x8xf32>, tensor<1x4x4xf32>)
  return
}

// -----

func.func @grouped_key_batch(%q: tensor<1x4x4x8xf32>, %k: tensor<2x2x4x8xf32>) {
  // expected-error @+1 {{key shape [2, 2, 4, 8] differs from [1, 2, 4, 8], the query's batch and head size}}
  %o, %l = slapo.flash_attention %q, %k, %k {masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x4x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> (tensor<1x4x4x8xf32>, tensor<1x4x4xf32>)
  return
}

// -----

// The gradients of a grouped key and value have their heads.
func.func @grouped_grad_heads(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>, %l: tensor<1x4x4xf32>) {
  // expected-error @+1 {{gradient type 'tensor<1x4x4x8xf32>' differs from its operand's 'tensor<1x2x4x8xf32>'}}
  %a, %b, %c = slapo.flash_attention_grad %q, %k, %k result %q, %l grad %q {masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4xf32>, tensor<1x4x4x8xf32>) -> (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>)
  return
}

// -----

// bshd's result is [B, T, H, E] too, its log-sum-exp [B, H, T].
func.func @bshd_result_heads_major(%q: tensor<1x4x2x8xf32>) {
  // expected-error @+1 {{result shape [1, 2, 4, 8] differs from [1, 4, 2, 8], the query's rows of value's width}}
  %o, %l = slapo.flash_attention %q, %q, %q {bshd, masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @bshd_logsumexp(%q: tensor<1x4x2x8xf32>) {
  // expected-error @+1 {{logsumexp shape [1, 4, 2] differs from [1, 2, 4], the query's rows}}
  %o, %l = slapo.flash_attention %q, %q, %q {bshd, masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x4x2xf32>)
  return
}

// -----

// The gradient's grad is in the forward's layout.
func.func @bshd_grad_layout(%q: tensor<1x4x2x8xf32>, %g: tensor<1x2x4x8xf32>, %l: tensor<1x2x4xf32>) {
  // expected-error @+1 {{grad shape [1, 2, 4, 8] differs from [1, 4, 2, 8], the result's shape}}
  %a, %b, %c = slapo.flash_attention_grad %q, %q, %q result %q, %l grad %g {bshd, masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>)
  return
}

// -----

// packed_qkv reads the heads of a token side by side.
func.func @packed_heads_major(%qkv: tensor<1x6x4x8xf32>) {
  // expected-error @+1 {{packed_qkv needs bshd (the heads of a token side by side)}}
  %o, %l = slapo.flash_attention %qkv, %qkv, %qkv {packed_qkv, masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x6x4x8xf32>, tensor<1x6x4x8xf32>, tensor<1x6x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @packed_two_tensors(%qkv: tensor<1x4x6x8xf32>, %v: tensor<1x4x6x8xf32>) {
  // expected-error @+1 {{packed_qkv needs query, key and value to be one tensor}}
  %o, %l = slapo.flash_attention %qkv, %qkv, %v {bshd, packed_qkv, masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @packed_heads_not_thirds(%qkv: tensor<1x4x4x8xf32>) {
  // expected-error @+1 {{packed_qkv needs 3H heads, got 4}}
  %o, %l = slapo.flash_attention %qkv, %qkv, %qkv {bshd, packed_qkv, masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> (tensor<1x4x1x8xf32>, tensor<1x1x4xf32>)
  return
}

// -----

// The result has the thirds' H heads.
func.func @packed_result_heads(%qkv: tensor<1x4x6x8xf32>) {
  // expected-error @+1 {{result shape [1, 4, 6, 8] differs from [1, 4, 2, 8], the query's rows of value's width}}
  %o, %l = slapo.flash_attention %qkv, %qkv, %qkv {bshd, packed_qkv, masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>) -> (tensor<1x4x6x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// The packed gradient is one tensor, the others three.
func.func @packed_three_gradients(%qkv: tensor<1x4x6x8xf32>, %o: tensor<1x4x2x8xf32>, %l: tensor<1x2x4xf32>) {
  // expected-error @+1 {{has 3 gradients, not 1 (of the packed query, key and value)}}
  %a, %b, %c = slapo.flash_attention_grad %qkv, %qkv, %qkv result %o, %l grad %o {bshd, packed_qkv, masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>)
  return
}

// -----

func.func @unpacked_one_gradient(%q: tensor<1x4x2x8xf32>, %l: tensor<1x2x4xf32>) {
  // expected-error @+1 {{has 1 gradients, not 3 (of query, key and value)}}
  %a = slapo.flash_attention_grad %q, %q, %q result %q, %l grad %q {bshd, masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4xf32>, tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32>
  return
}

// -----

func.func @packed_gradient_type(%qkv: tensor<1x4x6x8xf32>, %o: tensor<1x4x2x8xf32>, %l: tensor<1x2x4xf32>) {
  // expected-error @+1 {{gradient type 'tensor<1x4x2x8xf32>' differs from its operand's 'tensor<1x4x6x8xf32>'}}
  %a = slapo.flash_attention_grad %qkv, %qkv, %qkv result %o, %l grad %o {bshd, packed_qkv, masked_score = 0.0 : f64, scale = 1.0 : f64} : (tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4xf32>, tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32>
  return
}
