//===- Random.h - counter-based random numbers ------------------*- C++ -*-===//
//
// Randomness in a rank program is a pure function of (seed, stream, counter):
// the batch a step samples and, later, a dropout mask do not depend on thread
// count, rank count or what ran before, so runs are reproducible and a
// resumed run draws what the uninterrupted one would have.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_RANDOM_H
#define SLAPO_RUNTIME_RANDOM_H

// CUDA kernels draw the same bits as the CPU's (runtime/cuda).
#include "slapo/runtime/HostDevice.h"

#include <cstdint>

namespace slapo::rt {

/// Steele, Lea and Flood's SplitMix64 finalizer: a bijection that mixes
/// every input bit into every output bit.
SLAPO_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// 64 random bits for element `counter` of stream `stream` under `seed`.
SLAPO_HOST_DEVICE inline uint64_t randomBits(uint64_t seed, uint64_t stream, uint64_t counter) {
  return splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ counter);
}

/// The stream of dropout number `opStream` (slapo.dropout's `stream`) at step
/// `step` for ranks of `rankStream` (0, or the tp rank inside fork_rng()):
/// its masks are uniform01(randomBits(seed, this, element)) >= p. The tag
/// keeps dropout streams apart from the data's, whose stream is the step.
SLAPO_HOST_DEVICE inline uint64_t dropoutStream(uint64_t step, uint64_t opStream,
                              uint64_t rankStream) {
  constexpr uint64_t kDropoutTag = 0x64726f706f7574ull; // "dropout"
  return splitmix64(splitmix64(splitmix64(kDropoutTag ^ step) ^ opStream) ^
                    rankStream);
}

/// The key of dropout number `opStream`'s masks at step `step` for ranks of
/// `rankStream` under `seed`: randomBits(seed, dropoutStream(step, opStream,
/// rankStream), counter) is splitmix64(key ^ counter). The generated fused
/// loops draw masks from it (computed once per call).
SLAPO_HOST_DEVICE inline uint64_t dropoutKey(uint64_t seed, uint64_t step,
                                             uint64_t opStream,
                                             uint64_t rankStream) {
  return splitmix64(splitmix64(seed) ^
                    dropoutStream(step, opStream, rankStream));
}

/// A double in [0, 1) from the 53 high bits.
SLAPO_HOST_DEVICE inline double uniform01(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

/// Dropout with probability `p` in integers: uniform01(bits) >= p, with
/// uniform01 exact (a 53-bit integer times 2^-53), is (bits >> 11) >=
/// ceil(p * 2^53), and p * 2^53 is exact. p = 1 drops everything. Constant
/// for a literal p, so the generated loops compare integers alone.
SLAPO_HOST_DEVICE constexpr uint64_t dropoutThreshold(double p) {
  if (!(p > 0))
    return 0;
  if (p >= 1)
    return uint64_t(1) << 53;
  double scaled = p * 0x1.0p53;
  auto whole = static_cast<uint64_t>(scaled);
  return whole + (static_cast<double>(whole) < scaled ? 1 : 0);
}

/// Whether dropout keeps element `counter` of the mask keyed `key`
/// (dropoutKey) at `threshold` (dropoutThreshold(p)): the one rule of the
/// dropout kernels on every backend and of the generated fused loops, so
/// that all of them draw the same mask.
SLAPO_HOST_DEVICE inline bool keepsElement(uint64_t key, uint64_t counter,
                                           uint64_t threshold) {
  return splitmix64(key ^ counter) >> 11 >= threshold;
}

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_RANDOM_H
