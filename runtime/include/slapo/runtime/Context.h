//===- Context.h - where kernels run -----------------------------*- C++
//-*-===//
//
// Every kernel takes the execution context of its device. On the CPU it holds
// the thread count and the oneDNN engine, stream and primitive cache; a CUDA
// context (a later backend) holds a stream and library handles in the same
// place, so generated code has the same shape for every device.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CONTEXT_H
#define SLAPO_RUNTIME_CONTEXT_H

#include <memory>

namespace slapo::rt::cpu {

class Context {
public:
  /// `threads` <= 0 uses every core OpenMP reports.
  explicit Context(int threads = 0);
  ~Context();
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;

  int getThreads() const { return threads; }

  /// Backend state the kernels share (oneDNN objects, cached primitives);
  /// defined in runtime/cpu.
  struct Impl;
  Impl &getImpl() { return *impl; }

private:
  int threads;
  std::unique_ptr<Impl> impl;
};

} // namespace slapo::rt::cpu

#endif // SLAPO_RUNTIME_CONTEXT_H
