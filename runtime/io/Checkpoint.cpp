//===- Checkpoint.cpp - saving and resuming training ----------------------===//
#include "slapo/runtime/Checkpoint.h"

#include "File.h"

#include "slapo/runtime/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace slapo::rt {
namespace {

/// FNV-1a, 64 bits, of `size` bytes as 16 hex digits: changed bytes in a
/// checkpoint are found before they are trained on.
std::string fnv1a64(const void *data, size_t size) {
  uint64_t hash = 0xcbf29ce484222325ull;
  const auto *bytes = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < size; ++i)
    hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(hash));
  return text;
}

std::string checksum(const Tensor &tensor) {
  return fnv1a64(tensor.data, tensor.getBytes());
}

/// Where the metadata's own checksum is kept: not "fnv1a64:..." so that no
/// tensor name can collide with it.
const char kMetadataChecksumKey[] = "metadata_fnv1a64";

/// The checksum of every metadata entry but its own.
std::string
metadataChecksum(const std::map<std::string, std::string> &metadata) {
  std::string entries;
  for (const auto &[key, value] : metadata)
    if (key != kMetadataChecksumKey)
      entries.append(key).append(1, '\0').append(value).append(1, '\0');
  return fnv1a64(entries.data(), entries.size());
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

std::string stepDirectoryName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

/// `latest`'s contents: the step directory's name, then a line with its
/// checksum.
std::string latestText(const std::string &stepDirName) {
  return stepDirName + "\nfnv1a64 " +
         fnv1a64(stepDirName.data(), stepDirName.size()) + "\n";
}

/// The step directory DIR/latest names (a name in DIR), checked against its
/// checksum.
std::string readLatest(const std::string &dir) {
  std::string path = dir + "/latest";
  std::string text = readTextFile(path);
  size_t newline = text.find('\n');
  std::string name = text.substr(0, newline);
  if (name.empty() || name.find('/') != std::string::npos || name == "." ||
      name == "..")
    throw Error(path + ": does not name a step directory");
  if (newline == std::string::npos || latestText(name) != text + "\n")
    throw Error(path + ": does not match its checksum: the file is corrupt "
                       "(resume from one of the step directories instead)");
  return name;
}

bool isDecimal(const std::string &text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(),
                     [](unsigned char c) { return std::isdigit(c); });
}

/// The step of a step directory's name ("step-00000100"), or -1 for any
/// other name.
int64_t parseStepDirectoryName(const std::string &name) {
  const std::string prefix = "step-";
  std::string digits = name.substr(std::min(name.size(), prefix.size()));
  if (name.compare(0, prefix.size(), prefix) != 0 || !isDecimal(digits) ||
      digits.size() > 18)
    return -1;
  return std::stoll(digits);
}

/// Who holds a checkpoint directory's lock: "pid 1234 on host h, program
/// F, since 2026-12-05 10:00:00 UTC".
std::string describeThisRun(const std::string &fingerprint) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0)
    std::strcpy(host, "?");
  std::time_t now = std::time(nullptr);
  char since[32];
  std::strftime(since, sizeof since, "%Y-%m-%d %H:%M:%S UTC",
                std::gmtime(&now));
  return "pid " + std::to_string(::getpid()) + " on host " + host +
         ", program " + fingerprint + ", since " + since;
}

/// Whether `name` is a file that saving writes: a rank file, an index or
/// `latest`.
bool isCheckpointFileName(const std::string &name) {
  return name == "latest" || name == "index.json" ||
         (name.compare(0, 4, "rank") == 0 &&
          io::hasSuffix(name, ".safetensors") &&
          isDecimal(name.substr(4, name.size() - 4 - 12)));
}

/// Whether `name` is a temporary of a checkpoint file ("<file>.tmp.<pid>",
/// io::writeFileAtomically), which a killed run left half-written.
bool isLeftoverTemporary(const std::string &name) {
  size_t dot = name.rfind('.');
  if (dot == std::string::npos || !isDecimal(name.substr(dot + 1)))
    return false;
  std::string stem = name.substr(0, dot);
  return io::hasSuffix(stem, ".tmp") &&
         isCheckpointFileName(stem.substr(0, stem.size() - 4));
}

Error anotherProgram(const std::string &dir, const std::string &where,
                     const std::string &theirs, const std::string &ours) {
  return Error(dir + ": holds checkpoints of another program (" + where +
               " has fingerprint " + theirs + ", this program's is " + ours +
               "); saving here would overwrite them: give this run another "
               "--save directory, or resume them with the program that "
               "wrote them");
}

/// The fingerprint a complete step directory's index.json records.
std::string readIndexFingerprint(const std::string &stepDir) {
  std::string path = stepDir + "/index.json";
  try {
    return nlohmann::json::parse(readTextFile(path))
        .at("fingerprint")
        .get<std::string>();
  } catch (const nlohmann::json::exception &e) {
    throw Error(path + ": not a checkpoint index (" + e.what() +
                "), so whose checkpoint this is cannot be told: remove the "
                "step directory, or give this run another --save directory");
  }
}

/// What a killed run left of an uncommitted step, to be removed: its rank
/// files and temporaries. Throws if a rank file is another program's.
std::vector<std::string>
findIncompleteStepFiles(const std::string &dir, const std::string &stepDir,
                        const std::string &fingerprint) {
  std::vector<std::string> files;
  for (const std::string &name : io::listDirectory(stepDir)) {
    std::string path = stepDir + "/" + name;
    if (isCheckpointFileName(name)) {
      std::map<std::string, std::string> metadata;
      try {
        metadata = SafeTensorsReader(path).getMetadata();
      } catch (const Error &e) {
        throw Error(std::string(e.what()) +
                    "; whose uncommitted checkpoint this is cannot be told: "
                    "remove " +
                    stepDir + ", or give this run another --save directory");
      }
      auto theirs = metadata.find("fingerprint");
      if (theirs == metadata.end() || theirs->second != fingerprint)
        throw anotherProgram(dir, path,
                             theirs == metadata.end() ? "none" : theirs->second,
                             fingerprint);
    } else if (!isLeftoverTemporary(name)) {
      continue;
    }
    files.push_back(path);
  }
  return files;
}

} // namespace

CheckpointDirectoryLock::~CheckpointDirectoryLock() {
  if (fd >= 0)
    ::close(fd);
}

CheckpointDirectoryLock claimCheckpointDirectory(const std::string &dir,
                                                 const std::string &fingerprint,
                                                 int64_t startStep) {
  prepareDirectory(dir);
  std::string lockPath = dir + "/.lock";
  io::FileDescriptor lock(
      ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (lock.get() < 0)
    throw Error(cannotWrite(dir, lockPath + ": " + std::strerror(errno)));
  if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK)
      throw Error(cannotWrite(dir, "cannot lock " + lockPath + ": " +
                                       std::strerror(errno)));
    std::string owner = readTextFile(lockPath);
    throw Error(dir + ": another run saves checkpoints here (" +
                (owner.empty() ? std::string("it is starting") : owner) +
                "); two runs in one directory would mix their files: wait "
                "for it to end, or give this run another --save directory");
  }

  // Everything is checked before anything is removed.
  std::vector<std::string> leftovers, incomplete;
  for (const std::string &name : io::listDirectory(dir)) {
    std::string path = dir + "/" + name;
    if (isLeftoverTemporary(name)) {
      leftovers.push_back(path);
      continue;
    }
    int64_t step = parseStepDirectoryName(name);
    if (step < 0 || !io::isDirectory(path))
      continue;
    if (!io::pathExists(path + "/index.json")) {
      std::vector<std::string> files =
          findIncompleteStepFiles(dir, path, fingerprint);
      leftovers.insert(leftovers.end(), files.begin(), files.end());
      incomplete.push_back(path);
      continue;
    }
    std::string theirs = readIndexFingerprint(path);
    if (theirs != fingerprint)
      throw anotherProgram(dir, path, theirs, fingerprint);
  }
  // Steps saved after `latest` by a run killed before it committed them are
  // saved again.
  int64_t latest = io::pathExists(dir + "/latest")
                       ? parseStepDirectoryName(readLatest(dir))
                       : -1;
  if (latest > startStep)
    throw Error(dir + ": holds checkpoints up to step " +
                std::to_string(latest) + ", after step " +
                std::to_string(startStep) +
                " where this run starts; its checkpoints would replace "
                "them and move 'latest' back: resume from them (--resume " +
                dir + "), or give this run another --save directory");
  for (const std::string &file : leftovers)
    std::remove(file.c_str());
  // A directory that still holds something else stays.
  for (const std::string &stepDir : incomplete)
    ::rmdir(stepDir.c_str());

  std::string owner = describeThisRun(fingerprint) + "\n";
  if (::ftruncate(lock.get(), 0) != 0)
    throwSystemError(lockPath);
  io::writeAll(lock.get(), owner.data(), owner.size(), lockPath);
  return CheckpointDirectoryLock(lock.release());
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
  std::string stepDir = dir + "/" + stepDirectoryName(step);
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
  metadata[kMetadataChecksumKey] = metadataChecksum(metadata);
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
  if (io::pathExists(dir + "/latest")) {
    std::string current = readLatest(dir);
    if (parseStepDirectoryName(current) > step)
      throw Error(dir + "/latest: names " + current +
                  "; refusing to move it back to step " + std::to_string(step));
  }
  io::writeTextFileAtomically(stepDir + "/index.json", index.dump(2) + "\n");
  io::writeTextFileAtomically(dir + "/latest",
                              latestText(stepDirectoryName(step)));
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
    stepDir = path + "/" + readLatest(path);
  } else if (!io::pathExists(path + "/" + rankFileName(rank))) {
    throw Error(path + ": not a checkpoint (no 'latest' file and no " +
                rankFileName(rank) + ")");
  }
  SafeTensorsReader reader(stepDir + "/" + rankFileName(rank));
  if (metadataField(reader, kMetadataChecksumKey) !=
      metadataChecksum(reader.getMetadata()))
    throw Error(reader.getPath() +
                ": its metadata (step, rank, fingerprint, checksums) does "
                "not match its checksum: the file is corrupt");
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
