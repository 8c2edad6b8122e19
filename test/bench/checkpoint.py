#!/usr/bin/python3
"""Activation recomputation in slapoc: step time and memory without it, for every block, and
for a memory budget's choice.

  PYTHONPATH=third_party/.pydeps /usr/bin/python3 test/bench/checkpoint.py \\
      [gpt_train.py's flags] [--budget-fraction F]

The model, its batches and the flags are gpt_train.py's (imported from there: 4 layers x 512,
seq 256, batch 8 by default), trained in fp32 on one rank with its AdamW schedule.  It is
compiled three times:

  none     no checkpoint()
  all      sch["transformer.h.*"].checkpoint(): every block's forward computed again before its
           backward
  budget   train(memory_budget=F x the arena of "none", F = 0.5 by default): slapoc chooses the
           blocks (the fewest, cheapest first) by trial memory plans

Each program trains W + N steps with T threads; the three take turns, R repeats.  The table
shows the median step time over the repeats (each repeat's value is the median of its N timed
steps), the planned arena (the log's arena_bytes), the peak resident set of the run (VmHWM:
the arena plus the program, its libraries and oneDNN's scratch), the modules recomputed, and
the matmul FLOPs of a step: the model's (gpt_train.py's count) plus what recomputation adds
(slapoc's count, in its output), as GFLOP/s and as a percentage of the fp32 GEMM peak measured
here (the faster of torch.matmul and oneDNN, 2048^3, median of 10).  The losses of the three
agree bit for bit: recomputation changes no result.
"""

import argparse
import json
import os
import re
import statistics
import sys

import gpt_train


def schedule(budget_bytes=None, checkpoint_all=False):
    train = gpt_train.SCHEDULE
    if budget_bytes:
        train = train.replace(")\n", ', memory_budget="%dB")\n' % budget_bytes)
    return train + ('sch["transformer.h.*"].checkpoint()\n' if checkpoint_all else "")


def compile_config(args, work, name, text):
    """Compiles a configuration; returns (recomputed matmul GFLOP, modules) from the manifest."""
    gpt_train.compile_slapoc(args, work, name, text, gpt_train.input_flags(args))
    with open(os.path.join(work, name, "manifest.json")) as f:
        recomputation = json.load(f).get("recomputation", {})
    return recomputation.get("matmul_flops", 0) / 1e9, recomputation.get("modules", [])


def bench(args, work):
    import torch
    start_load = gpt_train.load_average()
    _, model_flops = gpt_train.prepare(args, work)
    configs = {"none": compile_config(args, work, "none", schedule()),
               "all blocks": compile_config(args, work, "all", schedule(checkpoint_all=True))}
    outputs = {"none": "none", "all blocks": "all"}
    with open(os.path.join(work, "none", "manifest.json")) as f:
        arena = json.load(f)["ranks"][0]["planned_memory_bytes"]["arena_bytes"]
    budget = int(arena * args.budget_fraction)
    budget_name = "budget %.0f%%" % (100 * args.budget_fraction)
    budget_error = None
    try:
        configs[budget_name] = compile_config(args, work, "budget", schedule(budget))
        outputs[budget_name] = "budget"
    except gpt_train.BenchError as e:
        budget_error = re.search(r"error: (.*)", str(e))
        budget_error = budget_error.group(1) if budget_error else str(e)
    gemm = gpt_train.gemm_rates(args.threads, torch.float32)
    peak = max((rate for rate in gemm.values() if not isinstance(rate, str)), default=None)

    runs = {name: [] for name in outputs}
    paths = None
    for _ in range(args.repeats):
        for name, out in outputs.items():
            result = gpt_train.run_program(args, work, os.path.join(work, out), out)
            paths = paths or result["paths"]
            runs[name].append(result)

    def median(name, key):
        return statistics.median(run[key] for run in runs[name])

    mib = lambda b: "%.1f MiB" % (b / 2 ** 20)
    print("## Activation recomputation, GPT-2-style training, fp32, CPU, one rank\n")
    print("`%s`\n" % gpt_train.command_line())
    print("- machine: %s; load average %s at the start, %s at the end"
          % (gpt_train.describe_machine(), start_load, gpt_train.load_average()))
    print("- model: test/models/gpt2.py, %d layers, hidden %d, %d heads, seq %d, batch %d, "
          "vocab %d; %d warmup + %d timed steps per run, %d runs per configuration, %d threads"
          % (args.layers, args.hidden, args.heads, args.seq, args.batch, args.vocab,
             args.warmup, args.steps, args.repeats, args.threads))
    print("- paths (the progress header): %s" % paths)
    print("- fp32 GEMM peak: %s" % ", ".join(
        "%s %s" % (lib, rate if isinstance(rate, str) else "%.1f GFLOP/s" % rate)
        for lib, rate in gemm.items()))
    print("- budget: %s of the plan without recomputation (%s)%s\n"
          % (mib(budget), "%.0f%%" % (100 * args.budget_fraction),
             ": n/a (%s)" % budget_error if budget_error else ""))
    print("| recomputation | step ms | vs none | planned arena | peak RSS | modules recomputed "
          "| matmul GFLOP/step | GFLOP/s | % of GEMM peak |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|")
    base_step = median("none", "step_s")
    for name in outputs:
        step_s = median(name, "step_s")
        extra_gflop, modules = configs[name]
        gflop = model_flops / 1e9 + extra_gflop
        print("| %s | %.0f | %.2fx | %s | %s | %s | %.1f | %.1f | %s |"
              % (name, step_s * 1e3, step_s / base_step, mib(median(name, "arena")),
                 mib(median(name, "rss")), len(modules), gflop, gflop / step_s,
                 "%.1f%%" % (100 * gflop / step_s / peak) if peak else "n/a"))
    losses = {name: runs[name][0]["loss"] for name in outputs}
    print("\nLoss after %d steps: %s%s." % (
        args.warmup + args.steps, ", ".join("%s %.9g" % item for item in losses.items()),
        " (bit for bit equal)" if len(set(losses.values())) == 1 else " (DIFFER)"))


def main():
    parser = argparse.ArgumentParser(
        description="Step time and memory of GPT-2 training with and without recomputation")
    gpt_train.add_common_args(parser, threads=2, steps=5)
    parser.add_argument("--budget-fraction", type=float, default=0.5,
                        help="the memory budget as a fraction of the arena without "
                             "recomputation (%(default)s)")
    args = gpt_train.parse_args(parser)
    if not 0 < args.budget_fraction <= 1:
        parser.error("--budget-fraction must be in (0, 1]")
    try:
        with gpt_train.work_dir(args) as work:
            bench(args, work)
    except gpt_train.BenchError as e:
        sys.exit("checkpoint.py: error: %s" % e)


if __name__ == "__main__":
    main()
