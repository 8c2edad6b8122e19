//===- Error.h - runtime failures ------------------------------*- C++ -*-===//
//
// Runtime failures (a missing file, a corrupt checkpoint, a token out of the
// vocabulary) are thrown as slapo::rt::Error with a message that names the
// file or value; the rank program's driver catches it, prefixes the rank and
// exits with status 2.
//
//===----------------------------------------------------------------------===//
#ifndef SLAPO_RUNTIME_ERROR_H
#define SLAPO_RUNTIME_ERROR_H

#include <stdexcept>
#include <string>

namespace slapo::rt {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
};

/// "path: strerror(errno)".
[[noreturn]] void throwSystemError(const std::string &path);

} // namespace slapo::rt

#endif // SLAPO_RUNTIME_ERROR_H
