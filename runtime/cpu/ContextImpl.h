//===- ContextImpl.h - the CPU context's oneDNN state ------------*- C++
//-*-===//
//
// Private to runtime/cpu (and its unit tests): the oneDNN engine and stream
// every contraction and convolution runs on, and the primitives created so
// far, one per combination of shapes and dtypes (and window).
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_CPU_CONTEXTIMPL_H
#define SLAPO_RUNTIME_CPU_CONTEXTIMPL_H

#include "slapo/runtime/cpu/Context.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace slapo::rt::cpu {

/// A matmul primitive, the memory descriptors its arguments are bound with
/// and its attributes (a sum post-op where it adds to dst).
struct CachedMatmul {
  dnnl::matmul primitive;
  dnnl::memory::desc src, weights, bias, dst;
  dnnl::primitive_attr attributes;
};

/// Another oneDNN primitive (a convolution or one of its gradients) and the
/// memory descriptors its arguments are bound with, by DNNL_ARG_*.
struct CachedPrimitive {
  dnnl::primitive primitive;
  std::vector<std::pair<int, dnnl::memory::desc>> args;
};

struct Context::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::mutex mutex;
  /// Keyed by the contraction (linear or matmul), dtype and operand dims.
  std::map<std::vector<int64_t>, CachedMatmul> matmuls;
  /// Keyed by the product (forward or gradient), groups, bias, dims and
  /// window.
  std::map<std::vector<int64_t>, CachedPrimitive> primitives;
};

/// How many oneDNN primitives `ctx` has created.
size_t getCachedPrimitiveCount(Context &ctx);

} // namespace slapo::rt::cpu

#endif // SLAPO_RUNTIME_CPU_CONTEXTIMPL_H
