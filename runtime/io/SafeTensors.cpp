//===- SafeTensors.cpp - the safetensors file format ----------------------===//
#include "slapo/runtime/SafeTensors.h"

#include "File.h"

#include "slapo/runtime/Error.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <sys/stat.h>
#include <unistd.h>

namespace slapo::rt {
namespace {

/// Headers larger than this are not tensor tables but a corrupt length (the
/// limit of Python's safetensors).
constexpr uint64_t kMaxHeaderBytes = 100 << 20;

std::string describe(DType dtype, const Shape &shape) {
  return getName(dtype) + shape.str();
}

} // namespace

void writeSafeTensors(const std::string &path,
                      const std::vector<NamedTensor> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const NamedTensor &named : tensors) {
    const Shape &shape = named.tensor.shape;
    if (named.name == "__metadata__" || header.contains(named.name))
      throw Error(path + ": cannot write two tensors named '" + named.name +
                  "'");
    uint64_t bytes = named.tensor.getBytes();
    header[named.name] = {
        {"dtype", getName(named.tensor.dtype)},
        {"shape", std::vector<int64_t>(shape.dims, shape.dims + shape.rank)},
        {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception &e) {
    // A name or metadata value that is not UTF-8.
    throw Error(path + ": cannot write the header: " + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i)
    prefix[i] = static_cast<unsigned char>(uint64_t(text.size()) >> (8 * i));

  io::writeFileAtomically(path, [&](int fd) {
    io::writeAll(fd, prefix, sizeof prefix, path);
    io::writeAll(fd, text.data(), text.size(), path);
    for (const NamedTensor &named : tensors)
      io::writeAll(fd, named.tensor.data, named.tensor.getBytes(), path);
  });
}

SafeTensorsReader::SafeTensorsReader(const std::string &path) : path(path) {
  io::FileDescriptor file = io::openForReading(path);
  struct stat status;
  if (::fstat(file.get(), &status) != 0)
    throwSystemError(path);
  if (!S_ISREG(status.st_mode))
    throw Error(path + ": not a regular file");
  uint64_t fileSize = status.st_size;
  auto bad = [&](const std::string &why) {
    return Error(path + ": not a valid safetensors file: " + why);
  };
  if (fileSize < 8)
    throw bad("shorter than its 8-byte header length (truncated?)");
  unsigned char prefix[8];
  io::readAt(file.get(), 0, prefix, 8, path);
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= static_cast<uint64_t>(prefix[i]) << (8 * i);
  if (length > kMaxHeaderBytes || length > fileSize - 8)
    throw bad("the header length " + std::to_string(length) +
              " exceeds the file's " + std::to_string(fileSize) +
              " bytes (truncated?)");
  std::string text(length, '\0');
  io::readAt(file.get(), 8, text.data(), length, path);
  nlohmann::ordered_json header =
      nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded())
    throw bad("the header is not valid JSON");
  if (!header.is_object())
    throw bad("the header is not a JSON object");

  uint64_t dataStart = 8 + length;
  for (auto &[name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object())
        throw bad("__metadata__ is not an object");
      for (auto &[key, value] : entry.items()) {
        if (!value.is_string())
          throw bad("metadata '" + key + "' is not a string");
        metadata[key] = value.get<std::string>();
      }
      continue;
    }
    std::string what = "tensor '" + name + "'";
    if (!entry.is_object() || !entry.contains("dtype") ||
        !entry.contains("shape") || !entry.contains("data_offsets"))
      throw bad(what + " lacks dtype, shape or data_offsets");
    const auto &dtype = entry["dtype"];
    const auto &shape = entry["shape"];
    const auto &offsets = entry["data_offsets"];
    Info info;
    if (!dtype.is_string() || !parseDType(dtype.get<std::string>(), info.dtype))
      throw bad(what + " has the unsupported dtype " + dtype.dump());
    if (!shape.is_array() || shape.size() > static_cast<size_t>(kMaxRank))
      throw bad(what + " has a shape that is not a list of at most " +
                std::to_string(kMaxRank) + " sizes");
    uint64_t bytes = getSize(info.dtype);
    info.shape.rank = shape.size();
    for (int d = 0; d < info.shape.rank; ++d) {
      const auto &size = shape[d];
      if (!size.is_number_unsigned() ||
          size.get<uint64_t>() > uint64_t(INT64_MAX) ||
          __builtin_mul_overflow(bytes, size.get<uint64_t>(), &bytes))
        throw bad(what + " has the bad shape " + shape.dump());
      info.shape.dims[d] = size.get<int64_t>();
    }
    if (!offsets.is_array() || offsets.size() != 2 ||
        !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
      throw bad(what + " has bad data_offsets " + offsets.dump());
    uint64_t begin = offsets[0].get<uint64_t>();
    uint64_t end = offsets[1].get<uint64_t>();
    if (end < begin || end - begin != bytes)
      throw bad(what + " has data_offsets " + offsets.dump() + " for the " +
                std::to_string(bytes) + " bytes of " +
                describe(info.dtype, info.shape));
    if (end > fileSize - dataStart)
      throw bad(what + " ends at byte " + std::to_string(dataStart + end) +
                " of a " + std::to_string(fileSize) +
                "-byte file (truncated?)");
    info.begin = dataStart + begin;
    info.end = dataStart + end;
    if (!infos.emplace(name, info).second)
      throw bad("two tensors are named '" + name + "'");
    names.push_back(name);
  }
  fd = file.release();
}

SafeTensorsReader::SafeTensorsReader(SafeTensorsReader &&other) noexcept
    : path(std::move(other.path)), fd(other.fd), names(std::move(other.names)),
      infos(std::move(other.infos)), metadata(std::move(other.metadata)) {
  other.fd = -1;
}

SafeTensorsReader &
SafeTensorsReader::operator=(SafeTensorsReader &&other) noexcept {
  if (this != &other) {
    if (fd >= 0)
      ::close(fd);
    path = std::move(other.path);
    fd = other.fd;
    other.fd = -1;
    names = std::move(other.names);
    infos = std::move(other.infos);
    metadata = std::move(other.metadata);
  }
  return *this;
}

SafeTensorsReader::~SafeTensorsReader() {
  if (fd >= 0)
    ::close(fd);
}

const SafeTensorsReader::Info &
SafeTensorsReader::getInfo(const std::string &name) const {
  auto it = infos.find(name);
  if (it == infos.end())
    throw Error(path + ": no tensor '" + name + "'");
  return it->second;
}

void SafeTensorsReader::read(const std::string &name, const Tensor &out) const {
  const Info &info = getInfo(name);
  if (info.dtype != out.dtype || info.shape != out.shape)
    throw Error(path + ": tensor '" + name + "' is " +
                describe(info.dtype, info.shape) +
                ", but the program expects " + describe(out.dtype, out.shape));
  io::readAt(fd, info.begin, out.data, out.getBytes(), path);
}

void SafeTensorsReader::readSlice(const std::string &name, int dim,
                                  int64_t start, const Tensor &out) const {
  const Info &info = getInfo(name);
  const Shape &shape = info.shape;
  bool matches = info.dtype == out.dtype && shape.rank == out.getRank() &&
                 dim >= 0 && dim < shape.rank;
  for (int d = 0; matches && d < shape.rank; ++d)
    matches = d == dim || shape[d] == out.shape[d];
  if (!matches)
    throw Error(path + ": tensor '" + name + "' is " +
                describe(info.dtype, shape) + ", which has no slice " +
                describe(out.dtype, out.shape) + " along dim " +
                std::to_string(dim));
  int64_t count = out.shape[dim];
  if (start < 0 || count < 0 || start > shape[dim] - count)
    throw Error(path + ": tensor '" + name + "' is " +
                describe(info.dtype, shape) + ", which has no slice [" +
                std::to_string(start) + ", " + std::to_string(start + count) +
                ") along dim " + std::to_string(dim));
  // The slice is `outer` runs of `count * inner` contiguous elements.
  int64_t outer = 1, inner = getSize(info.dtype);
  for (int d = 0; d < dim; ++d)
    outer *= shape[d];
  for (int d = dim + 1; d < shape.rank; ++d)
    inner *= shape[d];
  uint64_t run = count * inner;
  char *data = static_cast<char *>(out.data);
  for (int64_t o = 0; o < outer; ++o)
    io::readAt(fd, info.begin + (o * shape[dim] + start) * inner,
               data + o * run, run, path);
}

} // namespace slapo::rt
