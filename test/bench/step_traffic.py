#!/usr/bin/python3
"""The memory traffic of a compiled training step, kernel by kernel, counted from its code.

  python3 test/bench/step_traffic.py RANK_DIR [--bandwidth GB/s] [--baseline RANK_DIR]

RANK_DIR is a rank's directory of a program slapoc wrote (a CPU or a CUDA one: step.cpp or
step.cu). Each kernel call of the step (a block function's as often as the step runs it) is
counted with the bytes of the distinct tensors it is passed, each read or written once (a
slice: the part of its input it keeps): the least any implementation of that call moves. The
table sums them by kernel (binary, reduce and unary by kind), beside the time they take at
--bandwidth, the bound of a step whose every kernel ran at that bandwidth (the GEMMs' own bound
is their FLOPs: gemm_shapes.py, the MFU of gpu_train.py). A count, not a measurement: it says
where a step's passes over memory are and what a compiler change removed (--baseline: a second
program's column beside), not how fast a device runs them. The LM head kernels' and flash
attention's traffic inside their chunks and tiles is not counted.
"""

import argparse
import collections
import re

import generated_step


def traffic(rank_dir):
    """{kernel: [calls per step, bytes per step]} of the step in rank_dir."""
    totals = collections.defaultdict(lambda: [0, 0])
    for text, times in generated_step.functions(rank_dir):
        tensors = generated_step.views(text)
        for kernel, args in generated_step.kernel_calls(text):
            kind = re.search(r"(?:Binary|Reduce|Unary)Kind::(\w+)", args)
            name = "%s %s" % (kernel, kind.group(1)) if kind else kernel
            named = [n for n in re.findall(r"\b\w+\b", args) if n in tensors]
            # A slice reads only the elements it keeps: its output's, read and written.
            used = [named[1]] * 2 if kernel == "slice" else set(named)
            nbytes = 0
            for n in used:
                dtype, shape = tensors[n]
                count = 1
                for d in shape:
                    count *= d
                nbytes += count * generated_step.ELEMENT_BYTES[dtype]
            totals[name][0] += times
            totals[name][1] += nbytes * times
    return totals


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rank_dir")
    parser.add_argument("--bandwidth", type=float, default=3500.0,
                        help="GB/s the time column assumes (%(default)s: about what an "
                             "H200's kernels reach of its 4.8 TB/s)")
    parser.add_argument("--baseline", help="another program's rank directory, side by side")
    args = parser.parse_args()
    sides = [("program", traffic(args.rank_dir))]
    if args.baseline:
        sides.insert(0, ("baseline", traffic(args.baseline)))
    kernels = sorted({k for _, t in sides for k in t},
                     key=lambda k: -max(t.get(k, [0, 0])[1] for _, t in sides))
    header = " | ".join("%s calls | %s GB | %s ms" % (s, s, s) for s, _ in sides)
    print("| kernel | %s |" % header)
    print("|---|%s" % ("---:|" * 3 * len(sides)))
    for kernel in kernels:
        cells = []
        for _, t in sides:
            calls, nbytes = t.get(kernel, [0, 0])
            cells.append("%d | %.2f | %.2f" % (calls, nbytes / 1e9,
                                                nbytes / (args.bandwidth * 1e6)))
        print("| %s | %s |" % (kernel, " | ".join(cells)))
    cells = []
    for _, t in sides:
        calls = sum(v[0] for k, v in t.items() if k not in ("matmul", "linear"))
        nbytes = sum(v[1] for k, v in t.items() if k not in ("matmul", "linear"))
        cells.append("%d | %.2f | %.2f" % (calls, nbytes / 1e9, nbytes / (args.bandwidth * 1e6)))
    print("| all but matmul and linear | %s |" % " | ".join(cells))


if __name__ == "__main__":
    main()
