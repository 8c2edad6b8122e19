//===- Checkpoint.cpp - saving and resuming training ----------------------===//
#include "slapo/runtime/Checkpoint.h"

#include "File.h"

#include "slapo/runtime/Error.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace slapo::rt {
namespace {

/// FNV-1a, 64 bits, of the tensor's bytes as 16 hex digits: changed bytes in
/// a rank file are found before they are trained on.
std::string checksum(const Tensor &tensor) {
  uint64_t hash = 0xcbf29ce484222325ull;
  const auto *bytes = static_cast<const unsigned char *>(tensor.data);
  for (size_t i = 0, e = tensor.getBytes(); i < e; ++i)
    hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(hash));
  return text;
}

std::string checksumKey(const std::string &name) { return "fnv1a64:" + name; }

std::string rankFileName(int rank) {
  return "rank" + std::to_string(rank) + ".safetensors";
}

std::string cannotWrite(const std::string &dir, const std::string &why) {
  return dir + ": cannot write checkpoints here: " + why;
}

/// Creates `dir` if needed and checks that it is a writable directory.
void prepareDirectory(const std::string &dir) {
  try {
    io::makeDirectories(dir);
  } catch (const Error &e) {
    throw Error(cannotWrite(dir, e.what()));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(cannotWrite(dir, std::strerror(errno)));
}

/// The contents of a small text file, whitespace at the end dropped.
std::string readTextFile(const std::string &path) {
  io::FileDescriptor file = io::openForReading(path);
  std::string text;
  char buffer[256];
  ssize_t got;
  while ((got = ::read(file.get(), buffer, sizeof buffer)) != 0) {
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      throwSystemError(path);
    text.append(buffer, got);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.pop_back();
  return text;
}

} // namespace

void checkCheckpointDirectory(const std::string &dir) {
  prepareDirectory(dir);
  std::string probe = dir + "/.write-test." + std::to_string(::getpid());
  int fd =
      ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error(cannotWrite(dir, std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
}

std::string saveCheckpoint(const std::string &dir, int64_t step,
                           const std::string &fingerprint,
                           const std::vector<NamedTensor> &tensors, int rank,
                           int worldSize) {
  if (step < 0 || rank < 0 || rank >= worldSize)
    throw Error(dir + ": cannot save step " + std::to_string(step) +
                " of rank " + std::to_string(rank) + " of " +
                std::to_string(worldSize));
  prepareDirectory(dir);
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  std::string stepDir = dir + "/" + name;
  if (::mkdir(stepDir.c_str(), 0755) != 0 && errno != EEXIST)
    throw Error(cannotWrite(dir, std::strerror(errno)));
  if (!io::isDirectory(stepDir))
    throw Error(stepDir + ": not a directory");

  std::map<std::string, std::string> metadata = {
      {"fingerprint", fingerprint},
      {"step", std::to_string(step)},
      {"rank", std::to_string(rank)},
      {"world_size", std::to_string(worldSize)}};
  for (const NamedTensor &named : tensors)
    metadata[checksumKey(named.name)] = checksum(named.tensor);
  writeSafeTensors(stepDir + "/" + rankFileName(rank), tensors, metadata);
  return stepDir;
}

void commitCheckpoint(const std::string &dir, const std::string &stepDir,
                      int64_t step, const std::string &fingerprint,
                      int worldSize) {
  nlohmann::ordered_json index = {{"step", step},
                                  {"world_size", worldSize},
                                  {"fingerprint", fingerprint},
                                  {"files", nlohmann::ordered_json::array()}};
  for (int rank = 0; rank < worldSize; ++rank) {
    std::string file = rankFileName(rank);
    if (!io::pathExists(stepDir + "/" + file))
      throw Error(stepDir + ": cannot commit the checkpoint: " + file +
                  " is missing (every rank must have saved before rank 0 "
                  "commits)");
    index["files"].push_back(file);
  }
  io::writeTextFileAtomically(stepDir + "/index.json", index.dump(2) + "\n");
  size_t slash = stepDir.find_last_not_of('/');
  slash = stepDir.rfind('/', slash);
  std::string name = stepDir.substr(slash == std::string::npos ? 0 : slash + 1);
  io::writeTextFileAtomically(dir + "/latest", name + "\n");
}

namespace {

/// The value of `key` in the metadata of `reader`'s checkpoint file.
const std::string &metadataField(const SafeTensorsReader &reader,
                                 const std::string &key) {
  const std::map<std::string, std::string> &metadata = reader.getMetadata();
  auto it = metadata.find(key);
  if (it == metadata.end())
    throw Error(reader.getPath() + ": not a slapoc checkpoint (no '" + key +
                "' in its metadata)");
  return it->second;
}

/// The metadata's `key` as a number of at least `min`.
int64_t metadataNumber(const SafeTensorsReader &reader, const std::string &key,
                       int64_t min) {
  const std::string &text = metadataField(reader, key);
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < min)
    throw Error(reader.getPath() + ": the metadata's " + key + " '" + text +
                "' is not a " + key + " number");
  return value;
}

} // namespace

CheckpointFile openCheckpoint(const std::string &path, int rank) {
  if (!io::isDirectory(path))
    throw Error(path + ": no such checkpoint directory");
  std::string stepDir = path;
  if (io::pathExists(path + "/latest")) {
    std::string name = readTextFile(path + "/latest");
    if (name.empty() || name.find('/') != std::string::npos)
      throw Error(path + "/latest: does not name a step directory");
    stepDir = path + "/" + name;
  } else if (!io::pathExists(path + "/" + rankFileName(rank))) {
    throw Error(path + ": not a checkpoint (no 'latest' file and no " +
                rankFileName(rank) + ")");
  }
  SafeTensorsReader reader(stepDir + "/" + rankFileName(rank));
  std::string fingerprint = metadataField(reader, "fingerprint");
  if (metadataField(reader, "rank") != std::to_string(rank))
    throw Error(reader.getPath() + ": holds rank " +
                metadataField(reader, "rank") + ", not rank " +
                std::to_string(rank));
  int64_t step = metadataNumber(reader, "step", 0);
  int worldSize = static_cast<int>(metadataNumber(reader, "world_size", 1));
  return {std::move(reader), step, std::move(fingerprint), worldSize};
}

void readCheckpointTensor(const CheckpointFile &file,
                          const NamedTensor &named) {
  file.reader.read(named.name, named.tensor);
  if (checksum(named.tensor) !=
      metadataField(file.reader, checksumKey(named.name)))
    throw Error(file.reader.getPath() + ": tensor '" + named.name +
                "' does not match its checksum: the file is corrupt");
}

int64_t loadCheckpoint(const std::string &path, const std::string &fingerprint,
                       const std::vector<NamedTensor> &tensors, int rank) {
  CheckpointFile file = openCheckpoint(path, rank);
  if (file.fingerprint != fingerprint)
    throw Error(file.reader.getPath() +
                ": the checkpoint was written by a different program "
                "(fingerprint " +
                file.fingerprint + ", this program's is " + fingerprint +
                "); resume with the program that saved it");
  for (const NamedTensor &named : tensors)
    readCheckpointTensor(file, named);
  return file.step;
}

} // namespace slapo::rt
