//===- Attention.cu - flash attention, forward and backward ---------------===//
//
// FlashAttention-2 (Dao, 2023) on the GPU, without tensor cores: a block of
// query rows meets the keys and values one tile at a time in shared memory,
// and the softmax is computed online, with a running maximum and sum per
// row that rescale what the earlier tiles added, so that no [T, S] tensor
// is ever in global memory. The forward keeps each row's log-sum-exp; the
// backward computes every probability again from it. Scores, sums,
// probabilities and the log-sum-exp are in the compute type (f32 for 16-bit
// elements), summed in the CPU kernel's order where one thread owns a sum
// (runtime/cpu/Attention.cpp).
//
// The backward runs two passes instead of one with atomic adds: a key-major
// pass, one block per (batch * key head, key tile), sums the key and value
// gradients over every query row; a query-major pass, one block per (batch
// * head, query tile), sums the query gradient over every key. Each
// gradient element is then summed by one thread in a fixed order: the
// result does not depend on scheduling (the same bits on every run, as the
// rest of the runtime), 16-bit gradients need no f32 scratch, and the cost
// is computing the scores twice.
//
// Grouped-query attention (AttentionGeometry.h): a query head reads the
// keys and values of its keyHead, and a block of the key-major pass sums
// the gradients of its key head over the query heads of its group, one
// head after the other in the same threads (each head's sums added to the
// group's, as the CPU adds them), so that the key and value gradients need
// no atomics either and keep a fixed order; without grouping, the group is
// the one query head and its sums are the key head's.
//
// An attention dropout is drawn inside the tiles, element by element as the
// dropout kernel draws it, by the forward and again by both backward passes.
//
// Either AttentionLayout, and head windows of wider tensors, only move the
// heads' rows in global memory (loadTile and the writes, through
// getRowOffset, each operand with the heads it stores): the shared tiles,
// the sums and their order are the same.
//
// 16-bit attentions without dropout run as cuDNN's fused attention instead
// (CudnnAttention.cpp), which uses the tensor cores; these kernels run what
// cuDNN does not: f32, dropout, and what cuDNN refuses.
//
//===----------------------------------------------------------------------===//
#include "CudnnAttention.h"
#include "KernelSupport.cuh"

#include "slapo/runtime/AttentionGeometry.h"
#include "slapo/runtime/cuda/Kernels.h"

namespace slapo::rt::cuda {

using namespace detail;

namespace {

/// Query rows per block (forward, query gradient) or per step of the
/// key-major pass, and keys per tile: one key per lane of a warp, so that a
/// warp reduces a row's scores of a tile with shuffles.
constexpr int kRows = 16;
constexpr int kKeys = 32;
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

/// An operand in global memory and the heads it stores, which address it:
/// a head window's are its wider tensor's (AttentionGeometry.h).
template <typename T> struct HeadTensor {
  T *data;
  int64_t storedHeads;
};

/// What every attention kernel reads: the operands, their sizes and masks.
template <typename T> struct AttentionOperands {
  AttentionGeometry geometry;
  HeadTensor<const T> query, key, value;
  const bool *keep; // null: no keep mask
  const T *bias;    // null: no additive bias
  double scale, maskedScore;
};

/// min(count, limit) for a count of rows or keys left.
inline __host__ __device__ int clampCount(int64_t count, int limit) {
  return count < limit ? static_cast<int>(count) : limit;
}

/// Shared-memory row strides of the key and value tiles: odd, so that the
/// lanes of a warp reading one column of 32 rows hit 32 different banks.
inline __host__ __device__ int getTileStride(int64_t width) {
  return static_cast<int>(width | 1);
}

/// Carves a kernel's shared-memory buffers one after the other; with a null
/// base it only counts, so that the host sizes the launch with the code
/// the kernel carves with.
template <typename C> struct SharedCarver {
  C *base;
  int64_t used = 0;

  __host__ __device__ C *take(int64_t count) {
    int64_t at = used;
    used += count;
    return base ? base + at : nullptr;
  }
};

/// The key and value tiles of a head.
template <typename C> struct KeyTiles {
  C *key, *value;
  int keyStride, valueStride;

  __host__ __device__ KeyTiles(const AttentionGeometry &g,
                               SharedCarver<C> &carver)
      : keyStride(getTileStride(g.headSize)),
        valueStride(getTileStride(g.valueSize)) {
    key = carver.take(int64_t(kKeys) * keyStride);
    value = carver.take(int64_t(kKeys) * valueStride);
  }
};

/// Where a block works: head h of batch b of batch * `heads` (the query's
/// heads, or in the key-major pass the key's), and `count` rows or keys
/// from `first`, blocks taking `step` each of a head's `length` (`perHead`
/// blocks).
struct BlockPlace {
  int64_t b, h, first;
  int count;

  __device__ BlockPlace(int64_t heads, int64_t perHead, int step,
                        int64_t length)
      : b(blockIdx.x / perHead / heads), h(blockIdx.x / perHead % heads),
        first(blockIdx.x % perHead * step),
        count(clampCount(length - first, step)) {}
};

/// Where the log-sum-exp of row 0 of query head (b, h) is: [B, H, T] in
/// every layout.
__device__ int64_t getLogSumExpStart(const AttentionGeometry &g, int64_t b,
                                     int64_t h) {
  return (b * g.heads + h) * g.rows;
}

/// Where element i of head (b, h)'s rows from `first` is, counting them
/// dense (`size` elements each, as shared memory holds them), in a tensor
/// of `length` rows of `size` elements per head in g's layout that stores
/// `storedHeads` heads.
__device__ int64_t getRowOffset(const AttentionGeometry &g, int64_t b,
                                int64_t h, int64_t storedHeads, int64_t length,
                                int64_t size, int64_t first, int64_t i) {
  return g.headStart(b, h, length, size, storedHeads) +
         (first + i / size) * g.rowStride(size, storedHeads) + i % size;
}

/// Rows [first, first + count) of head (b, h) of `from` (`length` rows of
/// `width` elements per head) into shared rows of `stride`, zeros in the
/// rows from count to `tileRows`.
template <typename T, typename C>
__device__ void loadTile(const AttentionGeometry &g, int64_t b, int64_t h,
                         HeadTensor<const T> from, int64_t length,
                         int64_t first, int count, int64_t width, int tileRows,
                         int stride, C *to) {
  const T *rows = from.data + getRowOffset(g, b, h, from.storedHeads, length,
                                           width, first, 0);
  int64_t rowStride = g.rowStride(width, from.storedHeads);
  for (int64_t i = threadIdx.x; i < tileRows * width; i += blockDim.x) {
    int64_t r = i / width, c = i % width;
    to[r * stride + c] = r < count ? load(rows[r * rowStride + c]) : C(0);
  }
}

/// The inverse of loadTile: rows [first, first + count) of head (b, h) of
/// `to` (`length` rows of `width` elements per head) from the dense rows
/// `from`, element i by the thread that sums it in the kernels' loops over
/// [0, count * width).
template <typename T, typename C>
__device__ void storeTile(const AttentionGeometry &g, int64_t b, int64_t h,
                          const C *from, int64_t length, int64_t first,
                          int count, int64_t width, HeadTensor<T> to) {
  for (int64_t i = threadIdx.x; i < count * width; i += blockDim.x)
    to.data[getRowOffset(g, b, h, to.storedHeads, length, width, first, i)] =
        store<T>(from[i]);
}

/// Keys and values [first, first + width) of key head (b, keyHead) into
/// `tiles`.
template <typename T, typename C>
__device__ void loadKeyTiles(const AttentionOperands<T> &a, int64_t b,
                             int64_t keyHead, int64_t first, int width,
                             KeyTiles<C> &tiles) {
  const AttentionGeometry &g = a.geometry;
  loadTile(g, b, keyHead, a.key, g.keys, first, width, g.headSize, kKeys,
           tiles.keyStride, tiles.key);
  loadTile(g, b, keyHead, a.value, g.keys, first, width, g.valueSize, kKeys,
           tiles.valueStride, tiles.value);
}

/// The kernel's shared-memory buffers, as `Shared` carves them.
template <template <typename> class Shared, typename C>
__device__ Shared<C> carveShared(const AttentionGeometry &g) {
  extern __shared__ __align__(16) unsigned char sharedBytes[];
  SharedCarver<C> carver{reinterpret_cast<C *>(sharedBytes)};
  return Shared<C>(g, carver);
}

/// The score of row `r` of the shared query block (row t of head (b, h))
/// against key `j` of the tile (key s): q . k * scale, maskedScore where
/// the keep mask is false (then `kept` is false), plus the bias.
template <typename T, typename C>
__device__ C getScore(const AttentionOperands<T> &a, int64_t b, int64_t h,
                      int64_t t, int64_t s, const C *q, const KeyTiles<C> &k,
                      int j, bool &kept) {
  const AttentionGeometry &g = a.geometry;
  const C *kRow = k.key + j * k.keyStride;
  C dot = 0;
  for (int64_t d = 0; d < g.headSize; ++d)
    dot += q[d] * kRow[d];
  C score = dot * C(a.scale);
  kept = !a.keep || a.keep[g.offset(g.keepStrides, b, h, t) +
                           s * g.keepStrides[3]];
  if (!kept)
    score = C(a.maskedScore);
  if (a.bias)
    score += load(
        a.bias[g.offset(g.biasStrides, b, h, t) + s * g.biasStrides[3]]);
  return score;
}

struct Max {
  template <typename C> __device__ C operator()(C a, C b) const {
    return a > b ? a : b;
  }
};
struct Add {
  template <typename C> __device__ C operator()(C a, C b) const {
    return a + b;
  }
};

//===----------------------------------------------------------------------===//
// Forward.
//===----------------------------------------------------------------------===//

template <typename C> struct ForwardShared {
  KeyTiles<C> tiles;
  /// The block's query rows, their scores (then probabilities) against
  /// the tile, the running sums of probability-weighted values, and each
  /// row's running maximum, running total and the factor that rescaled it.
  C *query, *scores, *sums, *maxima, *totals, *rescales;

  __host__ __device__ ForwardShared(const AttentionGeometry &g,
                                    SharedCarver<C> &carver)
      : tiles(g, carver) {
    query = carver.take(int64_t(kRows) * g.headSize);
    scores = carver.take(kRows * kKeys);
    sums = carver.take(int64_t(kRows) * g.valueSize);
    maxima = carver.take(kRows);
    totals = carver.take(kRows);
    rescales = carver.take(kRows);
  }
};

/// One block per (batch * head, block of kRows query rows).
template <typename T>
__global__ void flashAttentionKernel(AttentionOperands<T> a, int64_t blocks,
                                     T *out, Compute<T> *logsumexp) {
  using C = Compute<T>;
  const AttentionGeometry &g = a.geometry;
  ForwardShared<C> sh = carveShared<ForwardShared, C>(g);
  BlockPlace place(g.heads, blocks, kRows, g.rows);
  int64_t b = place.b, h = place.h, first = place.first;
  int rows = place.count;
  int64_t D = g.headSize, E = g.valueSize;
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  loadTile(g, b, h, a.query, g.rows, first, rows, D, kRows, int(D), sh.query);
  for (int64_t i = threadIdx.x; i < kRows * E; i += blockDim.x)
    sh.sums[i] = 0;
  if (threadIdx.x < kRows) {
    sh.maxima[threadIdx.x] = -std::numeric_limits<C>::infinity();
    sh.totals[threadIdx.x] = 0;
  }
  for (int64_t tile = 0; tile < g.keys; tile += kKeys) {
    int width = clampCount(g.keys - tile, kKeys);
    __syncthreads(); // the previous tile's readers are done
    loadKeyTiles(a, b, g.keyHead(h), tile, width, sh.tiles);
    __syncthreads();
    for (int i = threadIdx.x; i < kRows * kKeys; i += blockDim.x) {
      int r = i / kKeys, j = i % kKeys;
      bool kept;
      sh.scores[i] = r < rows && j < width
                         ? getScore(a, b, h, first + r, tile + j,
                                    sh.query + r * D, sh.tiles, j, kept)
                         : -std::numeric_limits<C>::infinity();
    }
    __syncthreads();
    // One warp per row, one lane per key: the tile's maximum, the
    // probabilities relative to the new running maximum, and what the
    // earlier tiles added rescaled to it. A score of -inf (a key past the
    // tile's end, or masked by a -inf bias) adds nothing, even where every
    // score so far is -inf and e^(-inf - -inf) would be NaN (as on the
    // CPU).
    constexpr C kNone = -std::numeric_limits<C>::infinity();
    for (int r = warp; r < rows; r += kWarps) {
      C score = sh.scores[r * kKeys + lane];
      C maximum = Max()(sh.maxima[r], warpReduce(score, Max()));
      C p = score == kNone ? C(0) : C(exp(score - maximum));
      C total = warpReduce(p, Add());
      // The softmax's sum is the undropped one; the values get the dropped
      // probabilities.
      if (g.drops)
        p *= g.keepsDropped(g.dropoutRow(b, h, first + r), tile + lane)
                 ? C(g.keptScale)
                 : C(0);
      sh.scores[r * kKeys + lane] = p;
      __syncwarp();
      if (lane == 0) {
        C rescale =
            sh.maxima[r] == kNone ? C(0) : C(exp(sh.maxima[r] - maximum));
        sh.rescales[r] = rescale;
        sh.totals[r] = sh.totals[r] * rescale + total;
        sh.maxima[r] = maximum;
      }
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < rows * E; i += blockDim.x) {
      int64_t r = i / E, e = i % E;
      C sum = sh.sums[i] * sh.rescales[r];
      const C *p = sh.scores + r * kKeys;
      for (int j = 0; j < width; ++j)
        sum += p[j] * sh.tiles.value[j * sh.tiles.valueStride + e];
      sh.sums[i] = sum;
    }
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < rows * E; i += blockDim.x)
    out[getRowOffset(g, b, h, g.heads, g.rows, E, first, i)] =
        store<T>(sh.sums[i] * (C(1) / sh.totals[i / E]));
  if (threadIdx.x < rows)
    logsumexp[getLogSumExpStart(g, b, h) + first + threadIdx.x] =
        sh.maxima[threadIdx.x] + log(sh.totals[threadIdx.x]);
}

//===----------------------------------------------------------------------===//
// Backward.
//===----------------------------------------------------------------------===//

/// What the backward keeps of kRows query rows: the rows of query and of
/// out's gradient, each row's log-sum-exp and rowsum(grad * out), and the
/// probabilities and score gradients of the rows against a key tile.
template <typename C> struct QueryBlock {
  C *query, *grad, *logsumexp, *rowDots, *probabilities, *scoreGrads;

  __host__ __device__ QueryBlock(const AttentionGeometry &g,
                                 SharedCarver<C> &carver,
                                 bool withProbabilities) {
    query = carver.take(int64_t(kRows) * g.headSize);
    grad = carver.take(int64_t(kRows) * g.valueSize);
    logsumexp = carver.take(kRows);
    rowDots = carver.take(kRows);
    probabilities = withProbabilities ? carver.take(kRows * kKeys) : nullptr;
    scoreGrads = carver.take(kRows * kKeys);
  }
};

/// The backward's own operands: never head windows, they store `heads`.
template <typename T> struct GradOperands {
  const T *out;
  const Compute<T> *logsumexp;
  const T *grad;
};

/// Loads rows [first, first + rows) of query head (b, h) into `block`,
/// with their log-sum-exp and rowsum(grad * out): the softmax's sum(grad *
/// p) per row, as FlashAttention-2 computes it without the probabilities.
template <typename T, typename C>
__device__ void loadQueryBlock(const AttentionOperands<T> &a,
                               const GradOperands<T> &go, int64_t b, int64_t h,
                               int64_t first, int rows, QueryBlock<C> &block) {
  const AttentionGeometry &g = a.geometry;
  int64_t D = g.headSize, E = g.valueSize;
  loadTile(g, b, h, a.query, g.rows, first, rows, D, kRows, int(D),
           block.query);
  loadTile(g, b, h, HeadTensor<const T>{go.grad, g.heads}, g.rows, first, rows,
           E, kRows, int(E), block.grad);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int r = warp; r < kRows; r += kWarps) {
    int64_t row = getRowOffset(g, b, h, g.heads, g.rows, E, first + r, 0);
    C dot = 0;
    for (int64_t e = lane; r < rows && e < E; e += 32)
      dot += load(go.grad[row + e]) * load(go.out[row + e]);
    dot = warpReduce(dot, Add());
    if (lane == 0) {
      block.rowDots[r] = dot;
      block.logsumexp[r] =
          r < rows ? go.logsumexp[getLogSumExpStart(g, b, h) + first + r]
                   : C(0);
    }
  }
}

/// The probabilities and score gradients of the block's rows [0, rows)
/// against the tile's keys [0, width) (zeros elsewhere): p = e^(score -
/// logsumexp), dScore = p * (grad . value - rowDot) * scale, and no
/// gradient through a masked score, which is a constant.
template <typename T, typename C>
__device__ void scoreTileGrads(const AttentionOperands<T> &a, int64_t b,
                               int64_t h, int64_t first, int rows,
                               int64_t tile, int width,
                               const KeyTiles<C> &tiles,
                               QueryBlock<C> &block) {
  const AttentionGeometry &g = a.geometry;
  for (int i = threadIdx.x; i < kRows * kKeys; i += blockDim.x) {
    int r = i / kKeys, j = i % kKeys;
    C p = 0, dScore = 0;
    if (r < rows && j < width) {
      bool kept;
      C score = getScore(a, b, h, first + r, tile + j,
                         block.query + r * g.headSize, tiles, j, kept);
      p = exp(score - block.logsumexp[r]);
      const C *dO = block.grad + r * g.valueSize;
      const C *v = tiles.value + j * tiles.valueStride;
      C dp = 0;
      for (int64_t e = 0; e < g.valueSize; ++e)
        dp += dO[e] * v[e];
      // The dropout's factor (kept: 1/(1-p), else 0), as on the CPU: the
      // values met the dropped probabilities, and the probabilities'
      // gradient is dropped alike.
      C factor = C(1);
      if (g.drops)
        factor = g.keepsDropped(g.dropoutRow(b, h, first + r), tile + j)
                     ? C(g.keptScale)
                     : C(0);
      if (kept)
        dScore = p * (dp * factor - block.rowDots[r]) * C(a.scale);
      p *= factor;
    }
    if (block.probabilities)
      block.probabilities[i] = p;
    block.scoreGrads[i] = dScore;
  }
}

template <typename C> struct KeyGradShared {
  KeyTiles<C> tiles;
  QueryBlock<C> block;
  /// The tile's key and value gradients of one query head, summed over its
  /// rows.
  C *keyGrads, *valueGrads;
  /// Under grouped-query attention, the group's: the sums of its query
  /// heads' in query-head order, as the CPU adds them. Null without
  /// grouping, where the one query head's are the key head's.
  C *groupKeyGrads = nullptr, *groupValueGrads = nullptr;

  __host__ __device__ KeyGradShared(const AttentionGeometry &g,
                                    SharedCarver<C> &carver)
      : tiles(g, carver), block(g, carver, /*withProbabilities=*/true) {
    keyGrads = carver.take(int64_t(kKeys) * g.headSize);
    valueGrads = carver.take(int64_t(kKeys) * g.valueSize);
    if (g.keyHeads < g.heads) {
      groupKeyGrads = carver.take(int64_t(kKeys) * g.headSize);
      groupValueGrads = carver.take(int64_t(kKeys) * g.valueSize);
    }
  }
};

/// Adds a query head's `count` gradients `head` to its group's `group`
/// and zeroes them for the next head, element i in the thread that summed
/// it in the key-major pass's loops over [0, count).
template <typename C>
__device__ void addToGroup(C *head, C *group, int64_t count) {
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    group[i] += head[i];
    head[i] = 0;
  }
}

/// The key-major pass: one block per (batch * key head, tile of kKeys
/// keys), over every query row of each query head that reads the key head,
/// kRows at a time; each thread owns gradient elements and adds the rows to
/// them in order, and the heads' sums in order, as the CPU does.
template <typename T>
__global__ void flashAttentionKeyGradKernel(AttentionOperands<T> a,
                                            GradOperands<T> go, int64_t tiles,
                                            HeadTensor<T> gradKey,
                                            HeadTensor<T> gradValue) {
  using C = Compute<T>;
  const AttentionGeometry &g = a.geometry;
  KeyGradShared<C> sh = carveShared<KeyGradShared, C>(g);
  BlockPlace place(g.keyHeads, tiles, kKeys, g.keys);
  int64_t b = place.b, keyHead = place.h, tile = place.first;
  int width = place.count;
  int64_t D = g.headSize, E = g.valueSize;
  // The query heads whose keyHead is this block's: `group` consecutive ones.
  int64_t group = g.heads / g.keyHeads;
  bool grouped = sh.groupKeyGrads != nullptr;

  loadKeyTiles(a, b, keyHead, tile, width, sh.tiles);
  for (int64_t i = threadIdx.x; i < kKeys * D; i += blockDim.x) {
    sh.keyGrads[i] = 0;
    if (grouped)
      sh.groupKeyGrads[i] = 0;
  }
  for (int64_t i = threadIdx.x; i < kKeys * E; i += blockDim.x) {
    sh.valueGrads[i] = 0;
    if (grouped)
      sh.groupValueGrads[i] = 0;
  }
  for (int64_t h = keyHead * group; h < (keyHead + 1) * group; ++h) {
    for (int64_t first = 0; first < g.rows; first += kRows) {
      int rows = clampCount(g.rows - first, kRows);
      __syncthreads(); // the previous rows' readers are done
      loadQueryBlock(a, go, b, h, first, rows, sh.block);
      __syncthreads();
      scoreTileGrads(a, b, h, first, rows, tile, width, sh.tiles, sh.block);
      __syncthreads();
      for (int64_t i = threadIdx.x; i < width * E; i += blockDim.x) {
        int64_t j = i / E, e = i % E;
        C sum = sh.valueGrads[i];
        for (int r = 0; r < rows; ++r)
          sum +=
              sh.block.probabilities[r * kKeys + j] * sh.block.grad[r * E + e];
        sh.valueGrads[i] = sum;
      }
      for (int64_t i = threadIdx.x; i < width * D; i += blockDim.x) {
        int64_t j = i / D, d = i % D;
        C sum = sh.keyGrads[i];
        for (int r = 0; r < rows; ++r)
          sum += sh.block.scoreGrads[r * kKeys + j] * sh.block.query[r * D + d];
        sh.keyGrads[i] = sum;
      }
    }
    if (grouped) {
      addToGroup(sh.keyGrads, sh.groupKeyGrads, width * D);
      addToGroup(sh.valueGrads, sh.groupValueGrads, width * E);
    }
  }
  // Each thread writes the elements it summed: no barrier needed.
  storeTile(g, b, keyHead, grouped ? sh.groupKeyGrads : sh.keyGrads, g.keys,
            tile, width, D, gradKey);
  storeTile(g, b, keyHead, grouped ? sh.groupValueGrads : sh.valueGrads, g.keys,
            tile, width, E, gradValue);
}

template <typename C> struct QueryGradShared {
  KeyTiles<C> tiles;
  QueryBlock<C> block;
  /// The block's query gradients, summed over the keys.
  C *queryGrads;

  __host__ __device__ QueryGradShared(const AttentionGeometry &g,
                                      SharedCarver<C> &carver)
      : tiles(g, carver), block(g, carver, /*withProbabilities=*/false) {
    queryGrads = carver.take(int64_t(kRows) * g.headSize);
  }
};

/// The query-major pass: one block per (batch * head, block of kRows query
/// rows), over every key tile.
template <typename T>
__global__ void
flashAttentionQueryGradKernel(AttentionOperands<T> a, GradOperands<T> go,
                              int64_t blocks, HeadTensor<T> gradQuery) {
  using C = Compute<T>;
  const AttentionGeometry &g = a.geometry;
  QueryGradShared<C> sh = carveShared<QueryGradShared, C>(g);
  BlockPlace place(g.heads, blocks, kRows, g.rows);
  int64_t b = place.b, h = place.h, first = place.first;
  int rows = place.count;
  int64_t D = g.headSize;

  loadQueryBlock(a, go, b, h, first, rows, sh.block);
  for (int64_t i = threadIdx.x; i < kRows * D; i += blockDim.x)
    sh.queryGrads[i] = 0;
  for (int64_t tile = 0; tile < g.keys; tile += kKeys) {
    int width = clampCount(g.keys - tile, kKeys);
    __syncthreads(); // the previous tile's readers are done
    loadKeyTiles(a, b, g.keyHead(h), tile, width, sh.tiles);
    __syncthreads();
    scoreTileGrads(a, b, h, first, rows, tile, width, sh.tiles, sh.block);
    __syncthreads();
    for (int64_t i = threadIdx.x; i < rows * D; i += blockDim.x) {
      int64_t r = i / D, d = i % D;
      C sum = sh.queryGrads[i];
      const C *dScore = sh.block.scoreGrads + r * kKeys;
      for (int j = 0; j < width; ++j)
        sum += dScore[j] * sh.tiles.key[j * sh.tiles.keyStride + d];
      sh.queryGrads[i] = sum;
    }
  }
  storeTile(g, b, h, sh.queryGrads, g.rows, first, rows, D, gradQuery);
}

//===----------------------------------------------------------------------===//
// Launches.
//===----------------------------------------------------------------------===//

/// The shared-memory bytes of a kernel whose buffers `Shared` carves.
template <template <typename> class Shared, typename C>
size_t getSharedBytes(const AttentionGeometry &g) {
  SharedCarver<C> carver{nullptr};
  Shared<C> counted(g, carver);
  (void)counted;
  return size_t(carver.used) * sizeof(C);
}

/// Launches `kernel` on `blocks` blocks with `bytes` of shared memory,
/// opting in to more than the default 48 KiB where the head sizes need it;
/// throws Error naming `name` when the GPU has less.
template <typename Kernel, typename... Args>
void launchTiled(Context &ctx, const char *name, Kernel kernel, int64_t blocks,
                 size_t bytes, const AttentionGeometry &g, Args... args) {
  if (blocks <= 0)
    return;
  constexpr size_t kDefaultShared = 48 << 10;
  if (bytes > kDefaultShared) {
    int available = 0;
    checkCuda(cudaDeviceGetAttribute(&available,
                                     cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                     ctx.getDevice()),
              "cudaDeviceGetAttribute(shared memory per block)");
    if (bytes > size_t(available))
      throw Error(std::string("the CUDA kernel '") + name + "' needs " +
                  std::to_string(bytes) +
                  " bytes of shared memory for head sizes " +
                  std::to_string(g.headSize) + " and " +
                  std::to_string(g.valueSize) + "; the GPU has " +
                  std::to_string(available));
    checkCuda(cudaFuncSetAttribute(kernel,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(bytes)),
              "cudaFuncSetAttribute(shared memory)");
  }
  kernel<<<static_cast<unsigned>(blocks), kThreads, bytes,
           ctx.getStream()>>>(args...);
  checkLaunch(name);
}

/// `tensor`, an operand of the attention of `g`, with the heads it stores.
template <typename T>
HeadTensor<T> getHeadTensor(const AttentionGeometry &g, const Tensor &tensor) {
  return {tensor.as<T>(), g.getStoredHeads(tensor)};
}

template <typename T>
AttentionOperands<T>
getOperands(const Tensor &query, const Tensor &key, const Tensor &value,
            const Tensor &keep, const Tensor &bias, const Tensor &out,
            double scale, double maskedScore, AttentionLayout layout,
            const AttentionDropout &dropout) {
  AttentionGeometry g(query, key, value, keep, bias, out, layout, dropout);
  return {g,
          getHeadTensor<const T>(g, query),
          getHeadTensor<const T>(g, key),
          getHeadTensor<const T>(g, value),
          keep.as<bool>(),
          bias.as<T>(),
          scale,
          maskedScore};
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <typename T>
__global__ void attentionBiasKernel(AttentionGeometry g, const bool *keep,
                                    const T *bias, float maskedScore,
                                    int64_t biasHeads, int64_t count, T *out) {
  for (int64_t i = getGlobalThread(); i < count; i += getGlobalThreads()) {
    int64_t s = i % g.keys, t = i / g.keys % g.rows;
    int64_t h = i / (g.keys * g.rows) % biasHeads;
    int64_t b = i / (g.keys * g.rows * biasHeads);
    float score = 0;
    if (keep && !keep[g.offset(g.keepStrides, b, h, t) + s * g.keepStrides[3]])
      score = maskedScore;
    if (bias)
      score +=
          load(bias[g.offset(g.biasStrides, b, h, t) + s * g.biasStrides[3]]);
    out[i] = store<T>(score);
  }
}

__global__ void checkCausalKeepKernel(const bool *keep, int64_t rows,
                                      int64_t keys, KernelErrorSink sink) {
  for (int64_t i = getGlobalThread(); i < rows * keys;
       i += getGlobalThreads()) {
    int64_t t = i / keys, s = i % keys;
    if (keep[i] != (s <= t))
      reportBadIndex(sink, KernelErrorRecord::CausalKeepMask, keep[i], i,
                     rows * keys);
  }
}

} // namespace

void writeAttentionBias(Context &ctx, const AttentionGeometry &g,
                        const Tensor &keep, const Tensor &bias,
                        double maskedScore, const Tensor &out) {
  dispatch(TypeList<__nv_bfloat16, __half>(), out.dtype, "writeAttentionBias",
           [&](auto tag) {
             using T = typename decltype(tag)::type;
             // The lowest finite bf16 and f16.
             constexpr double kLowest =
                 std::is_same_v<T, __half> ? -65504.0 : -3.3895313892515355e38;
             float masked = float(std::max(maskedScore, kLowest));
             int64_t count = out.getNumElements();
             attentionBiasKernel<T>
                 <<<getGridSize(ctx, count, kBlockSize), kBlockSize, 0,
                    ctx.getStream()>>>(g, keep.as<bool>(), bias.as<T>(),
                                       masked, out.shape[1], count, out.as<T>());
             checkLaunch("writeAttentionBias");
           });
}

void checkCausalKeep(Context &ctx, const Tensor &keep) {
  int64_t rows = keep.shape[keep.shape.rank - 2];
  int64_t keys = keep.shape[keep.shape.rank - 1];
  checkCausalKeepKernel<<<getGridSize(ctx, rows * keys, kBlockSize),
                          kBlockSize, 0, ctx.getStream()>>>(
      keep.as<bool>(), rows, keys, ctx.getImpl().getErrorSink());
  checkLaunch("checkCausalKeep");
}

void flashAttention(Context &ctx, const Tensor &query, const Tensor &key,
                    const Tensor &value, const Tensor &keep, const Tensor &bias,
                    const Tensor &out, const Tensor &logsumexp, double scale,
                    double maskedScore, AttentionLayout layout,
                    const AttentionDropout &dropout) {
  checkFlashAttention(query, key, value, out, logsumexp, layout);
  if (runCudnnAttention(ctx, query, key, value, keep, bias, out, logsumexp,
                        scale, maskedScore, layout, dropout))
    return;
  dispatch(FloatTypes(), query.dtype, "flashAttention", [&](auto tag) {
    using T = typename decltype(tag)::type;
    AttentionOperands<T> a =
        getOperands<T>(query, key, value, keep, bias, out, scale, maskedScore,
                       layout, dropout);
    const AttentionGeometry &g = a.geometry;
    int64_t blocks = ceilDiv(g.rows, kRows);
    launchTiled(ctx, "flashAttention", flashAttentionKernel<T>,
                g.batch * g.heads * blocks,
                getSharedBytes<ForwardShared, Compute<T>>(g), g, a, blocks,
                out.as<T>(), logsumexp.as<Compute<T>>());
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
  if (runCudnnAttentionGrad(ctx, query, key, value, keep, bias, out, logsumexp,
                            grad, gradQuery, gradKey, gradValue, scale,
                            maskedScore, layout, dropout))
    return;
  dispatch(FloatTypes(), query.dtype, "flashAttentionGrad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    AttentionOperands<T> a =
        getOperands<T>(query, key, value, keep, bias, out, scale, maskedScore,
                       layout, dropout);
    GradOperands<T> go{out.as<T>(), logsumexp.as<C>(), grad.as<T>()};
    const AttentionGeometry &g = a.geometry;
    int64_t tiles = ceilDiv(g.keys, kKeys), blocks = ceilDiv(g.rows, kRows);
    launchTiled(ctx, "flashAttentionGrad", flashAttentionKeyGradKernel<T>,
                g.batch * g.keyHeads * tiles,
                getSharedBytes<KeyGradShared, C>(g), g, a, go, tiles,
                getHeadTensor<T>(g, gradKey), getHeadTensor<T>(g, gradValue));
    launchTiled(ctx, "flashAttentionGrad", flashAttentionQueryGradKernel<T>,
                g.batch * g.heads * blocks,
                getSharedBytes<QueryGradShared, C>(g), g, a, go, blocks,
                getHeadTensor<T>(g, gradQuery));
  });
}

} // namespace slapo::rt::cuda
