// The contractions of cut-pipeline-stage-balance.mlir's KERNELS run, whose
// FLOPs it computes by hand.
module {
  slapo.param @a.conv.weight : tensor<3x2x3x3xf32>
  slapo.param @a.attn.key : tensor<1x3x2x4xf32>
  slapo.param @a.attn.value : tensor<1x3x2x6xf32>
  slapo.param @head.weight : tensor<10x6xf32>
  func.func @forward(%x: tensor<1x2x4x4xf32> {slapo.name = "x"},
                     %target: tensor<12xi64> {slapo.name = "target"}) -> tensor<f32> {
    %w = slapo.get_param @a.conv.weight {slapo.module = "a.conv"} : tensor<3x2x3x3xf32>
    %y = slapo.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1, slapo.module = "a.conv"} : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x4x4xf32>
    %k = slapo.get_param @a.attn.key {slapo.module = "a.attn"} : tensor<1x3x2x4xf32>
    %v = slapo.get_param @a.attn.value {slapo.module = "a.attn"} : tensor<1x3x2x6xf32>
    %o, %lse = slapo.flash_attention %y, %k, %v {masked_score = 0.0 : f64, scale = 0.5 : f64, slapo.module = "a.attn"} : (tensor<1x3x4x4xf32>, tensor<1x3x2x4xf32>, tensor<1x3x2x6xf32>) -> (tensor<1x3x4x6xf32>, tensor<1x3x4xf32>)
    %h = slapo.reshape %o {slapo.module = "head"} : tensor<1x3x4x6xf32> -> tensor<12x6xf32>
    %wh = slapo.get_param @head.weight {slapo.module = "head"} : tensor<10x6xf32>
    %loss, %dh, %dw = slapo.linear_cross_entropy %h, %wh, %target {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>, slapo.module = "head"} : (tensor<12x6xf32>, tensor<10x6xf32>, tensor<12xi64>) -> (tensor<f32>, tensor<12x6xf32>, tensor<10x6xf32>)
    return %loss : tensor<f32>
  }
}
