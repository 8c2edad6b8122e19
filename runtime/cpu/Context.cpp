//===- Context.cpp - the CPU execution context ----------------------------===//
#include "ContextImpl.h"

#include <omp.h>

namespace slapo::rt::cpu {

Context::Context(int threads)
    : threads(threads > 0 ? threads : omp_get_max_threads()),
      impl(std::make_unique<Impl>()) {
  // oneDNN's OpenMP runtime sizes its parallel regions from this too.
  omp_set_num_threads(this->threads);
}

Context::~Context() = default;

size_t getCachedPrimitiveCount(Context &ctx) {
  Context::Impl &impl = ctx.getImpl();
  std::lock_guard<std::mutex> lock(impl.mutex);
  return impl.matmuls.size();
}

} // namespace slapo::rt::cpu
