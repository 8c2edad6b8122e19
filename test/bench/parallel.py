#!/usr/bin/python3
"""Tensor, data and pipeline parallelism of slapoc-compiled GPT-2 training: step time and
communication.

  PYTHONPATH=third_party/.pydeps /usr/bin/python3 test/bench/parallel.py \\
      [--pp-only] [--pp-cut MODULE] [gpt_train.py's flags; --threads is per rank and
      defaults to 1]

The model, its batches and the flags are gpt_train.py's (imported from there).  It is compiled
three times with schedules/gpt2.sched, its input() shapes set to [B, S] (B is the global
batch):

  1 rank  mesh(dp=1, tp=1, pp=1) and no primitives
  tp=2    the schedule as shipped: Megatron-style tensor parallelism over two ranks (its
          comments say what is split)
  dp=2    its mesh line made mesh(dp=2, tp=1, pp=1), as test/e2e/tensor_parallel.test does:
          two replicas on B/2 rows each, gradients all-reduced (sharding over one rank is a
          no-op)
  pp=2    no primitives but one cut_pipeline_stage(), mesh(dp=1, tp=1, pp=2), and
          train(microbatches=m) for m = 1, 2, 4, 8 (those that divide B): two stages in 1F1B
          order.  The cut is slapoc's best-balanced one: the schedule is first compiled
          (--emit=cpp, sources only) with a cut after the middle block, and the cut its
          manifest.json's pipeline_balance names (balanced_cuts: the cut after a module whose
          most expensive stage has the fewest estimated FLOPs, the contractions of a
          microbatch's forward and backward) is taken; --pp-cut MODULE takes another

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
backward follows the last stage's), so it does not wait in the tied embedding's all-reduce
(its comm_time_s is that all-reduce's own time).  The last stage's idle time is split between
its receives and that all-reduce, where it waits for the first stage: its idle fraction is
(p2p_wait_s + comm_time_s) / step_time_s, from its per-rank summary line (the median over all
W + N steps).  Beside the main table's 1F1B bubble (p - 1) / (m + p - 1), which assumes
stages of equal time, and measured / theory, a second table ("pipeline balance") compares each
stage's idle fraction with 1F1B's for stages of unequal cost c_k per microbatch: a step takes
sum(c) + (m - 1) max(c) (one microbatch through every stage, then the others at the pace of
the most expensive stage), of which stage k computes m c_k, so it idles 1 - m c_k / (sum(c) +
(m - 1) max(c)); with equal stages that is (p - 1) / (m + p - 1).  The costs are taken two
ways: estimated, each stage's FLOPs from slapoc (manifest.json's
pipeline_balance.stage_flops), and measured, each stage's busy time per step (step time minus
its p2p and comm time).  The stage with the most estimated FLOPs is the bottleneck.  All
meshes train on the same global batches, so their losses agree (printed below the table).
Last, each pp row's planned memory per stage (its manifest.json): the arena, the activations
at the planned peak, and how many microbatches' activations the stage holds at once.  The
header names the paths the programs took (rank 0's progress header: oneDNN's ISA, the kernel
build, the bf16 matmul; SLAPO_CPU_ISA caps them), the load average at the start and the end
(the bench shares the machine with whatever else runs: a load above the core count stretches
the waits), and the cut.
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
# microbatches: with pipeline stages, the schedule cuts after the pipeline cut)
MESHES = (("1 rank", "one-rank", 1, "mesh(dp=1, tp=1, pp=1)", False, 1),
          ("tp=2", "tp2", 2, "mesh(dp=1, tp=2, pp=1)", True, 1),
          ("dp=2", "dp2", 2, "mesh(dp=2, tp=1, pp=1)", True, 1)) + tuple(
              ("pp=2 m=%d" % m, "pp2-m%d" % m, 2, "mesh(dp=1, tp=1, pp=2)", False, m)
              for m in (1, 2, 4, 8))


def middle_cut(args):
    """The module after the middle block."""
    return "transformer.h.%d" % (args.layers // 2 - 1)


def schedule(args, mesh, primitives, microbatches=1, cut=None):
    """schedules/gpt2.sched with the mesh line, the input shapes [B, S], and its primitives
    (the sch[...] lines) kept or dropped; with pp=2 in the mesh, train(microbatches=) and a cut
    after the module `cut`."""
    with open(SCHEDULE) as f:
        lines = f.read().splitlines()
    lines = [re.sub(r"^mesh\(.*\)$", mesh, line) for line in lines
             if primitives or not line.startswith("sch[")]
    if "pp=2" in mesh:
        lines = [re.sub(r"^(train\(.*)\)$", r"\1, microbatches=%d)" % microbatches, line)
                 for line in lines]
        lines.append('sch["%s"].cut_pipeline_stage()' % cut)
    return re.sub(r"i64\[\d+, *\d+\]", "i64[%d, %d]" % (args.batch, args.seq),
                  "\n".join(lines) + "\n")


def meshes(args):
    """The meshes to run: with --pp-only the pp ones; a microbatch count must divide B."""
    return [mesh for mesh in MESHES if args.batch % mesh[5] == 0 and
            (not args.pp_only or "pp=2" in mesh[3])]


def pipeline_balance(work, out):
    """The output's manifest.json pipeline_balance: slapoc's estimate of its stages' FLOPs."""
    with open(os.path.join(work, out, "manifest.json")) as f:
        return json.load(f)["pipeline_balance"]


def choose_cut(args, work):
    """The pipeline's cut (--pp-cut, or slapoc's best-balanced one), and a sentence saying
    where it comes from."""
    if args.pp_cut:
        return args.pp_cut, "given with --pp-cut"
    gpt_train.compile_slapoc(args, work, "pp2-probe",
                             schedule(args, "mesh(dp=1, tp=1, pp=2)", False, 1,
                                      middle_cut(args)), flags=("--emit=cpp",))
    balance = pipeline_balance(work, "pp2-probe")
    cut, = balance["balanced_cuts"]
    return cut, ("slapoc's best-balanced cut (manifest.json pipeline_balance.balanced_cuts of "
                 "the schedule compiled with the cut after the middle block, `%s`, whose "
                 "stages' estimated FLOPs are %s)" % (middle_cut(args),
                                                      describe_costs(balance["stage_flops"])))


def describe_costs(costs):
    return "%s (%.2fx)" % (" : ".join("%.3g G" % (c / 1e9) for c in costs),
                           max(costs) / min(costs))


def stage_times(output, rank):
    """A rank's median step, p2p_wait_s and comm_time_s, from its per-rank summary line."""
    match = re.search(r"^rank %d \(pipeline stage .*: median of \d+ steps ([0-9.]+) s, "
                      r"p2p_wait_s ([0-9.]+) s .*comm_time_s ([0-9.]+) s" % rank, output,
                      re.MULTILINE)
    if not match:
        raise gpt_train.BenchError("no summary line of rank %d in:\n%s" % (rank, output))
    return tuple(float(match.group(i)) for i in (1, 2, 3))


def idle_1f1b(costs, microbatches):
    """Each stage's idle fraction under 1F1B, for stage costs per microbatch `costs`: a step is
    sum(costs) + (m - 1) max(costs), of which stage k computes m costs[k]."""
    step = sum(costs) + (microbatches - 1) * max(costs)
    return [1 - microbatches * cost / step for cost in costs]


def bench(args, work):
    start_load = gpt_train.load_average()
    n_params, _ = gpt_train.prepare(args, work)
    cut, cut_origin = choose_cut(args, work)
    for _, out, _, mesh, primitives, microbatches in meshes(args):
        gpt_train.compile_slapoc(args, work, out,
                                 schedule(args, mesh, primitives, microbatches, cut))
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
                               "stages": ([stage_times(finished.output, rank)
                                           for rank in range(ranks)]
                                          if "pp=2" in mesh else None),
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
    print("- pp=2: the cut after `%s`, %s" % (cut, cut_origin))
    print("- paths (rank 0's progress header): %s\n" % paths)
    print("| mesh | ranks | step ms | tokens/s | comm ms per step | comm fraction "
          "| p2p wait ms per step | measured bubble (first stage) | last stage's p2p wait "
          "| 1F1B bubble (theory) | measured / theory |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def median(name, key):
        return statistics.median(r[key] for r in runs[name])

    def stage_median(name, rank, index):
        return statistics.median(r["stages"][rank][index] for r in runs[name])

    for name, _, ranks, mesh, _, microbatches in meshes(args):
        step_s, comm_s, p2p_s = median(name, "step_s"), median(name, "comm_s"), median(
            name, "p2p_s")
        pipeline = ""
        if "pp=2" in mesh:
            measured, theory = p2p_s / step_s, 1 / (microbatches + 1)
            last = ranks - 1
            pipeline = "%.0f | %.1f%% | %.1f%% | %.1f%% | %.2fx" % (
                p2p_s * 1e3, 100 * measured,
                100 * stage_median(name, last, 1) / stage_median(name, last, 0), 100 * theory,
                measured / theory)
        print("| %s | %d | %.0f | %.0f | %.0f | %.1f%% | %s |"
              % (name, ranks, step_s * 1e3, tokens / step_s, comm_s * 1e3,
                 100 * comm_s / step_s, pipeline or " | | | | "))
    print("\nLoss after %d steps: %s." % (args.warmup + args.steps, ", ".join(
        "%s %.6f" % (name, runs[name][0]["loss"]) for name in runs)))

    pp_meshes = [mesh for mesh in meshes(args) if "pp=2" in mesh[3]]
    print("\nPipeline balance: each stage's idle fraction, measured (stage 0: p2p wait; stage "
          "1: p2p wait + comm, from the per-rank summary lines) and under 1F1B for equal "
          "stages, for the stages' estimated FLOPs (slapoc's), and for their measured busy "
          "time (step - p2p - comm); (b) marks the bottleneck, the stage with the most "
          "estimated FLOPs:\n")
    print("| mesh | est. FLOPs per microbatch, stage 0 : 1 | busy ms per step, stage 0 : 1 "
          "| stage 0 idle: measured | equal | est. | busy | stage 1 idle: measured | equal "
          "| est. | busy | bubble measured / equal theory (stage 0) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, out, ranks, _, _, microbatches in pp_meshes:
        flops = pipeline_balance(work, out)["stage_flops"]
        bottleneck = flops.index(max(flops))
        stage_s = [[stage_median(name, rank, i) for i in range(3)] for rank in range(ranks)]
        # Stage 0's idle time is its p2p wait (its comm is the all-reduce's own time), the
        # last stage's its p2p wait and its wait in the all-reduce.
        idle = [stage_s[0][1] / stage_s[0][0]] + [
            (p2p + comm) / step for step, p2p, comm in stage_s[1:]]
        busy = [step - p2p - comm for step, p2p, comm in stage_s]
        equal = idle_1f1b([1] * ranks, microbatches)
        estimated = idle_1f1b(flops, microbatches)
        measured = idle_1f1b(busy, microbatches)
        print("| %s | %s | %s | %s | %.2fx |" % (
            name, describe_costs(flops),
            "%s (%.2fx)" % (" : ".join("%.0f" % (b * 1e3) for b in busy),
                            max(busy) / min(busy)),
            " | ".join("%.1f%%%s | %.1f%% | %.1f%% | %.1f%%" % (
                100 * idle[k], " (b)" if k == bottleneck else "", 100 * equal[k],
                100 * estimated[k], 100 * measured[k]) for k in range(ranks)),
            idle[0] / equal[0]))

    print("\nPlanned memory of the pipeline stages (manifest.json: each stage's arena, its "
          "activations at the planned peak, the microbatches whose activations it holds at "
          "once):\n")
    print("| mesh | stage 0 arena | activations | in flight | stage 1 arena | activations "
          "| in flight |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, out, _, mesh, _, microbatches in pp_meshes:
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
    parser.add_argument("--pp-cut", metavar="MODULE",
                        help="cut the pp=2 pipeline after MODULE (default: slapoc's "
                             "best-balanced cut)")
    parser.add_argument("--pp-only", action="store_true",
                        help="run the pp=2 meshes only")
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
