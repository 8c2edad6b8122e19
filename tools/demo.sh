#!/usr/bin/env bash
# The main job: installs what is missing, builds slapoc, exports a small GPT-2
# to TorchScript, compiles it with a shipped data-parallel schedule and trains
# it for 100 steps on a token file on 2 CPU ranks under mpirun, printing loss
# and tokens/s.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SLAPO_BUILD_DIR:-$root/build}
work=${SLAPO_DEMO_DIR:-$build/demo}
steps=${SLAPO_DEMO_STEPS:-100}

"$root/third_party/bootstrap.sh"
mkdir -p "$work"
/usr/bin/python3 "$root/test/models/export.py" --model gpt2 --mode trace \
  --out "$work/gpt2.pt" > /dev/null
echo "exported $work/gpt2.pt"

# A token file (flat uint16 ids) with structure to learn: a cycle through
# the vocabulary of 128 with one in eight tokens random.
/usr/bin/python3 - "$work/tokens.bin" <<'PY'
import sys
import numpy
rng = numpy.random.default_rng(0)
tokens = numpy.arange(200_000) % 128
noise = rng.random(tokens.size) < 0.125
tokens[noise] = rng.integers(0, 128, noise.sum())
tokens.astype(numpy.uint16).tofile(sys.argv[1])
PY
echo "wrote $work/tokens.bin (200000 tokens)"

"$build/tools/slapoc/slapoc" "$work/gpt2.pt" \
  --schedule "$root/schedules/gpt2-dp2.sched" -o "$work/out"

# Two ranks share the cores; OpenMPI refuses root unless asked, and more
# ranks than cores unless oversubscribed.
mpirun=(mpirun -np 2 --oversubscribe --bind-to none)
if [ "$(id -u)" = 0 ]; then
  mpirun+=(--allow-run-as-root)
fi
threads=$(($(nproc) / 2))
"${mpirun[@]}" "$work/out/launch" --steps "$steps" --data "$work/tokens.bin" \
  --threads "$((threads > 0 ? threads : 1))" --log-json "$work/train.json"
