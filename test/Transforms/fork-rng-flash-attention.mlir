// RUN: slapo-opt "--slapo-shard=modules=proj param=weight axis=0" "--slapo-shard=modules=out param=weight axis=1" "--slapo-sync=modules=out mode=fwd_post op=all_reduce" --slapo-fork-rng=modules=attn --slapo-propagate-sharding=tp=2 %s | FileCheck %s
// RUN: not slapo-opt --slapo-fork-rng=modules=attn --slapo-propagate-sharding=tp=2 %s 2>&1 | FileCheck %s --check-prefix=REPLICATED
// RUN: not slapo-opt --slapo-fork-rng=modules=attn.attn_dropout %s 2>&1 | FileCheck %s --check-prefix=INSIDE

// A flash attention's dropout (replace() of an attention with dropout) under
// fork_rng() and tensor parallelism: the heads split by the projection's
// rows, the op records the split as slapo.dropout does (shard_axis 1: the
// rank's heads of the whole tensor's mask) and is forked. Forking unsplit
// attention would make the ranks' copies differ; forking the dropout's own
// module, which the replaced op no longer holds, is refused naming the order.
module {
  slapo.param @proj.weight : tensor<8x8xf32>
  slapo.param @out.weight : tensor<8x8xf32>
  func.func @forward(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %w = slapo.get_param @proj.weight {slapo.module = "proj"} : tensor<8x8xf32>
    %y = slapo.linear %x, %w {slapo.module = "proj"} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %r = slapo.reshape %y {slapo.module = "attn"} : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %q = slapo.permute %r {permutation = array<i64: 0, 2, 1, 3>, slapo.module = "attn"} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %o, %lse = slapo.flash_attention %q, %q, %q {dropout_p = 1.000000e-01 : f64, dropout_stream = 2 : i64, masked_score = 0.0 : f64, scale = 0.5 : f64, slapo.module = "attn"} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4xf32>)
    %b = slapo.permute %o {permutation = array<i64: 0, 2, 1, 3>, slapo.module = "attn"} : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
    %m = slapo.reshape %b {slapo.module = "attn"} : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    %v = slapo.get_param @out.weight {slapo.module = "out"} : tensor<8x8xf32>
    %z = slapo.linear %m, %v {slapo.module = "out"} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    return %z : tensor<2x4x8xf32>
  }
}
// CHECK: slapo.flash_attention {{.*}} {dropout_p = 1.000000e-01 : f64, dropout_stream = 2 : i64, fork_rng, masked_score = 0.000000e+00 : f64, scale = 5.000000e-01 : f64, shard_axis = 1 : i64, slapo.module = "attn"} : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> (tensor<2x1x4x4xf32>, tensor<2x1x4xf32>)
// REPLICATED: error: {{.*}}fork_rng() gives each rank its own dropout mask, but the query, key and value of 'flash_attention' in 'attn' are replicated: the ranks' copies would differ; fork only modules whose dropouts meet split activations
// INSIDE: error: fork_rng(): module 'attn.attn_dropout' is inside 'attn', whose attention replace("flash_attention") made one op, dropout and all; write fork_rng() before replace()
