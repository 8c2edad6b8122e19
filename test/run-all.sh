#!/usr/bin/env bash
# The whole test suite: installs, builds, then runs lit and the C++ unit tests.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SLAPO_BUILD_DIR:-$root/build}

"$root/third_party/bootstrap.sh"
cd "$build"
ctest --output-on-failure -j2
