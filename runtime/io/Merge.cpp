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
                                const std::string &where, int worldSize) {
  ManifestParameter param;
  param.name = fields.getString(json, where, "name");
  if (json.contains("shard"))
    throw Error(fields.getPath() + ": parameter '" + param.name +
                "' is sharded (\"" + where +
                ".shard\"): merging sharded parameters is not implemented "
                "yet");
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
  param.rank =
      static_cast<int>(fields.getInteger(json, where, "rank", 0, worldSize));
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

/// Every rank's file, rank by rank; the checkpoint's files must hold one
/// step.
std::vector<RankFile> openRankFiles(const std::string &outDir,
                                    const Manifest &manifest,
                                    const MergeOptions &options,
                                    MergedState &state) {
  std::vector<RankFile> files;
  for (const ManifestRank &rank : manifest.ranks) {
    if (options.checkpoint.empty()) {
      files.emplace_back(
          SafeTensorsReader(outDir + "/" + rank.dir + "/weights.safetensors"));
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

/// Reads `param` from its rank's file into `state`, under its name and each
/// alias. A sharded parameter would gather its shards from their ranks here.
void mergeParameter(const Manifest &manifest, const ManifestParameter &param,
                    const RankFile &file, MergedState &state) {
  const SafeTensorsReader &reader = file.getReader();
  const char *kind = param.buffer ? "buffer" : "parameter";
  if (!reader.contains(param.name))
    throw Error(reader.getPath() + ": no tensor '" + param.name + "' (a " +
                kind + " in " + manifest.path + ")");
  const SafeTensorsReader::Info &info = reader.getInfo(param.name);
  if (info.shape != param.shape)
    throw Error(reader.getPath() + ": tensor '" + param.name + "' is " +
                getName(info.dtype) + info.shape.str() + ", but " +
                manifest.path + " gives the " + kind + " the shape " +
                param.shape.str());
  Tensor tensor = allocate(state, info.dtype, info.shape);
  file.read({param.name, tensor});
  state.tensors.push_back({param.name, tensor});
  for (const std::string &alias : param.aliases)
    state.tensors.push_back({alias, tensor});
}

} // namespace

Manifest readManifest(const std::string &outDir) {
  Manifest manifest;
  manifest.path = outDir + "/manifest.json";
  Json json = parseManifestFile(manifest.path, outDir);
  ManifestFields fields(manifest.path);

  const Json &mesh =
      fields.get(json, "", "mesh", &Json::is_object, "an object");
  int64_t worldSize = 1;
  for (const char *axis : {"dp", "tp", "pp"})
    worldSize *= fields.getInteger(mesh, "mesh", axis, 1, 1 << 16);
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
        fields, params[i], "parameters[" + std::to_string(i) + "]",
        static_cast<int>(worldSize));
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
  MergedState state;
  std::vector<RankFile> files = openRankFiles(outDir, manifest, options, state);
  for (const ManifestParameter &param : manifest.parameters)
    mergeParameter(manifest, param, files[param.rank], state);
  if (!options.optimizerState)
    return state;
  // Everything else a rank's checkpoint file holds is optimizer state.
  std::set<std::string> merged;
  for (const NamedTensor &named : state.tensors)
    merged.insert(named.name);
  for (const RankFile &file : files)
    for (const std::string &name : file.getReader().getNames()) {
      if (merged.count(name))
        continue;
      const SafeTensorsReader::Info &info = file.getReader().getInfo(name);
      Tensor tensor = allocate(state, info.dtype, info.shape);
      file.read({name, tensor});
      state.tensors.push_back({name, tensor});
    }
  return state;
}

void writeMergedState(const std::string &path, const MergedState &state) {
  writeSafeTensors(path, state.tensors,
                   {{"format", "pt"}, {"step", std::to_string(state.step)}});
}

} // namespace slapo::rt
