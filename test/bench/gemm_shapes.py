#!/usr/bin/python3
"""The GEMMs of a compiled training step, each through three libraries, side by side.

  PYTHONPATH=third_party/.pydeps /usr/bin/python3 test/bench/gemm_shapes.py RANK_DIR \\
      [--threads T] [--runs N] [--repeats R] [--bench PATH]

RANK_DIR is a rank's directory of a program slapoc wrote (gpt_train.py --keep DIR leaves
DIR/out/rank0).  Every distinct contraction of its step.cpp and blocks.cpp (cpu::linear and
cpu::matmul calls, with their operands' shapes and permutations as the generated code passes
them, counted per step: a block function's calls once per block it runs) is timed by

  runtime   the runtime's cpu::linear / cpu::matmul, as the program calls it
  OpenBLAS  cblas_sgemm of the OpenMP build (libopenblas0-openmp) on the same strided
            operands: a batch's matrices split over the threads, one call each
  torch     torch.matmul on the same operands (permuted views; LibTorch's libblas.so.3)

the first two in build/test/bench/slapo-gemm-shapes (GemmShapes.cpp, alternating call by
call), torch in this process; a repeat runs both processes once, in turn.  Each cell is the
median GFLOP/s over the repeats of the per-repeat medians of N calls; "spread" is the
runtime's lowest and highest repeat.  The last row weighs each shape by its calls per step:
the step's GEMM time through each library.
"""

import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
import time

import generated_step

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def contractions(rank_dir):
    """{(kind, lhs, rhs, out, permutations): calls per step} of the generated code."""
    calls = collections.Counter()
    for text, times in generated_step.functions(rank_dir):
        shapes = {name: shape for name, (dtype, shape) in generated_step.views(text).items()
                  if dtype == "F32"}
        for kind, args in generated_step.kernel_calls(text):
            if kind not in ("linear", "matmul"):
                continue
            names = re.findall(r"\b(t\d+_\w+|in\d+)\b", args)
            permutations = tuple(tuple(int(x) for x in p.split(",")) if p else None for p, _ in
                                 re.findall(r"\{([\d, ]+)\}\.data\(\)|(nullptr)", args))
            operands = (names[0], names[1], names[-1])
            calls[(kind, *(shapes[n] for n in operands), permutations or (None,) * 3)] += times
    return calls


def spec_line(key):
    def text(values):
        return ",".join(map(str, values)) if values else "-"
    kind, lhs, rhs, out, permutations = key
    return " ".join([kind, text(lhs), text(rhs), text(out), *map(text, permutations)])


def describe(key):
    kind, lhs, rhs, out, permutations = key
    # T: the operand is read transposed (its last dim is not the stored last dim).
    marks = "".join("T" if p and p[-1] != len(p) - 1 else "N"
                    for p in permutations[:2]) if kind == "matmul" else "NT"
    return "%s %s x %s -> %s %s" % (kind, "x".join(map(str, lhs)), "x".join(map(str, rhs)),
                                    "x".join(map(str, out)), marks)


def torch_seconds(keys, runs):
    import torch
    seconds = []
    for kind, lhs, rhs, out, permutations in keys:
        a, b = torch.rand(lhs) * 2 - 1, torch.rand(rhs) * 2 - 1
        if kind == "linear":
            call = lambda: torch.nn.functional.linear(a, b)  # noqa: E731
        else:
            pa = a.permute(permutations[0]) if permutations[0] else a
            pb = b.permute(permutations[1]) if permutations[1] else b
            call = lambda: torch.matmul(pa, pb)  # noqa: E731
        call(), call()
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        seconds.append(statistics.median(times))
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rank_dir")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=10, help="calls per repeat (%(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="%(default)s")
    parser.add_argument("--bench", default=os.path.join(REPO, "build", "test", "bench",
                                                         "slapo-gemm-shapes"))
    parser.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    calls = contractions(args.rank_dir)
    keys = list(calls)
    if args.torch_worker:
        import torch
        torch.set_num_threads(args.threads)
        print(" ".join("%.6g" % s for s in torch_seconds(keys, args.runs)))
        return
    spec = "".join(spec_line(key) + "\n" for key in keys)
    sides = collections.defaultdict(list)  # (side, key index) -> seconds per repeat
    for _ in range(args.repeats):
        lines = subprocess.run([args.bench, str(args.threads), str(args.runs)], input=spec,
                               capture_output=True, text=True, check=True).stdout.split("\n")
        for i, line in enumerate(lines[:len(keys)]):
            flops, runtime, openblas = line.split()[:3]
            sides["runtime", i].append(float(runtime))
            sides["OpenBLAS", i].append(float(openblas))
        torch_line = subprocess.run([sys.executable, __file__, args.rank_dir, "--threads",
                                     str(args.threads), "--runs", str(args.runs),
                                     "--torch-worker"], capture_output=True, text=True,
                                    check=True).stdout.split()
        for i, seconds in enumerate(torch_line):
            sides["torch", i].append(float(seconds))
    flops = [int(line.split()[0]) for line in lines[:len(keys)]]
    print("%d threads, %d repeats of %d calls; load average %s" % (
        args.threads, args.repeats, args.runs, "/".join("%.2f" % x for x in os.getloadavg())))
    print()
    print("| GEMM | calls/step | runtime GFLOP/s (spread) | OpenBLAS | torch | OpenBLAS/runtime"
          " | torch/runtime |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    totals = collections.Counter()
    for i, key in enumerate(keys):
        rate = {side: flops[i] / statistics.median(sides[side, i]) / 1e9
                for side in ("runtime", "OpenBLAS", "torch")}
        for side in rate:
            totals[side] += calls[key] * statistics.median(sides[side, i])
        spread = "%.0f-%.0f" % (flops[i] / max(sides["runtime", i]) / 1e9,
                                flops[i] / min(sides["runtime", i]) / 1e9)
        print("| %s | %d | %.1f (%s) | %.1f | %.1f | %.2f | %.2f |" % (
            describe(key), calls[key], rate["runtime"], spread, rate["OpenBLAS"], rate["torch"],
            rate["OpenBLAS"] / rate["runtime"], rate["torch"] / rate["runtime"]))
    total_flops = sum(calls[key] * flops[i] for i, key in enumerate(keys))
    print("| step (%.1f GFLOP) | | %.0f ms | %.0f ms | %.0f ms | %.2f | %.2f |" % (
        total_flops / 1e9, 1e3 * totals["runtime"], 1e3 * totals["OpenBLAS"],
        1e3 * totals["torch"], totals["runtime"] / totals["OpenBLAS"],
        totals["runtime"] / totals["torch"]))


if __name__ == "__main__":
    main()
