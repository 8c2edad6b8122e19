//===- Merge.cpp - one state_dict from a compiled program's ranks ---------===//
#include "slapo/runtime/Merge.h"

#include "File.h"

#include "slapo/runtime/Checkpoint.h"
#include "slapo/runtime/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <optional>
#include <set>

namespace slapo::rt {
namespace {

using Json = nlohmann::json;

/// Typed access to manifest.json's fields: a missing or ill-typed field is
/// an Error naming the file and the field ("parameters[3].shape").
class ManifestFields {
public:
  explicit ManifestFields(std::string path) : path(std::move(path)) {}
  const std::string &getPath() const { return path; }

  [[noreturn]] void fail(const std::string &what) const {
    throw Error(path + ": malformed manifest: " + what);
  }

  /// `object[key]`, which `isType` accepts; `where` names the object
  /// ("ranks[0]"; empty for the top level).
  const Json &get(const Json &object, const std::string &where,
                  const std::string &key, bool (Json::*isType)() const,
                  const char *type) const {
    if (!object.is_object())
      fail((where.empty() ? std::string("the top level") : where) +
           " is not an object");
    std::string name = where.empty() ? key : where + "." + key;
    auto it = object.find(key);
    if (it == object.end())
      fail("no \"" + name + "\"");
    if (!((*it).*isType)())
      fail("\"" + name + "\" is not " + type);
    return *it;
  }
  const Json &getList(const Json &object, const std::string &where,
                      const std::string &key) const {
    return get(object, where, key, &Json::is_array, "a list");
  }
  std::string getString(const Json &object, const std::string &where,
                        const std::string &key) const {
    return get(object, where, key, &Json::is_string, "a string")
        .get<std::string>();
  }
  /// `value`, named `name`, as an integer in [min, max).
  int64_t toInteger(const Json &value, const std::string &name, int64_t min,
                    int64_t max = INT64_MAX) const {
    if (!value.is_number_integer())
      fail("\"" + name + "\" is " + value.dump() + ", not an integer");
    int64_t number = value.get<int64_t>();
    if (number < min || number >= max)
      fail("\"" + name + "\" is " + value.dump() + ", not in [" +
           std::to_string(min) + ", " +
           (max == INT64_MAX ? std::string("...") : std::to_string(max)) + ")");
    return number;
  }
  int64_t getInteger(const Json &object, const std::string &where,
                     const std::string &key, int64_t min,
                     int64_t max = INT64_MAX) const {
    const Json &value = get(object, where, key, &Json::is_number, "a number");
    return toInteger(value, where.empty() ? key : where + "." + key, min, max);
  }

private:
  std::string path;
};

Json parseManifestFile(const std::string &path, const std::string &outDir) {
  if (!io::pathExists(path))
    throw Error(path + ": no such file (is " + outDir +
                " an output directory of slapoc?)");
  std::ifstream file(path);
  if (!file)
    throwSystemError(path);
  try {
    return Json::parse(file);
  } catch (const Json::exception &e) {
    throw Error(path + ": malformed manifest: not valid JSON: " + e.what());
  }
}

ManifestParameter readParameter(const ManifestFields &fields, const Json &json,
                                const std::string &where, int tp, int pp) {
  ManifestParameter param;
  param.name = fields.getString(json, where, "name");
  param.buffer =
      fields.get(json, where, "buffer", &Json::is_boolean, "true or false")
          .get<bool>();
  const Json &shape = fields.getList(json, where, "shape");
  if (shape.size() > static_cast<size_t>(kMaxRank))
    fields.fail("\"" + where + ".shape\" has more than " +
                std::to_string(kMaxRank) + " dimensions");
  param.shape.rank = static_cast<int>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    param.shape.dims[d] = fields.toInteger(
        shape[d], where + ".shape[" + std::to_string(d) + "]", 0);
  for (const Json &alias : fields.getList(json, where, "aliases")) {
    if (!alias.is_string() || alias.get<std::string>().empty())
      fields.fail("\"" + where + ".aliases\" holds " + alias.dump() +
                  ", not a name");
    param.aliases.push_back(alias.get<std::string>());
  }
  if (json.contains("stages")) {
    const Json &stages = fields.getList(json, where, "stages");
    if (stages.empty())
      fields.fail("\"" + where + ".stages\" is empty");
    param.stage = static_cast<int>(
        fields.toInteger(stages[0], where + ".stages[0]", 0, pp));
  }
  if (!json.contains("shard"))
    return param;
  std::string shardWhere = where + ".shard";
  const Json &shard =
      fields.get(json, where, "shard", &Json::is_object, "an object");
  ShardLayout layout;
  layout.axis = static_cast<int>(
      fields.getInteger(shard, shardWhere, "axis", 0, param.shape.rank));
  layout.chunks = fields.getInteger(shard, shardWhere, "chunks", 1);
  layout.tp = tp;
  try {
    getShardShape(param.shape, layout);
  } catch (const Error &e) {
    fields.fail("\"" + shardWhere + "\" does not fit parameter '" + param.name +
                "': " + e.what());
  }
  param.shard = layout;
  return param;
}

/// A fresh tensor of `dtype` and `shape` whose bytes `state` owns.
Tensor allocate(MergedState &state, DType dtype, const Shape &shape) {
  Tensor tensor(nullptr, dtype, shape);
  state.storage.emplace_back(
      new uint8_t[std::max<size_t>(tensor.getBytes(), 1)]);
  tensor.data = state.storage.back().get();
  return tensor;
}

/// The file a rank's tensors are merged from: its initial weights, or its
/// file of a checkpoint, whose tensors are checked against their checksums.
class RankFile {
public:
  explicit RankFile(SafeTensorsReader weights) : weights(std::move(weights)) {}
  explicit RankFile(CheckpointFile checkpoint)
      : checkpoint(std::move(checkpoint)) {}

  const SafeTensorsReader &getReader() const {
    return checkpoint ? checkpoint->reader : *weights;
  }
  void read(const NamedTensor &named) const {
    if (checkpoint)
      readCheckpointTensor(*checkpoint, named);
    else
      weights->read(named.name, named.tensor);
  }

private:
  std::optional<SafeTensorsReader> weights;
  std::optional<CheckpointFile> checkpoint;
};

/// Rank `rank`'s file of the checkpoint at `path`, checked against the
/// manifest.
CheckpointFile openRankCheckpoint(const std::string &path,
                                  const Manifest &manifest, int rank) {
  CheckpointFile file = openCheckpoint(path, rank);
  const std::string &expected = manifest.ranks[rank].fingerprint;
  const std::string &name = file.reader.getPath();
  if (file.fingerprint != expected)
    throw Error(name +
                ": the checkpoint was written by a different program "
                "(fingerprint " +
                file.fingerprint + "; " + manifest.path + " gives rank " +
                std::to_string(rank) + " the fingerprint " + expected +
                "): merge it with the output directory that made it");
  if (file.worldSize != static_cast<int>(manifest.ranks.size()))
    throw Error(name + ": a checkpoint of " + std::to_string(file.worldSize) +
                " ranks, but " + manifest.path + " has " +
                std::to_string(manifest.ranks.size()));
  return file;
}

/// The files of the tp ranks of dp rank 0 of each pipeline stage k, world
/// ranks k*dp*tp .. k*dp*tp+tp-1, which hold every tensor of the stage (the
/// other dp ranks' hold the same), stage by stage; the checkpoint's files
/// must hold one step.
std::vector<RankFile> openRankFiles(const std::string &outDir,
                                    const Manifest &manifest,
                                    const MergeOptions &options,
                                    MergedState &state) {
  std::vector<RankFile> files;
  for (int stage = 0; stage < manifest.pp; ++stage)
    for (int tpRank = 0; tpRank < manifest.tp; ++tpRank) {
      const ManifestRank &rank =
          manifest.ranks[stage * manifest.dp * manifest.tp + tpRank];
      if (options.checkpoint.empty()) {
        files.emplace_back(SafeTensorsReader(outDir + "/" + rank.dir +
                                             "/weights.safetensors"));
      } else {
        CheckpointFile file =
            openRankCheckpoint(options.checkpoint, manifest, rank.rank);
        if (rank.rank == 0)
          state.step = file.step;
        else if (file.step != state.step)
          throw Error(file.reader.getPath() + ": holds step " +
                      std::to_string(file.step) + ", but " + state.files[0] +
                      " holds step " + std::to_string(state.step));
        files.emplace_back(std::move(file));
      }
      state.files.push_back(files.back().getReader().getPath());
    }
  return files;
}

/// Reads `param` into `state`, under its name and each alias: from rank 0's
/// file or, sharded, assembled from every tp rank's shard.
void mergeParameter(const Manifest &manifest, const ManifestParameter &param,
                    const std::vector<RankFile> &files, MergedState &state) {
  const char *kind = param.buffer ? "buffer" : "parameter";
  Shape fileShape =
      param.shard ? getShardShape(param.shape, *param.shard) : param.shape;
  int64_t sources = param.shard ? param.shard->tp : 1;
  Tensor merged;
  std::vector<uint8_t> shardBytes;
  for (int64_t tpRank = 0; tpRank < sources; ++tpRank) {
    const RankFile &file = files[param.stage * manifest.tp + tpRank];
    const SafeTensorsReader &reader = file.getReader();
    if (!reader.contains(param.name))
      throw Error(reader.getPath() + ": no tensor '" + param.name + "' (a " +
                  kind + " in " + manifest.path + ")");
    const SafeTensorsReader::Info &info = reader.getInfo(param.name);
    std::string what = param.shard ? "tp rank " + std::to_string(tpRank) +
                                         "'s shard of the " + kind
                                   : std::string("the ") + kind;
    if (info.shape != fileShape)
      throw Error(reader.getPath() + ": tensor '" + param.name + "' is " +
                  getName(info.dtype) + info.shape.str() + ", but " +
                  manifest.path + " gives " + what + " the shape " +
                  fileShape.str());
    if (tpRank == 0)
      merged = allocate(state, info.dtype, param.shape);
    else if (info.dtype != merged.dtype)
      throw Error(reader.getPath() + ": tensor '" + param.name + "' is " +
                  getName(info.dtype) + info.shape.str() + ", but " +
                  state.files[param.stage * manifest.tp] + " holds it as " +
                  getName(merged.dtype));
    if (!param.shard) {
      file.read({param.name, merged});
      continue;
    }
    Tensor shard(nullptr, info.dtype, fileShape);
    shardBytes.resize(shard.getBytes());
    shard.data = shardBytes.data();
    file.read({param.name, shard});
    assembleShard(shard, merged, *param.shard, tpRank);
  }
  state.tensors.push_back({param.name, merged});
  for (const std::string &alias : param.aliases)
    state.tensors.push_back({alias, merged});
}

} // namespace

Manifest readManifest(const std::string &outDir) {
  Manifest manifest;
  manifest.path = outDir + "/manifest.json";
  Json json = parseManifestFile(manifest.path, outDir);
  ManifestFields fields(manifest.path);

  const Json &mesh =
      fields.get(json, "", "mesh", &Json::is_object, "an object");
  auto meshSize = [&](const char *axis) {
    return static_cast<int>(fields.getInteger(mesh, "mesh", axis, 1, 1 << 16));
  };
  manifest.dp = meshSize("dp");
  manifest.tp = meshSize("tp");
  manifest.pp = meshSize("pp");
  int64_t worldSize =
      static_cast<int64_t>(manifest.dp) * manifest.tp * manifest.pp;
  const Json &ranks = fields.getList(json, "", "ranks");
  if (static_cast<int64_t>(ranks.size()) != worldSize)
    fields.fail("\"ranks\" lists " + std::to_string(ranks.size()) +
                " ranks, but the mesh has " + std::to_string(worldSize));
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::string where = "ranks[" + std::to_string(r) + "]";
    ManifestRank rank;
    rank.rank = static_cast<int>(fields.getInteger(
        ranks[r], where, "rank", static_cast<int64_t>(r), r + 1));
    rank.dir = fields.getString(ranks[r], where, "dir");
    rank.fingerprint = fields.getString(ranks[r], where, "fingerprint");
    manifest.ranks.push_back(std::move(rank));
  }

  std::set<std::string> names;
  auto claim = [&](const std::string &name) {
    if (!names.insert(name).second)
      fields.fail("the state_dict name '" + name + "' is given twice");
  };
  const Json &params = fields.getList(json, "", "parameters");
  for (size_t i = 0; i < params.size(); ++i) {
    ManifestParameter param = readParameter(
        fields, params[i], "parameters[" + std::to_string(i) + "]", manifest.tp,
        manifest.pp);
    claim(param.name);
    for (const std::string &alias : param.aliases)
      claim(alias);
    manifest.parameters.push_back(std::move(param));
  }
  return manifest;
}

uint64_t MergedState::getBytes() const {
  uint64_t bytes = 0;
  for (const NamedTensor &named : tensors)
    bytes += named.tensor.getBytes();
  return bytes;
}

MergedState mergeState(const std::string &outDir, const MergeOptions &options) {
  Manifest manifest = readManifest(outDir);
  if (options.optimizerState && options.checkpoint.empty())
    throw Error("the optimizer state is in checkpoints only: merging the "
                "initial weights of " +
                outDir + " has none to include");
  if (options.optimizerState)
    for (const ManifestParameter &param : manifest.parameters)
      if (param.shard)
        throw Error(manifest.path + ": parameter '" + param.name +
                    "' is sharded, and so is its optimizer state: merging "
                    "the optimizer state of sharded parameters is not "
                    "implemented yet (merge without it)");
  MergedState state;
  std::vector<RankFile> files = openRankFiles(outDir, manifest, options, state);
  for (const ManifestParameter &param : manifest.parameters)
    mergeParameter(manifest, param, files, state);
  if (!options.optimizerState)
    return state;
  // Everything else the first rank of each stage holds is optimizer state,
  // the same on every rank of the stage (that of a parameter tied across
  // stages, alike on both, is taken from the first).
  std::set<std::string> merged;
  for (const NamedTensor &named : state.tensors)
    merged.insert(named.name);
  for (int stage = 0; stage < manifest.pp; ++stage) {
    const RankFile &file = files[stage * manifest.tp];
    const SafeTensorsReader &reader = file.getReader();
    for (const std::string &name : reader.getNames()) {
      if (!merged.insert(name).second)
        continue;
      const SafeTensorsReader::Info &info = reader.getInfo(name);
      Tensor tensor = allocate(state, info.dtype, info.shape);
      file.read({name, tensor});
      state.tensors.push_back({name, tensor});
    }
  }
  return state;
}

void writeMergedState(const std::string &path, const MergedState &state) {
  writeSafeTensors(path, state.tensors,
                   {{"format", "pt"}, {"step", std::to_string(state.step)}});
}

} // namespace slapo::rt
