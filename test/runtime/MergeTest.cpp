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
     "aliases": ["lm_head.weight"]},
    {"name": "fc.bias", "buffer": false, "shape": [3], "aliases": []},
    {"name": "attn.mask", "buffer": true, "shape": [2, 2], "aliases": []}
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

/// A slapoc output directory written by hand, with a checkpoint directory
/// next to it.
struct OutputDir {
  ScratchDir scratch;
  std::string out = scratch / "out";
  std::string ckpt = scratch / "ckpt";

  /// rank<r>/weights.safetensors holds `rankWeights[r]`.
  OutputDir(const std::string &manifest,
            const std::vector<std::vector<NamedTensor>> &rankWeights) {
    writeManifest(manifest);
    for (size_t rank = 0; rank < rankWeights.size(); ++rank)
      writeWeights(rank, rankWeights[rank]);
  }
  void writeManifest(const std::string &text) {
    fs::create_directories(out);
    std::ofstream(out + "/manifest.json") << text;
  }
  std::string weightsPath(int rank) const {
    return out + "/rank" + std::to_string(rank) + "/weights.safetensors";
  }
  void writeWeights(int rank, const std::vector<NamedTensor> &tensors) {
    fs::create_directories(out + "/rank" + std::to_string(rank));
    writeSafeTensors(weightsPath(rank), tensors);
  }
  /// Saves rank r's `rankStates[r]` as step `step` and commits the step;
  /// returns its directory.
  std::string saveRanks(int64_t step,
                        const std::vector<std::vector<NamedTensor>> &rankStates,
                        const std::string &fingerprint = "fp0") {
    int worldSize = static_cast<int>(rankStates.size());
    std::string stepDir;
    for (int rank = 0; rank < worldSize; ++rank)
      stepDir = saveCheckpoint(ckpt, step, fingerprint, rankStates[rank], rank,
                               worldSize);
    commitCheckpoint(ckpt, stepDir, step, fingerprint, worldSize);
    return stepDir;
  }
  MergedState merge(const std::string &checkpoint = "",
                    bool optimizerState = false) {
    return mergeState(out, {checkpoint, optimizerState});
  }
};

/// kManifest's output directory with its initial weights (salt 1).
struct Compiled : OutputDir {
  Weights initial{1};

  Compiled() : OutputDir(kManifest, {Weights(1).tensors()}) {}
  /// Saves and commits `state` as step `step`; returns the rank file.
  std::string save(int64_t step, const std::vector<NamedTensor> &state,
                   const std::string &fingerprint = "fp0") {
    return saveRanks(step, {state}, fingerprint) + "/rank0.safetensors";
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
      {"\"aliases\": [\"lm_head.weight\"]", "\"aliases\": [\"fc.bias\"]",
       "the state_dict name 'fc.bias' is given twice"},
      {"\"aliases\": []},", "\"aliases\": [], \"shard\": [0]},",
       "\"parameters[1].shard\" is not an object"},
      {"\"aliases\": []},", "\"aliases\": [], \"shard\": {\"chunks\": 1}},",
       "no \"parameters[1].shard.axis\""},
      {"\"aliases\": []},",
       "\"aliases\": [], \"shard\": {\"axis\": 1, "
       "\"chunks\": 1}},",
       "\"parameters[1].shard.axis\" is 1, not in [0, 1)"},
      {"\"aliases\": []},",
       "\"aliases\": [], \"shard\": {\"axis\": 0, "
       "\"chunks\": 2}},",
       "\"parameters[1].shard\" does not fit parameter 'fc.bias': cannot "
       "shard [3] on dim 0 in 2 chunk(s) over 1 tp rank(s): 3 is not a "
       "multiple of 2"},
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

namespace {

/// A model compiled for mesh(tp=2): qkv.weight [12, 2] sharded on dim 0 in
/// 3 chunks (as a fused q/k/v projection is), proj.weight [2, 4] sharded on
/// dim 1 in one chunk, and ln.bias [2], whole on both ranks.
const char *const kShardedManifest = R"({
  "mesh": {"dp": 1, "tp": 2, "pp": 1},
  "parameters": [
    {"name": "qkv.weight", "buffer": false, "shape": [12, 2], "aliases": [],
     "shard": {"axis": 0, "chunks": 3}},
    {"name": "proj.weight", "buffer": false, "shape": [2, 4], "aliases": [],
     "shard": {"axis": 1, "chunks": 1}},
    {"name": "ln.bias", "buffer": false, "shape": [2], "aliases": []}
  ],
  "ranks": [{"rank": 0, "dir": "rank0", "fingerprint": "fp0"},
            {"rank": 1, "dir": "rank1", "fingerprint": "fp0"}]
})";

/// kShardedManifest's tensors, element (i, j) salt + 100 * i + j, and each tp
/// rank's shards of them.
struct ShardedWeights {
  float qkv[12][2], proj[2][4], bias[2];
  float qkvShard[2][6][2], projShard[2][2][2];

  explicit ShardedWeights(float salt) {
    for (int i = 0; i < 12; ++i)
      for (int j = 0; j < 2; ++j)
        qkv[i][j] = salt + 100 * i + j;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j)
        proj[i][j] = salt + 100 * i + j;
    bias[0] = salt;
    bias[1] = -salt;
    // Three chunks of 4 rows, each split in two: rank r holds rows 2r and
    // 2r + 1 of every chunk.
    const int qkvRows[2][6] = {{0, 1, 4, 5, 8, 9}, {2, 3, 6, 7, 10, 11}};
    for (int rank = 0; rank < 2; ++rank)
      for (int k = 0; k < 6; ++k)
        for (int j = 0; j < 2; ++j)
          qkvShard[rank][k][j] = qkv[qkvRows[rank][k]][j];
    // One chunk of 4 columns: rank r holds columns 2r and 2r + 1.
    for (int rank = 0; rank < 2; ++rank)
      for (int i = 0; i < 2; ++i)
        for (int k = 0; k < 2; ++k)
          projShard[rank][i][k] = proj[i][2 * rank + k];
  }
  std::vector<NamedTensor> rankTensors(int rank) {
    return {{"qkv.weight", Tensor(qkvShard[rank], DType::F32, {6, 2})},
            {"proj.weight", Tensor(projShard[rank], DType::F32, {2, 2})},
            {"ln.bias", Tensor(bias, DType::F32, {2})}};
  }
  std::vector<std::vector<NamedTensor>> allRanks() {
    return {rankTensors(0), rankTensors(1)};
  }
};

/// Whether `state` holds exactly `weights`' model tensors.
void checkMerged(const MergedState &state, const ShardedWeights &weights) {
  REQUIRE(namesOf(state) ==
          std::vector<std::string>{"qkv.weight", "proj.weight", "ln.bias"});
  CHECK(state.tensors[0].tensor.shape == Shape{12, 2});
  CHECK(holds(state.tensors[0].tensor, weights.qkv, sizeof weights.qkv));
  CHECK(state.tensors[1].tensor.shape == Shape{2, 4});
  CHECK(holds(state.tensors[1].tensor, weights.proj, sizeof weights.proj));
  CHECK(holds(state.tensors[2].tensor, weights.bias, sizeof weights.bias));
}

} // namespace

TEST_CASE("tensor-parallel shards merge into the model's tensors", "[merge]") {
  ShardedWeights initial(1);
  OutputDir compiled(kShardedManifest, initial.allRanks());
  Manifest manifest = readManifest(compiled.out);
  CHECK(manifest.tp == 2);
  REQUIRE(manifest.parameters.size() == 3);
  REQUIRE(manifest.parameters[0].shard);
  CHECK(manifest.parameters[0].shard->axis == 0);
  CHECK(manifest.parameters[0].shard->chunks == 3);
  CHECK(manifest.parameters[0].shard->tp == 2);
  REQUIRE(manifest.parameters[1].shard);
  CHECK(manifest.parameters[1].shard->axis == 1);
  CHECK(manifest.parameters[1].shard->chunks == 1);
  CHECK(!manifest.parameters[2].shard);

  MergedState weights = compiled.merge();
  CHECK(weights.files == std::vector<std::string>{compiled.weightsPath(0),
                                                  compiled.weightsPath(1)});
  checkMerged(weights, initial);

  ShardedWeights trained(7);
  std::string stepDir = compiled.saveRanks(4, trained.allRanks());
  MergedState checkpoint = compiled.merge(compiled.ckpt);
  CHECK(checkpoint.step == 4);
  CHECK(checkpoint.files ==
        std::vector<std::string>{stepDir + "/rank0.safetensors",
                                 stepDir + "/rank1.safetensors"});
  checkMerged(checkpoint, trained);

  // Under mesh(dp=2, tp=2), dp rank 1's ranks 2 and 3 hold the same tensors
  // as ranks 0 and 1: their files are not needed.
  std::string ranks =
      "{\"rank\": 1, \"dir\": \"rank1\", \"fingerprint\": \"fp0\"}";
  compiled.writeManifest(
      replaced(replaced(kShardedManifest, "\"dp\": 1", "\"dp\": 2"), ranks,
               ranks + ", {\"rank\": 2, \"dir\": \"rank2\", \"fingerprint\": "
                       "\"fp0\"}, {\"rank\": 3, \"dir\": \"rank3\", "
                       "\"fingerprint\": \"fp0\"}"));
  MergedState dataParallel = compiled.merge();
  CHECK(dataParallel.files.size() == 2);
  checkMerged(dataParallel, initial);
  compiled.writeManifest(kShardedManifest);

  CHECK_THROWS_WITH(compiled.merge(compiled.ckpt, /*optimizerState=*/true),
                    Contains(compiled.out +
                             "/manifest.json: parameter 'qkv.weight' is "
                             "sharded") &&
                        Contains("not implemented"));
}

TEST_CASE("tensor-parallel rank files that do not fit the manifest are "
          "refused",
          "[merge]") {
  ShardedWeights initial(1);
  OutputDir compiled(kShardedManifest, initial.allRanks());
  std::string manifestPath = compiled.out + "/manifest.json";

  fs::remove(compiled.weightsPath(1));
  CHECK_THROWS_WITH(compiled.merge(), Contains(compiled.weightsPath(1)));

  // Rank 1 with the whole qkv.weight rather than its shard.
  std::vector<NamedTensor> whole = initial.rankTensors(1);
  whole[0].tensor = Tensor(initial.qkv, DType::F32, {12, 2});
  compiled.writeWeights(1, whole);
  CHECK_THROWS_WITH(compiled.merge(),
                    Contains(compiled.weightsPath(1) +
                             ": tensor 'qkv.weight' is F32[12, 2], but " +
                             manifestPath +
                             " gives tp rank 1's shard of the parameter the "
                             "shape [6, 2]"));

  std::vector<NamedTensor> partial = initial.rankTensors(1);
  partial.erase(partial.begin() + 1);
  compiled.writeWeights(1, partial);
  CHECK_THROWS_WITH(compiled.merge(),
                    Contains(compiled.weightsPath(1) +
                             ": no tensor 'proj.weight' (a parameter in " +
                             manifestPath + ")"));

  // Rank 1's proj.weight of another dtype than rank 0's.
  int32_t projInts[2][2] = {};
  std::vector<NamedTensor> otherType = initial.rankTensors(1);
  otherType[1].tensor = Tensor(projInts, DType::I32, {2, 2});
  compiled.writeWeights(1, otherType);
  CHECK_THROWS_WITH(compiled.merge(),
                    Contains(compiled.weightsPath(1) +
                             ": tensor 'proj.weight' is I32[2, 2], but " +
                             compiled.weightsPath(0) + " holds it as F32"));

  compiled.writeWeights(1, initial.rankTensors(1));
  compiled.writeManifest(
      replaced(kShardedManifest, "\"chunks\": 3", "\"chunks\": 4"));
  CHECK_THROWS_WITH(compiled.merge(),
                    Contains(manifestPath + ": malformed manifest: "
                                            "\"parameters[0].shard\" does not "
                                            "fit parameter 'qkv.weight': "
                                            "cannot shard [12, 2] on dim 0 in "
                                            "4 chunk(s) over 2 tp rank(s): 12 "
                                            "is not a multiple of 8"));
}
