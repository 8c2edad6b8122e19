#!/usr/bin/env bash
# Installs every dependency slapoc needs on Debian 12. Idempotent: when everything is
# present it only checks and returns in seconds.
set -euo pipefail

# libopenblas-dev (its pthread build) makes LibTorch's fp32 matmul fast: libblas.so.3's
# alternative prefers it (priority 100) over the OpenMP build (95), which only
# test/bench/gemm_shapes.py's C++ side links, from its own directory.
DEBIAN_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  llvm-16-dev llvm-16-tools libmlir-16-dev mlir-16-tools
  clang-14 libclang-rt-14-dev clang-format
  libtorch-dev python3-torch python3-pip python3-numpy python3-yaml python3-requests python3-typing-extensions
  libcli11-dev nlohmann-json3-dev catch2
  libopenmpi-dev openmpi-bin
  libdnnl-dev libopenblas-dev libopenblas-openmp-dev
)

missing=()
for pkg in "${DEBIAN_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]})); then
  echo "install.sh: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python packages for the test models (Hugging Face transformers), kept out of the
# system site-packages. --no-deps: the Debian torch, numpy (< 2) and requests are used
# as they are, and --target would otherwise pull newer ones in.
root=$(cd "$(dirname "$0")/.." && pwd)
pydeps="$root/third_party/.pydeps"
requirements="$root/third_party/python-requirements.txt"
stamp="$pydeps/.requirements.sha256"
if [ ! -f "$stamp" ] || ! sha256sum --status -c "$stamp" 2>/dev/null; then
  echo "install.sh: installing Python test dependencies into $pydeps"
  rm -rf "$pydeps"
  /usr/bin/python3 -m pip install --quiet --root-user-action=ignore --no-deps --target "$pydeps" -r "$requirements"
  sha256sum "$requirements" > "$stamp"
fi
