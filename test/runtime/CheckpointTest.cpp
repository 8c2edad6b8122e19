#include "slapo/runtime/Checkpoint.h"
#include "slapo/runtime/Error.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace slapo::rt;
namespace fs = std::filesystem;
using Catch::Contains;

namespace {

std::string contentsOf(const fs::path &path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

/// FNV-1a 64 of `bytes` as 16 hex digits, the checksum's definition.
std::string fnv1a64(const void *bytes, size_t size) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i)
    hash = (hash ^ static_cast<const unsigned char *>(bytes)[i]) *
           0x100000001b3ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(hash));
  return text;
}

/// A model's training state: a weight matrix, a bias and a step counter,
/// with values that depend on `salt`.
struct State {
  float weight[2][3];
  float bias[3];
  int64_t count;

  explicit State(float salt) {
    for (int i = 0; i < 6; ++i)
      weight[i / 3][i % 3] = salt + i;
    for (int i = 0; i < 3; ++i)
      bias[i] = -salt * i;
    count = static_cast<int64_t>(salt) * 1000;
  }
  std::vector<NamedTensor> tensors() {
    return {{"fc.weight", Tensor(weight, DType::F32, {2, 3})},
            {"fc.bias", Tensor(bias, DType::F32, {3})},
            {"count", Tensor(&count, DType::I64, Shape{})}};
  }
  bool operator==(const State &other) const {
    return std::memcmp(weight, other.weight, sizeof weight) == 0 &&
           std::memcmp(bias, other.bias, sizeof bias) == 0 &&
           count == other.count;
  }
};

struct CheckpointDir {
  fs::path root;
  std::string dir;
  CheckpointDir() {
    char name[] = "/tmp/slapo-checkpoint-XXXXXX";
    REQUIRE(::mkdtemp(name));
    root = name;
    dir = (root / "ckpt").string();
  }
  ~CheckpointDir() { fs::remove_all(root); }

  /// Saves `state` as rank `rank` of `worldSize` under fingerprint "fp".
  std::string save(int64_t step, State &state, int rank = 0,
                   int worldSize = 1) {
    return saveCheckpoint(dir, step, "fp", state.tensors(), rank, worldSize);
  }
  int64_t load(State &state, int rank = 0) {
    return loadCheckpoint(dir, "fp", state.tensors(), rank);
  }
};

} // namespace

TEST_CASE("FNV-1a 64 of the test matches the published vectors",
          "[checkpoint]") {
  CHECK(fnv1a64("", 0) == "cbf29ce484222325");
  CHECK(fnv1a64("a", 1) == "af63dc4c8601ec8c");
}

TEST_CASE("a checkpoint round-trips and records its metadata", "[checkpoint]") {
  CheckpointDir ckpt;
  State saved(3);
  std::string stepDir =
      saveCheckpoint(ckpt.dir, 7, "fp-1", saved.tensors(), 0, 1);
  CHECK(stepDir == ckpt.dir + "/step-00000007");
  std::string file = stepDir + "/rank0.safetensors";
  REQUIRE(fs::exists(file));
  // Not the latest until committed.
  CHECK_FALSE(fs::exists(ckpt.dir + "/latest"));
  commitCheckpoint(ckpt.dir, stepDir, 7, "fp-1", 1);
  CHECK(contentsOf(ckpt.dir + "/latest") ==
        "step-00000007\nfnv1a64 " + fnv1a64("step-00000007", 13) + "\n");
  std::string index = contentsOf(stepDir + "/index.json");
  CHECK_THAT(index, Contains("\"step\": 7") && Contains("\"world_size\": 1") &&
                        Contains("\"fingerprint\": \"fp-1\"") &&
                        Contains("\"rank0.safetensors\""));

  SafeTensorsReader reader(file);
  const std::map<std::string, std::string> &metadata = reader.getMetadata();
  CHECK(metadata.at("fingerprint") == "fp-1");
  CHECK(metadata.at("step") == "7");
  CHECK(metadata.at("rank") == "0");
  CHECK(metadata.at("world_size") == "1");
  CHECK(metadata.at("fnv1a64:fc.weight") ==
        fnv1a64(saved.weight, sizeof saved.weight));
  CHECK(metadata.at("fnv1a64:count") ==
        fnv1a64(&saved.count, sizeof saved.count));
  std::string entries;
  for (const auto &[key, value] : metadata)
    if (key != "metadata_fnv1a64")
      entries += key + '\0' + value + '\0';
  CHECK(metadata.at("metadata_fnv1a64") ==
        fnv1a64(entries.data(), entries.size()));

  // From the checkpoint directory (through latest) and the step directory.
  for (const std::string &path : {ckpt.dir, stepDir}) {
    State loaded(0);
    CHECK(loadCheckpoint(path, "fp-1", loaded.tensors(), 0) == 7);
    CHECK(loaded == saved);
  }
}

TEST_CASE("latest moves only on commit and old steps stay untouched",
          "[checkpoint]") {
  CheckpointDir ckpt;
  State first(1), second(2);
  std::string firstDir = ckpt.save(1, first);
  commitCheckpoint(ckpt.dir, firstDir, 1, "fp", 1);
  std::string firstBytes = contentsOf(firstDir + "/rank0.safetensors");

  std::string secondDir = ckpt.save(20, second);
  State loaded(0);
  CHECK(ckpt.load(loaded) == 1);
  CHECK(loaded == first);
  commitCheckpoint(ckpt.dir, secondDir, 20, "fp", 1);
  CHECK(ckpt.load(loaded) == 20);
  CHECK(loaded == second);
  CHECK(contentsOf(firstDir + "/rank0.safetensors") == firstBytes);
  // Nothing but the checkpoint's files: no temporary files left behind.
  std::vector<std::string> names;
  for (const auto &entry : fs::recursive_directory_iterator(ckpt.dir))
    names.push_back(fs::relative(entry.path(), ckpt.dir).string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{
                     "latest", "step-00000001", "step-00000001/index.json",
                     "step-00000001/rank0.safetensors", "step-00000020",
                     "step-00000020/index.json",
                     "step-00000020/rank0.safetensors"});
}

TEST_CASE("every rank saves its own file and rank 0 commits them all",
          "[checkpoint]") {
  CheckpointDir ckpt;
  State rank0(10), rank1(11);
  std::string stepDir = ckpt.save(5, rank0, 0, 2);
  CHECK_THROWS_WITH(commitCheckpoint(ckpt.dir, stepDir, 5, "fp", 2),
                    Contains("rank1.safetensors is missing"));
  CHECK_FALSE(fs::exists(ckpt.dir + "/latest"));
  CHECK(ckpt.save(5, rank1, 1, 2) == stepDir);
  commitCheckpoint(ckpt.dir, stepDir, 5, "fp", 2);
  CHECK_THAT(contentsOf(stepDir + "/index.json"),
             Contains("\"world_size\": 2") &&
                 Contains("\"rank0.safetensors\",\n    \"rank1.safetensors\""));
  State loaded(0);
  CHECK(ckpt.load(loaded, 1) == 5);
  CHECK(loaded == rank1);
  CHECK(ckpt.load(loaded) == 5);
  CHECK(loaded == rank0);
}

TEST_CASE("damaged or foreign checkpoints are refused", "[checkpoint]") {
  CheckpointDir ckpt;
  State saved(4);
  std::string stepDir = ckpt.save(3, saved);
  commitCheckpoint(ckpt.dir, stepDir, 3, "fp", 1);
  std::string file = stepDir + "/rank0.safetensors";
  std::string bytes = contentsOf(file);
  auto rewrite = [&](const std::string &newBytes) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << newBytes;
  };
  State loaded(0);

  CHECK_THROWS_WITH(loadCheckpoint(ckpt.dir, "other", loaded.tensors(), 0),
                    Contains(file) &&
                        Contains("written by a different program"));

  std::vector<NamedTensor> more = loaded.tensors();
  float extra[2];
  more.push_back({"extra", Tensor(extra, DType::F32, {2})});
  CHECK_THROWS_WITH(loadCheckpoint(ckpt.dir, "fp", more, 0),
                    Contains(file + ": no tensor 'extra'"));

  std::vector<NamedTensor> reshaped = loaded.tensors();
  reshaped[0].tensor.shape = Shape{3, 2};
  CHECK_THROWS_WITH(loadCheckpoint(ckpt.dir, "fp", reshaped, 0),
                    Contains(file) &&
                        Contains("tensor 'fc.weight' is F32[2, 3]") &&
                        Contains("expects F32[3, 2]"));

  // One changed byte of the last tensor's data.
  std::string corrupt = bytes;
  corrupt.back() ^= 0x10;
  rewrite(corrupt);
  CHECK_THROWS_WITH(ckpt.load(loaded), Contains(file) &&
                                           Contains("tensor 'count'") &&
                                           Contains("corrupt"));

  rewrite(bytes.substr(0, bytes.size() - 5));
  CHECK_THROWS_WITH(ckpt.load(loaded), Contains(file) && Contains("truncated"));

  rewrite(bytes);
  CHECK(ckpt.load(loaded) == 3);
  CHECK(loaded == saved);

  std::ofstream(ckpt.dir + "/latest") << "../elsewhere\n";
  CHECK_THROWS_WITH(ckpt.load(loaded),
                    Contains("latest: does not name a step directory"));
  CHECK_THROWS_WITH(
      loadCheckpoint(ckpt.dir + "/none", "fp", loaded.tensors(), 0),
      Contains("/none: no such checkpoint directory"));
  fs::create_directories(ckpt.dir + "/empty");
  CHECK_THROWS_WITH(
      loadCheckpoint(ckpt.dir + "/empty", "fp", loaded.tensors(), 0),
      Contains("empty: not a checkpoint"));

  // A safetensors file that is no checkpoint.
  writeSafeTensors(ckpt.dir + "/empty/rank0.safetensors", loaded.tensors());
  CHECK_THROWS_WITH(
      loadCheckpoint(ckpt.dir + "/empty", "fp", loaded.tensors(), 0),
      Contains("not a slapoc checkpoint (no 'metadata_fnv1a64'"));
}

TEST_CASE("an unusable checkpoint directory is an error before any write",
          "[checkpoint]") {
  CheckpointDir ckpt;
  std::string blocker = (ckpt.root / "file").string();
  std::ofstream(blocker) << "not a directory";
  std::string dir = blocker + "/ckpt";
  State saved(1);
  CHECK_THROWS_WITH(claimCheckpointDirectory(dir, "fp", 0),
                    Contains(dir + ": cannot write checkpoints here") &&
                        Contains(blocker + ": not a directory"));
  CHECK_THROWS_WITH(saveCheckpoint(dir, 1, "fp", saved.tensors(), 0, 1),
                    Contains(dir + ": cannot write checkpoints here"));
  CHECK_THROWS_WITH(claimCheckpointDirectory(blocker, "fp", 0),
                    Contains(blocker + ": cannot write checkpoints here"));
  CHECK(std::distance(fs::directory_iterator(ckpt.root),
                      fs::directory_iterator()) == 1);

  // Missing parents are created; the directory holds the lock only.
  std::string nested = (ckpt.root / "a/b/c").string();
  claimCheckpointDirectory(nested, "fp", 0);
  CHECK(fs::is_directory(nested));
  CHECK(std::distance(fs::directory_iterator(nested),
                      fs::directory_iterator()) == 1);
  CHECK(fs::exists(nested + "/.lock"));
}

TEST_CASE("a checkpoint directory has one run at a time", "[checkpoint]") {
  CheckpointDir ckpt;
  {
    CheckpointDirectoryLock first = claimCheckpointDirectory(ckpt.dir, "fp", 0);
    CHECK_THAT(contentsOf(ckpt.dir + "/.lock"),
               Contains("pid " + std::to_string(::getpid()) + " on host ") &&
                   Contains(", program fp, since "));
    // flock: a second open file description of the lock conflicts, also in
    // the same process.
    CHECK_THROWS_WITH(claimCheckpointDirectory(ckpt.dir, "fp", 0),
                      Contains(ckpt.dir +
                               ": another run saves checkpoints "
                               "here (pid " +
                               std::to_string(::getpid())) &&
                          Contains("wait for it to end, or give this run "
                                   "another --save directory"));
  }
  // Released with its holder.
  claimCheckpointDirectory(ckpt.dir, "fp", 0);
}

TEST_CASE("another program's checkpoints and later steps are not overwritten",
          "[checkpoint]") {
  CheckpointDir ckpt;
  State saved(2);
  commitCheckpoint(ckpt.dir, ckpt.save(4, saved), 4, "fp", 1);
  std::string latest = contentsOf(ckpt.dir + "/latest");

  CHECK_THROWS_WITH(
      claimCheckpointDirectory(ckpt.dir, "other", 0),
      Contains(ckpt.dir + ": holds checkpoints of another program (" +
               ckpt.dir +
               "/step-00000004 has fingerprint fp, this program's "
               "is other)"));
  CHECK_THROWS_WITH(claimCheckpointDirectory(ckpt.dir, "fp", 3),
                    Contains(ckpt.dir + ": holds checkpoints up to step 4, "
                                        "after step 3 where this run starts") &&
                        Contains("--resume " + ckpt.dir));
  claimCheckpointDirectory(ckpt.dir, "fp", 4);

  // latest never moves back, whoever commits.
  std::string earlier = ckpt.save(2, saved);
  CHECK_THROWS_WITH(commitCheckpoint(ckpt.dir, earlier, 2, "fp", 1),
                    Contains("latest: names step-00000004; refusing to move "
                             "it back to step 2"));
  CHECK(contentsOf(ckpt.dir + "/latest") == latest);
}

TEST_CASE("a claim removes what killed runs left, and nothing else",
          "[checkpoint]") {
  CheckpointDir ckpt;
  State saved(5);
  commitCheckpoint(ckpt.dir, ckpt.save(1, saved), 1, "fp", 1);
  // Step 2: rank 0 saved, rank 1 was killed while writing; the commit of
  // step 3 was killed while writing latest.
  std::string incomplete = ckpt.save(2, saved, 0, 2);
  std::ofstream(incomplete + "/rank1.safetensors.tmp.123") << "half";
  std::ofstream(ckpt.dir + "/latest.tmp.456") << "step-000";
  std::ofstream(ckpt.dir + "/notes.tmp.7") << "the user's";
  std::ofstream(ckpt.dir + "/notes.txt") << "the user's";

  claimCheckpointDirectory(ckpt.dir, "fp", 1);
  std::vector<std::string> names;
  for (const auto &entry : fs::recursive_directory_iterator(ckpt.dir))
    names.push_back(fs::relative(entry.path(), ckpt.dir).string());
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{".lock", "latest", "notes.tmp.7",
                                          "notes.txt", "step-00000001",
                                          "step-00000001/index.json",
                                          "step-00000001/rank0.safetensors"});

  // An uncommitted step of another program is its, not a leftover.
  saveCheckpoint(ckpt.dir, 2, "other", saved.tensors(), 0, 2);
  CHECK_THROWS_WITH(claimCheckpointDirectory(ckpt.dir, "fp", 1),
                    Contains("step-00000002/rank0.safetensors has "
                             "fingerprint other"));
  CHECK(fs::exists(incomplete + "/rank0.safetensors"));

  // An unreadable rank file of an uncommitted step: whose it is is unknown.
  fs::remove_all(incomplete);
  fs::create_directories(incomplete);
  std::ofstream(incomplete + "/rank0.safetensors") << "damaged";
  CHECK_THROWS_WITH(claimCheckpointDirectory(ckpt.dir, "fp", 1),
                    Contains(incomplete + "/rank0.safetensors: not a valid "
                                          "safetensors file") &&
                        Contains("cannot be told: remove " + incomplete));
  CHECK(fs::exists(incomplete + "/rank0.safetensors"));
}

TEST_CASE("changed metadata or a changed latest is refused", "[checkpoint]") {
  CheckpointDir ckpt;
  State saved(6), loaded(0);
  commitCheckpoint(ckpt.dir, ckpt.save(3, saved), 3, "fp", 1);
  std::string file = ckpt.dir + "/step-00000003/rank0.safetensors";
  std::string bytes = contentsOf(file);

  // The step number in the header, one digit changed: the file still parses.
  std::string changed = bytes;
  size_t step = changed.find("\"step\":\"3\"");
  REQUIRE(step != std::string::npos);
  changed[step + 8] = '7';
  std::ofstream(file, std::ios::binary | std::ios::trunc) << changed;
  CHECK_THROWS_WITH(ckpt.load(loaded),
                    Contains(file + ": its metadata (step, rank, fingerprint, "
                                    "checksums) does not match its checksum: "
                                    "the file is corrupt"));
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;

  // latest naming another existing step, one bit changed (3 -> 2).
  ckpt.save(2, saved);
  std::string latest = contentsOf(ckpt.dir + "/latest");
  latest[12] = '2';
  std::ofstream(ckpt.dir + "/latest") << latest;
  CHECK_THROWS_WITH(ckpt.load(loaded),
                    Contains("latest: does not match its checksum"));
}
