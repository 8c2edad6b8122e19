#include "slapo/runtime/Data.h"
#include "slapo/runtime/Error.h"
#include "slapo/runtime/Random.h"
#include "slapo/runtime/SafeTensors.h"

#include "ScratchDir.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

using namespace slapo::rt;
namespace fs = std::filesystem;
using Catch::Contains;

namespace {

/// Token i of the test files.
uint32_t tokenAt(uint64_t i, uint32_t vocabulary) {
  return static_cast<uint32_t>((i * 37 + 11) % vocabulary);
}

/// Writes `tokens` as little-endian integers of `width` bytes.
void writeTokens(const std::string &path, const std::vector<uint32_t> &tokens,
                 int width) {
  std::string bytes;
  for (uint32_t token : tokens)
    for (int b = 0; b < width; ++b)
      bytes.push_back(static_cast<char>(token >> (8 * b)));
  std::ofstream(path, std::ios::binary) << bytes;
}

std::vector<uint32_t> makeTokens(int64_t count, uint32_t vocabulary) {
  std::vector<uint32_t> tokens;
  for (int64_t i = 0; i < count; ++i)
    tokens.push_back(tokenAt(i, vocabulary));
  return tokens;
}

/// The [B, T] token inputs of a language model.
struct TokenInputs {
  static constexpr int B = 4, T = 16;
  int64_t ids[B][T] = {};
  int32_t labels[B][T] = {};
  std::vector<DataInput> inputs(int64_t vocabulary) {
    return {{"input_ids", Tensor(ids, DType::I64, {B, T}), vocabulary},
            {"labels", Tensor(labels, DType::I32, {B, T}), vocabulary}};
  }
};

/// Checks that `inputs` hold the rows of step `step` of a file of `count`
/// tokens tokenAt(i, vocabulary).
void checkWindows(const TokenInputs &inputs, uint64_t seed, int64_t step,
                  int64_t count, uint32_t vocabulary) {
  for (int b = 0; b < TokenInputs::B; ++b) {
    uint64_t start = randomBits(seed, step, b) % (count - TokenInputs::T + 1);
    for (int t = 0; t < TokenInputs::T; ++t) {
      REQUIRE(inputs.ids[b][t] == tokenAt(start + t, vocabulary));
      REQUIRE(inputs.labels[b][t] == inputs.ids[b][t]);
    }
  }
}

} // namespace

TEST_CASE("a uint16 token file gives the windows of the formula", "[data]") {
  ScratchDir dir;
  std::string path = dir / "tokens.bin";
  const int64_t count = 500;
  writeTokens(path, makeTokens(count, 1000), 2);
  TokenInputs batch;
  std::unique_ptr<DataSource> data =
      openDataSource(path, 42, batch.inputs(1000));
  CHECK(data->describe() == path + " (500 uint16 tokens)");
  for (int64_t step : {1, 2, 77}) {
    data->fill(step, batch.inputs(1000));
    checkWindows(batch, 42, step, count, 1000);
  }
}

TEST_CASE("a .u32 token file holds 32-bit tokens", "[data]") {
  ScratchDir dir;
  std::string path = dir / "tokens.u32";
  const int64_t count = 64;
  const uint32_t vocabulary = 100000; // beyond uint16
  writeTokens(path, makeTokens(count, vocabulary), 4);
  TokenInputs batch;
  std::unique_ptr<DataSource> data =
      openDataSource(path, 7, batch.inputs(vocabulary));
  CHECK(data->describe() == path + " (64 uint32 tokens)");
  data->fill(3, batch.inputs(vocabulary));
  checkWindows(batch, 7, 3, count, vocabulary);
}

TEST_CASE("token windows depend only on the seed and the step", "[data]") {
  ScratchDir dir;
  std::string path = dir / "tokens.bin";
  writeTokens(path, makeTokens(4096, 50000), 2);
  TokenInputs a, b, c;
  openDataSource(path, 1, a.inputs(50000))->fill(5, a.inputs(50000));
  openDataSource(path, 1, b.inputs(50000))->fill(5, b.inputs(50000));
  openDataSource(path, 2, c.inputs(50000))->fill(5, c.inputs(50000));
  CHECK(std::memcmp(a.ids, b.ids, sizeof a.ids) == 0);
  CHECK(std::memcmp(a.ids, c.ids, sizeof a.ids) != 0);
  openDataSource(path, 1, b.inputs(50000))->fill(6, b.inputs(50000));
  CHECK(std::memcmp(a.ids, b.ids, sizeof a.ids) != 0);
}

TEST_CASE("token files that cannot feed the inputs are refused", "[data]") {
  ScratchDir dir;
  TokenInputs batch;
  std::string missing = dir / "missing.bin";
  CHECK_THROWS_WITH(openDataSource(missing, 0, batch.inputs(1000)),
                    Contains(missing + ": No such file or directory"));

  std::string odd = dir / "odd.bin";
  std::ofstream(odd, std::ios::binary) << std::string(33, '\0');
  CHECK_THROWS_WITH(openDataSource(odd, 0, batch.inputs(1000)),
                    Contains(odd) &&
                        Contains("33 bytes are not a whole number of uint16"));
  std::string oddWide = dir / "odd.u32";
  std::ofstream(oddWide, std::ios::binary) << std::string(34, '\0');
  CHECK_THROWS_WITH(openDataSource(oddWide, 0, batch.inputs(1000)),
                    Contains("not a whole number of uint32"));

  std::string shortFile = dir / "short.bin";
  writeTokens(shortFile, makeTokens(5, 1000), 2);
  CHECK_THROWS_WITH(openDataSource(shortFile, 0, batch.inputs(1000)),
                    Contains(shortFile) &&
                        Contains("data too short: 5 tokens, need 16"));

  float features[4][16];
  std::vector<DataInput> floats = {
      {"x", Tensor(features, DType::F32, {4, 16}), 0}};
  std::string tokens = dir / "tokens.bin";
  writeTokens(tokens, makeTokens(100, 1000), 2);
  CHECK_THROWS_WITH(openDataSource(tokens, 0, floats),
                    Contains("not input 'x' (F32[4, 16])"));
}

TEST_CASE("a token outside the vocabulary is an error when the file opens",
          "[data]") {
  ScratchDir dir;
  std::string path = dir / "tokens.bin";
  // The last of many tokens: a batch would draw it rarely.
  std::vector<uint32_t> tokens = makeTokens(100000, 1000);
  tokens.back() = 1000;
  writeTokens(path, tokens, 2);
  TokenInputs batch;
  CHECK_THROWS_WITH(openDataSource(path, 3, batch.inputs(1000)),
                    Contains(path + ": token 1000 at position 99999 (byte "
                                    "offset 199998) is outside the "
                                    "vocabulary (1000) of input 'input_ids' "
                                    "(I64[4, 16]); every token must be below "
                                    "1000"));
  // Within a larger vocabulary the token is fine.
  openDataSource(path, 3, batch.inputs(1001))->fill(1, batch.inputs(1001));
}

TEST_CASE("a directory given as --data is refused as one", "[data]") {
  ScratchDir dir;
  TokenInputs batch;
  CHECK_THROWS_WITH(
      openDataSource(dir.path.string(), 3, batch.inputs(1000)),
      Contains("--data " + dir.path.string() +
               ": is a directory; give a token file or a .safetensors batch "
               "file"));
}

TEST_CASE("a batch file feeds batch (step - 1) mod S", "[data]") {
  ScratchDir dir;
  std::string path = dir / "batches.safetensors";
  float x[3][2][2];
  int64_t y[3][2];
  for (int s = 0; s < 3; ++s) {
    for (int i = 0; i < 4; ++i)
      x[s][i / 2][i % 2] = 100 * s + i;
    y[s][0] = s;
    y[s][1] = 2 * s;
  }
  writeSafeTensors(path, {{"x", Tensor(x, DType::F32, {3, 2, 2})},
                          {"y", Tensor(y, DType::I64, {3, 2})}});
  float xIn[2][2];
  int64_t yIn[2];
  std::vector<DataInput> inputs = {{"x", Tensor(xIn, DType::F32, {2, 2}), 0},
                                   {"y", Tensor(yIn, DType::I64, {2}), 5}};
  std::unique_ptr<DataSource> data = openDataSource(path, 0, inputs);
  CHECK(data->describe() == path + " (3 batches)");
  for (int64_t step : {1, 2, 3, 4, 8}) {
    data->fill(step, inputs);
    int64_t s = (step - 1) % 3;
    CHECK(xIn[1][0] == 100 * s + 2);
    CHECK(yIn[1] == 2 * s);
  }
  inputs[1].indexBound = 4;
  CHECK_THROWS_WITH(data->fill(3, inputs),
                    Contains(path + ": value 4 at index 1 of batch 2 of "
                                    "input 'y' (I64[2])") &&
                        Contains("outside the vocabulary (4)"));
}

TEST_CASE("batch files that do not match the inputs are refused", "[data]") {
  ScratchDir dir;
  std::string path = dir / "batches.safetensors";
  float x[3][2];
  int64_t y[2][2];
  writeSafeTensors(path, {{"x", Tensor(x, DType::F32, {3, 2})},
                          {"y", Tensor(y, DType::I64, {2, 2})}});
  float xIn[2];
  int64_t yIn[2];
  auto refuse = [&](const std::vector<DataInput> &inputs,
                    const std::string &why) {
    CHECK_THROWS_WITH(openDataSource(path, 0, inputs),
                      Contains(path) && Contains(why));
  };
  refuse({{"z", Tensor(xIn, DType::F32, {2}), 0}},
         "no batches for input 'z' (F32[2])");
  refuse({{"x", Tensor(xIn, DType::F32, {1, 2}), 0}},
         "'x' is F32[3, 2], but the batches of input 'x' (F32[1, 2]) must be "
         "F32[S, 1, 2] with S >= 1");
  refuse({{"x", Tensor(xIn, DType::F64, {2}), 0}}, "must be F64[S, 2]");
  refuse({{"x", Tensor(xIn, DType::F32, {2}), 0},
          {"y", Tensor(yIn, DType::I64, {2}), 0}},
         "'y' has 2 batches, but 'x' has 3");
}

TEST_CASE("synthetic inputs follow the documented formulas", "[data]") {
  int64_t ids[3][5];
  int32_t bits[7];
  float features[2][3];
  uint8_t mask[4];
  std::vector<DataInput> inputs = {
      {"ids", Tensor(ids, DType::I64, {3, 5}), 11},
      {"bits", Tensor(bits, DType::I32, {7}), 0},
      {"features", Tensor(features, DType::F32, {2, 3}), 0},
      {"mask", Tensor(mask, DType::Bool, {4}), 0}};
  std::unique_ptr<DataSource> data = makeSyntheticDataSource(99, inputs);
  CHECK(data->describe() == "synthetic data (seed 99)");
  data->fill(4, inputs);
  for (int i = 0; i < 15; ++i)
    CHECK(ids[i / 5][i % 5] == int64_t(randomBits(99, 4, i) % 11));
  for (int i = 0; i < 7; ++i)
    CHECK(bits[i] == int32_t(randomBits(99, 4, i) % 2));
  for (int i = 0; i < 6; ++i) {
    float expected = float(2 * uniform01(randomBits(99, 4, i)) - 1);
    CHECK(features[i / 3][i % 3] == expected);
  }
  for (int i = 0; i < 4; ++i)
    CHECK(mask[i] == (randomBits(99, 4, i) & 1));

  int64_t again[3][5];
  std::vector<DataInput> same = {
      {"ids", Tensor(again, DType::I64, {3, 5}), 11}};
  makeSyntheticDataSource(99, same)->fill(4, same);
  CHECK(std::memcmp(again, ids, sizeof ids) == 0);
  makeSyntheticDataSource(98, same)->fill(4, same);
  CHECK(std::memcmp(again, ids, sizeof ids) != 0);
}

TEST_CASE("synthetic inputs of one shape agree unless given values of their "
          "own",
          "[data]") {
  int64_t inputIds[2][8], labels[2][8], decoderIds[2][8];
  std::vector<DataInput> inputs = {
      {"input_ids", Tensor(inputIds, DType::I64, {2, 8}), 1000},
      {"labels", Tensor(labels, DType::I64, {2, 8}), 1000},
      {"decoder_input_ids", Tensor(decoderIds, DType::I64, {2, 8}), 1000}};
  makeSyntheticDataSource(7, inputs)->fill(2, inputs);
  CHECK(std::memcmp(inputIds, labels, sizeof labels) == 0);
  CHECK(std::memcmp(inputIds, decoderIds, sizeof labels) == 0);

  std::unique_ptr<DataSource> data =
      makeSyntheticDataSource(7, inputs, {"decoder_input_ids"});
  CHECK(data->describe() ==
        "synthetic data (seed 7; own values: decoder_input_ids)");
  data->fill(2, inputs);
  CHECK(std::memcmp(inputIds, labels, sizeof labels) == 0);
  CHECK(std::memcmp(inputIds, decoderIds, sizeof labels) != 0);
  // Seed 7 XOR the FNV-1a hash of the name (computed with Python's ints).
  CHECK(decoderIds[1][3] ==
        int64_t(randomBits(7 ^ 0xd23cd9098f90465dull, 2, 11) % 1000));

  CHECK_THROWS_WITH(makeSyntheticDataSource(7, inputs, {"label"}),
                    "--own-values label: the program has no input 'label'; "
                    "its inputs are 'input_ids', 'labels', "
                    "'decoder_input_ids'");
}
