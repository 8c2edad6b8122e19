//===- ScratchDir.h - a temporary directory for runtime tests ---*- C++ -*-===//
#ifndef SLAPO_TEST_RUNTIME_SCRATCHDIR_H
#define SLAPO_TEST_RUNTIME_SCRATCHDIR_H

#include <catch2/catch.hpp>

#include <filesystem>
#include <stdlib.h>
#include <string>

/// A fresh directory under /tmp, removed with everything in it at the end.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    char name[] = "/tmp/slapo-test-XXXXXX";
    REQUIRE(::mkdtemp(name));
    path = name;
  }
  ~ScratchDir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string &name) const {
    return (path / name).string();
  }
};

#endif // SLAPO_TEST_RUNTIME_SCRATCHDIR_H
