//===- TypeMapping.cpp - MLIR element types <-> at::ScalarType ------------===//
#include "OpTable.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

namespace slapo::reference {

std::optional<at::ScalarType> toScalarType(mlir::Type type) {
  if (type.isF32())
    return at::kFloat;
  if (type.isF64())
    return at::kDouble;
  if (type.isBF16())
    return at::kBFloat16;
  if (type.isF16())
    return at::kHalf;
  // Signless and signed integers map alike; unsigned ones are not slapo types.
  if (auto integer = type.dyn_cast<mlir::IntegerType>()) {
    if (integer.isUnsigned())
      return std::nullopt;
    switch (integer.getWidth()) {
    case 1:
      return at::kBool;
    case 8:
      return at::kChar;
    case 32:
      return at::kInt;
    case 64:
      return at::kLong;
    default:
      return std::nullopt;
    }
  }
  return std::nullopt;
}

mlir::Type toElementType(at::ScalarType scalarType,
                         mlir::MLIRContext *context) {
  mlir::Builder builder(context);
  switch (scalarType) {
  case at::kFloat:
    return builder.getF32Type();
  case at::kDouble:
    return builder.getF64Type();
  case at::kBFloat16:
    return builder.getBF16Type();
  case at::kHalf:
    return builder.getF16Type();
  case at::kBool:
    return builder.getI1Type();
  case at::kChar:
    return builder.getI8Type();
  case at::kInt:
    return builder.getI32Type();
  case at::kLong:
    return builder.getI64Type();
  default:
    return {};
  }
}

std::string describe(const at::Tensor &tensor) {
  if (!tensor.defined())
    return "<undefined tensor>";
  std::string text = "tensor<";
  for (int64_t size : tensor.sizes())
    text += std::to_string(size) + "x";
  switch (tensor.scalar_type()) {
  case at::kFloat:
    text += "f32";
    break;
  case at::kDouble:
    text += "f64";
    break;
  case at::kBFloat16:
    text += "bf16";
    break;
  case at::kHalf:
    text += "f16";
    break;
  case at::kBool:
    text += "i1";
    break;
  case at::kChar:
    text += "i8";
    break;
  case at::kInt:
    text += "i32";
    break;
  case at::kLong:
    text += "i64";
    break;
  default:
    text += c10::toString(tensor.scalar_type());
    break;
  }
  return text + ">";
}

namespace {
/// Copies `count` elements of type T from an ElementsAttr value range.
template <typename T, typename Range>
void copyValues(Range &&values, at::Tensor &tensor) {
  T *out = static_cast<T *>(tensor.data_ptr());
  int64_t i = 0, n = tensor.numel();
  for (auto value : values) {
    if (i == n)
      break;
    out[i++] = static_cast<T>(value);
  }
}

/// Fills a 16-bit float tensor (bf16 / f16) from APFloats by their bits.
template <typename Range>
void copyHalfBits(Range &&values, at::Tensor &tensor) {
  auto *out = static_cast<uint16_t *>(tensor.data_ptr());
  int64_t i = 0, n = tensor.numel();
  for (const llvm::APFloat &value : values) {
    if (i == n)
      break;
    out[i++] = static_cast<uint16_t>(value.bitcastToAPInt().getZExtValue());
  }
}

/// The generic path through the ElementsAttr interface (e.g. dense_resource).
bool fillGeneric(mlir::ElementsAttr attr, at::Tensor &tensor) {
  switch (tensor.scalar_type()) {
  case at::kFloat:
    if (auto values = attr.tryGetValues<float>())
      return copyValues<float>(*values, tensor), true;
    break;
  case at::kDouble:
    if (auto values = attr.tryGetValues<double>())
      return copyValues<double>(*values, tensor), true;
    break;
  case at::kBool:
    if (auto values = attr.tryGetValues<bool>())
      return copyValues<bool>(*values, tensor), true;
    break;
  case at::kChar:
    if (auto values = attr.tryGetValues<int8_t>())
      return copyValues<int8_t>(*values, tensor), true;
    break;
  case at::kInt:
    if (auto values = attr.tryGetValues<int32_t>())
      return copyValues<int32_t>(*values, tensor), true;
    break;
  case at::kLong:
    if (auto values = attr.tryGetValues<int64_t>())
      return copyValues<int64_t>(*values, tensor), true;
    break;
  case at::kBFloat16:
  case at::kHalf:
    if (auto values = attr.tryGetValues<llvm::APFloat>())
      return copyHalfBits(*values, tensor), true;
    break;
  default:
    break;
  }
  // Last resort: element attributes.
  if (auto values = attr.tryGetValues<mlir::Attribute>()) {
    int64_t i = 0, n = tensor.numel();
    for (mlir::Attribute element : *values) {
      if (i == n)
        break;
      if (auto f = element.dyn_cast<mlir::FloatAttr>())
        tensor.view({-1})[i++].fill_(f.getValueAsDouble());
      else if (auto b = element.dyn_cast<mlir::BoolAttr>())
        tensor.view({-1})[i++].fill_(b.getValue());
      else if (auto integer = element.dyn_cast<mlir::IntegerAttr>())
        tensor.view({-1})[i++].fill_(integer.getValue().getSExtValue());
      else
        return false;
    }
    return i == n;
  }
  return false;
}
} // namespace

mlir::FailureOr<at::Tensor> toTensor(mlir::ElementsAttr attr) {
  try {
    auto type = attr.getType().dyn_cast<mlir::RankedTensorType>();
    if (!type || !type.hasStaticShape())
      return mlir::failure();
    std::optional<at::ScalarType> dtype = toScalarType(type.getElementType());
    if (!dtype)
      return mlir::failure();
    std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
    int64_t count = type.getNumElements();
    if (count == 0)
      return at::empty(shape, at::TensorOptions().dtype(*dtype));

    if (auto dense = attr.dyn_cast<mlir::DenseIntOrFPElementsAttr>()) {
      bool splat = dense.isSplat();
      at::Tensor flat = at::empty({splat ? std::min<int64_t>(count, 1) : count},
                                  at::TensorOptions().dtype(*dtype));
      if (*dtype == at::kBool) {
        // i1 is bit-packed in the raw buffer: go through the bool iterator.
        copyValues<bool>(dense.getValues<bool>(), flat);
      } else {
        llvm::ArrayRef<char> raw = dense.getRawData();
        size_t bytes = flat.numel() * flat.element_size();
        if (raw.size() < bytes)
          return mlir::failure();
        if (bytes)
          std::memcpy(flat.data_ptr(), raw.data(), bytes);
      }
      if (splat)
        return flat.reshape({}).expand(shape).contiguous();
      return flat.reshape(shape);
    }

    at::Tensor tensor = at::empty(shape, at::TensorOptions().dtype(*dtype));
    if (auto resource = attr.dyn_cast<mlir::DenseResourceElementsAttr>()) {
      // dense_resource: the blob holds the elements packed, one byte per i1.
      mlir::AsmResourceBlob *blob = resource.getRawHandle().getBlob();
      if (!blob)
        return mlir::failure();
      llvm::ArrayRef<char> data = blob->getData();
      size_t bytes = tensor.numel() * tensor.element_size();
      if (data.size() != bytes)
        return mlir::failure();
      if (bytes)
        std::memcpy(tensor.data_ptr(), data.data(), bytes);
      return tensor;
    }
    if (count && !fillGeneric(attr, tensor))
      return mlir::failure();
    return tensor;
  } catch (const std::exception &) {
    return mlir::failure();
  }
}

namespace detail {

at::ScalarType scalarTypeOf(mlir::Type tensorType) {
  auto shaped = tensorType.dyn_cast<mlir::RankedTensorType>();
  if (!shaped)
    fail("expected a ranked tensor type");
  std::optional<at::ScalarType> dtype = toScalarType(shaped.getElementType());
  if (!dtype) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "element type " << shaped.getElementType()
       << " has no LibTorch dtype";
    fail(os.str());
  }
  return *dtype;
}

std::vector<int64_t> shapeOf(mlir::Type tensorType) {
  auto shaped = tensorType.dyn_cast<mlir::RankedTensorType>();
  if (!shaped || !shaped.hasStaticShape())
    fail("expected a statically shaped ranked tensor type");
  return {shaped.getShape().begin(), shaped.getShape().end()};
}

std::string shapeString(at::IntArrayRef shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

} // namespace detail
} // namespace slapo::reference
