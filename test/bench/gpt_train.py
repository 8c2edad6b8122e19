#!/usr/bin/python3
"""Training throughput of a GPT-2-style model on the CPU: LibTorch eager vs. slapoc.

  PYTHONPATH=third_party/.pydeps /usr/bin/python3 test/bench/gpt_train.py \\
      [--precision fp32|bf16] [--threads T] [--steps N] [--warmup W] [--repeats R] \\
      [--layers L] [--hidden H] [--heads A] [--seq S] [--batch B] [--vocab V] \\
      [--slapoc PATH] [--keep DIR]

With --precision bf16 slapoc compiles with train(precision="bf16") and the eager side runs
its forward under torch.autocast("cpu", dtype=torch.bfloat16) (the backward follows it); the
GEMM peak is then bf16's.

The model is test/models/gpt2.py's GPT2LMHeadModel (Hugging Face's GPT-2 structure, tied LM
head; forward(input_ids, labels) is the shifted LM cross-entropy), built after
torch.manual_seed(0) with dropout 0 and n_positions = S (defaults: 4 layers, hidden 512, 8
heads, seq 256, batch 8, vocab 8192).  It is exported with torch.jit.trace and compiled for
one rank with `slapoc model.pt --input ... --schedule bench.sched -o out/` (SCHEDULE below).
Both sides train on the same W + N batches of test/e2e/make_batches.py with AdamW (lr 3e-4,
betas (0.9, 0.999), eps 1e-8, weight decay 0.1) in fp32 with T threads, set for OpenMP and
OpenBLAS too (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS: torch.set_num_threads does not size
OpenBLAS's own thread pool):

  eager   the nn.Module in a child process: model(ids, labels), backward(), AdamW step(),
          zero_grad(set_to_none=True), timed around the four
  slapoc  out/launch --steps W+N --data batches --threads T --log-json: the log's
          step_time_s (input copy, forward, backward, optimizer)

A repeat runs each side once (alternating, so that a shared machine's drift hits both): W
untimed steps, then N timed ones whose median is the repeat's step time.  The table shows the
median over R repeats; tokens/s = B * S / step time.

Model FLOP/s count the matmuls of a step, forward and backward:

  6 * tokens * P_matmul  +  12 * L * H * S * tokens,     tokens = B * S

P_matmul is every parameter but the position embedding (the token embedding once: it is the
tied LM head's weight; biases and layer norms are negligible); the second term is attention's
QK^T and AV, without a causal discount (both sides compute the masked half).  "% of GEMM peak"
divides by the faster of two fp32 GEMMs measured here with T threads (2048^3, median of 10):
torch.matmul (OpenBLAS, whose kernel set is printed: a DYNAMIC_ARCH build falls back to slow
generic kernels on a CPU model it does not know) and oneDNN through torch's mkldnn_linear
(slapoc's matmuls call oneDNN).

Peak memory is each side's peak resident set (VmHWM): for eager it includes Python and
libtorch (their resident set right after `import torch` is printed); beside slapoc's is the
planned arena (the log's arena_bytes: weights, gradients, optimizer state, activations and
temporaries).

test/bench/parallel.py imports this module for the model, its export and the run helpers.
"""

import argparse
import contextlib
import ctypes
import json
import os
import platform
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


def run(argv):
    """Runs argv to its end and returns its peak resident set in bytes, polled from VmHWM
    (wait4's ru_maxrss would not do: exec carries this interpreter's peak into the child's).
    Raises BenchError with the output if it fails."""
    with tempfile.TemporaryFile() as output:
        proc = subprocess.Popen(argv, stdout=output, stderr=subprocess.STDOUT)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, proc_status(proc.pid, "VmHWM"))
            time.sleep(0.05)
        if proc.returncode != 0:
            output.seek(0)
            raise BenchError("%s failed (exit %d):\n%s" % (
                shell(argv), proc.returncode, output.read().decode(errors="replace")))
    return peak


def compile_slapoc(args, work, name, schedule, flags=()):
    """Compiles WORK/model.pt with the schedule text into WORK/NAME; returns the command."""
    sched = os.path.join(work, name + ".sched")
    with open(sched, "w") as f:
        f.write(schedule)
    argv = [args.slapoc, os.path.join(work, "model.pt"), *flags, "--schedule", sched,
            "-o", os.path.join(work, name)]
    run(argv)
    return argv


def launch_argv(args, work, name, log):
    """The command that trains WORK/NAME's program on the batches, logging to LOG."""
    return [os.path.join(work, name, "launch"), "--steps", str(args.warmup + args.steps),
            "--data", os.path.join(work, "batches.safetensors"), "--threads", str(args.threads),
            "--log-json", log, "--quiet"]


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


def gemm_rates(threads, dtype, n=2048, runs=10):
    """{library: median GFLOP/s} of an n x n x n GEMM of `dtype` (a torch dtype) with
    torch.matmul and oneDNN."""
    import torch
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    a_dnn, b_dnn = a.to_mkldnn(), b.to_mkldnn()
    rates = {}
    for name, gemm in (("torch.matmul", lambda: torch.matmul(a, b)),
                       ("oneDNN", lambda: torch._C._nn.mkldnn_linear(a_dnn, b_dnn, None))):
        seconds = []
        for _ in range(2 + runs):  # two to warm up
            start = time.perf_counter()
            gemm()
            seconds.append(time.perf_counter() - start)
        rates[name] = 2 * n ** 3 / statistics.median(seconds[2:]) / 1e9
    return rates


def eager_worker(args, work):
    """The LibTorch side, in its own process so that its peak resident set is its own: trains
    on WORK/batches.safetensors and writes WORK/eager.json."""
    import torch
    rss_after_import = proc_status(os.getpid(), "VmRSS")
    from safetensors.torch import load_file
    torch.set_num_threads(args.threads)
    model = build_model(args)
    batches = load_file(os.path.join(work, "batches.safetensors"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS,
                                  weight_decay=WEIGHT_DECAY)
    times, losses = [], []
    for step in range(args.warmup + args.steps):
        ids, labels = batches["input_ids"][step], batches["labels"][step]
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = model(ids, labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    with open(os.path.join(work, "eager.json"), "w") as f:
        json.dump({"step_time_s": times, "losses": losses,
                   "rss_after_import": rss_after_import}, f)


def bench(args, work):
    start_load = load_average()
    n_params, flops = prepare(args, work)
    schedule = SCHEDULE
    if args.precision == "bf16":
        schedule = schedule.replace(")\n", ', precision="bf16")\n')
    slapoc_argv = compile_slapoc(args, work, "out", schedule, input_flags(args))
    import torch
    gemm = gemm_rates(args.threads, torch.bfloat16 if args.precision == "bf16" else torch.float32)
    peak = max(gemm.values())

    runs = {"eager": [], "slapoc": []}
    for _ in range(args.repeats):
        rss = run([sys.executable, os.path.abspath(__file__), "--eager-worker", work] +
                  sys.argv[1:])
        with open(os.path.join(work, "eager.json")) as f:
            eager = json.load(f)
        runs["eager"].append({"step_s": statistics.median(eager["step_time_s"][args.warmup:]),
                              "rss": rss, "loss": eager["losses"][-1],
                              "rss_after_import": eager["rss_after_import"]})
        log = os.path.join(work, "slapoc.json")
        rss = run(launch_argv(args, work, "out", log))
        steps = read_log(args, log)
        runs["slapoc"].append({"step_s": timed_median(args, steps, "step_time_s"), "rss": rss,
                               "loss": steps[-1]["loss"], "arena": steps[-1]["arena_bytes"]})

    def median(side, key):
        return statistics.median(r[key] for r in runs[side])

    mib = lambda n: "%.0f MiB" % (n / 2 ** 20)  # noqa: E731
    tokens = args.batch * args.seq
    print("## GPT-2-style training, %s, CPU: LibTorch eager%s vs. slapoc\n"
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
    print("- %s GEMM 2048^3, %d threads: %s (OpenBLAS kernels: %s)"
          % (args.precision, args.threads, ", ".join("%s %.0f GFLOP/s" % kv for kv in gemm.items()),
             openblas_kernels()))
    print("- slapoc: `%s`\n" % shell(os.path.relpath(a, work) if a.startswith(work) else a
                                     for a in slapoc_argv))
    print("| | tokens/s | step ms | model GFLOP/s | % of GEMM peak | peak RSS | planned arena |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for side, name, arena in (("eager", "LibTorch eager", "-"),
                              ("slapoc", "slapoc", mib(median("slapoc", "arena")))):
        step_s = median(side, "step_s")
        print("| %s | %.0f | %.0f | %.1f | %.1f%% | %s | %s |"
              % (name, tokens / step_s, step_s * 1e3, flops / step_s / 1e9,
                 100 * flops / step_s / 1e9 / peak, mib(median(side, "rss")), arena))
    print("| slapoc / eager | %.2fx | | | | %.2fx | |\n"
          % (median("eager", "step_s") / median("slapoc", "step_s"),
             median("slapoc", "rss") / median("eager", "rss")))
    print("Median step ms per repeat: eager %s; slapoc %s.  Loss after %d steps: eager %.6f, "
          "slapoc %.6f.  Eager's resident set after `import torch`: %s."
          % (", ".join("%.0f" % (r["step_s"] * 1e3) for r in runs["eager"]),
             ", ".join("%.0f" % (r["step_s"] * 1e3) for r in runs["slapoc"]),
             args.warmup + args.steps, runs["eager"][0]["loss"], runs["slapoc"][0]["loss"],
             mib(median("eager", "rss_after_import"))))


def main():
    parser = argparse.ArgumentParser(
        description="GPT-2-style training throughput, fp32 on the CPU: LibTorch eager vs. slapoc")
    add_common_args(parser, threads=os.cpu_count(), steps=10)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                        help="fp32, or bf16 mixed precision: slapoc's precision=\"bf16\" "
                             "against torch.autocast(\"cpu\", torch.bfloat16) (%(default)s)")
    parser.add_argument("--eager-worker", metavar="WORK", help=argparse.SUPPRESS)
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
