//===- Tensor.h - element types, shapes and tensor views --------*- C++ -*-===//
//
// The runtime's view of a tensor: a pointer into a device arena with a static
// element type and a row-major contiguous shape. Tensors never own memory;
// the memory plan places every tensor of a step in the rank's arena, and
// generated code builds views at planned offsets.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_TENSOR_H
#define SLAPO_RUNTIME_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

namespace slapo::rt {

enum class DType : uint8_t { F32, F64, BF16, F16, I8, I32, I64, Bool };

/// Bytes per element.
size_t getSize(DType dtype);
/// "F32", "BF16", "I64", "BOOL": the safetensors spelling.
const char *getName(DType dtype);
/// The inverse of getName; false for an unknown name.
bool parseDType(const std::string &name, DType &dtype);

constexpr int kMaxRank = 8;

struct Shape {
  int rank = 0;
  int64_t dims[kMaxRank] = {};

  Shape() = default;
  Shape(std::initializer_list<int64_t> sizes);
  int64_t getNumElements() const;
  int64_t operator[](int dim) const { return dims[dim]; }
  bool operator==(const Shape &other) const;
  bool operator!=(const Shape &other) const { return !(*this == other); }
  /// "[8, 32]".
  std::string str() const;
};

/// A contiguous, row-major view. A null `data` stands for an absent optional
/// operand (a linear without bias).
struct Tensor {
  void *data = nullptr;
  DType dtype = DType::F32;
  Shape shape;

  Tensor() = default;
  Tensor(void *data, DType dtype, Shape shape)
      : data(data), dtype(dtype), shape(shape) {}

  explicit operator bool() const { return data != nullptr; }
  int getRank() const { return shape.rank; }
  int64_t getNumElements() const { return shape.getNumElements(); }
  size_t getBytes() const { return getNumElements() * getSize(dtype); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// bfloat16 stored as its upper 16 bits of an IEEE float, converted with
/// round-to-nearest-even as PyTorch does. Inline and branch-free, so that
/// the kernels' loops over bf16 tensors vectorize.
struct BFloat16 {
  uint16_t bits;

  static BFloat16 fromFloat(float value) {
    uint32_t wide;
    std::memcpy(&wide, &value, sizeof wide);
    uint32_t rounded = wide + 0x7fffu + ((wide >> 16) & 1u);
    // A NaN stays a quiet NaN instead of rounding into infinity.
    bool isNaN = (wide & 0x7fffffffu) > 0x7f800000u;
    uint32_t upper = (isNaN ? wide | 0x400000u : rounded) >> 16;
    return {static_cast<uint16_t>(upper)};
  }

  float toFloat() const {
    uint32_t wide = static_cast<uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &wide, sizeof value);
    return value;
  }
};

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_TENSOR_H
