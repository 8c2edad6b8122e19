// RUN: not slapo-opt --split-input-file --slapo-cut-pipeline-stage=modules=h.0 %s 2>&1 | FileCheck %s --check-prefix=TIED
// RUN: not slapo-opt --split-input-file --slapo-cut-pipeline-stage=modules=act %s 2>&1 | FileCheck %s --check-prefix=INSIDE


// GPT-2's tied embedding and LM head: with the head on stage 1, both stages
// would compute a gradient of embed.weight.
module {
  slapo.param @embed.weight : tensor<8x4xf32>
  slapo.param @h.0.fc.weight : tensor<4x4xf32>
  func.func @forward(%ids: tensor<2xi64>, %target: tensor<2xi64>) -> tensor<f32> {
    %we = slapo.get_param @embed.weight {slapo.module = "embed"} : tensor<8x4xf32>
    %x = slapo.embedding %we, %ids {slapo.module = "embed"} : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
    %w0 = slapo.get_param @h.0.fc.weight {slapo.module = "h.0.fc"} : tensor<4x4xf32>
    %f0 = slapo.linear %x, %w0 {slapo.module = "h.0.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %logits = slapo.linear %f0, %we {slapo.module = "lm_head"} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %l = slapo.cross_entropy %logits, %target {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
// TIED: error: cut_pipeline_stage(): parameter 'embed.weight' is used on stage 0 (by 'embed') and on stage 1 (by 'lm_head'): tied parameters across stages are not implemented yet (their gradients would have to be summed between the stages); cut so that their users share a stage
// TIED: note: used on stage 0 here
// TIED: note: used on stage 1 here

// -----

// A module called around another: a cut after the inner one would run the
// outer one on two stages.
module {
  slapo.param @w : tensor<4x4xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<4x4xf32>
    %a = slapo.linear %x, %w {slapo.module = "outer.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %b = slapo.relu %a {slapo.module = "act"} : tensor<2x4xf32>
    %c = slapo.linear %b, %w {slapo.module = "outer.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %l = slapo.mean %c {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
// INSIDE: error: cut_pipeline_stage(): the cut after 'act' is inside module 'outer', whose ops run both before and after it; cut after a module that contains it or that it contains
