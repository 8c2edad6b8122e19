#!/usr/bin/python3
"""Activation recomputation in slapoc: step time and memory without it, for every block, and
for a memory budget's choice.

  PYTHONPATH=third_party/.pydeps /usr/bin/python3 test/bench/checkpoint.py \\
      [gpt_train.py's flags] [--budget-fractions F,...] [--plan-only]

The model, its batches and the flags are gpt_train.py's (imported from there: 4 layers x 512,
seq 256, batch 8 by default), trained in fp32 on one rank with its AdamW schedule.  It is
compiled three times:

  none     no checkpoint()
  all      sch["transformer.h.*"].checkpoint(): every block's forward computed again before its
           backward
  budget   train(memory_budget=F x the arena of "none"), for each F of --budget-fractions
           (0.5 and 0.7 by default): slapoc chooses the blocks (the fewest, cheapest first) by
           trial memory plans; a budget no choice meets is reported as n/a with slapoc's error

Each program trains W + N steps with T threads; the three take turns, R repeats.  The table
shows the median step time over the repeats (each repeat's value is the median of its N timed
steps), the planned arena (the log's arena_bytes), the peak resident set of the run (VmHWM:
the arena plus the program, its libraries and oneDNN's scratch), the modules recomputed, and
the matmul FLOPs of a step: the model's (gpt_train.py's count) plus what recomputation adds
(slapoc's count, in its output), as GFLOP/s and as a percentage of the fp32 GEMM peak measured
here (the faster of torch.matmul and oneDNN, 2048^3, median of 10).  The losses of the three
agree bit for bit: recomputation changes no result.

With --plan-only nothing runs: the programs' sources are written (slapoc --emit=cpp, without
the host compiler) and the table shows the planned arena of each configuration, for models
too large to train here (GPT-2 small: --layers 12 --hidden 768 --heads 12 --seq 1024
--vocab 50257).
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
    """Compiles a configuration; returns its planned arena in bytes, the recomputed matmul
    GFLOP and the modules recomputed, from the manifest."""
    flags = gpt_train.input_flags(args) + (["--emit=cpp"] if args.plan_only else [])
    gpt_train.compile_slapoc(args, work, name, text, flags)
    with open(os.path.join(work, name, "manifest.json")) as f:
        manifest = json.load(f)
    rank = manifest["ranks"][0]
    recomputation = rank.get("recomputation", {})
    return (rank["planned_memory_bytes"]["arena_bytes"],
            recomputation.get("matmul_flops", 0) / 1e9, recomputation.get("modules", []))


def bench(args, work):
    import torch
    start_load = gpt_train.load_average()
    _, model_flops = gpt_train.prepare(args, work)
    configs = {"none": compile_config(args, work, "none", schedule()),
               "all blocks": compile_config(args, work, "all", schedule(checkpoint_all=True))}
    outputs = {"none": "none", "all blocks": "all"}
    budgets = []  # (fraction, bytes, slapoc's error or None)
    for fraction in args.budget_fractions:
        budget = int(configs["none"][0] * fraction)
        name, out = "budget %.0f%%" % (100 * fraction), "budget-%.0f" % (100 * fraction)
        try:
            configs[name] = compile_config(args, work, out, schedule(budget))
            outputs[name] = out
            budgets.append((fraction, budget, None))
        except gpt_train.BenchError as e:
            error = re.search(r"error: (.*)", str(e))
            budgets.append((fraction, budget, error.group(1) if error else str(e)))
    mib = lambda b: "%.1f MiB" % (b / 2 ** 20)
    if args.plan_only:
        print_plans(args, configs, budgets, start_load, mib)
        return
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
    print_budgets(budgets, mib)
    print("| recomputation | step ms | vs none | planned arena | peak RSS | modules recomputed "
          "| matmul GFLOP/step | GFLOP/s | % of GEMM peak |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|")
    base_step = median("none", "step_s")
    for name in outputs:
        step_s = median(name, "step_s")
        _, extra_gflop, modules = configs[name]
        gflop = model_flops / 1e9 + extra_gflop
        print("| %s | %.0f | %.2fx | %s | %s | %s | %.1f | %.1f | %s |"
              % (name, step_s * 1e3, step_s / base_step, mib(median(name, "arena")),
                 mib(median(name, "rss")), len(modules), gflop, gflop / step_s,
                 "%.1f%%" % (100 * gflop / step_s / peak) if peak else "n/a"))
    losses = {name: runs[name][0]["loss"] for name in outputs}
    print("\nLoss after %d steps: %s%s." % (
        args.warmup + args.steps, ", ".join("%s %.9g" % item for item in losses.items()),
        " (bit for bit equal)" if len(set(losses.values())) == 1 else " (DIFFER)"))


def print_budgets(budgets, mib):
    for fraction, budget, error in budgets:
        print("- budget %.0f%%: %s%s" % (100 * fraction, mib(budget),
                                        ": n/a (%s)" % error if error else ""))
    print()


def print_plans(args, configs, budgets, start_load, mib):
    print("## Activation recomputation: planned arena, GPT-2-style training, fp32, one rank\n")
    print("`%s`\n" % gpt_train.command_line())
    print("- machine: %s; load average %s at the start, %s at the end"
          % (gpt_train.describe_machine(), start_load, gpt_train.load_average()))
    print("- model: test/models/gpt2.py, %d layers, hidden %d, %d heads, seq %d, batch %d, "
          "vocab %d" % (args.layers, args.hidden, args.heads, args.seq, args.batch, args.vocab))
    print_budgets(budgets, mib)
    print("| recomputation | planned arena | vs none | modules recomputed | "
          "matmul GFLOP/step recomputed |")
    print("|---|---:|---:|---:|---:|")
    for name, (arena, extra_gflop, modules) in configs.items():
        print("| %s | %s | %.2fx | %d | %.1f |" % (name, mib(arena), arena / configs["none"][0],
                                                  len(modules), extra_gflop))


def main():
    parser = argparse.ArgumentParser(
        description="Step time and memory of GPT-2 training with and without recomputation")
    gpt_train.add_common_args(parser, threads=2, steps=5)
    parser.add_argument("--budget-fractions", default="0.5,0.7",
                        type=lambda text: [float(f) for f in text.split(",")],
                        help="memory budgets as fractions of the arena without "
                             "recomputation (%(default)s)")
    parser.add_argument("--plan-only", action="store_true",
                        help="compile to sources only and report the planned arenas")
    args = gpt_train.parse_args(parser)
    if not all(0 < fraction <= 1 for fraction in args.budget_fractions):
        parser.error("--budget-fractions must be in (0, 1]")
    try:
        with gpt_train.work_dir(args) as work:
            bench(args, work)
    except gpt_train.BenchError as e:
        sys.exit("checkpoint.py: error: %s" % e)


if __name__ == "__main__":
    main()
