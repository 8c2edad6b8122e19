#!/usr/bin/env bash
# Installs what is missing, configures and builds slapoc into build/ (or $SLAPO_BUILD_DIR).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SLAPO_BUILD_DIR:-$root/build}

"$root/third_party/install.sh"
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSLAPO_ENABLE_FUZZ=ON
fi
ninja -C "$build"
