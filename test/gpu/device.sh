#!/usr/bin/env bash
# What one call of a lent GPU machine runs: the GPU suite, the GPU benchmark,
# then a per-kernel profile (ncu) of one fused GPT-2 small step, each under a
# time limit so that the call ends inside the device tool's. Here, first:
#
#   test/gpu/prepare.sh                                   # build/gpu-suite.tar.xz
#   PYTHONPATH=third_party/.pydeps /usr/bin/python3 test/bench/gpu_train.py --prepare DIR
#   cp DIR.tar.xz CARRY/gpu-bench.tar.xz                  # --prepare wrote it
#   cp build/gpu-suite.tar.xz CARRY/
#
# with DIR named gpu-bench and CARRY a folder that .git/info/exclude ignores
# and the call carries (the suite 21 MB with xz -9 on 2026-12-07, the bench
# at most 12 MiB: of the 64 that travel). gpu_train.py's
# --prepare traces GPT-2 small at [16, 1024] on the CPU: 26 minutes on a busy
# two-core machine, so start it first (a later --prepare reuses the trace kept
# in DIR.traces and only compiles: minutes). There:
#
#   test/gpu/device.sh CARRY        # writes suite.txt, bench.txt, ncu.csv.gz,
#                                   # suite-logs.tgz and gpu_bench.json to $OUT
set -uo pipefail
carry=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-$PWD}
work=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"
tar -C "$work" -xJf "$carry/gpu-suite.tar.xz" && tar -C "$work" -xJf "$carry/gpu-bench.tar.xz" ||
  exit 1

start=$SECONDS
OUT=$work/suite-out timeout 230 "$work/gpu-suite/run.sh" 2>&1 | tee "$out/suite.txt"
echo "suite: $((SECONDS - start)) s"
# One file: the device tool brings back at most 8.
tar -C "$work" -czf "$out/suite-logs.tgz" suite-out

start=$SECONDS
PYTHONUNBUFFERED=1 OUT=$out timeout 170 python3 "$root/test/bench/gpu_train.py" \
  --run "$work/gpu-bench" --repeats 2 2>&1 | tee "$out/bench.txt"
echo "bench: $((SECONDS - start)) s"

# Kernel by kernel, one step of the fused program (the benchmark wrote its
# weights): gpu__time_duration alone needs one pass per kernel.
start=$SECONDS
nccl=$(python3 -c "import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], 'lib'))")
LD_LIBRARY_PATH=$nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 80 ncu --csv \
  --metrics gpu__time_duration.sum --print-units base --log-file "$work/ncu.csv" \
  "$work/gpu-bench/gpt2-small/out-fused/launch" --steps 1 --quiet
echo "ncu: exit $?, $((SECONDS - start)) s"
gzip -c "$work/ncu.csv" > "$out/ncu.csv.gz"
