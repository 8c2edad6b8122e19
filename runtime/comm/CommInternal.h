//===- CommInternal.h - what the communicators share ------------*- C++ -*-===//
//
// Private to comm/: the local, MPI and NCCL communicators check their
// arguments alike and time their message passing alike, as the Communicator
// interface promises.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_COMM_COMMINTERNAL_H
#define SLAPO_RUNTIME_COMM_COMMINTERNAL_H

#include "slapo/runtime/Error.h"
#include "slapo/runtime/Tensor.h"

#include <chrono>
#include <cstdint>
#include <string>

namespace slapo::rt {

/// Sums are defined for these dtypes only: the ones gradients, losses and
/// counters use. bf16 gradients are reduced in an f32 copy by generated code.
inline void checkSummable(DType dtype, const char *operation) {
  if (dtype != DType::F32 && dtype != DType::F64 && dtype != DType::I64)
    throw Error(std::string(operation) + " of " + getName(dtype) +
                " elements is not supported (F32, F64, I64)");
}

/// "3 ranks", "1 rank".
inline std::string countRanks(int64_t ranks) {
  return std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks");
}

inline void checkBroadcastRoot(int root, int size) {
  if (root < 0 || root >= size)
    throw Error("broadcast from rank " + std::to_string(root) +
                " in a group of " + countRanks(size));
}

/// `peer` of send() and recv() (`operation`) must be another rank of the
/// group of `size` ranks in which this one is `rank`.
inline void checkPeer(int peer, int rank, int size, const char *operation) {
  if (peer < 0 || peer >= size || peer == rank)
    throw Error(std::string(operation) + " with rank " + std::to_string(peer) +
                " by rank " + std::to_string(rank) + " of a group of " +
                countRanks(size) +
                ": the peer must be another rank of the "
                "group");
}

/// Adds the wall time of its scope to `seconds`.
class ScopedTimer {
public:
  explicit ScopedTimer(double &seconds)
      : seconds(seconds), start(std::chrono::steady_clock::now()) {}
  ~ScopedTimer() {
    seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  }
  ScopedTimer(const ScopedTimer &) = delete;
  ScopedTimer &operator=(const ScopedTimer &) = delete;

private:
  double &seconds;
  std::chrono::steady_clock::time_point start;
};

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_COMM_COMMINTERNAL_H
