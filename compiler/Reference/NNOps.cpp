//===- NNOps.cpp - contractions and neural-network ops
//---------------------===//
#include "OpTable.h"

#include "slapo/Dialect/SlapoOps.h"

#include <ATen/core/Reduction.h>

namespace slapo::reference::detail {

void registerNNOps(OpTable &table) {
  add<LinearOp>(table, [](LinearOp op, Operands x, EvalContext &) {
    c10::optional<at::Tensor> bias;
    if (op.getBias())
      bias = x[2];
    return at::linear(x[0], x[1], bias);
  });

  add<MatmulOp>(table, [](MatmulOp op, Operands x, EvalContext &) {
    auto permuted = [](const at::Tensor &tensor,
                       std::optional<llvm::ArrayRef<int64_t>> order) {
      return order ? tensor.permute({order->data(), order->size()}) : tensor;
    };
    at::Tensor product = at::matmul(permuted(x[0], op.getLhsPermutation()),
                                    permuted(x[1], op.getRhsPermutation()));
    return permuted(product, op.getResultPermutation());
  });

  add<EmbeddingOp>(table, [](EmbeddingOp op, Operands x, EvalContext &) {
    // padding_idx only changes the gradient; the forward is a plain gather.
    int64_t paddingIdx = -1;
    if (auto padding = op.getPaddingIdx())
      paddingIdx = static_cast<int64_t>(*padding);
    return at::embedding(x[0], x[1], paddingIdx);
  });

  add<EmbeddingGradOp>(
      table, [](EmbeddingGradOp op, Operands x, EvalContext &) {
        auto rows = op.getType().cast<mlir::ShapedType>().getDimSize(0);
        int64_t paddingIdx = -1;
        if (auto padding = op.getPaddingIdx())
          paddingIdx = static_cast<int64_t>(*padding);
        return at::embedding_dense_backward(x[0], x[1], rows, paddingIdx,
                                            /*scale_grad_by_freq=*/false);
      });

  add<LayerNormOp>(table, [](LayerNormOp op, Operands x, EvalContext &) {
    const at::Tensor &input = x[0];
    auto rank = static_cast<int64_t>(op.getNormalizedRank());
    std::vector<int64_t> normalized(input.sizes().end() - rank,
                                    input.sizes().end());
    c10::optional<at::Tensor> weight, bias;
    size_t next = 1;
    if (op.getWeight())
      weight = x[next++];
    if (op.getBias())
      bias = x[next++];
    return at::layer_norm(input, normalized, weight, bias,
                          op.getEps().convertToDouble());
  });

  add<SoftmaxOp>(table, [](SoftmaxOp op, Operands x, EvalContext &) {
    return at::softmax(x[0], static_cast<int64_t>(op.getDim()));
  });
  add<LogSoftmaxOp>(table, [](LogSoftmaxOp op, Operands x, EvalContext &) {
    return at::log_softmax(x[0], static_cast<int64_t>(op.getDim()));
  });

  add<CrossEntropyOp>(table, [](CrossEntropyOp op, Operands x, EvalContext &) {
    int64_t reduction = at::Reduction::Mean;
    switch (op.getReduction()) {
    case Reduction::mean:
      reduction = at::Reduction::Mean;
      break;
    case Reduction::sum:
      reduction = at::Reduction::Sum;
      break;
    case Reduction::none:
      reduction = at::Reduction::None;
      break;
    }
    // nll_loss wants int64 class indices.
    return at::cross_entropy_loss(x[0], x[1].to(at::kLong), /*weight=*/{},
                                  reduction,
                                  static_cast<int64_t>(op.getIgnoreIndex()));
  });
  add<CrossEntropyGradOp>(
      table, [](CrossEntropyGradOp, Operands x, EvalContext &) {
        const at::Tensor &logits = x[0];
        // A target outside the classes (an ignored one) matches no column.
        at::Tensor oneHot =
            at::arange(logits.size(1), x[1].options()).unsqueeze(0) ==
            x[1].unsqueeze(1);
        return (at::softmax(logits, 1) - oneHot.to(logits.scalar_type())) *
               x[2].unsqueeze(1);
      });
}

} // namespace slapo::reference::detail
