#!/usr/bin/python3
"""Training throughput of a GPT-2-style model on the CPU: LibTorch eager and torch.jit.trace
vs. slapoc.

  PYTHONPATH=third_party/.pydeps /usr/bin/python3 test/bench/gpt_train.py \\
      [--precision fp32|bf16] [--fusion none|auto] [--threads T] [--steps N] [--warmup W] \\
      [--repeats R] [--layers L] [--hidden H] [--heads A] [--seq S] [--batch B] [--vocab V] \\
      [--slapoc PATH] [--baseline DIR] [--keep DIR] [--primitive LINE ...]

With --precision bf16 slapoc compiles with train(precision="bf16") and the eager side runs
its forward under torch.autocast("cpu", dtype=torch.bfloat16) (the backward follows it); the
GEMM peak is then bf16's.  --fusion none compiles with train(fusion="none") (one kernel per
op) instead of the default "auto": compare the two programs by --baseline (below).

The model is test/models/gpt2.py's GPT2LMHeadModel (Hugging Face's GPT-2 structure, tied LM
head; forward(input_ids, labels) is the shifted LM cross-entropy), built after
torch.manual_seed(0) with dropout 0 and n_positions = S (defaults: 4 layers, hidden 512, 8
heads, seq 256, batch 8, vocab 8192).  It is exported with torch.jit.trace and compiled for
one rank with `slapoc model.pt --input ... --schedule bench.sched -o out/` (SCHEDULE below;
each --primitive LINE is appended to it, e.g. 'sch["lm_head"].replace("cross_entropy")': the
header prints the schedule compiled).
All sides train on the same W + N batches of test/e2e/make_batches.py with AdamW (lr 3e-4,
betas (0.9, 0.999), eps 1e-8, weight decay 0.1) in fp32 with T threads, set for OpenMP and
OpenBLAS too (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS: torch.set_num_threads does not size
OpenBLAS's own thread pool):

  eager   the nn.Module in a child process: model(ids, labels), backward(), AdamW step(),
          zero_grad(set_to_none=True), timed around the four
  trace   the same with the module's torch.jit.trace (traced on the first batch, untimed):
          LibTorch running the TorchScript graph slapoc compiles
  slapoc  out/launch --steps W+N --data batches --threads T --log-json: the log's
          step_time_s (input copy, forward, backward, optimizer)

A repeat runs each side once (alternating, so that a shared machine's drift hits all), W
untimed steps, then N timed ones whose median is the repeat's step time, and then measures the
GEMM peak (below).  The table shows the median over R repeats; tokens/s = B * S / step time.
With --baseline DIR, the program of an earlier slapoc build (DIR: its out/ directory for the
same model and flags, such as --keep leaves) runs alternately too, as another side.

The CPUs these benchmarks run on differ (AVX2 only, AVX-512, AMX), so the header names the
paths each side took: ATen's kernel ISA and oneDNN's effective ISA for LibTorch, the progress
header of the program (oneDNN's ISA, its kernel build, its bf16 matmul) for slapoc; both
follow DNNL_MAX_CPU_ISA, slapoc's SLAPO_CPU_ISA, LibTorch's ATEN_CPU_CAPABILITY.  A side that
cannot run (LibTorch's bf16 where its oneDNN has no bf16 matmul) is reported as "n/a (its
error)", and so is a GEMM that cannot.

Model FLOP/s count the matmuls of a step, forward and backward:

  6 * tokens * P_matmul  +  12 * L * H * S * tokens,     tokens = B * S

P_matmul is every parameter but the position embedding (the token embedding once: it is the
tied LM head's weight; biases and layer norms are negligible); the second term is attention's
QK^T and AV, without a causal discount (every side computes the masked half).  The matmul
bound is the time those FLOPs take at the GEMM peak, the fastest of two GEMMs measured with T
threads after every repeat (2048^3, median of 10 each; the fastest of all repeats, since the
peak of a shared or turbo-clocked machine moves between minutes): torch.matmul (OpenBLAS, whose
kernel set is printed: a DYNAMIC_ARCH build falls back to slow generic kernels on a CPU model
it does not know) and oneDNN through torch's mkldnn_linear (slapoc's matmuls call oneDNN).
"x matmul bound" is a side's step time over it: 1.00x would be a step that does nothing but
its matmuls, at the peak.

Peak memory is each side's peak resident set (VmHWM): for eager it includes Python and
libtorch (their resident set right after `import torch` is printed); beside slapoc's is the
planned arena (the log's arena_bytes: weights, gradients, optimizer state, activations and
temporaries).

test/bench/parallel.py imports this module for the model, its export and the run helpers.
"""

import argparse
import collections
import contextlib
import ctypes
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAKE_BATCHES = os.path.join(REPO, "test", "e2e", "make_batches.py")
LR, BETAS, EPS, WEIGHT_DECAY = 3e-4, (0.9, 0.999), 1e-8, 0.1
# The LibTorch sides: the nn.Module as written, and its torch.jit.trace.
TORCH_SIDES = ("eager", "trace")
SCHEDULE = 'train(optimizer="adamw", lr=3e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)\n'


class BenchError(Exception):
    """A step of the benchmark failed; the message names it and holds its output."""


def add_common_args(parser, threads, steps):
    """The flags of both benchmarks: the model's size, the run lengths and where things are."""
    add = parser.add_argument
    add("--threads", type=int, default=threads, help="CPU threads per process (%(default)s)")
    add("--steps", type=int, default=steps, help="timed steps per run (%(default)s)")
    add("--warmup", type=int, default=3, help="untimed steps before them (%(default)s)")
    add("--repeats", type=int, default=3, help="runs of each configuration (%(default)s)")
    for name, default, what in (("layers", 4, "transformer blocks"), ("hidden", 512, "hidden size"),
                                ("heads", 8, "attention heads"), ("seq", 256, "sequence length"),
                                ("batch", 8, "(global) batch size"),
                                ("vocab", 8192, "vocabulary size")):
        add("--" + name, type=int, default=default, help="%s (%%(default)s)" % what)
    add("--slapoc", default=os.path.join(REPO, "build", "tools", "slapoc", "slapoc"),
        help="the slapoc binary (%(default)s)")
    add("--baseline", metavar="DIR",
        help="also run DIR/launch, a program compiled earlier (another slapoc build) for the "
             "same model and flags, alternately with the others")
    add("--keep", metavar="DIR", help="work in DIR and keep it (model, batches, outputs, logs)")


def parse_args(parser):
    """Parses and checks the flags, and sets the thread count of OpenMP and OpenBLAS for this
    process (before torch is imported) and its children."""
    args = parser.parse_args()
    if min(args.threads, args.steps, args.repeats, args.layers, args.hidden, args.heads,
           args.batch, args.vocab) < 1 or args.warmup < 0 or args.seq < 2:
        parser.error("counts and sizes must be at least 1 (--warmup 0, --seq 2)")
    if args.hidden % args.heads:
        parser.error("--hidden %d is not a multiple of --heads %d" % (args.hidden, args.heads))
    if not os.access(args.slapoc, os.X_OK):
        parser.error("%s is not an executable: build it (ninja -C build slapoc slapo_runtime) "
                     "or pass --slapoc" % args.slapoc)
    if args.baseline:
        args.baseline = os.path.abspath(args.baseline)
        if not os.access(os.path.join(args.baseline, "launch"), os.X_OK):
            parser.error("--baseline %s has no launch program" % args.baseline)
    os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    return args


def work_dir(args):
    """A context manager giving the working directory: --keep's, or a temporary one."""
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        return contextlib.nullcontext(os.path.abspath(args.keep))
    return tempfile.TemporaryDirectory(prefix="slapo-bench-")


def shell(argv):
    return " ".join(shlex.quote(a) for a in argv)


def command_line():
    """This benchmark's command line as typed, with the PYTHONPATH it ran with."""
    pythonpath = os.environ.get("PYTHONPATH")
    prefix = "PYTHONPATH=%s " % pythonpath if pythonpath else ""
    return prefix + shell([sys.executable] + sys.argv)


def build_model(args):
    import torch
    sys.path.insert(0, os.path.join(REPO, "test", "models"))
    import gpt2
    config = gpt2.GPT2Config(vocab_size=args.vocab, n_positions=args.seq, n_embd=args.hidden,
                             n_layer=args.layers, n_head=args.heads, dropout=0.0)
    torch.manual_seed(0)
    return gpt2.GPT2LMHeadModel(config).eval()


def input_flags(args):
    shape = "[%d,%d]" % (args.batch, args.seq)
    return ["--input", "input_ids=i64" + shape, "--input", "labels=i64" + shape]


def prepare(args, work):
    """Exports the model to WORK/model.pt and writes WORK/batches.safetensors (W + N batches);
    returns (parameters, model FLOPs per step)."""
    import torch
    model = build_model(args)
    example = torch.zeros(args.batch, args.seq, dtype=torch.long)
    model_path = os.path.join(work, "model.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings
        torch.jit.trace(model, (example, example)).save(model_path)
    run([sys.executable, MAKE_BATCHES, model_path] + input_flags(args) +
        ["--vocab", str(args.vocab), "--steps", str(args.warmup + args.steps),
         "-o", os.path.join(work, "batches.safetensors")])
    return count_flops(args, model)


def count_flops(args, model):
    """(parameters, model FLOPs per step) of MODEL built by build_model(ARGS)."""
    params = dict(model.named_parameters())  # the tied LM head's weight once
    total = sum(p.numel() for p in params.values())
    tokens = args.batch * args.seq
    flops = (6 * tokens * (total - params["transformer.wpe.weight"].numel()) +
             12 * args.layers * args.hidden * args.seq * tokens)
    return total, flops


def proc_status(pid, key):
    """A /proc/PID/status memory field in bytes; 0 once the process has exited."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


Finished = collections.namedtuple("Finished", "peak output")


def run(argv):
    """Runs argv to its end; returns its peak resident set in bytes, polled from VmHWM
    (wait4's ru_maxrss would not do: exec carries this interpreter's peak into the child's),
    and its output.  Raises BenchError with the output if it fails."""
    with tempfile.TemporaryFile() as output:
        proc = subprocess.Popen(argv, stdout=output, stderr=subprocess.STDOUT)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, proc_status(proc.pid, "VmHWM"))
            time.sleep(0.05)
        output.seek(0)
        text = output.read().decode(errors="replace")
        if proc.returncode != 0:
            raise BenchError("%s failed (exit %d):\n%s" % (shell(argv), proc.returncode, text))
    return Finished(peak, text)


def compile_slapoc(args, work, name, schedule, flags=()):
    """Compiles WORK/model.pt with the schedule text into WORK/NAME; returns the command."""
    sched = os.path.join(work, name + ".sched")
    with open(sched, "w") as f:
        f.write(schedule)
    argv = [args.slapoc, os.path.join(work, "model.pt"), *flags, "--schedule", sched,
            "-o", os.path.join(work, name)]
    run(argv)
    return argv


def launch_argv(args, work, out, log):
    """The command that trains the program in the directory OUT on WORK's batches, logging to
    LOG (and printing its progress header)."""
    return [os.path.join(out, "launch"), "--steps", str(args.warmup + args.steps),
            "--data", os.path.join(work, "batches.safetensors"), "--threads", str(args.threads),
            "--log-json", log]


def program_paths(output):
    """The paths a rank program took, as its progress header names its device ("cpu
    avx512_core_bf16, 2 threads, kernels avx512, bf16 matmul: oneDNN")."""
    match = re.search(r", (cpu\b.*?), arena ", output)
    return match.group(1) if match else "unknown (no progress header)"


def read_log(args, log):
    """The --log-json lines of a run (rank 0's), one dict per step."""
    with open(log) as f:
        steps = [json.loads(line) for line in f]
    if len(steps) != args.warmup + args.steps:
        raise BenchError("%s has %d steps, not %d" % (log, len(steps), args.warmup + args.steps))
    return steps


def timed_median(args, steps, key):
    """The median of a per-step value over the timed (post-warmup) steps."""
    return statistics.median(step[key] for step in steps[args.warmup:])


def describe_machine():
    """One line: CPU, its vector extensions, memory, OS and the software versions."""
    import torch
    with open("/proc/cpuinfo") as f:
        info = dict((key.strip(), value.strip()) for key, _, value in
                    (line.partition(":") for line in f) if value)
    flags = info.get("flags", "").split()
    extensions = [e for e in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if e in flags]
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return "%s, %d logical CPUs (%s), %.0f GiB; %s; Python %s, torch %s" % (
        info.get("model name", "unknown CPU"), os.cpu_count(), " ".join(extensions),
        memory / 2 ** 30, platform.platform(), platform.python_version(), torch.__version__)


def load_average():
    return "/".join("%.2f" % x for x in os.getloadavg())


def openblas_kernels():
    """The kernel set OpenBLAS (the libblas.so.3 torch loaded) chose for this CPU."""
    try:
        get = ctypes.CDLL("libblas.so.3").openblas_get_corename
    except (OSError, AttributeError):
        return "none: libblas.so.3 is not OpenBLAS"
    get.restype = ctypes.c_char_p
    return get().decode()


# oneDNN's ISAs by their dnnl_cpu_isa_t values (dnnl_types.h), named as slapo's programs and
# DNNL_MAX_CPU_ISA name them.
ONEDNN_ISAS = {0x1: "sse41", 0x3: "avx", 0x7: "avx2", 0x407: "avx2_vnni", 0x27: "avx512_core",
               0x67: "avx512_core_vnni", 0xe7: "avx512_core_bf16", 0x3e7: "avx512_core_amx"}


def torch_paths():
    """The paths LibTorch takes in this process: ATen's kernel ISA and the effective ISA of
    the oneDNN it links (the system's, which slapo's programs link too)."""
    import torch
    capability = re.search(r"CPU capability usage: (\w+)", torch.__config__.show())
    try:
        isa = ctypes.CDLL("libdnnl.so.2").dnnl_get_effective_cpu_isa()
        onednn = ONEDNN_ISAS.get(isa, hex(isa))
    except (OSError, AttributeError):
        onednn = "unknown (no libdnnl.so.2)"
    return "ATen %s kernels, oneDNN %s" % (capability.group(1) if capability else "unknown",
                                           onednn)


def unavailable(error):
    """How a side or a GEMM that raised is reported."""
    return "n/a (%s)" % str(error).strip().splitlines()[0]


def gemm_rates(threads, dtype, n=2048, runs=10):
    """{library: median GFLOP/s, or n/a and why} of an n x n x n GEMM of `dtype` (a torch
    dtype) with torch.matmul and oneDNN."""
    import torch
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)

    def onednn_gemm():
        a_dnn, b_dnn = a.to_mkldnn(), b.to_mkldnn()
        return lambda: torch._C._nn.mkldnn_linear(a_dnn, b_dnn, None)

    rates = {}
    for name, prepare_gemm in (("torch.matmul", lambda: lambda: torch.matmul(a, b)),
                               ("oneDNN", onednn_gemm)):
        try:
            gemm = prepare_gemm()
            seconds = []
            for _ in range(2 + runs):  # two to warm up
                start = time.perf_counter()
                gemm()
                seconds.append(time.perf_counter() - start)
        except RuntimeError as e:  # bf16 where torch's oneDNN has no bf16 matmul
            rates[name] = unavailable(e)
            continue
        rates[name] = 2 * n ** 3 / statistics.median(seconds[2:]) / 1e9
    return rates


def eager_worker(args, work):
    """A LibTorch side, in its own process so that its peak resident set is its own: trains
    on WORK/batches.safetensors the nn.Module (--torch-side eager) or its torch.jit.trace
    (trace: traced on the first batch, outside the timed steps, and run under the same
    autocast) and writes WORK/SIDE.json ({"unavailable": why} if LibTorch cannot train so on
    this CPU)."""
    import torch
    rss_after_import = proc_status(os.getpid(), "VmRSS")
    from safetensors.torch import load_file
    torch.set_num_threads(args.threads)
    module = build_model(args)
    batches = load_file(os.path.join(work, "batches.safetensors"))
    model = module
    if args.torch_side == "trace":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # TracerWarnings
            model = torch.jit.trace(module, (batches["input_ids"][0], batches["labels"][0]))
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS,
                                  weight_decay=WEIGHT_DECAY)
    times, losses = [], []
    try:
        for step in range(args.warmup + args.steps):
            ids, labels = batches["input_ids"][step], batches["labels"][step]
            start = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16,
                                enabled=args.precision == "bf16"):
                loss = model(ids, labels)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            times.append(time.perf_counter() - start)
            losses.append(loss.item())
        result = {"step_time_s": times, "losses": losses, "rss_after_import": rss_after_import}
    except RuntimeError as e:  # bf16 where torch's oneDNN has no bf16 matmul
        result = {"unavailable": unavailable(e)}
    with open(os.path.join(work, args.torch_side + ".json"), "w") as f:
        json.dump(result, f)


def run_program(args, work, out, name):
    """One timed run of the program in OUT: its median step, peak RSS, last loss, arena and
    paths."""
    log = os.path.join(work, name + ".json")
    finished = run(launch_argv(args, work, out, log))
    steps = read_log(args, log)
    return {"step_s": timed_median(args, steps, "step_time_s"), "rss": finished.peak,
            "loss": steps[-1]["loss"], "arena": steps[-1]["arena_bytes"],
            "paths": program_paths(finished.output)}


def bench(args, work):
    start_load = load_average()
    n_params, flops = prepare(args, work)
    schedule = SCHEDULE
    if args.precision == "bf16":
        schedule = schedule.replace(")\n", ', precision="bf16")\n')
    schedule = schedule.replace(")\n", ', fusion="%s")\n' % args.fusion)
    schedule += "".join(line + "\n" for line in args.primitive)
    slapoc_argv = compile_slapoc(args, work, "out", schedule, input_flags(args))
    import torch
    gemm_dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32

    programs = {"slapoc": os.path.join(work, "out")}
    if args.baseline:
        programs["baseline"] = args.baseline
    runs = {side: [] for side in [*TORCH_SIDES, *programs]}
    torch_unavailable = {}
    gemms = []  # per repeat: {library: GFLOP/s or n/a}
    for _ in range(args.repeats):
        for side in TORCH_SIDES:
            if side in torch_unavailable:
                continue
            rss = run([sys.executable, os.path.abspath(__file__), "--eager-worker", work,
                       "--torch-side", side] + sys.argv[1:]).peak
            with open(os.path.join(work, side + ".json")) as f:
                result = json.load(f)
            if "unavailable" in result:
                torch_unavailable[side] = result["unavailable"]
                continue
            runs[side].append({"step_s": statistics.median(result["step_time_s"][args.warmup:]),
                               "rss": rss, "loss": result["losses"][-1],
                               "rss_after_import": result["rss_after_import"]})
        for side, out in programs.items():
            runs[side].append(run_program(args, work, out, side))
        gemms.append(gemm_rates(args.threads, gemm_dtype))
    # The peak is the fastest GEMM of any repeat: the bound the step is held to is what this
    # machine reached, not an average that a slow moment drags down.
    rates = [rate for gemm in gemms for rate in gemm.values() if not isinstance(rate, str)]
    peak = max(rates, default=None)
    bound_s = flops / (peak * 1e9) if peak else None

    def median(side, key):
        return statistics.median(r[key] for r in runs[side])

    mib = lambda n: "%.0f MiB" % (n / 2 ** 20)  # noqa: E731
    tokens = args.batch * args.seq
    print("## GPT-2-style training, %s, CPU: LibTorch eager and torch.jit.trace%s vs. slapoc\n"
          % (args.precision, " (torch.autocast bf16)" if args.precision == "bf16" else ""))
    print("`%s`\n" % command_line())
    print("- machine: %s; load average %s at the start, %s at the end"
          % (describe_machine(), start_load, load_average()))
    print("- model: test/models/gpt2.py, %d layers, hidden %d, %d heads, seq %d, vocab %d, batch "
          "%d: %.1fM parameters, %.1f GFLOP per training step"
          % (args.layers, args.hidden, args.heads, args.seq, args.vocab, args.batch,
             n_params / 1e6, flops / 1e9))
    print("- AdamW, %d threads per side; %d warmup + %d timed steps per run, %d runs per side"
          % (args.threads, args.warmup, args.steps, args.repeats))
    print("- %s GEMM 2048^3, %d threads, measured after each repeat: %s (OpenBLAS kernels: %s)"
          % (args.precision, args.threads,
             "; ".join(", ".join("%s %s" % (name, rate if isinstance(rate, str)
                                            else "%.0f" % rate) for name, rate in gemm.items())
                       for gemm in gemms),
             openblas_kernels()))
    if peak:
        print("- matmul bound: %.0f ms per step (%.1f GFLOP at the fastest GEMM above, "
              "%.0f GFLOP/s)" % (bound_s * 1e3, flops / 1e9, peak))
    print("- paths: LibTorch %s; %s"
          % (torch_paths(), "; ".join("%s %s" % (side, runs[side][0]["paths"])
                                      for side in programs)))
    print("- slapoc: `%s`%s"
          % (shell(os.path.relpath(a, work) if a.startswith(work) else a for a in slapoc_argv),
             "; baseline: `%s/launch`" % args.baseline if args.baseline else ""))
    print("- slapoc's schedule: %s\n" % "; ".join(
        "`%s`" % line for line in schedule.splitlines()))
    print("| | tokens/s | step ms | model GFLOP/s | x matmul bound | peak RSS | planned arena |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    names = {"eager": "LibTorch eager", "trace": "LibTorch torch.jit.trace", "slapoc": "slapoc",
             "baseline": "slapoc (baseline)"}
    for side in runs:
        if not runs[side]:
            print("| %s | %s | | | | | - |" % (names[side], torch_unavailable[side]))
            continue
        step_s = median(side, "step_s")
        print("| %s | %.0f | %.0f | %.1f | %s | %s | %s |"
              % (names[side], tokens / step_s, step_s * 1e3, flops / step_s / 1e9,
                 "%.2fx" % (step_s / bound_s) if peak else "n/a",
                 mib(median(side, "rss")), mib(median(side, "arena"))
                 if side in programs else "-"))
    for side in runs:
        if side != "slapoc" and runs[side]:
            print("| slapoc / %s | %.2fx | | | | %.2fx | |"
                  % (names[side], median(side, "step_s") / median("slapoc", "step_s"),
                     median("slapoc", "rss") / median(side, "rss")))
    print("\nMedian step ms per repeat: %s.  Loss after %d steps: %s."
          % ("; ".join("%s %s" % (side, ", ".join("%.0f" % (r["step_s"] * 1e3) for r in runs[side]))
                       for side in runs if runs[side]),
             args.warmup + args.steps,
             ", ".join("%s %.6f" % (side, runs[side][0]["loss"]) for side in runs if runs[side])))
    if runs["eager"]:
        print("LibTorch's resident set after `import torch`: %s."
              % mib(median("eager", "rss_after_import")))


def main():
    parser = argparse.ArgumentParser(
        description="GPT-2-style training throughput, fp32 on the CPU: LibTorch eager vs. slapoc")
    add_common_args(parser, threads=os.cpu_count(), steps=10)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                        help="fp32, or bf16 mixed precision: slapoc's precision=\"bf16\" "
                             "against torch.autocast(\"cpu\", torch.bfloat16) (%(default)s)")
    parser.add_argument("--fusion", choices=("none", "auto"), default="auto",
                        help="slapoc's train(fusion=) (%(default)s)")
    parser.add_argument("--primitive", action="append", default=[], metavar="LINE",
                        help="a schedule line appended to slapoc's schedule (repeatable)")
    parser.add_argument("--eager-worker", metavar="WORK", help=argparse.SUPPRESS)
    parser.add_argument("--torch-side", choices=TORCH_SIDES, help=argparse.SUPPRESS)
    args = parse_args(parser)
    if args.eager_worker:
        return eager_worker(args, args.eager_worker)
    try:
        with work_dir(args) as work:
            bench(args, work)
    except BenchError as e:
        sys.exit("gpt_train.py: error: %s" % e)


if __name__ == "__main__":
    main()
