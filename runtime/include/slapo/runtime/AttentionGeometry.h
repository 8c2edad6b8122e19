//===- AttentionGeometry.h - an attention's sizes and masks -----*- C++ -*-===//
//
// Shared by the CPU and CUDA backends' flash attention (KernelSet.inc's
// flashAttention and flashAttentionGrad), so that both read the same mask
// element for every score: the keep mask and the additive bias broadcast
// to [B, H, T, S] as PyTorch broadcasts them; and the same element of every
// operand, a head window's included.
//
// Head windows: GPT-2's attention projects c_attn(h) into one [B, T, 3C]
// tensor and splits it into query, key and value. Token-major
// (AttentionLayout::Bshd), that tensor viewed as [B, T, 3H, D] holds the
// query in heads [0, H), the key in [H, 2H) and the value in [2H, 3H), so
// that the kernels read them where they are, with no slice that copies: a
// query, key or value (or, in flashAttentionGrad, a gradient of theirs)
// under Bshd may be H consecutive heads of a wider tensor [B, T, Hs, D], Hs
// >= H. Such a Tensor's `shape` is the wider tensor's [B, T, Hs, D] (its
// rows of one head are Hs * D elements apart) and its `data` points at the
// window's first head, element [0, 0, first, 0] (KernelTypes.h's headWindow).
// H, the attention's heads, is then out's (out, out's gradient and the
// log-sum-exp are never windows), and every operand is addressed with the heads
// it stores (headStart and rowStride's storedHeads), so that nothing outside
// the windows is read or written.
//
// Grouped-query attention (LLaMA's, Mistral's, Qwen2's GQA): key and value
// (and their gradients) may have fewer heads than the query, Hk dividing H,
// each shared by H / Hk consecutive query heads (keyHead): Hugging Face's
// repeat_kv, read where it is instead of copied H / Hk times. The key and
// value gradients then sum their group's query heads. A grouped key or value
// is never a head window (a window stores more heads than H, a group fewer).
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_ATTENTIONGEOMETRY_H
#define SLAPO_RUNTIME_ATTENTIONGEOMETRY_H

#include "slapo/runtime/DropoutCounter.h"
#include "slapo/runtime/Error.h"
#include "slapo/runtime/HostDevice.h"
#include "slapo/runtime/KernelTypes.h"
#include "slapo/runtime/Random.h"
#include "slapo/runtime/Tensor.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace slapo::rt {

/// The sizes of an attention of query [B, H, T, D] and key [B, H, S, D]
/// against value [B, H, S, E] in `layout`, where their rows are, and where
/// its masks are: element (b, h, t, s) of a mask broadcast to [B, H, T, S]
/// is at b * strides[0] + h * strides[1] + t * strides[2] + s * strides[3]
/// (0 along the dims it broadcasts over). With a dropout, probability (b, h,
/// t, s) is kept iff keepsDropped(dropoutRow(b, h, t), s) and then scaled
/// by keptScale. H is out's heads: query, key and value may be head windows
/// of more, key and value a group of fewer, keyHeads (see above;
/// checkAttentionHeads checks that they can be).
struct AttentionGeometry {
  int64_t batch, heads, rows, keys, headSize, valueSize;
  /// The heads of key and value: `heads`, or fewer for grouped-query
  /// attention.
  int64_t keyHeads;
  AttentionLayout layout;
  int64_t keepStrides[4] = {}, biasStrides[4] = {};
  bool drops = false;
  double keptScale = 1;

  AttentionGeometry(const Tensor &query, const Tensor &key, const Tensor &value,
                    const Tensor &keep, const Tensor &bias, const Tensor &out,
                    AttentionLayout layout,
                    const AttentionDropout &dropout = {})
      : batch(query.shape[0]), heads(out.shape[headDim(layout)]),
        rows(query.shape[3 - headDim(layout)]),
        keys(key.shape[3 - headDim(layout)]), headSize(query.shape[3]),
        valueSize(value.shape[3]),
        keyHeads(std::min(heads, key.shape[headDim(layout)])), layout(layout) {
    setStrides(keep, keepStrides);
    setStrides(bias, biasStrides);
    setDropout(dropout);
  }

  /// The dim of the heads in a tensor stored in `layout` (the rows' is the
  /// other of 1 and 2).
  static constexpr int headDim(AttentionLayout layout) {
    return layout == AttentionLayout::Bhsd ? 1 : 2;
  }

  /// The shape of an operand [batch, heads, length, width] stored in
  /// `layout`.
  static Shape getStoredShape(AttentionLayout layout, int64_t batch,
                              int64_t heads, int64_t length, int64_t width) {
    return layout == AttentionLayout::Bhsd ? Shape{batch, heads, length, width}
                                           : Shape{batch, length, heads, width};
  }

  /// The heads `operand` stores, its head dim's size: `heads`, or more for
  /// a head window, which is addressed with them, or keyHeads for a grouped
  /// key or value.
  int64_t getStoredHeads(const Tensor &operand) const {
    return operand.shape[headDim(layout)];
  }

  /// Where row 0 of head (b, h) starts in a tensor of `count` rows of
  /// `size` elements per head (query, out and their gradients: `rows`;
  /// key, value and theirs: `keys`; size the head's or the value's) that
  /// stores `storedHeads` heads (getStoredHeads), relative to its `data`: a
  /// head window's first head, so that h counts from it.
  SLAPO_HOST_DEVICE int64_t headStart(int64_t b, int64_t h, int64_t count,
                                      int64_t size, int64_t storedHeads) const {
    return layout == AttentionLayout::Bhsd
               ? (b * storedHeads + h) * count * size
               : (b * count * storedHeads + h) * size;
  }

  /// The distance between consecutive rows of one head in such a tensor.
  SLAPO_HOST_DEVICE int64_t rowStride(int64_t size, int64_t storedHeads) const {
    return layout == AttentionLayout::Bhsd ? size : storedHeads * size;
  }

  /// The key and value head that query head h reads: h itself, or its
  /// group's under grouped-query attention.
  SLAPO_HOST_DEVICE int64_t keyHead(int64_t h) const {
    return h / (heads / keyHeads);
  }

  /// Where row t of head (b, h) of a mask of `strides` starts.
  SLAPO_HOST_DEVICE int64_t offset(const int64_t (&strides)[4], int64_t b,
                                   int64_t h, int64_t t) const {
    return b * strides[0] + h * strides[1] + t * strides[2];
  }

  /// The dropout counter of probability (b, h, t, 0): its index in the
  /// whole [B, H, T, S] tensor one device computes for the global batch, as
  /// dropout() counts. Keys follow it: s is the innermost dim of every split.
  SLAPO_HOST_DEVICE uint64_t dropoutRow(int64_t b, int64_t h, int64_t t) const {
    return maskCounter(((b * heads + h) * rows + t) * keys);
  }

  /// Whether the dropout keeps key s of the row whose counter is `row`.
  SLAPO_HOST_DEVICE bool keepsDropped(uint64_t row, int64_t s) const {
    return keepsElement(maskKey, row + uint64_t(s), maskThreshold);
  }

private:
  uint64_t maskKey = 0, maskThreshold = 0;
  DropoutCounter maskCounter;

  void setDropout(const AttentionDropout &dropout) {
    if (!(dropout.p > 0))
      return;
    drops = true;
    keptScale = 1.0 / (1.0 - dropout.p);
    const DropoutKey &key = dropout.key;
    maskKey = dropoutKey(key.seed, key.step, key.stream, key.rankStream);
    maskThreshold = dropoutThreshold(dropout.p);
    maskCounter =
        DropoutCounter(Shape{batch, heads, rows, keys}, dropout.placement);
  }

  void setStrides(const Tensor &mask, int64_t (&strides)[4]) const {
    if (!mask.data)
      return;
    const int64_t full[4] = {batch, heads, rows, keys};
    int64_t stride = 1;
    for (int d = 3; d >= 0; --d) {
      int maskDim = d - (4 - mask.shape.rank);
      bool present =
          maskDim >= 0 && mask.shape[maskDim] == full[d] && full[d] != 1;
      strides[d] = present ? stride : 0;
      if (maskDim >= 0)
        stride *= mask.shape[maskDim];
    }
  }
};

/// Throws unless `logsumexp` has the dtype `kernel` keeps the log-sum-exp
/// of a `query` of its dtype in: the compute type, f64 for f64 and f32 for
/// the rest (what slapo.flash_attention's verifier checks of the IR).
inline void checkLogSumExpType(const char *kernel, const Tensor &query,
                               const Tensor &logsumexp) {
  DType expected = query.dtype == DType::F64 ? DType::F64 : DType::F32;
  if (logsumexp.dtype != expected)
    throw Error(std::string("'") + kernel + "' keeps the log-sum-exp of " +
                getName(query.dtype) + " attention in " + getName(expected) +
                ", not " + getName(logsumexp.dtype));
}

/// An operand of flashAttention or flashAttentionGrad and its name, for
/// checkAttentionHeads's errors.
struct NamedOperand {
  const char *name;
  const Tensor &tensor;
};

/// Throws unless `kernel`'s operands in `layout` can be addressed with the
/// heads of `out` (its head dim's size, the attention's): each of `queries`
/// (query and its gradient) and `keySide` (key, value and their gradients)
/// stores out's heads or, under AttentionLayout::Bshd, more (a head
/// window); or, grouped-query attention, every one of `keySide` stores the
/// same fewer heads, a divisor of out's; each of `whole` (out's gradient)
/// stores exactly out's.
inline void
checkAttentionHeads(const char *kernel, AttentionLayout layout,
                    const Tensor &out,
                    std::initializer_list<NamedOperand> queries,
                    std::initializer_list<NamedOperand> keySide,
                    std::initializer_list<NamedOperand> whole = {}) {
  int dim = AttentionGeometry::headDim(layout);
  int64_t heads = out.shape[dim];
  auto fail = [&](const NamedOperand &operand, const char *rule) {
    throw Error(std::string("'") + kernel + "': " + operand.name + " " +
                operand.tensor.shape.str() + " has a head dim of " +
                std::to_string(operand.tensor.shape[dim]) + " and out " +
                out.shape.str() + " of " + std::to_string(heads) + ": " + rule);
  };
  auto checkWindow = [&](const NamedOperand &operand) {
    int64_t stored = operand.tensor.shape[dim];
    if (stored == heads || (layout == AttentionLayout::Bshd && stored > heads))
      return;
    fail(operand, layout == AttentionLayout::Bhsd
                      ? "under AttentionLayout::Bhsd every operand but a "
                        "grouped key and value has out's heads"
                      : "a head window holds at least out's heads");
  };
  for (const NamedOperand &operand : queries)
    checkWindow(operand);
  int64_t keyHeads = keySide.begin()->tensor.shape[dim];
  bool grouped = keyHeads < heads;
  for (const NamedOperand &operand : keySide) {
    if (!grouped) {
      checkWindow(operand);
      continue;
    }
    if (operand.tensor.shape[dim] != keyHeads || keyHeads < 1 ||
        heads % keyHeads)
      fail(operand, "grouped-query attention's key, value and their "
                    "gradients have one number of heads, a divisor of out's");
  }
  for (const NamedOperand &operand : whole)
    if (operand.tensor.shape[dim] != heads)
      fail(operand, "out's gradient has out's heads");
}

/// What every backend's flashAttention checks of its operands before it
/// runs: the log-sum-exp's type and the heads.
inline void checkFlashAttention(const Tensor &query, const Tensor &key,
                                const Tensor &value, const Tensor &out,
                                const Tensor &logsumexp,
                                AttentionLayout layout) {
  checkLogSumExpType("flashAttention", query, logsumexp);
  checkAttentionHeads("flashAttention", layout, out, {{"query", query}},
                      {{"key", key}, {"value", value}});
}

/// flashAttentionGrad's checkFlashAttention.
inline void checkFlashAttentionGrad(const Tensor &query, const Tensor &key,
                                    const Tensor &value, const Tensor &out,
                                    const Tensor &logsumexp, const Tensor &grad,
                                    const Tensor &gradQuery,
                                    const Tensor &gradKey,
                                    const Tensor &gradValue,
                                    AttentionLayout layout) {
  checkLogSumExpType("flashAttentionGrad", query, logsumexp);
  checkAttentionHeads("flashAttentionGrad", layout, out,
                      {{"query", query}, {"gradQuery", gradQuery}},
                      {{"key", key},
                       {"value", value},
                       {"gradKey", gradKey},
                       {"gradValue", gradValue}},
                      {{"grad", grad}});
}

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_ATTENTIONGEOMETRY_H
