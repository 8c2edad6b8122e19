// Module paths are the ops' slapo.module attributes, not their locations:
// with debug info stripped before them, the selecting passes pick the same
// ops and give the same IR. Every pass that selects by path matches one way,
// the module itself or one of its submodules ("h.1" is not "h.10"), and the
// ops the passes build or clone carry the path of the op they derive from.
// DEFINE: %{tp} = "--slapo-shard=modules=h.0.fc1 param=weight axis=0" "--slapo-shard=modules=h.0.fc1 param=bias axis=0" "--slapo-sync=modules=h.0.fc1 mode=bwd_post op=all_reduce" "--slapo-shard=modules=h.0.fc2 param=weight axis=1" "--slapo-sync=modules=h.0.fc2 mode=fwd_post op=all_reduce" --slapo-fork-rng=modules=h.0 --slapo-propagate-sharding=tp=2
// RUN: slapo-opt --strip-debuginfo %{tp} %s | FileCheck %s --check-prefix=TP
// RUN: slapo-opt %{tp} %s > %t.kept.mlir
// RUN: slapo-opt --strip-debuginfo %{tp} %s > %t.stripped.mlir
// RUN: diff %t.kept.mlir %t.stripped.mlir
// RUN: slapo-opt --strip-debuginfo --slapo-decompose=modules=h.0,h.1 --slapo-fork-rng=modules=h.1 %s | FileCheck %s --check-prefix=RULE
// RUN: slapo-opt --strip-debuginfo --slapo-autodiff --slapo-optimizer=optimizer=sgd --slapo-cse --slapo-checkpoint=modules=h.0 %s | FileCheck %s --check-prefix=CLONES

module {
  slapo.param @scale : tensor<4xf32>
  slapo.param @h.0.fc1.weight : tensor<8x4xf32>
  slapo.param @h.0.fc1.bias : tensor<8xf32>
  slapo.param @h.0.fc2.weight : tensor<4x8xf32>
  slapo.param @h.0.fc2.bias : tensor<4xf32>
  slapo.param @h.1.fc.weight : tensor<4x4xf32>
  slapo.param @h.1.fc.bias : tensor<4xf32>
  slapo.param @h.10.fc.weight : tensor<4x4xf32>
  slapo.param @h.10.fc.bias : tensor<4xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"}) -> tensor<f32> {
    %s = slapo.get_param @scale : tensor<4xf32> loc(#src)
    %xs = slapo.mul %x, %s : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc(#src)
    %w1 = slapo.get_param @h.0.fc1.weight {slapo.module = "h.0.fc1"} : tensor<8x4xf32> loc(#h0fc1)
    %b1 = slapo.get_param @h.0.fc1.bias {slapo.module = "h.0.fc1"} : tensor<8xf32> loc(#h0fc1)
    %h = slapo.linear %xs, %w1, %b1 {slapo.module = "h.0.fc1"} : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32> loc(#h0fc1)
    %a = slapo.tanh %h {slapo.module = "h.0.act"} : tensor<2x8xf32> loc(#h0act)
    %d = slapo.dropout %a {p = 1.000000e-01 : f64, slapo.module = "h.0.drop", stream = 0 : i64} : tensor<2x8xf32> loc(#h0drop)
    %w2 = slapo.get_param @h.0.fc2.weight {slapo.module = "h.0.fc2"} : tensor<4x8xf32> loc(#h0fc2)
    %b2 = slapo.get_param @h.0.fc2.bias {slapo.module = "h.0.fc2"} : tensor<4xf32> loc(#h0fc2)
    %y0 = slapo.linear %d, %w2, %b2 {slapo.module = "h.0.fc2"} : (tensor<2x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc(#h0fc2)
    %w3 = slapo.get_param @h.1.fc.weight {slapo.module = "h.1.fc"} : tensor<4x4xf32> loc(#h1fc)
    %b3 = slapo.get_param @h.1.fc.bias {slapo.module = "h.1.fc"} : tensor<4xf32> loc(#h1fc)
    %y1 = slapo.linear %y0, %w3, %b3 {slapo.module = "h.1.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc(#h1fc)
    %d1 = slapo.dropout %y1 {p = 1.000000e-01 : f64, slapo.module = "h.1.drop", stream = 1 : i64} : tensor<2x4xf32> loc(#h1drop)
    %w4 = slapo.get_param @h.10.fc.weight {slapo.module = "h.10.fc"} : tensor<4x4xf32> loc(#h10fc)
    %b4 = slapo.get_param @h.10.fc.bias {slapo.module = "h.10.fc"} : tensor<4xf32> loc(#h10fc)
    %y10 = slapo.linear %d1, %w4, %b4 {slapo.module = "h.10.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc(#h10fc)
    %d10 = slapo.dropout %y10 {p = 1.000000e-01 : f64, slapo.module = "h.10.drop", stream = 2 : i64} : tensor<2x4xf32> loc(#h10drop)
    %l = slapo.sum %d10 {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32> loc(#src)
    return %l : tensor<f32>
  }
}
#src = loc("model.py":20:0)
#h0fc1 = loc("h.0.fc1"("model.py":5:0))
#h0act = loc("h.0.act"("model.py":6:0))
#h0drop = loc("h.0.drop"("model.py":7:0))
#h0fc2 = loc("h.0.fc2"("model.py":8:0))
#h1fc = loc("h.1.fc"("model.py":12:0))
#h1drop = loc("h.1.drop"("model.py":13:0))
#h10fc = loc("h.10.fc"("model.py":12:0))
#h10drop = loc("h.10.drop"("model.py":13:0))

// The selectors reach their ops through the attributes alone: the shards,
// the collectives, which carry the path of the module whose first op they
// follow or precede, and the forked dropout below h.0.
// TP: slapo.param @h.0.fc1.weight : tensor<4x4xf32> {shard_axis = 0 : i64}
// TP-NEXT: slapo.param @h.0.fc1.bias : tensor<4xf32> {shard_axis = 0 : i64}
// TP-NEXT: slapo.param @h.0.fc2.weight : tensor<4x4xf32> {shard_axis = 1 : i64}
// TP: %[[XS:.*]] = slapo.mul %arg0
// TP: slapo.grad_all_reduce %[[XS]] <tp> {slapo.module = "h.0.fc1"} : tensor<2x4xf32>
// TP: slapo.dropout %{{.*}} {fork_rng, p = 1.000000e-01 : f64, shard_axis = 1 : i64, slapo.module = "h.0.drop", stream = 0 : i64}
// TP: %[[PARTIAL:.*]] = slapo.linear %{{.*}}, %{{.*}} {slapo.module = "h.0.fc2"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
// TP-NEXT: %[[SUM:.*]] = slapo.all_reduce %[[PARTIAL]] <tp> {slapo.module = "h.0.fc2"}
// TP-NEXT: slapo.add %[[SUM]], %{{.*}} {slapo.module = "h.0.fc2"}
// TP-NOT: fork_rng

// decompose() and fork_rng() select alike: every linear with a bias below h.0
// is split (h.0 itself computes none), h.1's linear and dropout are selected
// and h.10's are not.
// RULE: %[[P1:.*]] = slapo.linear %{{.*}}, %{{.*}} {slapo.module = "h.0.fc1"} :
// RULE-NEXT: slapo.add %[[P1]], %{{.*}} {slapo.module = "h.0.fc1"} :
// RULE: slapo.dropout %{{.*}} {p = 1.000000e-01 : f64, slapo.module = "h.0.drop", stream = 0 : i64}
// RULE: %[[P2:.*]] = slapo.linear %{{.*}}, %{{.*}} {slapo.module = "h.0.fc2"} :
// RULE-NEXT: slapo.add %[[P2]], %{{.*}} {slapo.module = "h.0.fc2"} :
// RULE: %[[P3:.*]] = slapo.linear %{{.*}}, %{{.*}} {slapo.module = "h.1.fc"} :
// RULE-NEXT: %[[B3:.*]] = slapo.add %[[P3]], %{{.*}} {slapo.module = "h.1.fc"} :
// RULE-NEXT: slapo.dropout %[[B3]] {fork_rng, p = 1.000000e-01 : f64, slapo.module = "h.1.drop", stream = 1 : i64}
// RULE: slapo.linear %{{.*}}, %{{.*}}, %{{.*}} {slapo.module = "h.10.fc"} :
// RULE-NEXT: slapo.dropout %{{.*}} {p = 1.000000e-01 : f64, slapo.module = "h.10.drop", stream = 2 : i64}

// The backward, the optimizer's updates and the recomputed forward of h.0
// carry their forward ops' paths; ops of the root module carry none.
// slapo-cse merges constants of different modules (tanh's gradient's 1 with
// the loss's seed), as it merges them whatever their locations.
// CLONES-LABEL: func.func @train_step
// CLONES: %[[SEED:.*]] = slapo.constant dense<1.000000e+00> : tensor<f32> {slapo.phase = "backward"}
// CLONES: slapo.matmul %{{.*}}, %{{.*}} {slapo.module = "h.10.fc", slapo.phase = "backward"}
// CLONES: %[[H:.*]] = slapo.linear %{{.*}}, %{{.*}}, %{{.*}} {slapo.module = "h.0.fc1", slapo.phase = "backward", slapo.recomputed}
// CLONES-NEXT: %[[A:.*]] = slapo.tanh %[[H]] {slapo.module = "h.0.act", slapo.phase = "backward", slapo.recomputed}
// CLONES-NEXT: slapo.dropout %[[A]] step %{{.*}} {p = 1.000000e-01 : f64, slapo.module = "h.0.drop", slapo.phase = "backward", slapo.recomputed, stream = 0 : i64}
// CLONES: %[[SQUARE:.*]] = slapo.mul %[[A]], %[[A]] {slapo.module = "h.0.act", slapo.phase = "backward"}
// CLONES-NEXT: slapo.sub %[[SEED]], %[[SQUARE]] {slapo.module = "h.0.act", slapo.phase = "backward"}
// CLONES: slapo.mul %{{.*}}, %arg0 {slapo.phase = "backward"}
// CLONES: slapo.param_grad @scale, %{{.*}} {slapo.phase = "backward"}
// CLONES-NEXT: slapo.param_grad @h.0.fc1.weight, %{{.*}} {slapo.module = "h.0.fc1", slapo.phase = "backward"}
// CLONES: slapo.sgd_update @h.0.fc1.weight, {{.*}}slapo.module = "h.0.fc1", slapo.phase = "optimizer"
