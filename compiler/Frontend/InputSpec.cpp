//===- InputSpec.cpp - static input declarations --------------------------===//
#include "slapo/Frontend/InputSpec.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

namespace slapo {

llvm::ArrayRef<llvm::StringRef> dtypeNames() {
  static const llvm::StringRef names[] = {"f32", "f64", "bf16", "f16",
                                          "i64", "i32", "i8",   "i1"};
  return names;
}

mlir::Type parseDtype(mlir::MLIRContext &context, llvm::StringRef dtype) {
  mlir::Builder builder(&context);
  return llvm::StringSwitch<mlir::Type>(dtype)
      .Case("f32", builder.getF32Type())
      .Case("f64", builder.getF64Type())
      .Case("bf16", builder.getBF16Type())
      .Case("f16", builder.getF16Type())
      .Case("i64", builder.getI64Type())
      .Case("i32", builder.getI32Type())
      .Case("i8", builder.getI8Type())
      .Case("i1", builder.getI1Type())
      .Default(nullptr);
}

mlir::RankedTensorType InputSpec::getType(mlir::MLIRContext &context) const {
  return mlir::RankedTensorType::get(shape, parseDtype(context, dtype));
}

std::string InputSpec::str() const {
  return name + "=" + dtype + "[" +
         llvm::join(llvm::map_range(
                        shape, [](int64_t d) { return std::to_string(d); }),
                    ",") +
         "]";
}

std::string InputSpec::declaredStr() const {
  InputSpec declared = *this;
  if (!declared.shape.empty())
    declared.shape[0] *= dataParallelRanks;
  return declared.str();
}

static llvm::Error specError(llvm::StringRef text, const llvm::Twine &problem) {
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "invalid input '" + text + "': " + problem +
          " (expected NAME=DTYPE[D0,D1,...], e.g. input_ids=i64[8,128])");
}

llvm::Expected<InputSpec> parseInputSpec(llvm::StringRef text) {
  auto [name, type] = text.split('=');
  name = name.trim();
  if (name.empty() || type.empty())
    return specError(text, "missing name or type");
  if (!llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; }))
    return specError(text, "the name must be a Python identifier");
  size_t open = type.find('[');
  if (open == llvm::StringRef::npos || !type.trim().endswith("]"))
    return specError(text, "the shape must be in brackets");
  InputSpec spec;
  spec.name = name.str();
  spec.dtype = type.take_front(open).trim().str();
  if (!llvm::is_contained(dtypeNames(), spec.dtype))
    return specError(text, "unknown dtype '" + spec.dtype +
                               "'; valid: " + llvm::join(dtypeNames(), ", "));
  llvm::StringRef dims = type.drop_front(open + 1).trim().drop_back().trim();
  if (dims.empty())
    return spec;
  llvm::SmallVector<llvm::StringRef> parts;
  dims.split(parts, ',');
  for (llvm::StringRef part : parts) {
    int64_t size;
    if (part.trim().getAsInteger(10, size) || size <= 0)
      return specError(text, "dimension '" + part.trim() +
                                 "' is not a positive integer");
    spec.shape.push_back(size);
  }
  return spec;
}

} // namespace slapo
