//===- Tensor.cpp - element types, shapes and tensor views ----------------===//
#include "slapo/runtime/Tensor.h"
#include "slapo/runtime/Error.h"

#include <cerrno>
#include <cstring>

namespace slapo::rt {

namespace {
struct DTypeInfo {
  DType dtype;
  const char *name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::F32, "F32", 4}, {DType::F64, "F64", 8},   {DType::BF16, "BF16", 2},
    {DType::F16, "F16", 2}, {DType::I8, "I8", 1},     {DType::I32, "I32", 4},
    {DType::I64, "I64", 8}, {DType::Bool, "BOOL", 1},
};
const DTypeInfo &getInfo(DType dtype) {
  return kDTypes[static_cast<int>(dtype)];
}
} // namespace

size_t getSize(DType dtype) { return getInfo(dtype).size; }
const char *getName(DType dtype) { return getInfo(dtype).name; }

bool parseDType(const std::string &name, DType &dtype) {
  for (const DTypeInfo &info : kDTypes)
    if (name == info.name) {
      dtype = info.dtype;
      return true;
    }
  return false;
}

Shape::Shape(std::initializer_list<int64_t> sizes) {
  if (sizes.size() > kMaxRank)
    throw Error("a tensor of rank " + std::to_string(sizes.size()) +
                " exceeds the runtime's rank limit " +
                std::to_string(kMaxRank));
  for (int64_t size : sizes)
    dims[rank++] = size;
}

int64_t Shape::getNumElements() const {
  int64_t count = 1;
  for (int d = 0; d < rank; ++d)
    count *= dims[d];
  return count;
}

bool Shape::operator==(const Shape &other) const {
  if (rank != other.rank)
    return false;
  for (int d = 0; d < rank; ++d)
    if (dims[d] != other.dims[d])
      return false;
  return true;
}

std::string Shape::str() const {
  std::string text = "[";
  for (int d = 0; d < rank; ++d)
    text += (d ? ", " : "") + std::to_string(dims[d]);
  return text + "]";
}

void throwSystemError(const std::string &path) {
  throw Error(path + ": " + std::strerror(errno));
}

} // namespace slapo::rt
