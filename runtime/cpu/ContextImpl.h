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
#include <memory>
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

/// What a kernel keeps in Context::Impl::getScratch's memory during a call.
enum class Scratch {
  /// The f32 copies of a bf16 contraction's operands and of its result
  /// where oneDNN has no bf16 contractions (Contraction.h).
  WidenedOperand0,
  WidenedOperand1,
  WidenedOperand2,
  WidenedResult,
  Count,
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

  /// At least `count` floats for `slot`'s use during one kernel call, held
  /// under scratchMutex. The memory is kept for the next call and grown to
  /// the largest request: a call allocates nothing, where fresh pages cost
  /// the kernel's zeroing on first touch (when the f32 fallback allocated
  /// its copies per call: 17% of a 3-step bf16 profile on AVX2, most at
  /// start-up; 3% of a later step).
  float *getScratch(Scratch slot, int64_t count) {
    size_t index = size_t(slot);
    if (count > scratchCapacity[index]) {
      scratch[index].reset(new float[count]);
      scratchCapacity[index] = count;
    }
    return scratch[index].get();
  }
  std::mutex scratchMutex;

private:
  std::unique_ptr<float[]> scratch[size_t(Scratch::Count)];
  int64_t scratchCapacity[size_t(Scratch::Count)] = {};
};

/// How many oneDNN primitives `ctx` has created.
size_t getCachedPrimitiveCount(Context &ctx);

} // namespace slapo::rt::cpu

#endif // SLAPO_RUNTIME_CPU_CONTEXTIMPL_H
