#!/usr/bin/python3
"""Tensor, data and pipeline parallelism of slapoc-compiled GPT-2 training: step time and
communication.

  PYTHONPATH=third_party/.pydeps /usr/bin/python3 test/bench/parallel.py \\
      [gpt_train.py's flags; --threads is per rank and defaults to 1]

The model, its batches and the flags are gpt_train.py's (imported from there).  It is compiled
three times with schedules/gpt2.sched, its input() shapes set to [B, S] (B is the global
batch):

  1 rank  mesh(dp=1, tp=1, pp=1) and no primitives
  tp=2    the schedule as shipped: Megatron-style tensor parallelism over two ranks (its
          comments say what is split)
  dp=2    its mesh line made mesh(dp=2, tp=1, pp=1), as test/e2e/tensor_parallel.test does:
          two replicas on B/2 rows each, gradients all-reduced (sharding over one rank is a
          no-op)
  pp=2    no primitives but a cut after the middle block, mesh(dp=1, tp=1, pp=2), and
          train(microbatches=m) for m = 1, 2, 4, 8 (those that divide B): two stages in 1F1B
          order

Each program trains W + N steps under
`mpirun --allow-run-as-root --oversubscribe --bind-to none -np RANKS` with --threads T per
rank (T = 1 by default, so that two ranks fill a two-core machine); the meshes take turns,
R repeats.  Rank 0's --log-json gives per step step_time_s, comm_time_s, the wall time the
rank spent inside MPI collectives (waiting for its peer included), and p2p_wait_s, the wall time
it spent in the pipeline's point-to-point sends and receives (counted apart); a run's value is
the median over its N timed steps, the table shows the median over the repeats, and a fraction
is a median time / the median step time.

For pp=2 the measured bubble is the first stage's (rank 0's) p2p_wait_s / step_time_s: its sends
copy and do not wait, so its p2p time is the time it waits on receives (the gradients of its
microbatches, and the loss), and all of its idle time is there: it ends the step last (its last
backward follows the last stage's), so it does not wait in the tied embedding's all-reduce.
The last stage's idle time is split between its first receive (the first microbatch's
activations) and that all-reduce (comm_time_s): its p2p fraction, from its per-rank summary
line (the median over all W + N steps), is shown for comparison.  Beside them, 1F1B's
theoretical bubble (p - 1) / (m + p - 1), which assumes stages of equal time, and measured /
theory.  All meshes train on the same global batches, so their losses agree (printed below the
table).  Last, each pp row's planned memory per stage (its manifest.json): the arena, the
activations at the planned peak, and how many microbatches' activations the stage holds at once.  The header names the paths the programs took (rank 0's
progress header: oneDNN's ISA, the kernel build, the bf16 matmul; SLAPO_CPU_ISA caps them).
"""

import argparse
import json
import os
import re
import statistics
import sys

import gpt_train

SCHEDULE = os.path.join(gpt_train.REPO, "schedules", "gpt2.sched")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np"]
# (name, output directory, ranks, the schedule's mesh line, whether the primitives stay,
# microbatches: with pipeline stages, the schedule cuts after the middle block)
MESHES = (("1 rank", "one-rank", 1, "mesh(dp=1, tp=1, pp=1)", False, 1),
          ("tp=2", "tp2", 2, "mesh(dp=1, tp=2, pp=1)", True, 1),
          ("dp=2", "dp2", 2, "mesh(dp=2, tp=1, pp=1)", True, 1)) + tuple(
              ("pp=2 m=%d" % m, "pp2-m%d" % m, 2, "mesh(dp=1, tp=1, pp=2)", False, m)
              for m in (1, 2, 4, 8))


def schedule(args, mesh, primitives, microbatches=1):
    """schedules/gpt2.sched with the mesh line, the input shapes [B, S], and its primitives
    (the sch[...] lines) kept or dropped; with pp=2 in the mesh, train(microbatches=) and a cut
    after the middle block."""
    with open(SCHEDULE) as f:
        lines = f.read().splitlines()
    lines = [re.sub(r"^mesh\(.*\)$", mesh, line) for line in lines
             if primitives or not line.startswith("sch[")]
    if "pp=2" in mesh:
        lines = [re.sub(r"^(train\(.*)\)$", r"\1, microbatches=%d)" % microbatches, line)
                 for line in lines]
        lines.append('sch["transformer.h.%d"].cut_pipeline_stage()' % (args.layers // 2 - 1))
    return re.sub(r"i64\[\d+, *\d+\]", "i64[%d, %d]" % (args.batch, args.seq),
                  "\n".join(lines) + "\n")


def meshes(args):
    """The meshes this batch can run: a microbatch count must divide it."""
    return [mesh for mesh in MESHES if args.batch % mesh[5] == 0]


def last_stage_wait(output, ranks):
    """The last rank's median p2p_wait_s / step time, from its per-rank summary line."""
    match = re.search(r"^rank %d \(pipeline stage .*: median of \d+ steps ([0-9.]+) s, "
                      r"p2p_wait_s ([0-9.]+) s" % (ranks - 1), output, re.MULTILINE)
    if not match:
        raise gpt_train.BenchError("no summary line of rank %d in:\n%s" % (ranks - 1, output))
    return float(match.group(2)) / float(match.group(1))


def bench(args, work):
    start_load = gpt_train.load_average()
    n_params, _ = gpt_train.prepare(args, work)
    for _, out, _, mesh, primitives, microbatches in meshes(args):
        gpt_train.compile_slapoc(args, work, out,
                                 schedule(args, mesh, primitives, microbatches))
    runs = {mesh[0]: [] for mesh in meshes(args)}
    paths = None
    for _ in range(args.repeats):
        for name, out, ranks, mesh, _, _ in meshes(args):
            log = os.path.join(work, out + ".json")
            finished = gpt_train.run(MPIRUN + [str(ranks)] + gpt_train.launch_argv(
                args, work, os.path.join(work, out), log))
            paths = paths or gpt_train.program_paths(finished.output)
            steps = gpt_train.read_log(args, log)
            runs[name].append({"step_s": gpt_train.timed_median(args, steps, "step_time_s"),
                               "comm_s": gpt_train.timed_median(args, steps, "comm_time_s"),
                               "p2p_s": gpt_train.timed_median(args, steps, "p2p_wait_s"),
                               "last_p2p": (last_stage_wait(finished.output, ranks)
                                            if "pp=2" in mesh else 0),
                               "loss": steps[-1]["loss"]})

    tokens = args.batch * args.seq
    train_line = " ".join(re.search(r"^train\(.*?\)$", schedule(args, "", False),
                                    re.MULTILINE | re.DOTALL).group().split())
    print("## GPT-2-style training on several ranks, fp32, CPU: step time and communication\n")
    print("`%s`\n" % gpt_train.command_line())
    print("- machine: %s; load average %s at the start, %s at the end"
          % (gpt_train.describe_machine(), start_load, gpt_train.load_average()))
    print("- model: test/models/gpt2.py, %d layers, hidden %d, %d heads, seq %d, vocab %d, "
          "global batch %d: %.1fM parameters; schedules/gpt2.sched's `%s`"
          % (args.layers, args.hidden, args.heads, args.seq, args.vocab, args.batch,
             n_params / 1e6, train_line))
    print("- `%s N out/launch ... --threads %d`; %d warmup + %d timed steps per run, %d runs "
          "per mesh, rank 0's times" % (gpt_train.shell(MPIRUN), args.threads, args.warmup,
                                         args.steps, args.repeats))
    print("- paths (rank 0's progress header): %s\n" % paths)
    print("| mesh | ranks | step ms | tokens/s | comm ms per step | comm fraction "
          "| p2p wait ms per step | measured bubble (first stage) | last stage's p2p wait "
          "| 1F1B bubble (theory) | measured / theory |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, _, ranks, mesh, _, microbatches in meshes(args):
        def median(key):
            return statistics.median(r[key] for r in runs[name])
        step_s, comm_s, p2p_s = median("step_s"), median("comm_s"), median("p2p_s")
        pipeline = ""
        if "pp=2" in mesh:
            measured, theory = p2p_s / step_s, 1 / (microbatches + 1)
            pipeline = "%.0f | %.1f%% | %.1f%% | %.1f%% | %.2fx" % (
                p2p_s * 1e3, 100 * measured, 100 * median("last_p2p"), 100 * theory,
                measured / theory)
        print("| %s | %d | %.0f | %.0f | %.0f | %.1f%% | %s |"
              % (name, ranks, step_s * 1e3, tokens / step_s, comm_s * 1e3,
                 100 * comm_s / step_s, pipeline or " | | | | "))
    print("\nLoss after %d steps: %s." % (args.warmup + args.steps, ", ".join(
        "%s %.6f" % (name, runs[name][0]["loss"]) for name in runs)))
    print("\nPlanned memory of the pipeline stages (manifest.json: each stage's arena, its "
          "activations at the planned peak, the microbatches whose activations it holds at "
          "once):\n")
    print("| mesh | stage 0 arena | activations | in flight | stage 1 arena | activations "
          "| in flight |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, out, _, mesh, _, microbatches in meshes(args):
        if "pp=2" not in mesh:
            continue
        with open(os.path.join(work, out, "manifest.json")) as f:
            ranks = json.load(f)["ranks"]
        def in_flight(rank):
            if "microbatches_in_flight" not in rank:
                return "1 of 1"
            held = rank["planned_memory_bytes"].get("activations_in_flight")
            return "%d of %d%s" % (rank["microbatches_in_flight"], microbatches,
                                   "" if held is None else " (%.1f MiB)" % (held / 2**20))
        print("| %s | %s |" % (name, " | ".join(
            "%.1f MiB | %.1f MiB | %s" % (rank["planned_memory_bytes"]["arena_bytes"] / 2**20,
                                          rank["planned_memory_bytes"]["activations"] / 2**20,
                                          in_flight(rank))
            for rank in ranks)))


def main():
    parser = argparse.ArgumentParser(
        description="Step time and communication of GPT-2 training on 1 rank, tp=2, dp=2 "
                    "and pp=2 (m=1, 2, 4, 8)")
    gpt_train.add_common_args(parser, threads=1, steps=5)
    args = gpt_train.parse_args(parser)
    if args.batch % 2 or args.heads % 2 or args.layers < 2:
        parser.error("dp=2 needs an even --batch, tp=2 an even --heads and pp=2 two --layers")
    try:
        with gpt_train.work_dir(args) as work:
            bench(args, work)
    except gpt_train.BenchError as e:
        sys.exit("parallel.py: error: %s" % e)


if __name__ == "__main__":
    main()
