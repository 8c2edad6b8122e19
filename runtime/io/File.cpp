//===- File.cpp - POSIX file helpers of the io sources --------------------===//
#include "File.h"

#include "slapo/runtime/Error.h"

#include <cerrno>
#include <cstdio>
#include <dirent.h>
#include <fcntl.h>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

namespace slapo::rt::io {

FileDescriptor &FileDescriptor::operator=(FileDescriptor &&other) noexcept {
  if (this != &other) {
    reset();
    fd = other.fd;
    other.fd = -1;
  }
  return *this;
}

void FileDescriptor::reset() {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

FileDescriptor openForReading(const std::string &path) {
  int fd;
  do
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0)
    throwSystemError(path);
  return FileDescriptor(fd);
}

void writeAll(int fd, const void *data, uint64_t size,
              const std::string &path) {
  const char *bytes = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t written = ::write(fd, bytes, size);
    if (written < 0 && errno == EINTR)
      continue;
    if (written < 0)
      throwSystemError(path);
    bytes += written;
    size -= written;
  }
}

void readAt(int fd, uint64_t offset, void *data, uint64_t size,
            const std::string &path) {
  char *bytes = static_cast<char *>(data);
  while (size > 0) {
    ssize_t got = ::pread(fd, bytes, size, offset);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      throwSystemError(path);
    if (got == 0)
      throw Error(path + ": unexpected end of file (truncated?)");
    bytes += got;
    offset += got;
    size -= got;
  }
}

namespace {
/// Syncs the directory holding `path` so that a rename in it survives a
/// crash. Best effort: some file systems refuse to sync a directory.
void syncParentDirectory(const std::string &path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "."
                    : slash == 0               ? "/"
                                               : path.substr(0, slash);
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return;
  ::fsync(fd);
  ::close(fd);
}
} // namespace

void writeFileAtomically(const std::string &path,
                         const std::function<void(int fd)> &write) {
  std::string temporary = path + ".tmp." + std::to_string(::getpid());
  try {
    FileDescriptor file(::open(temporary.c_str(),
                               O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (file.get() < 0)
      throwSystemError(path);
    write(file.get());
    if (::fsync(file.get()) != 0)
      throwSystemError(path);
    if (::close(file.release()) != 0)
      throwSystemError(path);
    if (std::rename(temporary.c_str(), path.c_str()) != 0)
      throwSystemError(path);
  } catch (...) {
    std::remove(temporary.c_str());
    throw;
  }
  syncParentDirectory(path);
}

void writeTextFileAtomically(const std::string &path, const std::string &text) {
  writeFileAtomically(
      path, [&](int fd) { writeAll(fd, text.data(), text.size(), path); });
}

bool isDirectory(const std::string &path) {
  struct stat status;
  return ::stat(path.c_str(), &status) == 0 && S_ISDIR(status.st_mode);
}

bool pathExists(const std::string &path) {
  struct stat status;
  return ::stat(path.c_str(), &status) == 0;
}

void makeDirectories(const std::string &dir) {
  if (dir.empty())
    throw Error("an empty directory name");
  if (isDirectory(dir))
    return;
  size_t slash = dir.find_last_not_of('/');
  slash =
      slash == std::string::npos ? std::string::npos : dir.rfind('/', slash);
  if (slash != std::string::npos && slash > 0)
    makeDirectories(dir.substr(0, slash));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    throwSystemError(dir);
  if (!isDirectory(dir))
    throw Error(dir + ": not a directory");
}

std::vector<std::string> listDirectory(const std::string &dir) {
  std::unique_ptr<DIR, int (*)(DIR *)> stream(::opendir(dir.c_str()),
                                              ::closedir);
  if (!stream)
    throwSystemError(dir);
  std::vector<std::string> names;
  errno = 0;
  while (const struct dirent *entry = ::readdir(stream.get())) {
    std::string name = entry->d_name;
    if (name != "." && name != "..")
      names.push_back(std::move(name));
  }
  if (errno != 0)
    throwSystemError(dir);
  return names;
}

bool hasSuffix(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace slapo::rt::io
