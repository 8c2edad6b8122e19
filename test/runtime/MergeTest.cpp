#include "slapo/runtime/Merge.h"
#include "slapo/runtime/Checkpoint.h"
#include "slapo/runtime/Error.h"

#include "ScratchDir.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

using namespace slapo::rt;
namespace fs = std::filesystem;
using Catch::Contains;

namespace {

/// The manifest of a model with a tied embedding (wte.weight is also
/// lm_head.weight), a bias and a buffer, compiled for one rank.
const char *const kManifest = R"({
  "mesh": {"dp": 1, "tp": 1, "pp": 1},
  "parameters": [
    {"name": "wte.weight", "buffer": false, "shape": [4, 3],
     "aliases": ["lm_head.weight"], "rank": 0},
    {"name": "fc.bias", "buffer": false, "shape": [3], "aliases": [],
     "rank": 0},
    {"name": "attn.mask", "buffer": true, "shape": [2, 2], "aliases": [],
     "rank": 0}
  ],
  "ranks": [{"rank": 0, "dir": "rank0", "fingerprint": "fp0",
             "program": "rank0/train"}]
})";

/// The model's tensors, their values depending on `salt`, and the
/// optimizer state a checkpoint holds besides them.
struct Weights {
  float wte[4][3];
  float bias[3];
  float mask[2][2];
  float expAvg[3];

  explicit Weights(float salt) {
    for (int i = 0; i < 12; ++i)
      wte[i / 3][i % 3] = salt + i;
    for (int i = 0; i < 3; ++i)
      bias[i] = expAvg[i] = -salt * i;
    for (int i = 0; i < 4; ++i)
      mask[i / 2][i % 2] = i % 3 == 0;
  }
  std::vector<NamedTensor> tensors() {
    return {{"wte.weight", Tensor(wte, DType::F32, {4, 3})},
            {"fc.bias", Tensor(bias, DType::F32, {3})},
            {"attn.mask", Tensor(mask, DType::F32, {2, 2})}};
  }
  std::vector<NamedTensor> trainingState() {
    std::vector<NamedTensor> state = tensors();
    state.push_back({"fc.bias.exp_avg", Tensor(expAvg, DType::F32, {3})});
    return state;
  }
};

/// `text` with its one `from` replaced by `to`.
std::string replaced(std::string text, const std::string &from,
                     const std::string &to) {
  size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  REQUIRE(text.find(from, at + 1) == std::string::npos);
  return text.replace(at, from.size(), to);
}

/// A slapoc output directory with its initial weights (salt 1), and a
/// checkpoint directory next to it.
struct Compiled {
  ScratchDir scratch;
  std::string out = scratch / "out";
  std::string ckpt = scratch / "ckpt";
  Weights initial{1};

  Compiled() {
    fs::create_directories(out + "/rank0");
    writeManifest(kManifest);
    writeSafeTensors(out + "/rank0/weights.safetensors", initial.tensors());
  }
  void writeManifest(const std::string &text) {
    std::ofstream(out + "/manifest.json") << text;
  }
  /// Saves and commits `state` as step `step`; returns the rank file.
  std::string save(int64_t step, const std::vector<NamedTensor> &state,
                   const std::string &fingerprint = "fp0") {
    std::string stepDir = saveCheckpoint(ckpt, step, fingerprint, state, 0, 1);
    commitCheckpoint(ckpt, stepDir, step, fingerprint, 1);
    return stepDir + "/rank0.safetensors";
  }
  MergedState merge(const std::string &checkpoint = "",
                    bool optimizerState = false) {
    return mergeState(out, {checkpoint, optimizerState});
  }
};

std::vector<std::string> namesOf(const MergedState &state) {
  std::vector<std::string> names;
  for (const NamedTensor &named : state.tensors)
    names.push_back(named.name);
  return names;
}

/// Whether `tensor` holds `bytes` bytes equal to `expected`'s.
bool holds(const Tensor &tensor, const void *expected, size_t bytes) {
  return tensor.getBytes() == bytes &&
         std::memcmp(tensor.data, expected, bytes) == 0;
}

const std::vector<std::string> kStateDict = {"wte.weight", "lm_head.weight",
                                             "fc.bias", "attn.mask"};

} // namespace

TEST_CASE("the initial weights merge under every state_dict name", "[merge]") {
  Compiled compiled;
  Manifest manifest = readManifest(compiled.out);
  REQUIRE(manifest.parameters.size() == 3);
  CHECK(manifest.parameters[0].aliases ==
        std::vector<std::string>{"lm_head.weight"});
  CHECK(manifest.parameters[0].shape == Shape{4, 3});
  CHECK(manifest.parameters[2].buffer);
  REQUIRE(manifest.ranks.size() == 1);
  CHECK(manifest.ranks[0].fingerprint == "fp0");

  MergedState state = compiled.merge();
  CHECK(namesOf(state) == kStateDict);
  CHECK(state.step == 0);
  CHECK(state.files ==
        std::vector<std::string>{compiled.out + "/rank0/weights.safetensors"});
  // The alias is the tied tensor itself.
  CHECK(state.tensors[1].tensor.data == state.tensors[0].tensor.data);
  CHECK(holds(state.tensors[0].tensor, compiled.initial.wte,
              sizeof compiled.initial.wte));
  CHECK(holds(state.tensors[3].tensor, compiled.initial.mask,
              sizeof compiled.initial.mask));
  CHECK(state.getBytes() == 2 * sizeof compiled.initial.wte +
                                sizeof compiled.initial.bias +
                                sizeof compiled.initial.mask);

  std::string output = compiled.scratch / "model.safetensors";
  writeMergedState(output, state);
  SafeTensorsReader reader(output);
  CHECK(reader.getNames() == kStateDict);
  CHECK(reader.getMetadata().at("step") == "0");
  CHECK(reader.getMetadata().at("format") == "pt");
  Weights read(0);
  reader.read("lm_head.weight", Tensor(read.wte, DType::F32, {4, 3}));
  CHECK(std::memcmp(read.wte, compiled.initial.wte, sizeof read.wte) == 0);
}

TEST_CASE("a checkpoint merges from its latest step or a step directory",
          "[merge]") {
  Compiled compiled;
  Weights third(3), fifth(5);
  std::string thirdFile = compiled.save(3, third.trainingState());
  std::string fifthFile = compiled.save(5, fifth.trainingState());

  MergedState latest = compiled.merge(compiled.ckpt);
  CHECK(latest.step == 5);
  CHECK(latest.files == std::vector<std::string>{fifthFile});
  // No optimizer state unless asked for.
  CHECK(namesOf(latest) == kStateDict);
  CHECK(holds(latest.tensors[1].tensor, fifth.wte, sizeof fifth.wte));
  CHECK(holds(latest.tensors[2].tensor, fifth.bias, sizeof fifth.bias));

  MergedState step = compiled.merge(compiled.ckpt + "/step-00000003");
  CHECK(step.step == 3);
  CHECK(holds(step.tensors[0].tensor, third.wte, sizeof third.wte));

  MergedState full = compiled.merge(compiled.ckpt, /*optimizerState=*/true);
  std::vector<std::string> names = kStateDict;
  names.push_back("fc.bias.exp_avg");
  CHECK(namesOf(full) == names);
  CHECK(holds(full.tensors[4].tensor, fifth.expAvg, sizeof fifth.expAvg));

  CHECK_THROWS_WITH(compiled.merge("", /*optimizerState=*/true),
                    Contains("optimizer state is in checkpoints only"));
}

TEST_CASE("a missing or malformed manifest is refused", "[merge]") {
  Compiled compiled;
  std::string path = compiled.out + "/manifest.json";
  auto refuses = [&](const std::string &text, const std::string &why) {
    compiled.writeManifest(text);
    CHECK_THROWS_WITH(compiled.merge(), Contains(path + ": ") && Contains(why));
  };

  fs::remove(path);
  CHECK_THROWS_WITH(compiled.merge(), Contains(path + ": no such file"));
  refuses("{\"mesh\": ", "not valid JSON");
  refuses("[]", "the top level is not an object");
  // Edits of the good manifest: the text replaced, its replacement, the
  // error.
  const char *const edits[][3] = {
      {"\"dir\": \"rank0\", ", "", "no \"ranks[0].dir\""},
      {"\"shape\": [3]", "\"shape\": 3",
       "\"parameters[1].shape\" is not a list"},
      {"\"shape\": [3]", "\"shape\": [-3]",
       "\"parameters[1].shape[0]\" is -3, not in [0, ...)"},
      {"\"buffer\": true", "\"buffer\": 1",
       "\"parameters[2].buffer\" is not true or false"},
      {"\"tp\": 1", "\"tp\": 2", "\"ranks\" lists 1 ranks, but the mesh has 2"},
      {"\"rank\": 0}\n  ]", "\"rank\": 1}\n  ]",
       "\"parameters[2].rank\" is 1, not in [0, 1)"},
      {"\"aliases\": [\"lm_head.weight\"]", "\"aliases\": [\"fc.bias\"]",
       "the state_dict name 'fc.bias' is given twice"},
      {"\"fc.bias\", ",
       "\"fc.bias\", \"shard\": {\"axis\": 0, \"ranks\": [0]}, ",
       "parameter 'fc.bias' is sharded (\"parameters[1].shard\"): merging "
       "sharded parameters is not implemented yet"},
  };
  for (const auto &edit : edits) {
    INFO(edit[2]);
    refuses(replaced(kManifest, edit[0], edit[1]), edit[2]);
  }
}

TEST_CASE("a checkpoint that does not fit the manifest is refused", "[merge]") {
  Compiled compiled;
  Weights trained(2);
  std::string file = compiled.save(2, trained.trainingState(), "fp1");
  CHECK_THROWS_WITH(compiled.merge(compiled.ckpt),
                    Contains(file + ": the checkpoint was written by a "
                                    "different program (fingerprint fp1") &&
                        Contains("the fingerprint fp0"));

  std::vector<NamedTensor> partial = trained.tensors();
  partial.pop_back();
  file = compiled.save(3, partial);
  CHECK_THROWS_WITH(compiled.merge(compiled.ckpt),
                    Contains(file + ": no tensor 'attn.mask' (a buffer in " +
                             compiled.out + "/manifest.json)"));

  file = compiled.save(4, trained.tensors());
  compiled.writeManifest(
      replaced(kManifest, "\"shape\": [3]", "\"shape\": [1, 3]"));
  CHECK_THROWS_WITH(compiled.merge(compiled.ckpt),
                    Contains(file + ": tensor 'fc.bias' is F32[3], but " +
                             compiled.out +
                             "/manifest.json gives the parameter the shape "
                             "[1, 3]"));
  compiled.writeManifest(kManifest);
  fs::remove(compiled.out + "/rank0/weights.safetensors");
  CHECK_THROWS_WITH(compiled.merge(),
                    Contains(compiled.out + "/rank0/weights.safetensors"));

  // One rank of two, not committed: merged from its step directory.
  std::string stepDir =
      saveCheckpoint(compiled.ckpt, 6, "fp0", trained.tensors(), 0, 2);
  CHECK_THROWS_WITH(compiled.merge(stepDir),
                    Contains(stepDir +
                             "/rank0.safetensors: a checkpoint of "
                             "2 ranks, but " +
                             compiled.out + "/manifest.json has 1"));
}

TEST_CASE("changed bytes of a merged tensor are found", "[merge]") {
  Compiled compiled;
  Weights trained(2);
  std::string file = compiled.save(2, trained.trainingState());
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  // The first byte of the tensors' data: wte.weight's.
  uint64_t headerLength;
  std::memcpy(&headerLength, bytes.data(), sizeof headerLength);
  bytes[8 + headerLength] ^= 0x10;
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  CHECK_THROWS_WITH(compiled.merge(compiled.ckpt),
                    Contains(file + ": tensor 'wte.weight' does not match its "
                                    "checksum: the file is corrupt"));
}
