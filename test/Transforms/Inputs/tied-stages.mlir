// GPT-2's tied embedding and LM head in small: embed.weight is read by the
// embedding (before h.0) and by the LM head (after it).
module {
  slapo.param @embed.weight : tensor<8x4xf32>
  slapo.param @h.0.fc.weight : tensor<4x4xf32>
  slapo.param @h.1.fc.weight : tensor<4x4xf32>
  func.func @forward(%ids: tensor<2xi64> {slapo.name = "ids"},
                     %target: tensor<2xi64> {slapo.name = "target"}) -> tensor<f32> {
    %we = slapo.get_param @embed.weight {slapo.module = "embed"} : tensor<8x4xf32>
    %x = slapo.embedding %we, %ids {slapo.module = "embed"} : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
    %w0 = slapo.get_param @h.0.fc.weight {slapo.module = "h.0.fc"} : tensor<4x4xf32>
    %f0 = slapo.linear %x, %w0 {slapo.module = "h.0.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %w1 = slapo.get_param @h.1.fc.weight {slapo.module = "h.1.fc"} : tensor<4x4xf32>
    %f1 = slapo.linear %f0, %w1 {slapo.module = "h.1.fc"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %logits = slapo.linear %f1, %we {slapo.module = "lm_head"} : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %l = slapo.cross_entropy %logits, %target {ignore_index = -100 : i64, reduction = #slapo.reduction<mean>, slapo.module = "loss"} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
