// RUN: not slapo-opt --split-input-file --slapo-cut-pipeline-stage=modules=embed,h.0 %s 2>&1 | FileCheck %s --check-prefix=TIED
// RUN: not slapo-opt --split-input-file --slapo-cut-pipeline-stage=modules=act %s 2>&1 | FileCheck %s --check-prefix=INSIDE


// A parameter tied between the first stage and a middle one: only the first
// and the last stage's ranks sum the gradients of their copies (Megatron's
// embedding group).
module {
  slapo.param @embed.weight : tensor<8x4xf32>
  slapo.param @h.1.fc.weight : tensor<4x8xf32>
  func.func @forward(%ids: tensor<2xi64>, %target: tensor<2xi64>) -> tensor<f32> {
    %we = slapo.get_param @embed.weight {slapo.module = "embed"} : tensor<8x4xf32>
    %x = slapo.embedding %we, %ids {slapo.module = "embed"} : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
    %f0 = slapo.linear %x, %we {slapo.module = "h.0.fc"} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %w1 = slapo.get_param @h.1.fc.weight {slapo.module = "h.1.fc"} : tensor<4x8xf32>
    %f1 = slapo.linear %f0, %w1 {slapo.module = "h.1.fc"} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
    %l = slapo.cross_entropy %f1, %target {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
// TIED: error: cut_pipeline_stage(): parameter 'embed.weight' is used on stage 0 (by 'embed') and on stage 1 (by 'h.0.fc'): a parameter tied across stages must be used on the first and the last stage only (their ranks sum its gradients, as Megatron's embedding group does); cut so that its other users share one of those stages
// TIED: note: used on stage 0 here
// TIED: note: used on stage 1 here

// -----

// Tied between a middle stage and the last one (stages 1 and 2 of three):
// refused in the same way.
module {
  slapo.param @embed.weight : tensor<8x4xf32>
  slapo.param @h.0.fc.weight : tensor<4x4xf32>
  func.func @forward(%ids: tensor<2xi64>, %target: tensor<2xi64>) -> tensor<f32> {
    %we = slapo.get_param @embed.weight {slapo.module = "embed"} : tensor<8x4xf32>
    %x = slapo.embedding %we, %ids {slapo.module = "embed"} : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
    %w0 = slapo.get_param @h.0.fc.weight {slapo.module = "h.0.fc"} : tensor<4x4xf32>
    %f0 = slapo.linear %x, %w0 {slapo.module = "h.0.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %f1 = slapo.linear %f0, %w0 {slapo.module = "h.1.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %l = slapo.cross_entropy %f1, %target {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>} : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
// TIED: error: cut_pipeline_stage(): parameter 'h.0.fc.weight' is used on stage 1 (by 'h.0.fc') and on stage 2 (by 'h.1.fc'): a parameter tied across stages must be used on the first and the last stage only
// TIED: note: used on stage 1 here
// TIED: note: used on stage 2 here

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
