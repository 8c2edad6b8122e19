//===- File.h - POSIX file helpers of the io sources ------------*- C++ -*-===//
//
// Private to runtime/io: file descriptors, whole reads and writes, atomic
// replacement of a file and directory creation, each failure an Error that
// names the path.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_IO_FILE_H
#define SLAPO_RUNTIME_IO_FILE_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace slapo::rt::io {

/// An owned file descriptor, closed on destruction.
class FileDescriptor {
public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) : fd(fd) {}
  FileDescriptor(FileDescriptor &&other) noexcept : fd(other.fd) {
    other.fd = -1;
  }
  FileDescriptor &operator=(FileDescriptor &&other) noexcept;
  FileDescriptor(const FileDescriptor &) = delete;
  FileDescriptor &operator=(const FileDescriptor &) = delete;
  ~FileDescriptor() { reset(); }

  int get() const { return fd; }
  /// Gives up ownership: the caller closes the returned descriptor.
  int release() {
    int released = fd;
    fd = -1;
    return released;
  }
  void reset();

private:
  int fd = -1;
};

/// Opens `path` read-only; throws "path: strerror" on failure.
FileDescriptor openForReading(const std::string &path);

/// Writes all `size` bytes; `path` names the file in errors.
void writeAll(int fd, const void *data, uint64_t size, const std::string &path);

/// Reads exactly `size` bytes at `offset`; a short file is an Error
/// "path: unexpected end of file (truncated?)".
void readAt(int fd, uint64_t offset, void *data, uint64_t size,
            const std::string &path);

/// Replaces `path` atomically: `write` fills a temporary file
/// `path.tmp.<pid>` in the same directory, which is synced and renamed over
/// `path`. On any failure the temporary file is removed, `path` is left as
/// it was and the Error names `path`.
void writeFileAtomically(const std::string &path,
                         const std::function<void(int fd)> &write);
/// writeFileAtomically with `text` as the contents.
void writeTextFileAtomically(const std::string &path, const std::string &text);

bool isDirectory(const std::string &path);
bool pathExists(const std::string &path);
/// Creates `dir` and its missing parents (mkdir -p); throws Error naming the
/// directory that could not be created, or a path that is not a directory.
void makeDirectories(const std::string &dir);

/// The names of the entries of directory `dir`, but "." and "..".
std::vector<std::string> listDirectory(const std::string &dir);

bool hasSuffix(const std::string &text, const std::string &suffix);

} // namespace slapo::rt::io

#endif // SLAPO_RUNTIME_IO_FILE_H
