//===- Attention.cpp - flash attention, forward and backward --------------===//
//
// FlashAttention-2 (Dao, 2023) on the CPU: the scores of a block of query
// rows against a tile of keys live only in the task's scratch, and the
// softmax is computed online, with a running maximum and sum per row that
// rescale what the earlier tiles added. The forward keeps the rows'
// log-sum-exp, in the compute type (f32 for 16-bit elements); the backward
// computes every probability again from it, so that no [T, S] tensor is
// ever in memory. One task per (batch, head) and block of query rows in the
// forward, per (batch, key head) in the backward (whose key and value
// gradients sum over all query rows). An attention dropout is drawn inside
// the tiles, element by element as dropout() draws it, and drawn again by
// the backward: no mask is stored either.
//
// Grouped-query attention (AttentionGeometry's keyHeads) reads a group's
// key and value head, where it is, for each of the group's query heads; the
// backward computes each query head's key and value gradients as it would
// against its own copy (repeat_kv's) and sums them in query-head order.
//
// Either AttentionLayout, and head windows of wider tensors, only move the
// heads' rows (AttentionGeometry's headStart and rowStride, each operand
// with the heads it stores): the arithmetic and its order are the same, and
// so are the bits. The loops read the rows they reuse from dense copies in
// scratch (packRows, transposeTile), so that Bshd's strided rows cost them no
// more than Bhsd's.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.h"
#include "KernelVariant.h"

#include "slapo/runtime/AttentionGeometry.h"
#include "slapo/runtime/cpu/VectorMath.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <type_traits>
#include <vector>

SLAPO_CPU_VARIANT_ISA_BEGIN
namespace slapo::rt::cpu::SLAPO_CPU_VARIANT {

using namespace detail;

namespace {

/// Query rows per forward task, keys per tile: a tile of keys and values
/// (64 x 64 floats each at head size 64) stays in L1/L2 while a block of
/// rows is scored against it.
constexpr int64_t kQueryBlock = 32;
constexpr int64_t kKeyTile = 64;

/// Rows [first, first + count) of a head's keys or values (`rows`, `size`
/// elements each, `stride` apart) transposed into `transposed`
/// [size][kKeyTile] in the compute type: the loops over a tile's keys then
/// read contiguous memory and vectorize, where a dot product per key would
/// be a sequential sum.
template <typename T, typename C>
void transposeTile(const T *rows, int64_t size, int64_t stride, int64_t first,
                   int64_t count, C *transposed) {
  for (int64_t j = 0; j < count; ++j)
    for (int64_t d = 0; d < size; ++d)
      transposed[d * kKeyTile + j] = load(rows[(first + j) * stride + d]);
}

/// Rows [first, first + count) of `rows` (`size` elements each, `stride`
/// apart) copied into `packed` [count][size] in the compute type, for the
/// loops that read them many times: rows a power-of-two stride apart
/// (Bshd's, H * D elements) fall into a few L1 sets and evict each other,
/// and 16-bit elements would be converted at every read. load() is exact,
/// so the sums are those of the rows read in place.
template <typename T, typename C>
void packRows(const T *rows, int64_t size, int64_t stride, int64_t first,
              int64_t count, C *packed) {
  for (int64_t j = 0; j < count; ++j)
    for (int64_t d = 0; d < size; ++d)
      packed[j * size + d] = load(rows[(first + j) * stride + d]);
}

/// A vector of 32 bytes of C (an AVX2 register: wider ones GCC spills to
/// the stack on AVX2), read and written in place at any element's
/// alignment, so that no local's address is taken and the sums stay in
/// registers.
template <typename C> struct ColumnVector {
  typedef C type
      __attribute__((vector_size(32), aligned(sizeof(C)), may_alias));
  static constexpr int64_t kLanes = 32 / sizeof(C);
};

/// out[first, first + kVectors * kLanes) += sum over k in [0, count) of
/// weight(k) * load(row(k)[c]), each column summed in the order of k, in
/// kVectors vectors held in registers across the sum. Several vectors
/// because each sum waits on its last add (3 to 4 cycles): one vector
/// would use a fraction of the adders.
template <int kVectors, typename C, typename Weight, typename Row>
void addWeightedColumns(C *out, int64_t first, int64_t count, Weight weight,
                        Row row) {
  using Vector = typename ColumnVector<C>::type;
  constexpr int64_t kLanes = ColumnVector<C>::kLanes;
  Vector sums[kVectors];
  for (int v = 0; v < kVectors; ++v)
    sums[v] = *reinterpret_cast<const Vector *>(out + first + v * kLanes);
  for (int64_t k = 0; k < count; ++k) {
    const auto *values = row(k) + first;
    C factor = weight(k);
    for (int v = 0; v < kVectors; ++v) {
      Vector loaded;
      if constexpr (std::is_same_v<std::decay_t<decltype(*values)>, C>) {
        loaded = *reinterpret_cast<const Vector *>(values + v * kLanes);
      } else {
        for (int64_t c = 0; c < kLanes; ++c)
          loaded[c] = load(values[v * kLanes + c]);
      }
      sums[v] += factor * loaded;
    }
  }
  for (int v = 0; v < kVectors; ++v)
    *reinterpret_cast<Vector *>(out + first + v * kLanes) = sums[v];
}

/// out[c] += sum over k in [0, count) of weight(k) * load(row(k)[c]), for
/// the columns c in [0, columns), each column summed in the order of k:
/// the products of the attention, with the columns in registers across the
/// sum (GCC's vector extension: from plain loops GCC vectorizes the wrong
/// loop, or reloads the sums from memory), eight vectors at a time, then
/// one, then the last columns alone.
template <typename C, typename Weight, typename Row>
void addWeightedRows(C *out, int64_t columns, int64_t count, Weight weight,
                     Row row) {
  constexpr int64_t kLanes = ColumnVector<C>::kLanes;
  int64_t first = 0;
  for (; first + 8 * kLanes <= columns; first += 8 * kLanes)
    addWeightedColumns<8>(out, first, count, weight, row);
  for (; first + kLanes <= columns; first += kLanes)
    addWeightedColumns<1>(out, first, count, weight, row);
  for (; first < columns; ++first)
    for (int64_t k = 0; k < count; ++k)
      out[first] += weight(k) * load(row(k)[first]);
}

/// The scores of one query row against keys [first, first + count) (their
/// tile transposed by transposeTile), masked as the module masked them,
/// into `scores`. Each score sums its products in the order of the head's
/// dims, as a dot product per key would.
template <typename T, typename C>
void scoreRow(const AttentionGeometry &g, const C *q, const C *keysT,
              int64_t first, int64_t count, const bool *keepRow,
              const T *biasRow, C scale, C maskedScore, C *scores) {
  std::fill(scores, scores + count, C(0));
  addWeightedRows(
      scores, count, g.headSize, [&](int64_t d) { return q[d]; },
      [&](int64_t d) { return keysT + d * kKeyTile; });
  for (int64_t j = 0; j < count; ++j) {
    C score = scores[j] * scale;
    int64_t s = first + j;
    if (keepRow && !keepRow[s * g.keepStrides[3]])
      score = maskedScore;
    if (biasRow)
      score += load(biasRow[s * g.biasStrides[3]]);
    scores[j] = score;
  }
}

/// The rows of one head of an operand: row r at rows[r * stride].
template <typename T> struct HeadRows {
  T *rows;
  int64_t stride;
};

/// The rows of head (b, h) of `tensor`, of `count` rows of `size` elements
/// per head, addressed with the heads it stores (a head window's are its
/// wider tensor's).
template <typename T>
HeadRows<T> getHeadRows(const AttentionGeometry &g, const Tensor &tensor,
                        int64_t b, int64_t h, int64_t count, int64_t size) {
  int64_t stored = g.getStoredHeads(tensor);
  return {tensor.as<T>() + g.headStart(b, h, count, size, stored),
          g.rowStride(size, stored)};
}

/// The masks' rows for query row t of head (b, h), or null.
struct MaskRows {
  const bool *keep = nullptr;
  const void *bias = nullptr;
};
MaskRows maskRows(const AttentionGeometry &g, const Tensor &keep,
                  const Tensor &bias, size_t biasElementSize, int64_t b,
                  int64_t h, int64_t t) {
  MaskRows rows;
  if (keep.data)
    rows.keep = keep.as<bool>() + g.offset(g.keepStrides, b, h, t);
  if (bias.data)
    rows.bias = static_cast<const char *>(bias.data) +
                g.offset(g.biasStrides, b, h, t) * biasElementSize;
  return rows;
}

} // namespace

void flashAttention(Context &ctx, const Tensor &query, const Tensor &key,
                    const Tensor &value, const Tensor &keep, const Tensor &bias,
                    const Tensor &out, const Tensor &logsumexp, double scale,
                    double maskedScore, AttentionLayout layout,
                    const AttentionDropout &dropout) {
  checkFlashAttention(query, key, value, out, logsumexp, layout);
  AttentionGeometry g(query, key, value, keep, bias, out, layout, dropout);
  int64_t blocks = (g.rows + kQueryBlock - 1) / kQueryBlock,
          tiles = (g.keys + kKeyTile - 1) / kKeyTile;
  dispatch(FloatTypes(), query.dtype, "flashAttention", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    parallelFor(
        ctx, g.batch * g.heads * blocks, 1, [&](int64_t begin, int64_t end) {
          std::vector<C> scores(kKeyTile), sums(kQueryBlock * g.valueSize);
          std::vector<C> maxima(kQueryBlock), totals(kQueryBlock);
          // The block's query rows (packRows). The key head's keys,
          // transposed tile by tile (transposeTile), and values (packRows),
          // packed where the thread's tasks reach a new key head: they are
          // consecutive, so the blocks of a head, and the heads of a
          // grouped-query group, share them.
          std::vector<C> queries(kQueryBlock * g.headSize),
              keysT(tiles * kKeyTile * g.headSize),
              values(g.keys * g.valueSize);
          int64_t packedKeyHead = -1;
          for (int64_t task = begin; task < end; ++task) {
            int64_t head = task / blocks, block = task % blocks;
            int64_t b = head / g.heads, h = head % g.heads;
            int64_t kh = g.keyHead(h), keyHead = b * g.keyHeads + kh;
            int64_t first = block * kQueryBlock;
            int64_t count = std::min(kQueryBlock, g.rows - first);
            auto q = getHeadRows<const T>(g, query, b, h, g.rows, g.headSize);
            packRows(q.rows, g.headSize, q.stride, first, count,
                     queries.data());
            if (keyHead != packedKeyHead) {
              auto k = getHeadRows<const T>(g, key, b, kh, g.keys, g.headSize);
              for (int64_t tile = 0; tile < g.keys; tile += kKeyTile)
                transposeTile(k.rows, g.headSize, k.stride, tile,
                              std::min(kKeyTile, g.keys - tile),
                              keysT.data() + tile * g.headSize);
              auto v =
                  getHeadRows<const T>(g, value, b, kh, g.keys, g.valueSize);
              packRows(v.rows, g.valueSize, v.stride, 0, g.keys, values.data());
              packedKeyHead = keyHead;
            }
            std::fill(maxima.begin(), maxima.end(),
                      -std::numeric_limits<C>::infinity());
            std::fill(totals.begin(), totals.end(), C(0));
            std::fill(sums.begin(), sums.end(), C(0));
            for (int64_t tile = 0; tile < g.keys; tile += kKeyTile) {
              int64_t width = std::min(kKeyTile, g.keys - tile);
              const C *tileKeysT = keysT.data() + tile * g.headSize;
              const C *tileValues = values.data() + tile * g.valueSize;
              for (int64_t i = 0; i < count; ++i) {
                MaskRows masks =
                    maskRows(g, keep, bias, sizeof(T), b, h, first + i);
                scoreRow(g, queries.data() + i * g.headSize, tileKeysT, tile,
                         width, masks.keep, static_cast<const T *>(masks.bias),
                         C(scale), C(maskedScore), scores.data());
                C maximum =
                    maxPropagatingNaN(maxRow(scores.data(), width), maxima[i]);
                // What the earlier tiles added, rescaled to the new maximum.
                // A score of -inf (a key masked by a -inf bias) adds
                // nothing, even where every score so far is -inf and
                // e^(-inf - -inf) would be NaN.
                constexpr C kNone = -std::numeric_limits<C>::infinity();
                C rescale =
                    maxima[i] == kNone ? C(0) : vexp(maxima[i] - maximum);
                C *sum = sums.data() + i * g.valueSize;
                C total = totals[i] * rescale;
                for (int64_t e = 0; e < g.valueSize; ++e)
                  sum[e] *= rescale;
                // The probabilities in place of the scores, in a loop of
                // their own, which vectorizes.
                for (int64_t j = 0; j < width; ++j)
                  scores[j] =
                      scores[j] == kNone ? C(0) : vexp(scores[j] - maximum);
                // The softmax's sum is the undropped one; the values get
                // the dropped probabilities.
                for (int64_t j = 0; j < width; ++j)
                  total += scores[j];
                if (g.drops) {
                  uint64_t dropRow = g.dropoutRow(b, h, first + i);
                  for (int64_t j = 0; j < width; ++j)
                    scores[j] *= g.keepsDropped(dropRow, tile + j)
                                     ? C(g.keptScale)
                                     : C(0);
                }
                addWeightedRows(
                    sum, g.valueSize, width,
                    [&](int64_t j) { return scores[j]; },
                    [&](int64_t j) { return tileValues + j * g.valueSize; });
                maxima[i] = maximum;
                totals[i] = total;
              }
            }
            auto o = getHeadRows<T>(g, out, b, h, g.rows, g.valueSize);
            C *lse = logsumexp.as<C>() + head * g.rows + first;
            for (int64_t i = 0; i < count; ++i) {
              C inverse = C(1) / totals[i];
              for (int64_t e = 0; e < g.valueSize; ++e)
                o.rows[(first + i) * o.stride + e] =
                    store<T>(sums[i * g.valueSize + e] * inverse);
              lse[i] = maxima[i] + std::log(totals[i]);
            }
          }
        });
  });
}

void flashAttentionGrad(Context &ctx, const Tensor &query, const Tensor &key,
                        const Tensor &value, const Tensor &keep,
                        const Tensor &bias, const Tensor &out,
                        const Tensor &logsumexp, const Tensor &grad,
                        const Tensor &gradQuery, const Tensor &gradKey,
                        const Tensor &gradValue, double scale,
                        double maskedScore, AttentionLayout layout,
                        const AttentionDropout &dropout) {
  checkFlashAttentionGrad(query, key, value, out, logsumexp, grad, gradQuery,
                          gradKey, gradValue, layout);
  AttentionGeometry g(query, key, value, keep, bias, out, layout, dropout);
  dispatch(FloatTypes(), query.dtype, "flashAttentionGrad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    // One task per (batch, key head): it alone writes the key head's
    // gradients, the sums of its group's query heads.
    int64_t group = g.heads / g.keyHeads;
    parallelFor(ctx, g.batch * g.keyHeads, 1, [&](int64_t begin, int64_t end) {
      std::vector<C> scores(kKeyTile), rowDots(g.rows);
      // A block of rows' dropped probabilities and score gradients
      // [kQueryBlock][kKeyTile], for the key and value gradients.
      std::vector<C> dropped(kQueryBlock * kKeyTile),
          scoreGrads(kQueryBlock * kKeyTile);
      // The key head's keys and values transposed tile by tile
      // (transposeTile), once for the group's query heads.
      int64_t tiles = (g.keys + kKeyTile - 1) / kKeyTile;
      std::vector<C> keysT(tiles * kKeyTile * g.headSize),
          valuesT(tiles * kKeyTile * g.valueSize);
      // A query head's gradients (dk and dv as against its own copy of the
      // key and value head), and the key head's: the group's query heads'
      // dk and dv, each summed whole, in query-head order.
      std::vector<C> dq(g.rows * g.headSize), dk(g.keys * g.headSize),
          dv(g.keys * g.valueSize);
      std::vector<C> groupDk(g.keys * g.headSize),
          groupDv(g.keys * g.valueSize);
      // The query head's query and out-gradient rows and the key head's
      // key rows (packRows): each is read for every tile or block.
      std::vector<C> queries(g.rows * g.headSize), keys(g.keys * g.headSize),
          grads(g.rows * g.valueSize);
      for (int64_t keyHead = begin; keyHead < end; ++keyHead) {
        int64_t b = keyHead / g.keyHeads, kh = keyHead % g.keyHeads;
        // The dense [count][size] sums of head h into its rows of `to` (of
        // a head window: its heads' only).
        auto write = [&](const std::vector<C> &from, const Tensor &to,
                         int64_t h, int64_t count, int64_t size) {
          auto target = getHeadRows<T>(g, to, b, h, count, size);
          for (int64_t r = 0; r < count; ++r)
            for (int64_t c = 0; c < size; ++c)
              target.rows[r * target.stride + c] = store<T>(from[r * size + c]);
        };
        auto keyRows = getHeadRows<const T>(g, key, b, kh, g.keys, g.headSize);
        packRows(keyRows.rows, g.headSize, keyRows.stride, 0, g.keys,
                 keys.data());
        const C *k = keys.data();
        auto valueRows =
            getHeadRows<const T>(g, value, b, kh, g.keys, g.valueSize);
        for (int64_t tile = 0; tile < g.keys; tile += kKeyTile) {
          int64_t width = std::min(kKeyTile, g.keys - tile);
          transposeTile(k, g.headSize, g.headSize, tile, width,
                        keysT.data() + tile * g.headSize);
          transposeTile(valueRows.rows, g.valueSize, valueRows.stride, tile,
                        width, valuesT.data() + tile * g.valueSize);
        }
        std::fill(groupDk.begin(), groupDk.end(), C(0));
        std::fill(groupDv.begin(), groupDv.end(), C(0));
        for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
          int64_t head = b * g.heads + h;
          auto queryRows =
              getHeadRows<const T>(g, query, b, h, g.rows, g.headSize);
          auto gradRows =
              getHeadRows<const T>(g, grad, b, h, g.rows, g.valueSize);
          packRows(queryRows.rows, g.headSize, queryRows.stride, 0, g.rows,
                   queries.data());
          packRows(gradRows.rows, g.valueSize, gradRows.stride, 0, g.rows,
                   grads.data());
          const C *q = queries.data(), *dO = grads.data();
          auto outRows =
              getHeadRows<const T>(g, out, b, h, g.rows, g.valueSize);
          const C *lse = logsumexp.as<C>() + head * g.rows;
          // rowsum(grad * out): the softmax's sum(grad * p) per row, as
          // FlashAttention-2 computes it without the probabilities.
          for (int64_t t = 0; t < g.rows; ++t) {
            C dot = 0;
            for (int64_t e = 0; e < g.valueSize; ++e)
              dot += dO[t * g.valueSize + e] *
                     load(outRows.rows[t * outRows.stride + e]);
            rowDots[t] = dot;
          }
          std::fill(dq.begin(), dq.end(), C(0));
          std::fill(dk.begin(), dk.end(), C(0));
          std::fill(dv.begin(), dv.end(), C(0));
          for (int64_t tile = 0; tile < g.keys; tile += kKeyTile) {
            int64_t width = std::min(kKeyTile, g.keys - tile);
            const C *tileKeysT = keysT.data() + tile * g.headSize;
            const C *tileValuesT = valuesT.data() + tile * g.valueSize;
            for (int64_t first = 0; first < g.rows; first += kQueryBlock) {
              int64_t count = std::min(kQueryBlock, g.rows - first);
              for (int64_t i = 0; i < count; ++i) {
                int64_t t = first + i;
                MaskRows masks = maskRows(g, keep, bias, sizeof(T), b, h, t);
                const C *dORow = dO + t * g.valueSize;
                scoreRow(g, q + t * g.headSize, tileKeysT, tile, width,
                         masks.keep, static_cast<const T *>(masks.bias),
                         C(scale), C(maskedScore), scores.data());
                C rowLse = lse[t];
                C *p = dropped.data() + i * kKeyTile;
                for (int64_t j = 0; j < width; ++j)
                  p[j] = vexp(scores[j] - rowLse);
                // dp[j] = the grad row . value j, summed over the value's
                // dims in order.
                C *dScores = scoreGrads.data() + i * kKeyTile;
                std::fill(dScores, dScores + width, C(0));
                addWeightedRows(
                    dScores, width, g.valueSize,
                    [&](int64_t e) { return dORow[e]; },
                    [&](int64_t e) { return tileValuesT + e * kKeyTile; });
                uint64_t dropRow = g.drops ? g.dropoutRow(b, h, t) : 0;
                for (int64_t j = 0; j < width; ++j) {
                  int64_t s = tile + j;
                  // The dropout's factor (kept: 1/(1-p), else 0): the
                  // values met the dropped probabilities, and the gradient
                  // of the probabilities is dropped alike
                  // (FlashAttention-2's dropout backward; rowDots is
                  // unchanged, as sum(P * dP) = rowsum(dO * O) still
                  // holds).
                  C factor =
                      g.drops
                          ? (g.keepsDropped(dropRow, s) ? C(g.keptScale) : C(0))
                          : C(1);
                  // A masked score is a constant: no gradient passes it.
                  bool masked = masks.keep && !masks.keep[s * g.keepStrides[3]];
                  dScores[j] = masked
                                   ? C(0)
                                   : p[j] * (dScores[j] * factor - rowDots[t]) *
                                         C(scale);
                  p[j] *= factor;
                }
                addWeightedRows(
                    dq.data() + t * g.headSize, g.headSize, width,
                    [&](int64_t j) { return dScores[j]; },
                    [&](int64_t j) { return k + (tile + j) * g.headSize; });
              }
              // The block's share of the tile's key and value gradients,
              // its rows in order.
              for (int64_t j = 0; j < width; ++j) {
                int64_t s = tile + j;
                addWeightedRows(
                    dv.data() + s * g.valueSize, g.valueSize, count,
                    [&](int64_t i) { return dropped[i * kKeyTile + j]; },
                    [&](int64_t i) { return dO + (first + i) * g.valueSize; });
                addWeightedRows(
                    dk.data() + s * g.headSize, g.headSize, count,
                    [&](int64_t i) { return scoreGrads[i * kKeyTile + j]; },
                    [&](int64_t i) { return q + (first + i) * g.headSize; });
              }
            }
          }
          write(dq, gradQuery, h, g.rows, g.headSize);
          // 0 + x is x: sums that start at +0 are never -0 (an exact zero
          // rounds to +0), so that a group of one head writes the bits of
          // its own gradients.
          std::transform(groupDk.begin(), groupDk.end(), dk.begin(),
                         groupDk.begin(), std::plus<C>());
          std::transform(groupDv.begin(), groupDv.end(), dv.begin(),
                         groupDv.begin(), std::plus<C>());
        }
        write(groupDk, gradKey, kh, g.keys, g.headSize);
        write(groupDv, gradValue, kh, g.keys, g.valueSize);
      }
    });
  });
}

} // namespace slapo::rt::cpu::SLAPO_CPU_VARIANT
SLAPO_CPU_VARIANT_ISA_END
