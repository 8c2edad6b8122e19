#!/usr/bin/python3
"""How long slapoc takes to compile a model, phase by phase.

  PYTHONPATH=third_party/.pydeps /usr/bin/python3 test/bench/compile_time.py \\
      [--models gpt2,hf-gpt2-small] [--train] [--repeats R] [--target cpu|cuda] \\
      [--slapoc [LABEL=]PATH ...] [--keep DIR]

Models (each exported once, in eval mode or with --train in train mode, where their dropouts
are active, its export timed apart from slapoc):

  gpt2           test/models/gpt2.py's GPT-2 (2 layers, hidden 32), torch.jit.script, [2, 16]:
                 the model of test/e2e/gpt2.test
  hf-gpt2-small  Hugging Face's GPT2LMHeadModel with GPT2Config()'s defaults: GPT-2 small,
                 12 layers, hidden 768, 12 heads, vocab 50257, 124M parameters; randomly
                 initialized after torch.manual_seed(0), wrapped as test/models/hf.py wraps
                 hf_gpt2 (forward(input_ids, labels) -> loss) and traced at [2, 128]

Each is compiled R times (default 1) for one rank with test/bench/gpt_train.py's AdamW
schedule, by every slapoc given (default: this checkout's build/tools/slapoc/slapoc; give two,
`--slapoc before=OLD --slapoc after=NEW`, to compare builds in one run, alternating so that a
shared machine's drift hits both), as

  slapoc model.pt --input ... --schedule adamw.sched -o out --mlir-timing --mlir-timing-display=tree

The table shows the median over the repeats of each phase, from slapoc's timing report:
import (loading the TorchScript file, which precedes the report, and converting it), passes
(every pass and the schedule), weights (writing rank0/weights.safetensors), emission (writing
the C++ source), host compile (c++ or nvcc on it, linked against the runtime), and the wall
time of the whole run; beside them the lines of generated source and the files they are in.
A slapoc whose report has no weights/emission/host compile scopes (built before they
existed) shows their sum as host compile.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "test", "models"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gpt_train  # noqa: E402

MODELS = ("gpt2", "hf-gpt2-small")
PHASES = ("import", "passes", "weights", "emission", "host compile")
# The timing report's lines: "  1.2345 ( 12.3%)    name", nested scopes indented by two.
TIMING_LINE = re.compile(r"^\s+([0-9.]+) \(\s*[0-9.]+%\)  ( *)(\S.*?)\s*$")


class BenchError(Exception):
    pass


def export_gpt2(path, train):
    """test/e2e/gpt2.test's model; returns the --input flags."""
    subprocess.run([sys.executable, os.path.join(REPO, "test", "models", "export.py"),
                    "--model", "gpt2", "--mode", "script", "--out", path] +
                   (["--train"] if train else []),
                   check=True, stdout=subprocess.DEVNULL)
    return ["--input", "input_ids=i64[2,16]", "--input", "labels=i64[2,16]"]


def export_hf_gpt2_small(path, train):
    import torch
    import torch.nn as nn
    import hf

    class HFGPT2Small(hf.HFGPT2LMLoss):
        """hf_gpt2's wrapper (its forward) around GPT-2 small instead of the tiny config."""

        def __init__(self):
            nn.Module.__init__(self)
            transformers = hf._quiet_transformers()
            self.model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
                torchscript=True, attn_implementation="eager"))

    torch.manual_seed(0)
    model = HFGPT2Small().train(train)
    ids = torch.zeros(2, 128, dtype=torch.long)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # TracerWarnings
        torch.jit.trace(model, (ids, ids), check_trace=False).save(path)
    return ["--input", "input_ids=i64[2,128]", "--input", "labels=i64[2,128]"]


EXPORTERS = {"gpt2": export_gpt2, "hf-gpt2-small": export_hf_gpt2_small}


def parse_timing(report):
    """{phase: seconds} from slapoc's tree timing report."""
    phases = dict.fromkeys(PHASES, 0.0)
    total = None
    in_rank_programs = False
    for line in report.splitlines():
        if "Total Execution Time:" in line:
            total = float(line.split(":")[1].split()[0])
            continue
        match = TIMING_LINE.match(line)
        if not match:
            continue
        seconds, indent, name = float(match.group(1)), len(match.group(2)), match.group(3)
        if indent == 0:
            in_rank_programs = name == "rank programs"
            if name == "TorchScript import":
                phases["import"] += seconds
            elif name == "rank programs":
                phases["host compile"] += seconds  # moved to its parts below when they exist
            elif name not in ("Rest", "Total"):
                phases["passes"] += seconds
        elif indent == 2 and in_rank_programs and name in PHASES:
            phases[name] += seconds
            phases["host compile"] -= seconds
    if total is None:
        raise BenchError("no timing report in slapoc's output:\n" + report[-2000:])
    return phases, total


def source_files(out):
    rank = os.path.join(out, "rank0")
    names = sorted(n for n in os.listdir(rank) if n.endswith((".cpp", ".cu", ".h")))
    lines = 0
    for name in names:
        with open(os.path.join(rank, name)) as f:
            lines += sum(1 for _ in f)
    return lines, names


def compile_once(slapoc, model, inputs, schedule, out, target):
    argv = ([slapoc, model] + inputs + ["--schedule", schedule, "-o", out, "--target=" + target,
                                        "--mlir-timing", "--mlir-timing-display=tree"])
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise BenchError("%s failed (exit %d):\n%s" % (gpt_train.shell(argv), done.returncode,
                                                      done.stdout[-4000:]))
    phases, timed = parse_timing(done.stdout)
    # Loading the TorchScript file precedes the report.
    phases["import"] += max(wall - timed, 0.0)
    phases["wall"] = wall
    return phases


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma-separated, of %s (default: all)" % ", ".join(MODELS))
    parser.add_argument("--train", action="store_true", help="export in train mode (dropout)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--target", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--slapoc", action="append", metavar="[LABEL=]PATH",
                        help="a slapoc binary, repeatable (default: this checkout's build)")
    parser.add_argument("--keep", metavar="DIR", help="work here and keep the outputs")
    args = parser.parse_args()
    models = args.models.split(",")
    for name in models:
        if name not in EXPORTERS:
            parser.error("unknown model %r (known: %s)" % (name, ", ".join(MODELS)))
    builds = []
    for spec in args.slapoc or [os.path.join(REPO, "build", "tools", "slapoc", "slapoc")]:
        label, _, path = spec.rpartition("=")
        if not os.access(path, os.X_OK):
            parser.error("%s is not an executable: build it (ninja -C build slapoc) or pass "
                         "--slapoc" % path)
        builds.append((label or "slapoc", path))

    work = args.keep or tempfile.mkdtemp(prefix="slapoc-compile-time-")
    os.makedirs(work, exist_ok=True)
    schedule = os.path.join(work, "adamw.sched")
    with open(schedule, "w") as f:
        f.write(gpt_train.SCHEDULE)

    print("# slapoc compile time, %d CPUs, target %s, models in %s mode"
          % (os.cpu_count(), args.target, "train" if args.train else "eval"))
    print("# " + gpt_train.command_line())
    print()
    print("| model | slapoc | export | %s | wall | generated source |" % " | ".join(PHASES))
    print("|---|---|---|%s---|---|" % ("---|" * len(PHASES)))
    for name in models:
        model = os.path.join(work, name + ".pt")
        start = time.perf_counter()
        inputs = EXPORTERS[name](model, args.train)
        export_s = time.perf_counter() - start
        runs = {label: [] for label, _ in builds}
        sources = {}
        for _ in range(args.repeats):
            for label, path in builds:
                out = os.path.join(work, "%s-%s" % (name, label))
                runs[label].append(compile_once(path, model, inputs, schedule, out, args.target))
                sources[label] = source_files(out)
        for label, _ in builds:
            median = {key: statistics.median(run[key] for run in runs[label])
                      for key in PHASES + ("wall",)}
            lines, files = sources[label]
            print("| %s | %s | %.1f s | %s | **%.1f s** | %d lines in %s |" % (
                name, label, export_s, " | ".join("%.1f s" % median[p] for p in PHASES),
                median["wall"], lines, ", ".join(files)))
        sys.stdout.flush()
    if not args.keep:
        subprocess.run(["rm", "-rf", work])
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print("compile_time.py: error: %s" % e, file=sys.stderr)
        sys.exit(1)
