//===- RuntimeTensor.h - LibTorch tensors as runtime views ------*- C++ -*-===//
//
// The compiler writes LibTorch tensors (weights, verification inputs) with
// the runtime's safetensors writer, so that the rank program reads exactly
// what it would read from any other writer.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_FRONTEND_TORCHSCRIPT_RUNTIMETENSOR_H
#define SLAPO_FRONTEND_TORCHSCRIPT_RUNTIMETENSOR_H

#include "slapo/runtime/Tensor.h"

#include <ATen/ATen.h>

#include <optional>

namespace slapo {

inline std::optional<rt::DType> toRuntimeDType(at::ScalarType type) {
  switch (type) {
  case at::kFloat:
    return rt::DType::F32;
  case at::kDouble:
    return rt::DType::F64;
  case at::kBFloat16:
    return rt::DType::BF16;
  case at::kHalf:
    return rt::DType::F16;
  case at::kChar:
    return rt::DType::I8;
  case at::kInt:
    return rt::DType::I32;
  case at::kLong:
    return rt::DType::I64;
  case at::kBool:
    return rt::DType::Bool;
  default:
    return std::nullopt;
  }
}

/// A view of `tensor`, which must be contiguous, of a supported dtype and
/// alive as long as the view.
inline rt::Tensor viewOf(const at::Tensor &tensor) {
  rt::Shape shape;
  shape.rank = tensor.dim();
  for (int d = 0; d < shape.rank; ++d)
    shape.dims[d] = tensor.size(d);
  return rt::Tensor(tensor.data_ptr(), *toRuntimeDType(tensor.scalar_type()),
                    shape);
}

} // namespace slapo

#endif // SLAPO_FRONTEND_TORCHSCRIPT_RUNTIMETENSOR_H
