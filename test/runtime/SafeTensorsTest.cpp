#include "slapo/runtime/SafeTensors.h"
#include "slapo/runtime/Error.h"

#include "ScratchDir.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sys/mman.h>

using namespace slapo::rt;
namespace fs = std::filesystem;
using Catch::Contains;

namespace {

std::string readBytes(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

/// A file of the format written by hand: header length, header, data.
std::string makeFile(std::string header, const std::string &data) {
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i)
    prefix[i] = static_cast<char>(uint64_t(header.size()) >> (8 * i));
  return prefix + header + data;
}

std::string floatBytes(std::initializer_list<float> values) {
  std::string bytes;
  for (float value : values)
    bytes.append(reinterpret_cast<const char *>(&value), sizeof value);
  return bytes;
}

/// The repository's Python with safetensors, as the README sets it up.
std::string pythonCommand() {
  return "PYTHONPATH=" +
         (fs::path(SLAPO_SOURCE_DIR) / "third_party/.pydeps").string() +
         " /usr/bin/python3";
}

/// Fails the test case where the Python that third_party/install.sh sets up
/// cannot import safetensors: a missing dependency is a broken install, not a
/// reason to pass.
void requirePythonSafeTensors() {
  if (std::system((pythonCommand() +
                   " -c 'import numpy, safetensors.numpy' >/dev/null 2>&1")
                      .c_str()) != 0)
    FAIL("python3 cannot import numpy and safetensors from "
         "third_party/.pydeps: run third_party/install.sh");
}

/// Runs `script` with `argument`; its exit status.
int runPython(const ScratchDir &dir, const std::string &script,
              const std::string &argument) {
  std::string scriptPath = dir / "script.py";
  writeBytes(scriptPath, script);
  return std::system(
      (pythonCommand() + " " + scriptPath + " " + argument).c_str());
}

} // namespace

TEST_CASE("the file layout is the safetensors format", "[safetensors]") {
  ScratchDir dir;
  float values[] = {1.0f, -2.0f};
  writeSafeTensors(dir / "a.safetensors",
                   {{"a", Tensor(values, DType::F32, {2})}});
  std::string header =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  // Spaces pad the header to a multiple of 8 bytes.
  header.append((8 - header.size() % 8) % 8, ' ');
  REQUIRE(header.size() % 8 == 0);
  CHECK(readBytes(dir / "a.safetensors") ==
        makeFile(header, floatBytes({1.0f, -2.0f})));
}

TEST_CASE("a written file reads back with names, metadata and offsets",
          "[safetensors]") {
  ScratchDir dir;
  std::string path = dir / "t.safetensors";
  float weights[6] = {0, 1, 2, 3, 4, 5};
  int64_t ids[2] = {-1, int64_t(1) << 40};
  BFloat16 halves[2] = {BFloat16::fromFloat(1.5f), BFloat16::fromFloat(-3)};
  uint8_t flags[3] = {1, 0, 1};
  int32_t scalar = 9;
  writeSafeTensors(path,
                   {{"w", Tensor(weights, DType::F32, {2, 3})},
                    {"ids", Tensor(ids, DType::I64, {2})},
                    {"h", Tensor(halves, DType::BF16, {2})},
                    {"flags", Tensor(flags, DType::Bool, {3})},
                    {"scalar", Tensor(&scalar, DType::I32, Shape{})},
                    {"empty", Tensor(weights, DType::F32, {0, 4})}},
                   {{"step", "12"}, {"note", "a \"quoted\" value"}});

  SafeTensorsReader reader(path);
  CHECK(reader.getNames() ==
        std::vector<std::string>{"w", "ids", "h", "flags", "scalar", "empty"});
  CHECK(reader.getMetadata() ==
        std::map<std::string, std::string>{{"step", "12"},
                                           {"note", "a \"quoted\" value"}});
  CHECK(reader.contains("w"));
  CHECK_FALSE(reader.contains("x"));
  const SafeTensorsReader::Info &w = reader.getInfo("w");
  CHECK(w.dtype == DType::F32);
  CHECK(w.shape == Shape{2, 3});
  // Data follows the 8-byte length and the header, in the order written.
  uint64_t dataStart = fs::file_size(path) - (24 + 16 + 4 + 3 + 4);
  CHECK(w.begin == dataStart);
  CHECK(w.end == dataStart + 24);
  CHECK(reader.getInfo("ids").begin == dataStart + 24);
  CHECK(reader.getInfo("empty").begin == reader.getInfo("empty").end);

  float weightsBack[6] = {};
  reader.read("w", Tensor(weightsBack, DType::F32, {2, 3}));
  CHECK(std::memcmp(weightsBack, weights, sizeof weights) == 0);
  int64_t idsBack[2] = {};
  reader.read("ids", Tensor(idsBack, DType::I64, {2}));
  CHECK(idsBack[1] == int64_t(1) << 40);
  BFloat16 halvesBack[2] = {};
  reader.read("h", Tensor(halvesBack, DType::BF16, {2}));
  CHECK(halvesBack[1].toFloat() == -3.0f);
  uint8_t flagsBack[3] = {};
  reader.read("flags", Tensor(flagsBack, DType::Bool, {3}));
  CHECK(flagsBack[2] == 1);
  int32_t scalarBack = 0;
  reader.read("scalar", Tensor(&scalarBack, DType::I32, Shape{}));
  CHECK(scalarBack == 9);
}

TEST_CASE("readSlice reads a range of one dim", "[safetensors]") {
  ScratchDir dir;
  std::string path = dir / "m.safetensors";
  float matrix[3][4];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      matrix[i][j] = 10 * i + j;
  writeSafeTensors(path, {{"m", Tensor(matrix, DType::F32, {3, 4})}});
  SafeTensorsReader reader(path);

  float rows[2][4] = {};
  reader.readSlice("m", 0, 1, Tensor(rows, DType::F32, {2, 4}));
  CHECK(rows[0][0] == 10);
  CHECK(rows[1][3] == 23);
  float columns[3][2] = {};
  reader.readSlice("m", 1, 2, Tensor(columns, DType::F32, {3, 2}));
  for (int i = 0; i < 3; ++i) {
    CHECK(columns[i][0] == 10 * i + 2);
    CHECK(columns[i][1] == 10 * i + 3);
  }

  CHECK_THROWS_WITH(
      reader.readSlice("m", 1, 3, Tensor(columns, DType::F32, {3, 2})),
      Contains(path) && Contains("no slice [3, 5) along dim 1"));
  CHECK_THROWS_WITH(
      reader.readSlice("m", 0, 0, Tensor(columns, DType::F32, {1, 2})),
      Contains("tensor 'm' is F32[3, 4], which has no slice F32[1, 2]"));
  CHECK_THROWS_WITH(
      reader.readSlice("m", 2, 0, Tensor(matrix, DType::F32, {3, 4})),
      Contains("along dim 2"));
}

TEST_CASE("reading checks the program's dtype and shape", "[safetensors]") {
  ScratchDir dir;
  std::string path = dir / "w.safetensors";
  float weights[6] = {};
  writeSafeTensors(path, {{"w", Tensor(weights, DType::F32, {2, 3})}});
  SafeTensorsReader reader(path);
  CHECK_THROWS_WITH(reader.read("w", Tensor(weights, DType::F32, {3, 2})),
                    Contains(path) && Contains("tensor 'w' is F32[2, 3]") &&
                        Contains("the program expects F32[3, 2]"));
  CHECK_THROWS_WITH(reader.read("w", Tensor(weights, DType::I32, {2, 3})),
                    Contains("expects I32[2, 3]"));
  CHECK_THROWS_WITH(reader.read("v", Tensor(weights, DType::F32, {2, 3})),
                    Contains(path + ": no tensor 'v'"));
  CHECK_THROWS_WITH(reader.getInfo("v"), Contains("no tensor 'v'"));
}

TEST_CASE("malformed files are refused with the file's name", "[safetensors]") {
  ScratchDir dir;
  std::string path = dir / "bad.safetensors";
  auto refuse = [&](const std::string &bytes, const std::string &why) {
    writeBytes(path, bytes);
    CHECK_THROWS_WITH(SafeTensorsReader(path), Contains(path) && Contains(why));
  };
  std::string data = floatBytes({1, 2});
  std::string good =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  writeBytes(path, makeFile(good, data));
  REQUIRE_NOTHROW(SafeTensorsReader(path));

  refuse("abc", "shorter than its 8-byte header length");
  refuse(makeFile(good, data).substr(0, 20), "exceeds the file");
  refuse(makeFile(good, data).substr(0, 8 + good.size() + 4), "truncated");
  refuse(makeFile("{\"a\": [", data), "not valid JSON");
  refuse(makeFile("[1, 2]", data), "not a JSON object");
  auto refuseEntry = [&](const std::string &dtype, const std::string &shape,
                         const std::string &offsets, const std::string &why) {
    refuse(makeFile(R"({"a":{"dtype":")" + dtype + R"(","shape":)" + shape +
                        R"(,"data_offsets":)" + offsets + "}}",
                    data),
           why);
  };
  refuseEntry("F31", "[2]", "[0,8]", "unsupported dtype \"F31\"");
  refuseEntry("F32", "[2]", "[8,16]", "ends at byte");
  refuseEntry("F32", "[3]", "[0,8]", "for the 12 bytes of F32[3]");
  refuseEntry("F32", "[-2]", "[0,8]", "bad shape");
  refuseEntry("F32", "[2]", "[0]", "bad data_offsets");
  refuse(makeFile(R"({"a":{"dtype":"F32","shape":[2]}})", data),
         "lacks dtype, shape or data_offsets");
  refuse(makeFile(R"({"__metadata__":{"k":1}})", ""),
         "metadata 'k' is not a string");
  CHECK_THROWS_WITH(SafeTensorsReader(dir / "missing.safetensors"),
                    Contains(dir / "missing.safetensors") &&
                        Contains("No such file or directory"));
}

TEST_CASE("a failed write leaves the old file and no temporary file",
          "[safetensors]") {
  ScratchDir dir;
  std::string path = dir / "w.safetensors";
  float weights[2] = {1, 2};
  writeSafeTensors(path, {{"w", Tensor(weights, DType::F32, {2})}});
  std::string before = readBytes(path);

  // Memory that write(2) cannot read: the write fails after the temporary
  // file was created.
  void *unreadable =
      ::mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(unreadable != MAP_FAILED);
  CHECK_THROWS_WITH(
      writeSafeTensors(path, {{"w", Tensor(weights, DType::F32, {2})},
                              {"v", Tensor(unreadable, DType::F32, {1024})}}),
      Contains(path + ": Bad address"));
  ::munmap(unreadable, 4096);
  CHECK(readBytes(path) == before);
  CHECK(std::distance(fs::directory_iterator(dir.path),
                      fs::directory_iterator()) == 1);

  CHECK_THROWS_WITH(writeSafeTensors(dir / "no/such/dir.safetensors",
                                     {{"w", Tensor(weights, DType::F32, {2})}}),
                    Contains(dir / "no/such/dir.safetensors") &&
                        Contains("No such file or directory"));
  CHECK_THROWS_WITH(
      writeSafeTensors(path, {{"w", Tensor(weights, DType::F32, {2})},
                              {"w", Tensor(weights, DType::F32, {2})}}),
      Contains("two tensors named 'w'"));
}

TEST_CASE("files written by Python's safetensors read back",
          "[safetensors][python]") {
  requirePythonSafeTensors();
  ScratchDir dir;
  std::string path = dir / "python.safetensors";
  REQUIRE(runPython(dir, R"(
import sys
import numpy as np
from safetensors.numpy import save_file
save_file({"weight": np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5,
           "ids": np.array([[1, -2], [3, 1 << 40]], dtype=np.int64),
           "mask": np.array([True, False, True]),
           "count": np.array(7, dtype=np.int32)},
          sys.argv[1], metadata={"origin": "python"})
)",
                    path) == 0);
  SafeTensorsReader reader(path);
  CHECK(reader.getMetadata().at("origin") == "python");
  CHECK(reader.getNames().size() == 4);
  float weight[2][3];
  reader.read("weight", Tensor(weight, DType::F32, {2, 3}));
  for (int i = 0; i < 6; ++i)
    CHECK(weight[i / 3][i % 3] == 0.5f * i);
  int64_t ids[2][2];
  reader.read("ids", Tensor(ids, DType::I64, {2, 2}));
  CHECK(ids[0][1] == -2);
  CHECK(ids[1][1] == int64_t(1) << 40);
  uint8_t mask[3];
  reader.read("mask", Tensor(mask, DType::Bool, {3}));
  CHECK((mask[0] == 1 && mask[1] == 0 && mask[2] == 1));
  int32_t count;
  reader.read("count", Tensor(&count, DType::I32, Shape{}));
  CHECK(count == 7);
}

TEST_CASE("Python's safetensors reads what we write", "[safetensors][python]") {
  requirePythonSafeTensors();
  ScratchDir dir;
  std::string path = dir / "ours.safetensors";
  float weights[6] = {0, 1.5f, 3, 4.5f, 6, 7.5f};
  int64_t ids[2] = {-1, int64_t(1) << 40};
  uint8_t flags[3] = {1, 0, 1};
  int32_t scalar = -9;
  writeSafeTensors(path,
                   {{"w", Tensor(weights, DType::F32, {2, 3})},
                    {"ids", Tensor(ids, DType::I64, {2})},
                    {"flags", Tensor(flags, DType::Bool, {3})},
                    {"scalar", Tensor(&scalar, DType::I32, Shape{})}},
                   {{"step", "3"}});
  CHECK(runPython(dir, R"(
import sys
import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file
tensors = load_file(sys.argv[1])
assert sorted(tensors) == ["flags", "ids", "scalar", "w"], sorted(tensors)
w = tensors["w"]
assert w.dtype == np.float32 and w.shape == (2, 3), (w.dtype, w.shape)
assert (w == np.arange(6, dtype=np.float32).reshape(2, 3) * 1.5).all(), w
assert tensors["ids"].dtype == np.int64
assert tensors["ids"].tolist() == [-1, 1 << 40]
assert tensors["flags"].dtype == np.bool_
assert tensors["flags"].tolist() == [True, False, True]
assert tensors["scalar"].shape == () and int(tensors["scalar"]) == -9
with safe_open(sys.argv[1], "np") as f:
    assert f.metadata() == {"step": "3"}, f.metadata()
)",
                  path) == 0);
}
