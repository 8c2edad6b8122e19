//===- Dispatch.h - from a runtime dtype to a templated kernel --*- C++ -*-===//
//
// One definition, for the CPU and CUDA backends, of how a kernel goes from
// the DType of its tensors (or a kind enum) to the instantiation of its
// templated implementation for that element type, and of the errors it
// throws for the dtypes it does not take. Each backend binds these (in its
// KernelSupport header; RotaryDispatcher in its Rotary file) to its own
// element types (its ElementTraits, whose 16-bit floats differ: BFloat16 and
// Half on the CPU, __nv_bfloat16 and __half on the GPU) and to its name in
// messages ("the CPU kernel 'x' does not support ..."), so that both
// backends throw the same words. Host code without MLIR, LLVM, LibTorch or
// CUDA headers: g++ and nvcc both compile it.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_DISPATCH_H
#define SLAPO_RUNTIME_DISPATCH_H

#include "slapo/runtime/Error.h"
#include "slapo/runtime/Tensor.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace slapo::rt {

template <typename T> struct TypeTag { using type = T; };
template <typename... Ts> struct TypeList {};

using IndexTypes = TypeList<int32_t, int64_t>;

/// "the <backend> kernel '<kernel>' does not support ", which every message
/// of a backend's dispatch begins with.
inline std::string getUnsupportedPrefix(const char *backend,
                                        const char *kernel) {
  return std::string("the ") + backend + " kernel '" + kernel +
         "' does not support ";
}

/// A backend's `throwUnsupported(kernel, dtype)`: `backend` ("CPU", "CUDA")
/// names it in the message.
struct UnsupportedThrower {
  const char *backend;

  [[noreturn]] void operator()(const char *kernel, DType dtype) const {
    throw Error(getUnsupportedPrefix(backend, kernel) + getName(dtype) +
                " tensors");
  }
};

/// A backend's `dispatch(types, dtype, kernel, body)` over its element types,
/// whose dtypes `Traits` (its ElementTraits) gives.
template <template <typename> class Traits> struct Dispatcher {
  const char *backend;

  /// Calls `body(TypeTag<T>())` for the element type T of `dtype` among `Ts`.
  template <typename... Ts, typename F>
  void operator()(TypeList<Ts...>, DType dtype, const char *kernel,
                  F &&body) const {
    bool found =
        ((dtype == Traits<Ts>::dtype ? (body(TypeTag<Ts>()), true) : false) ||
         ...);
    if (!found)
      UnsupportedThrower{backend}(kernel, dtype);
  }
};

/// A backend's `dispatchHeldExactly(kernel, wideName, wide, narrowName,
/// narrow, body)` over its float types and all its element types.
template <template <typename> class Traits, typename FloatTypes,
          typename AllTypes>
struct HeldExactlyDispatcher {
  const char *backend;

  /// Calls `body(TypeTag<W>(), TypeTag<N>())` for the float type W of `wide`
  /// and the type N of `narrow` (`wideName` and `narrowName` in messages): W
  /// itself, or a narrower float, which W holds exactly (the compiler's
  /// holdsExactly, by which it folds a cast into the kernel: a norm's bf16
  /// out or grad of f32 rows, a bf16 sum into f32). Throws naming both
  /// dtypes otherwise.
  template <typename F>
  void operator()(const char *kernel, const char *wideName, const Tensor &wide,
                  const char *narrowName, const Tensor &narrow,
                  F &&body) const {
    Dispatcher<Traits> dispatch{backend};
    if (narrow.dtype == wide.dtype)
      return dispatch(FloatTypes(), wide.dtype, kernel,
                      [&](auto tag) { body(tag, tag); });
    dispatch(FloatTypes(), wide.dtype, kernel, [&](auto wideTag) {
      dispatch(AllTypes(), narrow.dtype, kernel, [&](auto narrowTag) {
        using W = typename decltype(wideTag)::type;
        using N = typename decltype(narrowTag)::type;
        if constexpr (std::is_floating_point_v<typename Traits<N>::Compute> &&
                      sizeof(N) < sizeof(W))
          body(wideTag, narrowTag);
        else
          throw Error(getUnsupportedPrefix(backend, kernel) + narrowName + " " +
                      getName(narrow.dtype) + " with " + wideName + " " +
                      getName(wide.dtype) + " (" + narrowName +
                      " must be the " + wideName +
                      "'s dtype or a narrower float)");
      });
    });
  }
};

/// A backend's `dispatchRotary(input, cos, sin, out, body)` for its rotary
/// embedding, through its `dispatchHeldExactly`, whose pairs and messages
/// these are.
template <template <typename> class Traits, typename FloatTypes,
          typename AllTypes>
struct RotaryDispatcher {
  HeldExactlyDispatcher<Traits, FloatTypes, AllTypes> dispatchHeldExactly;

  /// Calls `body(TypeTag<C>(), TypeTag<In>(), TypeTag<Out>())` for the dtype
  /// C of cos and sin and those of the input and the out, each C's or a
  /// narrower float, which C holds exactly. Throws naming the dtypes
  /// otherwise.
  template <typename F>
  void operator()(const Tensor &input, const Tensor &cos, const Tensor &sin,
                  const Tensor &out, F &&body) const {
    const char *kernel = "rotaryEmbedding", *angles = "cos and sin";
    if (sin.dtype != cos.dtype)
      throw Error(getUnsupportedPrefix(dispatchHeldExactly.backend, kernel) +
                  "sin " + getName(sin.dtype) + " with cos " +
                  getName(cos.dtype) + " (cos and sin must share one dtype)");
    dispatchHeldExactly(
        kernel, angles, cos, "input", input, [&](auto cosTag, auto inTag) {
          // A type, not decltype(cosTag) in the inner condition, which GCC 12
          // takes to be false.
          using C = typename decltype(cosTag)::type;
          dispatchHeldExactly(
              kernel, angles, cos, "out", out, [&](auto sameTag, auto outTag) {
                // sameTag is cosTag: the other instantiations never run.
                if constexpr (std::is_same_v<C,
                                             typename decltype(sameTag)::type>)
                  body(cosTag, inTag, outTag);
              });
        });
  }
};

/// Calls `body(TypeTag<W>())` for the unsigned integer W of `bytes` (1, 2,
/// 4, else 8): for kernels that only move elements.
template <typename F> void dispatchWidth(size_t bytes, F &&body) {
  switch (bytes) {
  case 1:
    return body(TypeTag<uint8_t>());
  case 2:
    return body(TypeTag<uint16_t>());
  case 4:
    return body(TypeTag<uint32_t>());
  default:
    return body(TypeTag<uint64_t>());
  }
}

/// dispatchWidth for the elements of `dtype`.
template <typename F> void dispatchWidth(DType dtype, F &&body) {
  dispatchWidth(getSize(dtype), std::forward<F>(body));
}

template <typename E, typename F, int... Values>
void dispatchEnumImpl(E value, F &body, std::integer_sequence<int, Values...>) {
  ((static_cast<int>(value) == Values
        ? (body(std::integral_constant<E, static_cast<E>(Values)>()), true)
        : false) ||
   ...);
}

/// Calls `body(std::integral_constant<E, value>())`, so that a kernel (a CPU
/// kernel's inner loop) is compiled once per kind instead of branching per
/// element.
template <typename E, int Count, typename F>
void dispatchEnum(E value, F &&body) {
  dispatchEnumImpl(value, body, std::make_integer_sequence<int, Count>());
}

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_DISPATCH_H
