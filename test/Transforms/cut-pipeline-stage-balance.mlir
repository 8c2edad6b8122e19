// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=l1 %s 2>&1 | FileCheck %s --check-prefix=UNBALANCED
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=mm %s 2>&1 | FileCheck %s --check-prefix=BALANCED
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=l0,l1 %s 2>&1 | FileCheck %s --check-prefix=THREE
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=head %s 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: slapo-opt --slapo-cut-pipeline-stage=modules=a %S/Inputs/stage-balance-kernels.mlir 2>&1 | FileCheck %s --check-prefix=KERNELS

// Each stage's cost is the FLOPs (2 per multiply-add) of its contractions'
// forward and backward. Computed by hand:
//   l0    linear [2, 4] x [8, 4]^T: forward 2*2*8*4 = 128; its input is the
//         step's input, which gets no gradient, so the backward computes
//         the weight's only: 128. 256 in all.
//   l1    linear [2, 8] x [8, 8]^T: 2*2*8*8 = 256 forward, twice that
//         backward (input and weight): 768.
//   mm    matmul [2, 8] x [8, 8]: 256 forward, 512 backward: 768.
//   head  linear [2, 8] x [16, 8]^T: 2*2*16*8 = 512 forward, 1024
//         backward: 1536.
//   loss  no contraction: 0.
// In all 3328; the bias add and the tanh cost nothing.
module {
  slapo.param @l0.weight : tensor<8x4xf32>
  slapo.param @l0.bias : tensor<8xf32>
  slapo.param @l1.weight : tensor<8x8xf32>
  slapo.param @mm.weight : tensor<8x8xf32>
  slapo.param @head.weight : tensor<16x8xf32>
  func.func @forward(%x: tensor<2x4xf32> {slapo.name = "x"},
                     %target: tensor<2xi64> {slapo.name = "target"}) -> tensor<f32> {
    %w0 = slapo.get_param @l0.weight {slapo.module = "l0"} : tensor<8x4xf32>
    %b0 = slapo.get_param @l0.bias {slapo.module = "l0"} : tensor<8xf32>
    %h0 = slapo.linear %x, %w0, %b0 {slapo.module = "l0"} : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %w1 = slapo.get_param @l1.weight {slapo.module = "l1"} : tensor<8x8xf32>
    %h1 = slapo.linear %h0, %w1 {slapo.module = "l1"} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %t1 = slapo.tanh %h1 {slapo.module = "l1"} : tensor<2x8xf32>
    %wm = slapo.get_param @mm.weight {slapo.module = "mm"} : tensor<8x8xf32>
    %h2 = slapo.matmul %t1, %wm {slapo.module = "mm"} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %wh = slapo.get_param @head.weight {slapo.module = "head"} : tensor<16x8xf32>
    %logits = slapo.linear %h2, %wh {slapo.module = "head"} : (tensor<2x8xf32>, tensor<16x8xf32>) -> tensor<2x16xf32>
    %l = slapo.cross_entropy %logits, %target {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>, slapo.module = "loss"} : (tensor<2x16xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// After l1: 256 + 768 = 1024 against 768 + 1536 = 2304, 2.25x. The cut
// after mm is the best of those after l0 (256 : 3072), l1, mm
// (1792 : 1536) and head (3328 : 0): its most expensive stage costs least.
// UNBALANCED: warning: cut_pipeline_stage(): the pipeline stages are unbalanced: stage 1 costs 2.25x stage 0 (estimated FLOPs of the contractions of one microbatch's forward and backward, by stage: 1024 FLOP, 2304 FLOP), and every stage waits for the most expensive one in each step; cutting after 'mm' instead of after 'l1' gives 1792 FLOP, 1536 FLOP (1.17x)
// UNBALANCED: module attributes {slapo.pipeline_balance = {balanced_cuts = ["mm"], balanced_stage_flops = [1792, 1536], cuts = ["l1"], stage_flops = [1024, 2304]}}

// 1792 : 1536 is within 1.2x: no warning.
// BALANCED-NOT: warning
// BALANCED: module attributes {slapo.pipeline_balance = {balanced_cuts = ["mm"], balanced_stage_flops = [1792, 1536], cuts = ["mm"], stage_flops = [1792, 1536]}}

// Three stages, 256 : 768 : 2304: the most expensive is the last, warned
// at the cut that starts it. Of the cuts whose most expensive stage costs
// 1536 (l1 and mm: 1024 : 768 : 1536; l0 and mm: 256 : 1536 : 1536), the
// first found.
// THREE: warning: cut_pipeline_stage(): the pipeline stages are unbalanced: stage 2 costs 9.00x stage 0 (estimated FLOPs of the contractions of one microbatch's forward and backward, by stage: 256 FLOP, 768 FLOP, 2304 FLOP), and every stage waits for the most expensive one in each step; cutting after 'l1', 'mm' instead of after 'l0', 'l1' gives 1024 FLOP, 768 FLOP, 1536 FLOP (2.00x)
// THREE: balanced_cuts = ["l1", "mm"], balanced_stage_flops = [1024, 768, 1536], cuts = ["l0", "l1"], stage_flops = [256, 768, 2304]

// The loss alone on the last stage computes no contraction.
// EMPTY: warning: cut_pipeline_stage(): the pipeline stages are unbalanced: stage 0 costs 3328 FLOP while stage 1 has no contractions ({{.*}} by stage: 3328 FLOP, 0 FLOP), {{.*}}; cutting after 'mm' instead of after 'head' gives 1792 FLOP, 1536 FLOP (1.17x)

// The other contractions, in Inputs/stage-balance-kernels.mlir:
//   a.conv   conv2d of the step's input [1, 2, 4, 4] by [3, 2, 3, 3],
//            padding 1: 48 outputs of 2*3*3 = 18 products each, forward
//            2*48*18 = 1728, and the weight's gradient (the input gets
//            none) as much: 3456.
//   a.attn   flash attention, query [1, 3, 4, 4], key [1, 3, 2, 4], value
//            [1, 3, 2, 6]: query x key^T 2*48*2 = 192, probabilities x
//            value 2*72*2 = 288, 480 forward; the backward recomputes the
//            scores (192), grad x value^T (288), and the gradients of query
//            and key (192 each) and value (288): 1152. 1632 in all.
//   head     linear_cross_entropy of [12, 6] by [10, 6]: the logits and
//            both gradients in the op itself, 3*2*12*10*6 = 4320; its
//            gradient rule only scales them.
// 3456 + 1632 = 5088 against 4320.
// KERNELS-NOT: warning
// KERNELS: stage_flops = [5088, 4320]
