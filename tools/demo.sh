#!/usr/bin/env bash
# The main job: installs what is missing, builds slapoc, exports a small GPT-2
# to TorchScript, imports it and prints the slapo IR summary, then proves the
# import against the model's own forward.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SLAPO_BUILD_DIR:-$root/build}
work=${SLAPO_DEMO_DIR:-$build/demo}

"$root/third_party/bootstrap.sh"
mkdir -p "$work"
inputs=$(/usr/bin/python3 "$root/test/models/export.py" --model gpt2 --mode trace \
  --out "$work/gpt2.pt")
echo "exported $work/gpt2.pt ($inputs)"
# shellcheck disable=SC2086 # $inputs is a list of flags
"$build/tools/slapoc/slapoc" "$work/gpt2.pt" $inputs --emit=slapo -o "$work/gpt2.mlir"
echo "slapo IR written to $work/gpt2.mlir"
# shellcheck disable=SC2086
"$build/tools/slapoc/slapoc" "$work/gpt2.pt" $inputs --summary --check-import
