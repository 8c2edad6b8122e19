#!/usr/bin/python3
"""Training throughput on one NVIDIA GPU: slapoc's CUDA program vs. PyTorch eager vs. torch.compile.

slapoc runs only on the build machine (it needs MLIR and LibTorch) and the GPU is elsewhere,
so the benchmark has two halves:

  here:   PYTHONPATH=third_party/.pydeps /usr/bin/python3 test/bench/gpu_train.py \\
              --prepare DIR [--slapoc PATH] [--trace-cache DIR] [--tiny]
  there:  python3 test/bench/gpu_train.py --run DIR [--warmup W] [--steps N] [--repeats R]
              [--device cuda|cpu]

Configurations (test/models/gpt2.py's GPT2LMHeadModel, Hugging Face's GPT-2 structure and
names, tied LM head, built by gpt_train.build_model: torch.manual_seed(0), dropout 0,
n_positions = seq):

  gpt2-small   GPT-2 small: 12 layers, hidden 768, 12 heads, seq 1024, batch 16, vocab 50257
  cpu-default  test/bench/gpt_train.py's default model: 4 layers, hidden 512, 8 heads, seq 256,
               batch 8, vocab 8192

--prepare exports each with gpt_train.prepare (torch.jit.trace, under no_grad so that tracing
the 124M model at [16, 1024] does not keep its activations) and compiles it three times with
`slapoc model.pt --input ... --target=cuda --schedule out.sched -o DIR/CONFIG/out`, the
schedule being gpt_train.py's AdamW (lr 3e-4, betas (0.9, 0.999), eps 1e-8, weight decay 0.1)
with precision="bf16": with fusion="none" into out/ (one kernel per op) and with
fusion="auto" into out-fused/ (elementwise chains as generated kernels), and with fusion="auto"
plus replace("flash_attention") of every attention and replace("cross_entropy") of the LM head
into out-replaced/ (what a user of the GPU would compile: cuDNN's fused attention in bf16, the
[rows, vocabulary] logits never held).  The weights (500 MB for GPT-2 small), the TorchScript
file and the batches gpt_train.prepare writes are deleted and rank0/train is stripped, so that
DIR travels: --prepare writes DIR.tar.xz (at most 12 MiB, beside the GPU suite's ~49 of the 64
a device call carries); DIR/CONFIG/config.json keeps what --run needs: the model's sizes,
the FLOPs per step, and every tensor the program reads with its dtype and shape (the header of
the weights file slapoc wrote, plus the manifest's aliases of tied weights).  Tracing runs
GPT-2 small's forward three times at [16, 1024] in fp32 on the CPU (the trace and its check):
minutes, and far more on a busy two-core machine: the trace is kept in DIR.traces (or
--trace-cache) and a later --prepare reuses it while the sizes, test/models/gpt2.py and
LibTorch's version are the same, so that only the compilations run again.

--run rebuilds each model with the same seed and writes its tensors, under every name
config.json lists, to rank0/weights.safetensors of each program's directory, where it reads them
(PyTorch there may draw other values than LibTorch here: what matters is that all sides start
from the same weights).
Then each repeat runs five sides in turn (alternating, so that drift hits all of them),
W untimed + N timed steps each (defaults 3 + 10, R = 3):

  slapoc   out/launch --steps W+N --log-json LOG --quiet: synthetic batches, made by the
           program; a step's time is the log's step_time_s (the host fills the batch and copies
           it to the GPU, forward, backward, AdamW, then synchronizes)
  fused    the same with out-fused/launch
  replaced the same with out-replaced/launch
  eager    the nn.Module on the GPU, forward under torch.autocast("cuda", torch.bfloat16),
           torch.optim.AdamW(fused=True) with the same hyperparameters; timed between
           torch.cuda.synchronize() calls around model(ids, labels).backward(), step(),
           zero_grad(set_to_none=True); random token batches made on the GPU beforehand
  compile  the same with torch.compile(model) (mode default); the warmup steps cover
           compilation

A repeat's step time is the median over its N timed steps, the table's the median over the R
repeats; tokens/s = batch * seq / step time.  The FLOPs of a step are gpt_train.py's count
(6 * tokens * matmul parameters + 12 * layers * hidden * seq * tokens); MFU divides the model
FLOP/s by 989 TFLOP/s (dense bf16 peak of the H100/H200) and by a bf16 8192^3 torch.matmul
measured at the start of the run (median of 10, CUDA events).  Peak memory is
torch.cuda.max_memory_allocated for the PyTorch sides (the largest over the repeats) and
the planned arena (the log's arena_bytes) for slapoc.  A side that fails (the weights do not
match the program's, the program exits non-zero, torch.compile raises, out of memory) shows
"n/a (reason)" and the others go on.  The tables are printed in Markdown and written as JSON
to $OUT/gpu_bench.json, or DIR/gpu_bench.json when OUT is not set.

The NCCL the program links is found as test/gpu/run.sh finds it: when the loader does not know
libnccl.so.2, LD_LIBRARY_PATH gets the lib directory of PyTorch's nvidia.nccl package.

Self-test without a GPU (checks the plumbing, measures nothing of interest): `--prepare DIR
--tiny` prepares one configuration, tiny (2 layers, hidden 64, 2 heads, seq 32, batch 2,
vocab 128), and `--run DIR --device cpu` trains the PyTorch sides on the CPU (bf16 autocast on
the CPU, AdamW unfused, a 1024^3 GEMM) and still launches the CUDA program, which then fails
and shows as n/a with its own error.
"""

import argparse
import copy
import gc
import hashlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

import gpt_train

CONFIGS = (
    ("gpt2-small", dict(layers=12, hidden=768, heads=12, seq=1024, batch=16, vocab=50257)),
    ("cpu-default", dict(layers=4, hidden=512, heads=8, seq=256, batch=8, vocab=8192)),
)
TINY_CONFIGS = (("tiny", dict(layers=2, hidden=64, heads=2, seq=32, batch=2, vocab=128)),)
SCHEDULE = gpt_train.SCHEDULE.replace(")\n", ', precision="bf16")\n')
PEAK_FLOPS = 989e12  # dense bf16, H100 / H200 SXM
# The compressed DIR's share of the 64 MiB a device call carries (the GPU suite is ~49).
TRAVEL_LIMIT = 12 * 2 ** 20
GEMM_SIZE = {"cuda": 8192, "cpu": 1024}
LAUNCH_TIMEOUT_S = 300
# slapoc's programs, by side: the directory each is compiled into, its schedule's fusion and
# the primitives appended to the schedule.
REPLACE_PRIMITIVES = ('sch["transformer.h.*.attn"].replace("flash_attention")\n'
                      'sch["lm_head"].replace("cross_entropy")\n')
PROGRAMS = {"slapoc": ("out", "none", ""), "fused": ("out-fused", "auto", ""),
            "replaced": ("out-replaced", "auto", REPLACE_PRIMITIVES)}
SIDES = (("slapoc", "slapoc"), ("fused", 'slapoc fusion="auto"'),
         ("replaced", 'slapoc fusion="auto", flash attention, chunked cross-entropy'),
         ("eager", "PyTorch eager"), ("compile", "torch.compile"))
SAFETENSORS_DTYPES = {"F32": "float32", "F64": "float64", "F16": "float16", "BF16": "bfloat16",
                      "I64": "int64", "I32": "int32", "I8": "int8", "U8": "uint8", "BOOL": "bool"}


class SideFailed(Exception):
    """One side of a configuration could not be measured; the message says why, in a line."""


def size_text(n):
    return "%.2f GiB" % (n / 2 ** 30) if n >= 2 ** 30 else "%.1f MiB" % (n / 2 ** 20)


def directory_bytes(path):
    return sum(os.path.getsize(os.path.join(parent, name))
               for parent, _, names in os.walk(path) for name in names)


# --prepare: here, with slapoc.

def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def trace_stamp(sizes):
    """What a traced model depends on: its sizes, the model's source and LibTorch's version."""
    import torch
    with open(os.path.join(gpt_train.REPO, "test", "models", "gpt2.py"), "rb") as f:
        source = hashlib.sha256(f.read()).hexdigest()[:16]
    return "%s gpt2.py %s torch %s" % (json.dumps(sizes, sort_keys=True), source,
                                       torch.__version__)


def prepare_config(args, root, name, sizes):
    """Exports and compiles one configuration into ROOT/NAME and writes its config.json."""
    import torch
    from safetensors import safe_open
    work = os.path.join(root, name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # gpt_train.prepare also writes W + N batches for --data; the program here makes its own,
    # so one is enough.
    model_args = argparse.Namespace(warmup=0, steps=1, **sizes)
    start = time.perf_counter()
    cached = os.path.join(args.trace_cache, name + ".pt")
    stamp = trace_stamp(sizes)
    if os.path.exists(cached) and read_text(cached + ".stamp") == stamp:
        shutil.copyfile(cached, os.path.join(work, "model.pt"))
        with torch.no_grad():
            n_params, flops = gpt_train.count_flops(model_args, gpt_train.build_model(model_args))
        print("%s: the trace in %s is this model's (%s): not traced again" % (name, cached, stamp))
    else:
        with torch.no_grad():
            n_params, flops = gpt_train.prepare(model_args, work)
        os.makedirs(args.trace_cache, exist_ok=True)
        shutil.copyfile(os.path.join(work, "model.pt"), cached)
        with open(cached + ".stamp", "w") as f:
            f.write(stamp)
    commands = {}
    for side, (program, fusion, primitives) in PROGRAMS.items():
        schedule = SCHEDULE.replace(")\n", ', fusion="%s")\n' % fusion) + primitives
        argv = gpt_train.compile_slapoc(args, work, program, schedule,
                                        gpt_train.input_flags(model_args) + ["--target=cuda"])
        commands[side] = gpt_train.shell(os.path.relpath(a, work) if a.startswith(work) else a
                                         for a in argv)
    out = os.path.join(work, "out")
    with open(os.path.join(out, "manifest.json")) as f:
        manifest = json.load(f)
    # Fusion and replace() change the step, never the parameters: the programs read one layout.
    weights = os.path.join(out, "rank0", "weights.safetensors")
    with safe_open(weights, framework="pt") as f:
        layout = {key: {"dtype": f.get_slice(key).get_dtype(),
                        "shape": f.get_slice(key).get_shape()} for key in f.keys()}
        metadata = f.metadata()
    tensors = []
    for param in manifest["parameters"]:
        for tensor_name in [param["name"]] + param["aliases"]:
            tensors.append(dict(name=tensor_name, **layout[param["name"]]))
    for path in (os.path.join(work, "model.pt"), os.path.join(work, "batches.safetensors")):
        if os.path.exists(path):
            os.remove(path)
    for program, *_ in PROGRAMS.values():
        os.remove(os.path.join(work, program, "rank0", "weights.safetensors"))
        subprocess.run(["strip", os.path.join(work, program, "rank0", "train")], check=True)
    config = {
        "name": name,
        "model": sizes,
        "precision": "bf16",
        "optimizer": {"name": "adamw", "lr": gpt_train.LR, "betas": gpt_train.BETAS,
                      "eps": gpt_train.EPS, "weight_decay": gpt_train.WEIGHT_DECAY},
        "parameters": n_params,
        "flops_per_step": flops,
        "tensors": tensors,
        "weights_metadata": metadata,
        "arena_bytes": manifest["ranks"][0]["planned_memory_bytes"]["arena_bytes"],
        "build": manifest["build"],
        "slapoc_commands": commands,
    }
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    print("%s: %.1fM parameters, %.1f GFLOP per step, planned arena %.0f MiB; exported and "
          "compiled in %.0f s; %s is %.1f MiB" % (
              name, n_params / 1e6, flops / 1e9, config["arena_bytes"] / 2 ** 20,
              time.perf_counter() - start, work, directory_bytes(work) / 2 ** 20))


def prepare(args):
    os.makedirs(args.prepare, exist_ok=True)
    for name, sizes in TINY_CONFIGS if args.tiny else CONFIGS:
        prepare_config(args, args.prepare, name, sizes)
    # What travels is DIR compressed, beside the GPU suite: xz -9's 64 MiB window spans the
    # programs, which share most of their code (the tiny configuration: 2.6 MiB, 5.6 with -6).
    directory = os.path.normpath(args.prepare)
    archive = directory + ".tar.xz"
    subprocess.run(["tar", "-C", os.path.dirname(os.path.abspath(directory)), "-cJf", archive,
                    os.path.basename(directory)], check=True, env=dict(os.environ, XZ_OPT="-9"))
    size = os.path.getsize(archive)
    if size > TRAVEL_LIMIT:
        raise gpt_train.BenchError("%s is %.1f MiB, more than the %d MiB that may travel beside "
                                   "the GPU suite" % (archive, size / 2 ** 20,
                                                      TRAVEL_LIMIT // 2 ** 20))
    print("%s: %.1f MiB, %s %.1f MiB; there, unpacked: python3 test/bench/gpu_train.py --run %s"
          % (args.prepare, directory_bytes(args.prepare) / 2 ** 20, archive, size / 2 ** 20,
             os.path.basename(directory)))


# --run: there, with PyTorch and a GPU.

def find_nccl():
    """Puts PyTorch's NCCL on LD_LIBRARY_PATH for the program when the loader lacks one (as
    test/gpu/run.sh does)."""
    try:
        known = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    except OSError:
        known = ""
    if "libnccl.so.2" in known:
        return
    try:
        import nvidia.nccl
    except ImportError:
        return
    lib = os.path.join(nvidia.nccl.__path__[0], "lib")
    os.environ["LD_LIBRARY_PATH"] = ":".join(
        filter(None, (lib, os.environ.get("LD_LIBRARY_PATH"))))


def write_weights(model, config, path):
    """Writes the model's tensors under every name config.json lists, in its dtype and shape."""
    import torch
    from safetensors.torch import save_file
    # Non-persistent buffers (the causal masks) are missing from state_dict, tied names from
    # named_parameters.
    available = {**dict(model.named_buffers()), **model.state_dict()}
    tensors = {}
    for entry in config["tensors"]:
        tensor = available.get(entry["name"])
        dtype = getattr(torch, SAFETENSORS_DTYPES[entry["dtype"]])
        if tensor is None or tensor.dtype != dtype or list(tensor.shape) != entry["shape"]:
            raise gpt_train.BenchError(
                "the program reads %s as %s%s, the model has %s" % (
                    entry["name"], entry["dtype"], entry["shape"],
                    "no such tensor" if tensor is None else "%s%s" % (tensor.dtype,
                                                                      list(tensor.shape))))
        # save_file refuses tensors that share memory, as the tied LM head does.
        tensors[entry["name"]] = tensor.detach().clone()
    save_file(tensors, path, metadata=config["weights_metadata"])


def gemm_rate(device):
    """FLOP/s of an n x n x n bf16 torch.matmul: the median of 10 after 3 warmup runs."""
    import torch
    n = GEMM_SIZE[device.type]
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    seconds = []
    for _ in range(3 + 10):
        if device.type == "cuda":
            # Events time the kernel alone: at ~1.4 ms, a host timer's launch and
            # synchronization overheads would be a few percent of it.
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.matmul(a, b)
            end.record()
            end.synchronize()
            seconds.append(start.elapsed_time(end) / 1e3)
        else:
            start_s = time.perf_counter()
            torch.matmul(a, b)
            seconds.append(time.perf_counter() - start_s)
    return 2 * n ** 3 / statistics.median(seconds[3:])


def run_slapoc(args, work, side):
    """One run of a compiled program: its median timed step, last loss and arena."""
    program = PROGRAMS[side][0]
    log = os.path.join(work, program + "-log.json")
    argv = [os.path.join(work, program, "launch"), "--steps", str(args.warmup + args.steps),
            "--log-json", log, "--quiet"]
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors="replace", timeout=LAUNCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise SideFailed("no exit after %d s" % LAUNCH_TIMEOUT_S)
    if proc.returncode != 0:
        lines = proc.stdout.strip().splitlines()
        raise SideFailed("exit %d%s" % (proc.returncode, ": " + lines[-1] if lines else ""))
    steps = gpt_train.read_log(args, log)
    return {"step_s": gpt_train.timed_median(args, steps, "step_time_s"),
            "loss": steps[-1]["loss"], "memory_bytes": steps[-1]["arena_bytes"]}


def run_pytorch(args, cpu_model, config, batches, device, compiled):
    """One run of the model on DEVICE, eager or under torch.compile: its median timed step,
    last loss and peak memory."""
    import torch
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    model = copy.deepcopy(cpu_model).to(device)  # deepcopy keeps the LM head tied
    optim = config["optimizer"]
    # torch 1.13 (the self-test's) has no fused AdamW.
    fused = {"fused": True} if device.type == "cuda" else {}
    optimizer = torch.optim.AdamW(model.parameters(), lr=optim["lr"], betas=optim["betas"],
                                  eps=optim["eps"], weight_decay=optim["weight_decay"], **fused)
    # A fresh module per repeat: PyTorch 2's dynamo reuses or adds a cache entry for it, far
    # below its recompile limit at a few repeats.
    forward = torch.compile(model) if compiled else model
    synchronize = torch.cuda.synchronize if device.type == "cuda" else lambda: None
    times = []
    for ids, labels in batches:
        synchronize()
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16,
                            enabled=config["precision"] == "bf16"):
            loss = forward(ids, labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        synchronize()
        times.append(time.perf_counter() - start)
    return {"step_s": statistics.median(times[args.warmup:]), "loss": loss.item(),
            "memory_bytes": torch.cuda.max_memory_allocated() if device.type == "cuda" else None}


def max_memory(runs):
    """The largest peak memory of a side's runs; None where it is not measured (the CPU)."""
    peaks = [r["memory_bytes"] for r in runs]
    return None if None in peaks else max(peaks)


def failure_reason(error):
    """One line saying why a side failed."""
    if isinstance(error, SideFailed):
        return str(error)
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    # torch.compile's errors open with "backend='inductor' raised:", the cause on the next line.
    text = " ".join(lines[:2]) if lines and lines[0].endswith(":") else " ".join(lines[:1])
    return "%s%s" % (type(error).__name__, ": " + text[:300] if text else "")


def bench_config(args, root, name, device, peak_gemm):
    """Runs one prepared configuration's three sides; returns its result for the JSON."""
    import torch
    work = os.path.join(root, name)
    with open(os.path.join(work, "config.json")) as f:
        config = json.load(f)
    model_args = argparse.Namespace(**config["model"])
    cpu_model = gpt_train.build_model(model_args)
    failures = {}
    for side, (program, *_) in PROGRAMS.items():
        try:
            write_weights(cpu_model, config,
                          os.path.join(work, program, "rank0", "weights.safetensors"))
        except gpt_train.BenchError as error:
            failures[side] = str(error)
    # Random ids and labels, drawn apart as the program's synthetic batches are.
    generator = torch.Generator(device=device).manual_seed(0)
    batches = [[torch.randint(model_args.vocab, (model_args.batch, model_args.seq),
                              generator=generator, device=device) for _ in range(2)]
               for _ in range(args.warmup + args.steps)]
    runners = {
        "slapoc": lambda: run_slapoc(args, work, "slapoc"),
        "fused": lambda: run_slapoc(args, work, "fused"),
        "eager": lambda: run_pytorch(args, cpu_model, config, batches, device, compiled=False),
        "compile": lambda: run_pytorch(args, cpu_model, config, batches, device, compiled=True),
    }
    runs = {side: [] for side, _ in SIDES}
    for _ in range(args.repeats):
        for side, _ in SIDES:
            if side in failures:
                continue
            try:
                runs[side].append(runners[side]())
            except Exception as error:  # any failure of one side must leave the others running
                failures[side] = failure_reason(error)
            # The memory of a run (or of its traceback's frames) is not the next run's.
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()

    tokens = model_args.batch * model_args.seq
    flops = config["flops_per_step"]
    sides = {}
    for side, _ in SIDES:
        if side in failures:
            sides[side] = {"error": failures[side]}
            continue
        step_s = statistics.median(r["step_s"] for r in runs[side])
        sides[side] = {"tokens_per_s": tokens / step_s, "step_ms": step_s * 1e3,
                       "mfu_peak": flops / step_s / PEAK_FLOPS,
                       "mfu_gemm": flops / step_s / peak_gemm,
                       "memory_bytes": max_memory(runs[side]),
                       "step_ms_per_repeat": [r["step_s"] * 1e3 for r in runs[side]],
                       "final_loss": runs[side][-1]["loss"]}
    for result in sides.values():
        if "error" not in result and "error" not in sides["eager"]:
            result["vs_eager"] = result["tokens_per_s"] / sides["eager"]["tokens_per_s"]
    return {"model": config["model"], "parameters": config["parameters"],
            "flops_per_step": flops, "slapoc_commands": config["slapoc_commands"],
            "sides": sides}


def print_table(name, result, peak_gemm, device):
    model = result["model"]
    memory_label = "peak GPU memory" if device.type == "cuda" else "peak memory"
    print("### %s: %d layers, hidden %d, %d heads, seq %d, batch %d, vocab %d; %.1fM parameters, "
          "%.1f GFLOP per step\n" % (name, model["layers"], model["hidden"], model["heads"],
                                     model["seq"], model["batch"], model["vocab"],
                                     result["parameters"] / 1e6, result["flops_per_step"] / 1e9))
    for side, command in result["slapoc_commands"].items():
        print("%s: `%s`\n" % (dict(SIDES)[side], command))
    print("| | tokens/s | ms/step | vs eager | MFU vs 989 TFLOP/s | MFU vs GEMM (%.1f TFLOP/s) "
          "| %s |" % (peak_gemm / 1e12, memory_label))
    print("|---|---:|---:|---:|---:|---:|---:|")
    for side, label in SIDES:
        r = result["sides"][side]
        if "error" in r:
            print("| %s | n/a (%s) | | | | | |" % (label, r["error"].replace("|", "/")))
            continue
        memory = "-" if r["memory_bytes"] is None else "%s%s" % (
            size_text(r["memory_bytes"]), " (planned arena)" if side in PROGRAMS else "")
        print("| %s | %.1fk | %.1f | %s | %.1f%% | %.1f%% | %s |"
              % (label, r["tokens_per_s"] / 1e3, r["step_ms"],
                 "%.2fx" % r["vs_eager"] if "vs_eager" in r else "-",
                 100 * r["mfu_peak"], 100 * r["mfu_gemm"], memory))
    measured = [(label, result["sides"][side]) for side, label in SIDES
                if "error" not in result["sides"][side]]
    print("\nMedian ms/step per repeat: %s.  Loss after the last step (random tokens, so "
          "ln(vocab) = %.2f is chance): %s.\n" % (
              "; ".join("%s %s" % (label, ", ".join("%.1f" % ms for ms in r["step_ms_per_repeat"]))
                        for label, r in measured),
              math.log(model["vocab"]),
              ", ".join("%s %.4f" % (label, r["final_loss"]) for label, r in measured)))


def run(args):
    import torch
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise gpt_train.BenchError("no CUDA device (--device cpu runs the self-test)")
    find_nccl()
    names = [name for name, _ in CONFIGS + TINY_CONFIGS
             if os.path.exists(os.path.join(args.run, name, "config.json"))]
    if not names:
        raise gpt_train.BenchError("%s holds no prepared configuration (run --prepare)" % args.run)
    start = time.perf_counter()
    peak_gemm = gemm_rate(device)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "no GPU"
    machine = "%s; %s, CUDA %s" % (gpt_train.describe_machine(), gpu, torch.version.cuda)
    print("## Training throughput on one GPU, bf16: slapoc vs. PyTorch eager vs. torch.compile\n")
    print("`%s`\n" % gpt_train.command_line())
    print("- machine: %s" % machine)
    print("- %d warmup + %d timed steps per run, %d runs per side; bf16 GEMM %d^3: %.1f TFLOP/s\n"
          % (args.warmup, args.steps, args.repeats, GEMM_SIZE[device.type], peak_gemm / 1e12))
    results = {}
    for name in names:
        results[name] = bench_config(args, args.run, name, device, peak_gemm)
        print_table(name, results[name], peak_gemm, device)
    print("Whole run: %.0f s." % (time.perf_counter() - start))
    out_dir = os.environ.get("OUT") or args.run
    with open(os.path.join(out_dir, "gpu_bench.json"), "w") as f:
        json.dump({"command": gpt_train.command_line(), "machine": machine,
                   "device": device.type, "warmup": args.warmup, "steps": args.steps,
                   "repeats": args.repeats, "gemm_size": GEMM_SIZE[device.type],
                   "gemm_flops": peak_gemm, "peak_flops": PEAK_FLOPS, "configs": results},
                  f, indent=1)


def main():
    parser = argparse.ArgumentParser(
        description="bf16 training throughput on one GPU: slapoc vs. PyTorch eager vs. "
                    "torch.compile (--prepare here, --run on the GPU machine)")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--prepare", metavar="DIR",
                      help="export and compile the configurations into DIR (needs slapoc)")
    mode.add_argument("--run", metavar="DIR", help="benchmark the configurations DIR holds")
    add = parser.add_argument
    add("--slapoc", default=os.path.join(gpt_train.REPO, "build", "tools", "slapoc", "slapoc"),
        help="--prepare: the slapoc binary (%(default)s)")
    add("--trace-cache", metavar="DIR",
        help="--prepare: where each configuration's TorchScript trace is kept for the next "
             "--prepare, which reuses it while the model's sizes, test/models/gpt2.py and "
             "LibTorch are the same (default: DIR.traces beside DIR; tracing GPT-2 small "
             "takes half an hour on two busy cores)")
    add("--tiny", action="store_true",
        help="--prepare: only a tiny configuration, for the self-test")
    add("--warmup", type=int, default=3, help="--run: untimed steps per run (%(default)s)")
    add("--steps", type=int, default=10, help="--run: timed steps per run (%(default)s)")
    add("--repeats", type=int, default=3, help="--run: runs of each side (%(default)s)")
    add("--device", choices=("cuda", "cpu"), default="cuda",
        help="--run: where PyTorch trains; cpu is the self-test (%(default)s)")
    args = parser.parse_args()
    if args.steps < 1 or args.repeats < 1 or args.warmup < 0:
        parser.error("--steps and --repeats must be at least 1, --warmup at least 0")
    if args.prepare and not args.trace_cache:
        args.trace_cache = os.path.normpath(args.prepare) + ".traces"
    if args.prepare and not os.access(args.slapoc, os.X_OK):
        parser.error("%s is not an executable: build it or pass --slapoc" % args.slapoc)
    try:
        if args.prepare:
            prepare(args)
        else:
            run(args)
    except gpt_train.BenchError as e:
        sys.exit("gpu_train.py: error: %s" % e)


if __name__ == "__main__":
    main()
