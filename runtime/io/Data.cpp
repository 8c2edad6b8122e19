//===- Data.cpp - the inputs of each training step ------------------------===//
#include "slapo/runtime/Data.h"

#include "File.h"

#include "slapo/runtime/Error.h"
#include "slapo/runtime/Random.h"
#include "slapo/runtime/SafeTensors.h"

#include <algorithm>
#include <sys/mman.h>
#include <sys/stat.h>

namespace slapo::rt {

DataSource::~DataSource() = default;

namespace {

bool isIndex(DType dtype) { return dtype == DType::I64 || dtype == DType::I32; }

std::string describeInput(const DataInput &input) {
  return "input '" + input.name + "' (" + getName(input.tensor.dtype) +
         input.tensor.shape.str() + ")";
}

/// Stores integer `value` as element `i` of an I64 or I32 tensor.
void storeIndex(const Tensor &tensor, int64_t i, int64_t value) {
  if (tensor.dtype == DType::I64)
    tensor.as<int64_t>()[i] = value;
  else
    tensor.as<int32_t>()[i] = static_cast<int32_t>(value);
}

int64_t loadIndex(const Tensor &tensor, int64_t i) {
  return tensor.dtype == DType::I64 ? tensor.as<int64_t>()[i]
                                    : tensor.as<int32_t>()[i];
}

/// A flat token file, mapped read-only.
class TokenFile final : public DataSource {
public:
  TokenFile(const std::string &path, uint64_t seed,
            const std::vector<DataInput> &inputs)
      : path(path), seed(seed), width(io::hasSuffix(path, ".u32") ? 4 : 2) {
    io::FileDescriptor file = io::openForReading(path);
    struct stat status;
    if (::fstat(file.get(), &status) != 0)
      throwSystemError(path);
    bytes = status.st_size;
    if (bytes % width != 0)
      throw Error(path + ": its " + std::to_string(bytes) +
                  " bytes are not a whole number of " + getTokenType() +
                  " tokens");
    count = bytes / width;
    const DataInput *smallestVocabulary = nullptr;
    for (const DataInput &input : inputs) {
      if (!isIndex(input.tensor.dtype) || input.tensor.getRank() != 2)
        throw Error(path +
                    ": a token file feeds [batch, sequence] I64 or "
                    "I32 inputs, not " +
                    describeInput(input) + "; use a .safetensors batch file");
      uint64_t length = input.tensor.shape[1];
      if (count < length)
        throw Error(path + ": data too short: " + std::to_string(count) +
                    " tokens, need " + std::to_string(length) + " for " +
                    describeInput(input));
      if (input.indexBound > 0 &&
          (!smallestVocabulary ||
           input.indexBound < smallestVocabulary->indexBound))
        smallestVocabulary = &input;
    }
    if (bytes == 0)
      return;
    mapping = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, file.get(), 0);
    if (mapping == MAP_FAILED)
      throwSystemError(path);
    if (smallestVocabulary)
      checkVocabulary(*smallestVocabulary);
  }
  ~TokenFile() override {
    if (mapping != MAP_FAILED)
      ::munmap(mapping, bytes);
  }

  void fill(int64_t step, const std::vector<DataInput> &inputs) override {
    for (const DataInput &input : inputs) {
      int64_t rows = input.tensor.shape[0], length = input.tensor.shape[1];
      uint64_t windows = count - length + 1;
      for (int64_t row = 0; row < rows; ++row) {
        uint64_t start = randomBits(seed, step, row) % windows;
        for (int64_t t = 0; t < length; ++t)
          storeIndex(input.tensor, row * length + t, getToken(start + t));
      }
    }
  }

  std::string describe() const override {
    return path + " (" + std::to_string(count) + " " + getTokenType() +
           " tokens)";
  }

private:
  std::string getTokenType() const { return width == 4 ? "uint32" : "uint16"; }

  /// Every token of the file is below the vocabulary of `input`, the
  /// smallest of the inputs: checked once, before step 1, rather than when
  /// a batch happens to draw a bad one.
  void checkVocabulary(const DataInput &input) const {
    auto bound = static_cast<uint64_t>(input.indexBound);
    for (uint64_t position = 0; position < count; ++position) {
      uint64_t value = getToken(position);
      if (value >= bound)
        throw Error(path + ": token " + std::to_string(value) +
                    " at position " + std::to_string(position) +
                    " (byte offset " + std::to_string(position * width) +
                    ") is outside the vocabulary (" + std::to_string(bound) +
                    ") of " + describeInput(input) +
                    "; every token must be below " + std::to_string(bound));
    }
  }

  uint64_t getToken(uint64_t position) const {
    const auto *data =
        static_cast<const unsigned char *>(mapping) + position * width;
    uint64_t value = 0;
    for (unsigned b = 0; b < width; ++b)
      value |= static_cast<uint64_t>(data[b]) << (8 * b);
    return value;
  }

  std::string path;
  uint64_t seed;
  unsigned width;
  void *mapping = MAP_FAILED;
  uint64_t bytes = 0, count = 0;
};

/// A safetensors file of whole batches.
class BatchFile final : public DataSource {
public:
  BatchFile(const std::string &path, const std::vector<DataInput> &inputs)
      : reader(path) {
    const DataInput *first = nullptr;
    for (const DataInput &input : inputs) {
      if (!reader.contains(input.name))
        throw Error(path + ": no batches for " + describeInput(input));
      const SafeTensorsReader::Info &info = reader.getInfo(input.name);
      const Shape &shape = info.shape;
      bool matches = info.dtype == input.tensor.dtype &&
                     shape.rank == input.tensor.getRank() + 1 &&
                     shape.rank <= kMaxRank && shape[0] > 0;
      for (int d = 1; matches && d < shape.rank; ++d)
        matches = shape[d] == input.tensor.shape[d - 1];
      if (!matches)
        throw Error(
            path + ": '" + input.name + "' is " + getName(info.dtype) +
            shape.str() + ", but the batches of " + describeInput(input) +
            " must be " + getName(input.tensor.dtype) + "[S" +
            (input.tensor.getRank() ? ", " + input.tensor.shape.str().substr(1)
                                    : std::string("]")) +
            " with S >= 1");
      if (!first) {
        first = &input;
        batches = shape[0];
      } else if (shape[0] != batches) {
        throw Error(path + ": '" + input.name + "' has " +
                    std::to_string(shape[0]) + " batches, but '" + first->name +
                    "' has " + std::to_string(batches));
      }
    }
  }

  void fill(int64_t step, const std::vector<DataInput> &inputs) override {
    int64_t batch = (step - 1) % batches;
    for (const DataInput &input : inputs) {
      // `input` as batch `batch` of the file's [S, ...] tensor.
      Tensor slice = input.tensor;
      slice.shape.rank = input.tensor.getRank() + 1;
      slice.shape.dims[0] = 1;
      for (int d = 1; d < slice.shape.rank; ++d)
        slice.shape.dims[d] = input.tensor.shape[d - 1];
      reader.readSlice(input.name, 0, batch, slice);
      if (input.indexBound <= 0 || !isIndex(input.tensor.dtype))
        continue;
      for (int64_t i = 0, e = input.tensor.getNumElements(); i < e; ++i) {
        int64_t value = loadIndex(input.tensor, i);
        if ((value < 0 || value >= input.indexBound) &&
            value != input.ignoredIndex)
          throw Error(reader.getPath() + ": value " + std::to_string(value) +
                      " at index " + std::to_string(i) + " of batch " +
                      std::to_string(batch) + " of " + describeInput(input) +
                      " is outside the vocabulary (" +
                      std::to_string(input.indexBound) + ")" +
                      (input.ignoredIndex
                           ? " and not the ignored index " +
                                 std::to_string(*input.ignoredIndex)
                           : std::string()));
      }
    }
  }

  std::string describe() const override {
    return reader.getPath() + " (" + std::to_string(batches) + " batches)";
  }

private:
  SafeTensorsReader reader;
  int64_t batches = 1;
};

/// The FNV-1a hash of `text`: the same on every rank and build.
uint64_t hashName(const std::string &text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text)
    hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

class SyntheticData final : public DataSource {
public:
  SyntheticData(uint64_t seed, std::vector<std::string> ownValues)
      : seed(seed), ownValues(std::move(ownValues)) {}

  void fill(int64_t step, const std::vector<DataInput> &inputs) override {
    for (const DataInput &input : inputs) {
      const Tensor &tensor = input.tensor;
      uint64_t bound = input.indexBound > 0 ? input.indexBound : 2;
      uint64_t inputSeed = std::find(ownValues.begin(), ownValues.end(),
                                     input.name) != ownValues.end()
                               ? seed ^ hashName(input.name)
                               : seed;
      for (int64_t i = 0, e = tensor.getNumElements(); i < e; ++i) {
        uint64_t bits = randomBits(inputSeed, step, i);
        double real = 2 * uniform01(bits) - 1;
        switch (tensor.dtype) {
        case DType::I64:
        case DType::I32:
          storeIndex(tensor, i, static_cast<int64_t>(bits % bound));
          break;
        case DType::I8:
          tensor.as<int8_t>()[i] =
              static_cast<int8_t>(bits % std::min<uint64_t>(bound, 128));
          break;
        case DType::Bool:
          tensor.as<uint8_t>()[i] = bits & 1;
          break;
        case DType::F32:
          tensor.as<float>()[i] = static_cast<float>(real);
          break;
        case DType::F64:
          tensor.as<double>()[i] = real;
          break;
        case DType::BF16:
          tensor.as<BFloat16>()[i] =
              BFloat16::fromFloat(static_cast<float>(real));
          break;
        case DType::F16:
          throw Error("synthetic data for " + describeInput(input) +
                      " is not supported; give --data");
        }
      }
    }
  }

  std::string describe() const override {
    std::string text = "synthetic data (seed " + std::to_string(seed);
    for (size_t i = 0; i < ownValues.size(); ++i)
      text += (i == 0 ? "; own values: " : ", ") + ownValues[i];
    return text + ")";
  }

private:
  uint64_t seed;
  std::vector<std::string> ownValues;
};

} // namespace

std::unique_ptr<DataSource>
openDataSource(const std::string &path, uint64_t seed,
               const std::vector<DataInput> &inputs) {
  if (io::isDirectory(path))
    throw Error("--data " + path +
                ": is a directory; give a token file or a .safetensors "
                "batch file");
  if (io::hasSuffix(path, ".safetensors"))
    return std::make_unique<BatchFile>(path, inputs);
  return std::make_unique<TokenFile>(path, seed, inputs);
}

std::unique_ptr<DataSource>
makeSyntheticDataSource(uint64_t seed, const std::vector<DataInput> &inputs,
                        const std::vector<std::string> &ownValues) {
  for (const std::string &name : ownValues)
    if (std::none_of(inputs.begin(), inputs.end(), [&](const DataInput &input) {
          return input.name == name;
        })) {
      std::string names;
      for (const DataInput &input : inputs)
        names += (names.empty() ? "'" : ", '") + input.name + "'";
      throw Error("--own-values " + name + ": the program has no input '" +
                  name + "'; its inputs are " + names);
    }
  return std::make_unique<SyntheticData>(seed, ownValues);
}

} // namespace slapo::rt
