//===- LinearCrossEntropyWorkspace.h - LM head kernels' bytes -*- C++ -*-===//
//
// How many rows a chunk of the LM head kernels (linearCrossEntropy,
// linearLogSumExp and its gradient, KernelSet.inc) holds, and the layout of
// the workspace they compute in. The compiler's memory plan gives each such
// op a workspace buffer of getLinearCrossEntropyWorkspace's bytes in the
// arena (slapo's WorkspaceOpInterface) and the kernels lay their parts out
// with the same function, so the two agree by construction; the kernels
// still check the size they are given.
//
// Plain integer arithmetic: the compiler includes it too.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_LINEARCROSSENTROPYWORKSPACE_H
#define SLAPO_RUNTIME_LINEARCROSSENTROPYWORKSPACE_H

#include <algorithm>
#include <cstdint>

namespace slapo::rt {

/// The fewest logits a chunk holds (32 MiB of f32) unless the whole head has
/// fewer: a chunk's three GEMMs (logits, hidden and weight gradients) have
/// its rows as M or K, and measured on the bench's LM head (2048 rows of 512
/// features, 8192 classes; 2 AVX2 cores under load, medians of 6 and 12
/// calls) the kernel took 1.5x as long in 128-row chunks (Liger's size
/// alone) as in one chunk, 1.13x in 512-row ones and 1.03-1.07x in 1024-row
/// ones, this bound's (the fastest calls of 1024 rows and of one chunk
/// equal).
constexpr int64_t kMinChunkLogits = int64_t(1) << 23;

/// The most chunks a head is split into. Each chunk reads and writes the
/// whole f32 weight gradient once more (its share is added inside the GEMM)
/// and its hidden-gradient product has only the chunk's rows as M: GPT-2
/// small's head (16384 rows, 50257 x 768) in Liger's 66 chunks of 249 rows
/// would move 20 GB of weight gradient per step, 5.7 ms at an H200's
/// 3.5 TB/s; in 16 chunks of 1024 rows 4.9 GB, for a workspace of 206 MB of
/// f32 logits (+103 MB bf16 under mixed precision), a sixteenth of the whole
/// head's.
constexpr int64_t kMaxChunks = 16;

/// The rows of one chunk of an LM head of `rows` hidden rows of `features`
/// and `classes` logits each: the chunk's logits are about as large as the
/// hidden rows (Liger's FusedLinearCrossEntropy sizes them so) but at least
/// kMinChunkLogits and at least a kMaxChunks-th of the rows, the rows split
/// evenly over the chunks, never more rows than there are, at least one.
inline int64_t getLinearCrossEntropyChunkRows(int64_t rows, int64_t features,
                                              int64_t classes) {
  if (rows < 1)
    return 1;
  auto ceilDiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  int64_t ligerChunks = ceilDiv(classes, features > 0 ? features : 1);
  int64_t wanted = ceilDiv(rows, ligerChunks < 1 ? 1 : ligerChunks);
  // At least one row: kMinChunkLogits is positive.
  int64_t forGemms = ceilDiv(kMinChunkLogits, classes > 0 ? classes : 1);
  int64_t forWeightGradient = ceilDiv(rows, kMaxChunks);
  wanted = std::max({wanted, forGemms, forWeightGradient});
  return ceilDiv(rows, ceilDiv(rows, wanted));
}

/// Which LM head kernel a workspace is for.
enum class LinearCrossEntropyKernel {
  /// linearCrossEntropy: the loss and the gradients.
  CrossEntropy,
  /// linearLogSumExp: each row's log-sum-exp only.
  LogSumExp,
  /// linearLogSumExpGrad: the gradients.
  LogSumExpGrad,
};

/// The parts of an LM head kernel's workspace, as byte offsets into it
/// (64-byte aligned), -1 for a part the kernel does not need, and its size.
///
/// The size depends on the shapes only, never on the thread count, which
/// the compiler does not know: one chunk of logits exists at a time and the
/// threads split its rows (and oneDNN's matmuls split their own work), so
/// any number of threads computes in the same bytes.
struct LinearCrossEntropyWorkspace {
  int64_t chunkRows = 0;
  /// f32 [chunkRows, classes]: a chunk's logits, then their gradient. (A
  /// later chunk's share of the weight gradient is added to it inside the
  /// GEMM: no part of its own.)
  int64_t logits = -1;
  /// [chunkRows, classes] of the hidden and weight's 16-bit type (bf16
  /// operands with gradients only): the chunk's logit gradient rounded to
  /// it for the two gradient products, which take it as torch.autocast's
  /// backward does.
  int64_t lowGradient = -1;
  /// f64 [classes]: the bias gradient's sums over the chunks (with
  /// gradients and a bias; the CPU's, the CUDA kernels add into the bias
  /// gradient directly).
  int64_t classSums = -1;
  /// 8 bytes for each row and one more (linearCrossEntropy only): the rows'
  /// losses, f64 on the CPU, f32 then the loss scale on CUDA.
  int64_t rowLosses = -1;
  int64_t bytes = 0;
};

/// `operandBytes` is the size of an element of hidden and weight (4 for
/// f32, 2 for bf16).
inline LinearCrossEntropyWorkspace
getLinearCrossEntropyWorkspace(LinearCrossEntropyKernel kernel, int64_t rows,
                               int64_t features, int64_t classes, bool hasBias,
                               int64_t operandBytes) {
  constexpr int64_t kAlignment = 64;
  LinearCrossEntropyWorkspace layout;
  auto take = [&](int64_t bytes) {
    int64_t at = layout.bytes;
    layout.bytes += (bytes + kAlignment - 1) / kAlignment * kAlignment;
    return at;
  };
  bool gradients = kernel != LinearCrossEntropyKernel::LogSumExp;
  layout.chunkRows = getLinearCrossEntropyChunkRows(rows, features, classes);
  layout.logits = take(4 * layout.chunkRows * classes);
  if (gradients && operandBytes < 4)
    layout.lowGradient = take(operandBytes * layout.chunkRows * classes);
  if (gradients && hasBias)
    layout.classSums = take(8 * classes);
  if (kernel == LinearCrossEntropyKernel::CrossEntropy)
    layout.rowLosses = take(8 * (rows + 1));
  return layout;
}

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_LINEARCROSSENTROPYWORKSPACE_H
