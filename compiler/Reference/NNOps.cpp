//===- NNOps.cpp - contractions and neural-network ops
//---------------------===//
#include "OpTable.h"

#include "slapo/Dialect/SlapoOps.h"

#include <ATen/core/Reduction.h>

namespace slapo::reference::detail {

namespace {

/// Whether a pooling with `op`'s window gives `outShape` from `input` only
/// with ceil_mode: the ops carry no flag, their result's size says it.
template <typename OpT>
bool isCeilMode(OpT op, const at::Tensor &input,
                llvm::ArrayRef<int64_t> outShape) {
  for (int d = 0; d < 2; ++d) {
    int64_t span = input.size(2 + d) + 2 * op.getPadding()[d] -
                   op.getDilation()[d] * (op.getKernelSize()[d] - 1) - 1;
    if (outShape[2 + d] != span / op.getStride()[d] + 1)
      return true;
  }
  return false;
}

/// The maxima and their indices of a max pooling with `op`'s window.
template <typename OpT>
std::tuple<at::Tensor, at::Tensor> maxPool2d(OpT op, const at::Tensor &input,
                                             llvm::ArrayRef<int64_t> outShape) {
  return at::max_pool2d_with_indices(
      input, toVector(op.getKernelSize()), toVector(op.getStride()),
      toVector(op.getPadding()), toVector(op.getDilation()),
      isCeilMode(op, input, outShape));
}

/// The masked, scaled scores of a flash_attention or its gradient, whose
/// operands `x` begin with query, key, value and the masks the op has, in
/// `compute` (its log-sum-exp's dtype, which the kernels compute in: f32
/// for 16-bit operands).
template <typename OpT>
at::Tensor attentionScores(OpT op, Operands x, at::ScalarType compute) {
  at::Tensor scores =
      at::matmul(x[0].to(compute), x[1].to(compute).transpose(-1, -2)) *
      op.getScale().convertToDouble();
  size_t next = 3;
  if (op.getKeep())
    scores = at::where(x[next++], scores,
                       at::scalar_tensor(op.getMaskedScore().convertToDouble(),
                                         scores.options()));
  if (op.getBias())
    scores = scores + x[next].to(compute);
  return scores;
}

/// The dropout factor of a flash_attention with dropout_p or its gradient
/// (kept 1/(1-p), dropped 0) for `scores`, or an undefined tensor. Drawn
/// as the reference draws slapo.dropout (at::dropout, PyTorch's generator
/// in program order): the draws of the dropout that was replaced, and of
/// its gradient's dropout for the gradient.
template <typename OpT>
at::Tensor attentionDropout(OpT op, const at::Tensor &scores) {
  std::optional<llvm::APFloat> p = op.getDropoutP();
  if (!p)
    return at::Tensor();
  return at::dropout(at::ones_like(scores), p->convertToDouble(),
                     /*train=*/true);
}

/// The operands `x` of a flash_attention or its gradient with query, key,
/// value (and the gradient's result and grad) as [B, H, rows, size], which
/// the formulas read: transposed from the [B, rows, H, size] of `bshd`,
/// query, key and value each their third of the heads of `packed_qkv`'s one
/// tensor, and a grouped key and value repeated to H heads as repeat_kv
/// repeats them.
template <typename OpT>
std::vector<at::Tensor> headsMajorOperands(OpT op, Operands x) {
  std::vector<at::Tensor> operands(x.begin(), x.end());
  if (op.getBshd())
    for (mlir::OpOperand *operand : getTokenMajorValues(op).operands)
      operands[operand->getOperandNumber()] =
          operands[operand->getOperandNumber()].transpose(1, 2);
  if (op.getPackedQkv())
    for (int64_t part = 0; part < 3; ++part) {
      int64_t heads = operands[part].size(1) / 3;
      operands[part] = operands[part].narrow(1, part * heads, heads);
    }
  if (int64_t group = operands[0].size(1) / operands[1].size(1); group > 1)
    for (int part = 1; part < 3; ++part)
      operands[part] = operands[part].repeat_interleave(group, /*dim=*/1);
  return operands;
}

/// The gradient [B, H, S, size] of a key or value repeated to H heads as
/// the gradient of the `keyHeads` heads it repeats: the sum over each
/// group's query heads, in their order.
at::Tensor sumGroups(const at::Tensor &grad, int64_t keyHeads) {
  if (grad.size(1) == keyHeads)
    return grad;
  return grad
      .view({grad.size(0), keyHeads, grad.size(1) / keyHeads, grad.size(2),
             grad.size(3)})
      .sum(2);
}

/// A [B, H, rows, size] result of the formulas as `op` stores it.
template <typename OpT> at::Tensor toStored(OpT op, const at::Tensor &result) {
  return op.getBshd() ? result.transpose(1, 2).contiguous() : result;
}

/// A norm gradient's input gradient `gradInput` plus `op`'s addend, if it
/// has one (the last operand).
at::Tensor withAddend(AddendOpInterface op, Operands x,
                      const at::Tensor &gradInput) {
  return op.getAddend() ? gradInput + x.back() : gradInput;
}

} // namespace

/// flash_attention as the formulas of its description, the probabilities
/// and all; the runtime's kernel never makes them. Computed in the
/// log-sum-exp's dtype, as the kernels compute, with the result and the
/// gradients rounded to the operands' dtype.
static void registerAttentionOps(OpTable &table) {
  table.try_emplace(
      FlashAttentionOp::getOperationName(),
      [](mlir::Operation *operation, Operands given,
         llvm::SmallVectorImpl<at::Tensor> &results, EvalContext &) {
        auto op = llvm::cast<FlashAttentionOp>(operation);
        std::vector<at::Tensor> operands = headsMajorOperands(op, given);
        Operands x = operands;
        at::ScalarType compute = scalarTypeOf(op.getLogsumexp().getType());
        at::Tensor scores = attentionScores(op, x, compute);
        at::Tensor p = at::softmax(scores, -1);
        if (at::Tensor factor = attentionDropout(op, scores); factor.defined())
          p = p * factor;
        results.push_back(toStored(
            op, at::matmul(p, x[2].to(compute)).to(x[0].scalar_type())));
        results.push_back(at::logsumexp(scores, -1));
      });
  table.try_emplace(
      FlashAttentionGradOp::getOperationName(),
      [](mlir::Operation *operation, Operands given,
         llvm::SmallVectorImpl<at::Tensor> &results, EvalContext &) {
        auto op = llvm::cast<FlashAttentionGradOp>(operation);
        std::vector<at::Tensor> operands = headsMajorOperands(op, given);
        Operands x = operands;
        size_t next = 3 + (op.getKeep() ? 1 : 0) + (op.getBias() ? 1 : 0);
        const at::Tensor &lse = x[next + 1];
        at::ScalarType compute = lse.scalar_type();
        at::Tensor result = x[next].to(compute), grad = x[next + 2].to(compute);
        at::Tensor p =
            at::exp(attentionScores(op, x, compute) - lse.unsqueeze(-1));
        at::Tensor rowDot = (grad * result).sum(-1, /*keepdim=*/true);
        at::Tensor dP = at::matmul(grad, x[2].to(compute).transpose(-1, -2));
        at::Tensor dropped = p;
        if (at::Tensor factor = attentionDropout(op, p); factor.defined()) {
          dP = dP * factor;
          dropped = p * factor;
        }
        at::Tensor dScores = p * (dP - rowDot);
        if (op.getKeep())
          dScores = at::where(x[3], dScores, at::zeros({}, dScores.options()));
        double scale = op.getScale().convertToDouble();
        at::ScalarType stored = x[0].scalar_type();
        int64_t keyHeads =
            getHeadsMajorShape(op.getKey(), op.getBshd(), op.getPackedQkv())[1];
        std::vector<at::Tensor> grads = {
            toStored(
                op, (at::matmul(dScores, x[1].to(compute)) * scale).to(stored)),
            toStored(op, sumGroups(at::matmul(dScores.transpose(-1, -2),
                                              x[0].to(compute)) *
                                       scale,
                                   keyHeads)
                             .to(stored)),
            toStored(op, sumGroups(at::matmul(dropped.transpose(-1, -2), grad),
                                   keyHeads)
                             .to(stored))};
        if (op.getPackedQkv())
          results.push_back(at::cat(grads, /*dim=*/2));
        else
          results.append(grads.begin(), grads.end());
      });
}

/// linear_cross_entropy as the unfused formulas, the [N, V] logits and
/// their gradient and all; the runtime's kernel never makes them whole.
/// Everything is f32; bf16 operands (precision="bf16") are widened, and the
/// logits' gradient is rounded to bf16 for the two products, as the
/// kernel's are.
static void registerLinearCrossEntropy(OpTable &table) {
  table.try_emplace(
      LinearCrossEntropyOp::getOperationName(),
      [](mlir::Operation *operation, Operands x,
         llvm::SmallVectorImpl<at::Tensor> &results, EvalContext &) {
        auto op = llvm::cast<LinearCrossEntropyOp>(operation);
        at::ScalarType operands = x[0].scalar_type();
        at::Tensor hidden = x[0].to(at::kFloat), weight = x[1].to(at::kFloat);
        c10::optional<at::Tensor> bias;
        if (op.getBias())
          bias = x[3];
        at::Tensor logits = at::linear(hidden, weight, bias);
        at::Tensor target = x[2].to(at::kLong);
        int64_t ignoreIndex = op.getIgnoreIndex();
        bool mean = op.getReduction() == Reduction::mean;
        results.push_back(at::cross_entropy_loss(
            logits, target, /*weight=*/{},
            mean ? at::Reduction::Mean : at::Reduction::Sum, ignoreIndex));
        // (softmax - one_hot) per row, 0 for an ignored one, over the
        // count of targets not ignored for the mean.
        at::Tensor kept = (target != ignoreIndex).to(logits.scalar_type());
        at::Tensor oneHot =
            at::arange(logits.size(1), target.options()).unsqueeze(0) ==
            target.unsqueeze(1);
        at::Tensor rowWeight = mean ? kept / kept.sum() : kept;
        at::Tensor gradLogits =
            (at::softmax(logits, 1) - oneHot.to(logits.scalar_type())) *
            rowWeight.unsqueeze(1);
        at::Tensor productGrads = gradLogits.to(operands).to(at::kFloat);
        results.push_back(at::matmul(productGrads, weight));
        results.push_back(at::matmul(productGrads.t(), hidden));
        if (op.getBias())
          results.push_back(gradLogits.sum(0));
      });
}

/// linear_log_sum_exp and its gradient with the [N, V] logits whole, f32
/// as linear_cross_entropy's: bf16 operands widened, G rounded to bf16 for
/// the two products.
static void registerLinearLogSumExp(OpTable &table) {
  auto f32LogitsOf = [](mlir::Value bias, Operands x) {
    c10::optional<at::Tensor> value;
    if (bias)
      value = x[2];
    return at::linear(x[0].to(at::kFloat), x[1].to(at::kFloat), value);
  };
  add<LinearLogSumExpOp>(
      table, [=](LinearLogSumExpOp op, Operands x, EvalContext &) {
        return at::logsumexp(f32LogitsOf(op.getBias(), x), 1);
      });
  table.try_emplace(
      LinearLogSumExpGradOp::getOperationName(),
      [=](mlir::Operation *operation, Operands x,
          llvm::SmallVectorImpl<at::Tensor> &results, EvalContext &) {
        auto op = llvm::cast<LinearLogSumExpGradOp>(operation);
        size_t rest = op.getBias() ? 3 : 2;
        at::Tensor logits = f32LogitsOf(op.getBias(), x);
        at::Tensor scaled =
            at::exp(logits - x[rest].unsqueeze(1)) * x[rest + 1].unsqueeze(1);
        at::Tensor productGrads = scaled.to(x[0].scalar_type()).to(at::kFloat);
        results.push_back(at::matmul(productGrads, x[1].to(at::kFloat)));
        results.push_back(at::matmul(productGrads.t(), x[0].to(at::kFloat)));
        if (op.getBias())
          results.push_back(scaled.sum(0));
      });
}

void registerNNOps(OpTable &table) {
  registerAttentionOps(table);
  registerLinearCrossEntropy(table);
  registerLinearLogSumExp(table);
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

  // The formulas as Hugging Face writes them: rotate_half and its
  // transpose by slices, a negation and a concat; in the angles' type (a
  // narrower input widened), rounded once to the result's.
  add<RotaryEmbeddingOp>(table, [](RotaryEmbeddingOp op, Operands x,
                                   EvalContext &) {
    const at::Tensor &cos = x[1], &sin = x[2];
    at::Tensor input = x[0].to(cos.scalar_type());
    int64_t half = input.size(-1) / 2;
    auto rotateHalf = [&](const at::Tensor &y, bool transposed) {
      at::Tensor low = y.narrow(-1, 0, half), high = y.narrow(-1, half, half);
      return transposed ? at::cat({high, -low}, -1) : at::cat({-high, low}, -1);
    };
    at::Tensor result =
        op.getTransposed()
            ? input * cos + rotateHalf(input * sin, /*transposed=*/true)
            : input * cos + rotateHalf(input, /*transposed=*/false) * sin;
    return result.to(scalarTypeOf(op.getResult().getType()));
  });

  add<RmsNormOp>(table, [](RmsNormOp op, Operands x, EvalContext &) {
    at::Tensor normalized =
        x[0] * at::rsqrt(x[0].pow(2).mean(-1, /*keepdim=*/true) +
                         op.getEps().convertToDouble());
    // Rounded once to a narrower result type (bf16 rows of an f32 norm).
    return (op.getWeight() ? x[1] * normalized : normalized)
        .to(scalarTypeOf(op.getResult().getType()));
  });

  add<Conv2dOp>(table, [](Conv2dOp op, Operands x, EvalContext &) {
    c10::optional<at::Tensor> bias;
    if (op.getBias())
      bias = x[2];
    return at::conv2d(x[0], x[1], bias, toVector(op.getStride()),
                      toVector(op.getPadding()), toVector(op.getDilation()),
                      static_cast<int64_t>(op.getGroups()));
  });
  // The two products of convolution_backward, one per op: the gradient of
  // the input needs only its shape.
  auto convolutionBackward = [](auto op, const at::Tensor &grad,
                                const at::Tensor &input,
                                const at::Tensor &weight, bool ofInput) {
    auto grads = at::convolution_backward(
        grad, input, weight, /*bias_sizes=*/c10::nullopt,
        toVector(op.getStride()), toVector(op.getPadding()),
        toVector(op.getDilation()), /*transposed=*/false,
        /*output_padding=*/{0, 0}, static_cast<int64_t>(op.getGroups()),
        {ofInput, !ofInput, false});
    return ofInput ? std::get<0>(grads) : std::get<1>(grads);
  };
  add<Conv2dGradInputOp>(
      table, [=](Conv2dGradInputOp op, Operands x, EvalContext &) {
        at::Tensor input = at::zeros(shapeOf(op.getType()), x[0].options());
        return convolutionBackward(op, x[0], input, x[1], /*ofInput=*/true);
      });
  add<Conv2dGradWeightOp>(
      table, [=](Conv2dGradWeightOp op, Operands x, EvalContext &) {
        at::Tensor weight = at::zeros(shapeOf(op.getType()), x[0].options());
        return convolutionBackward(op, x[0], x[1], weight, /*ofInput=*/false);
      });

  add<MaxPool2dOp>(table, [](MaxPool2dOp op, Operands x, EvalContext &) {
    return std::get<0>(maxPool2d(op, x[0], shapeOf(op.getType())));
  });
  add<MaxPool2dGradOp>(
      table, [](MaxPool2dGradOp op, Operands x, EvalContext &) {
        std::vector<int64_t> outShape = shapeOf(op.getGrad().getType());
        at::Tensor indices = std::get<1>(maxPool2d(op, x[1], outShape));
        return at::max_pool2d_with_indices_backward(
            x[0], x[1], toVector(op.getKernelSize()), toVector(op.getStride()),
            toVector(op.getPadding()), toVector(op.getDilation()),
            isCeilMode(op, x[1], outShape), indices);
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
                          op.getEps().convertToDouble())
        .to(scalarTypeOf(op.getResult().getType()));
  });

  // layer_norm_grad as the formulas of its description (not autograd's), so
  // that the gradient checks compare them with autograd.
  table.try_emplace(
      LayerNormGradOp::getOperationName(),
      [](mlir::Operation *operation, Operands x,
         llvm::SmallVectorImpl<at::Tensor> &results, EvalContext &) {
        auto op = llvm::cast<LayerNormGradOp>(operation);
        const at::Tensor &input = x[1];
        // A narrower grad (bf16 rows of an f32 norm) is widened exactly.
        at::Tensor grad = x[0].to(input.scalar_type());
        int64_t rank = input.dim();
        int64_t first = rank - static_cast<int64_t>(op.getNormalizedRank());
        std::vector<int64_t> rowDims, leadingDims;
        for (int64_t d = 0; d < rank; ++d)
          (d < first ? leadingDims : rowDims).push_back(d);
        at::Tensor centered = input - input.mean(rowDims, /*keepdim=*/true);
        at::Tensor rstd = at::rsqrt((centered * centered).mean(rowDims, true) +
                                    op.getEps().convertToDouble());
        at::Tensor xhat = centered * rstd;
        at::Tensor scaled = op.getWeight() ? grad * x[2] : grad;
        results.push_back(
            withAddend(op, x,
                       rstd * (scaled - scaled.mean(rowDims, true) -
                               xhat * (scaled * xhat).mean(rowDims, true))));
        // Summed over the rows; with no leading dims, one row: as it is.
        auto overRows = [&](const at::Tensor &value) {
          return leadingDims.empty() ? value : value.sum(leadingDims);
        };
        results.push_back(overRows(grad * xhat));
        results.push_back(overRows(grad));
      });

  // rms_norm_grad as the formulas of its description, like layer_norm_grad.
  table.try_emplace(
      RmsNormGradOp::getOperationName(),
      [](mlir::Operation *operation, Operands x,
         llvm::SmallVectorImpl<at::Tensor> &results, EvalContext &) {
        auto op = llvm::cast<RmsNormGradOp>(operation);
        const at::Tensor &input = x[1];
        at::Tensor grad = x[0].to(input.scalar_type());
        at::Tensor rstd = at::rsqrt(input.pow(2).mean(-1, /*keepdim=*/true) +
                                    op.getEps().convertToDouble());
        at::Tensor xhat = input * rstd;
        at::Tensor scaled = op.getWeight() ? grad * x[2] : grad;
        results.push_back(withAddend(
            op, x, rstd * (scaled - xhat * (scaled * xhat).mean(-1, true))));
        at::Tensor weightGrad = grad * xhat;
        results.push_back(input.dim() == 1 ? weightGrad
                                           : weightGrad.flatten(0, -2).sum(0));
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
        at::Tensor oneHot =
            at::arange(logits.size(1), x[1].options()).unsqueeze(0) ==
            x[1].unsqueeze(1);
        at::Tensor grad =
            (at::softmax(logits, 1) - oneHot.to(logits.scalar_type())) *
            x[2].unsqueeze(1);
        // The row of a target outside the classes (an ignored one) is
        // zeros, whatever its logits.
        at::Tensor inClasses = (x[1] >= 0).logical_and(x[1] < logits.size(1));
        return at::where(inClasses.unsqueeze(1), grad, at::zeros_like(grad));
      });
}

} // namespace slapo::reference::detail
