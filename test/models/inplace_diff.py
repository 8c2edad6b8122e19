#!/usr/bin/python3
"""Differential test of slapoc's import of in-place ops, views and constants.

  /usr/bin/python3 test/models/inplace_diff.py --slapoc PATH --workdir DIR [--count N] [--seed S]

Generates N small random TorchScript programs (deterministically from the seed) that mix
tensors known at compile time (torch.full, zeros, triu, ...), tensors computed from the
inputs, views of both (slicing, integer indexing, view/reshape, transpose/permute, expand,
unbind/chunk/split, ...) and in-place writes through them (add_, mul_, masked_fill_, copy_,
fill_, zero_, item assignment, augmented assignment, ...). Half of them are scripted, half
traced. Only programs that eager PyTorch runs are kept. Each one is imported with

  slapoc P.pt --emit=slapo --check-import --input a=f32[4,6] --input b=f32[8,12]

which runs the imported IR and the TorchScript forward on the same random inputs. Outcomes:
  match     exit status 0, every output within check-import's tolerance;
  rejected  exit status 1, and every error is at a line of the generated programs and names
            the op that slapoc cannot model.
Anything else is WRONG: a different value, an error without a Python line, a crash.
The generator knows which patterns slapoc must reject (a view no view steps describe
(diagonal) read or written after a runtime write, an `out=` argument, a boolean-mask
assignment or an in-place reshape of a runtime tensor); a program with one ends right after it
and expects that op's error at that line. A write into a buffer, once refused, is model state
the step updates: read as written, it must match. Every other program expects a match,
so rejecting what can be modelled fails the test as surely as a wrong value does.

Prints a line per program that did not meet its expectation, then
  inplace-diff: N programs (S scripted, T traced): M matched, R rejected as expected, W wrong
and exits with status 1 if W > 0, or if fewer than half the programs are expected to match
(the generator would then test little of what slapoc models).
"""

import argparse
import concurrent.futures
import importlib.util
import os
import random
import re
import subprocess
import sys
import warnings

import torch

INPUT_SHAPE = (4, 6)
# b provides the run-time values in-place ops write: as many as the largest tensor has.
VALUES_SHAPE = (8, 12)
VALUES = VALUES_SHAPE[0] * VALUES_SHAPE[1]
INPUT_FLAGS = ["--input", "a=f32[4,6]", "--input", "b=f32[8,12]"]


class Storage:
    """Memory that tensors share, as slapoc sees it."""

    def __init__(self, runtime, buffer=False):
        self.runtime = runtime  # holds a value computed at run time
        self.buffer = buffer  # the module's buffer, model state that writes update


class Var:
    def __init__(self, name, storage, opaque=False, line=None):
        self.name = name
        self.storage = storage
        self.opaque = opaque  # a view slapoc's view steps do not describe (diagonal)
        self.line = line  # index of the line that makes it


class Rejection(Exception):
    """The line just generated must make slapoc report an error naming `op`."""

    def __init__(self, op):
        super().__init__(op)
        self.op = op


class Buffers:
    """What `self` is while the generator runs a program's lines."""

    def __init__(self):
        self.buf = torch.arange(24.0).reshape(4, 6)


def factorizations(n):
    shapes = [(n,)]
    for d in range(2, n):
        if n % d == 0:
            shapes.append((d, n // d))
            shapes += [(d, e, n // d // e) for e in range(2, n // d) if (n // d) % e == 0]
    return shapes


def shares_memory(x, y):
    return x.storage().data_ptr() == y.storage().data_ptr()


class ProgramGenerator:
    """Writes one program's forward(self, a, b), running every line eagerly as it goes:
    PyTorch decides which lines are valid, what shape each tensor has and which results
    share memory with what (reshape and contiguous copy only sometimes)."""

    def __init__(self, rng, mode, seed):
        self.rng = rng
        self.mode = mode
        gen = torch.Generator().manual_seed(seed)
        self.env = {"torch": torch, "self": Buffers(),
                    "a": torch.randn(INPUT_SHAPE, generator=gen),
                    "b": torch.randn(VALUES_SHAPE, generator=gen)}
        self.input = Storage(runtime=True)  # input a, which views share
        self.lines = []
        self.vars = []
        self.counter = 0
        self.expect = None  # (line index, op) of the rejection, if any
        self.pending = None  # op of a rejection the line being built makes
        self.touched = None  # the tensor the last line changed or made

    # -- running lines ---------------------------------------------------------------------
    def run(self, line, touched):
        """Runs `line`, which changes or makes `touched`, and keeps it if PyTorch accepts
        it; raises Rejection if slapoc must refuse it."""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exec(line, self.env)  # noqa: S102 - the generator's own code
        except Exception:  # noqa: BLE001 - PyTorch refuses the line: drop it
            self.pending = None
            return False
        self.lines.append(line)
        self.touched = touched
        if self.pending:
            raise Rejection(self.pending)
        return True

    def define(self, expr, storage, opaque=False, base=None):
        """`tN = expr`: a new tensor with `storage`, or, for a view op on `base` that
        copied, with a storage of its own."""
        var = Var("t%d" % self.counter, storage, opaque, line=len(self.lines))
        self.counter += 1
        if not self.run("%s = %s" % (var.name, expr), var):
            return None
        if base is not None and not shares_memory(self.value(var), self.value(base)):
            var.storage, var.opaque = Storage(base.storage.runtime), False
        self.vars.append(var)
        return var

    def value(self, var):
        return self.env[var.name]

    def shape(self, var):
        return tuple(self.value(var).shape)

    def read(self, var):
        """`var` is read by the line being built: a view slapoc cannot describe, of a
        tensor written at run time, makes that line an error."""
        if var.opaque and var.storage.runtime:
            self.pending = "aten::diagonal"
        return var.name

    # -- operands --------------------------------------------------------------------------
    def scalar(self):
        return self.rng.choice(["0.5", "-1.25", "2.0", "3.0", "-0.75"])

    def runtime_values(self, shape):
        """An expression of shape `shape` computed from input b."""
        n = 1
        for d in shape:
            n *= d
        start = self.rng.randrange(0, VALUES - n + 1)
        return "b.flatten()[%d:%d].reshape(%s)" % (start, start + n, list(shape))

    def operand(self, shape):
        """A value an in-place op on a tensor of `shape` takes: (expression, computed at run
        time)."""
        same = [v for v in self.vars if self.shape(v) == shape]
        kind = self.rng.choice(["scalar", "runtime", "constant", "broadcast"] +
                               (["var", "var"] if same else []))
        if kind == "scalar":
            return self.scalar(), False
        if kind == "runtime" or (kind == "broadcast" and not shape):
            return self.runtime_values(shape), True
        if kind == "constant":
            return "torch.full(%s, %s)" % (list(shape), self.scalar()), False
        if kind == "broadcast":
            return self.runtime_values(shape[-1:]), True
        other = self.rng.choice(same)
        return self.read(other), other.storage.runtime

    def mask(self, target):
        """A bool tensor of `target`'s shape: (expression, computed at run time)."""
        if self.rng.random() < 0.5:
            return "%s > 0" % self.runtime_values(self.shape(target)), True
        return "%s > 1.0" % self.read(target), target.storage.runtime

    # -- statements ------------------------------------------------------------------------
    def create(self):
        rng = self.rng
        runtime = {
            "a * %s" % self.scalar(): True,
            # Elementwise ops keep a transposed input's strides: a non-contiguous result.
            "a.t() * 2.0": True,
            "b[:2].reshape(2, 3, 4) - 1.0": True,
            # slapoc computes arange at run time.
            "torch.arange(24, dtype=torch.float32).reshape(4, 6)": True,
            "torch.full((4, 6), %s)" % self.scalar(): False,
            "torch.zeros(2, 3, 4)": False,
            "torch.ones(24)": False,
            "torch.full((6, 6), -1e4).triu(1)": False,
            "torch.full((4, 6), %s).t()" % self.scalar(): False,
            "torch.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])": False,
        }
        if rng.random() < 0.15:
            base = Var("a", self.input)
            self.define("a[%d:]" % rng.randrange(0, 3), self.input, base=base)
            return
        expr = rng.choice(sorted(runtime))
        self.define(expr, Storage(runtime[expr]))

    def view(self):
        rng = self.rng
        base = rng.choice(self.vars)
        s, name = self.shape(base), self.read(base)
        rank = len(s)
        kinds = ["reshape", "view", "flatten", "detach", "contiguous", "to", "clone",
                 "unsqueeze"]
        if rank >= 1:
            kinds += ["select", "slice", "step", "narrow", "unbind", "chunk"]
        if rank >= 1 and self.value(base).numel() <= VALUES // 3:
            kinds.append("expand")
        if rank >= 2:
            kinds += ["select1", "slice1", "transpose", "t" if rank == 2 else "permute"]
        if rank == 2:
            kinds.append("diagonal")
        if 1 in s:
            kinds.append("squeeze")
        kind = rng.choice(kinds)
        if kind in ("reshape", "view"):
            shape = rng.choice(factorizations(self.value(base).numel()))
            expr = "%s.%s(%s)" % (name, kind, ", ".join(map(str, shape)))
        elif kind in ("flatten", "detach", "contiguous", "clone"):
            expr = "%s.%s()" % (name, kind)
        elif kind == "to":
            expr = "%s.to(torch.float32)" % name
        elif kind == "unsqueeze":
            expr = "%s.unsqueeze(%d)" % (name, rng.randrange(0, rank + 1))
        elif kind == "squeeze":
            expr = "%s.squeeze(%d)" % (name, s.index(1))
        elif kind == "select":
            expr = "%s[%d]" % (name, rng.randrange(-s[0], s[0]))
        elif kind == "select1":
            expr = "%s[:, %d]" % (name, rng.randrange(0, s[1]))
        elif kind in ("slice", "slice1"):
            d = 0 if kind == "slice" else 1
            i = rng.randrange(0, s[d])
            expr = "%s[%s%d:%d]" % (name, ":, " * d, i, rng.randrange(i + 1, s[d] + 1))
        elif kind == "step":
            expr = "%s[%d::%d]" % (name, rng.randrange(0, 2), rng.choice([2, 3]))
        elif kind == "narrow":
            d = rng.randrange(0, rank)
            i = rng.randrange(0, s[d])
            expr = "%s.narrow(%d, %d, %d)" % (name, d, i, rng.randrange(1, s[d] - i + 1))
        elif kind == "unbind":
            expr = "%s.unbind(0)[%d]" % (name, rng.randrange(0, s[0]))
        elif kind == "chunk":
            expr = "%s.chunk(2, %d)[0]" % (name, rng.randrange(0, rank))
        elif kind == "expand":
            expr = "%s.expand(3, %s)" % (name, ", ".join(map(str, s)))
        elif kind in ("transpose", "t"):
            expr = "%s.transpose(0, -1)" % name if kind == "transpose" else "%s.t()" % name
        elif kind == "permute":
            perm = list(range(rank))
            rng.shuffle(perm)
            expr = "%s.permute(%s)" % (name, ", ".join(map(str, perm)))
        else:
            # A view slapoc's view steps do not describe: computed at compile time only.
            expr = "%s.diagonal()" % name
            if base.storage.runtime:
                self.pending = "aten::diagonal"
        if kind == "clone":
            self.define(expr, Storage(base.storage.runtime))
        else:
            self.define(expr, base.storage, base.opaque or kind == "diagonal", base=base)

    def write(self):
        """An in-place write into a live tensor, through a view more often than not."""
        rng = self.rng
        owners = {}
        for var in self.vars:
            owners.setdefault(id(var.storage), []).append(var)
        shared = [v for v in self.vars if len(owners[id(v.storage)]) > 1]
        target = rng.choice(shared if shared and rng.random() < 0.7 else self.vars)
        name, s = self.read(target), self.shape(target)
        kinds = ["add_", "sub_", "mul_", "mask_mul", "div_", "iadd", "imul", "masked_fill_",
                 "copy_", "fill_", "zero_", "unary"]
        if len(s) == 2:
            kinds.append("tri")
        if len(s) >= 1:
            kinds += ["setitem", "item_iadd"]
        if len(s) >= 2:
            kinds.append("setitem_slice")
        kind = rng.choice(kinds)
        runtime = False
        if kind in ("add_", "sub_", "mul_", "copy_"):
            x, runtime = self.operand(s)
            line = "%s.%s(%s)" % (name, kind, x)
        elif kind == "div_":
            divisor, runtime = rng.choice([
                ("4.0", False), ("%s.abs() + 1.0" % self.runtime_values(s), True)])
            line = "%s.div_(%s)" % (name, divisor)
        elif kind == "mask_mul":
            m, runtime = self.mask(target)
            line = "%s.mul_(%s)" % (name, m)
        elif kind in ("iadd", "imul"):
            x, runtime = self.operand(s)
            line = "%s %s= %s" % (name, "+" if kind == "iadd" else "*", x)
        elif kind == "masked_fill_":
            m, runtime = self.mask(target)
            line = "%s.masked_fill_(%s, %s)" % (name, m, self.scalar())
        elif kind == "fill_":
            line = "%s.fill_(%s)" % (name, self.scalar())
        elif kind == "zero_":
            line = "%s.zero_()" % name
        elif kind == "unary":
            line = "%s.%s()" % (name, rng.choice(["neg_", "relu_", "tanh_", "sigmoid_"]))
        elif kind == "tri":
            line = "%s.%s(%d)" % (name, rng.choice(["triu_", "tril_"]), rng.randrange(-1, 2))
        elif kind in ("setitem", "item_iadd"):
            i = rng.randrange(0, s[0])
            x, runtime = self.operand(s[1:])
            line = "%s[%d] %s= %s" % (name, i, "+" if kind == "item_iadd" else "", x)
        else:
            i = rng.randrange(0, s[1])
            j = rng.randrange(i + 1, s[1] + 1)
            x, runtime = self.operand((s[0], j - i) + s[2:])
            line = "%s[:, %d:%d] = %s" % (name, i, j, x)
        # Whether the write makes its storage a run-time value, and whether slapoc must
        # refuse it.
        storage = target.storage
        runtime = runtime or storage.runtime
        if target.opaque and runtime:
            self.pending = "aten::diagonal"
        if self.run(line, target):
            storage.runtime = runtime

    def compute(self):
        """A new tensor computed from a live one."""
        var = self.rng.choice(self.vars)
        self.define("torch.tanh(%s) * %s" % (self.read(var), self.scalar()),
                    Storage(var.storage.runtime))

    def unmodelled(self):
        """One of the writes slapoc refuses, or a write into the module's buffer (once refused,
        now model state the step updates: the program goes on, and must match)."""
        rng = self.rng
        kind = rng.choice(["buffer", "mask_assign", "unsqueeze_"] +
                          (["out"] if self.mode == "script" else []))
        if kind == "buffer":
            var = self.define("self.buf[1:]", Storage(True, buffer=True))
            self.run("%s.add_(%s)" % (var.name, self.runtime_values(self.shape(var))), var)
            return
        runtime = [v for v in self.vars if v.storage.runtime and not v.opaque]
        target = rng.choice(runtime) if runtime else self.define("a * 1.0", Storage(True))
        self.pending = {"out": "'out'", "mask_assign": "aten::index_put_",
                        "unsqueeze_": "aten::unsqueeze_"}[kind]
        self.run({"out": "torch.neg(%s, out=%s)" % (target.name, target.name),
                  "mask_assign": "%s[%s > 0] = 0.0" % (target.name, target.name),
                  "unsqueeze_": "%s.unsqueeze_(0)" % target.name}[kind], target)

    def generate(self, statements, reject):
        while len(self.vars) < 2:
            self.create()
        try:
            for _ in range(statements):
                self.rng.choice([self.create, self.view, self.view, self.write, self.write,
                                 self.write, self.compute])()
            if reject:
                self.unmodelled()
            # Every tensor is an output: each must read what PyTorch's does. slapoc reads
            # an output where it was made.
            self.lines.append("return (%s,)" % ", ".join(v.name for v in self.vars))
            stale = [v for v in self.vars if v.opaque and v.storage.runtime]
            if stale:
                self.expect = (stale[0].line, "aten::diagonal")
        except Rejection as rejection:
            self.expect = (len(self.lines) - 1, rejection.op)
            self.pending = None
            # What the refused line changed or made is an output, so that TorchScript
            # keeps the line.
            self.lines.append("return (%s,)" % self.touched.name)
        return self.lines


class Program:
    def __init__(self, index, mode, lines, expect):
        self.index = index
        self.mode = mode
        self.lines = lines
        self.expect = expect  # (line index in `lines`, op) or None
        self.first_line = 0  # line number of lines[0] in the generated file
        self.path = None

    def expected_line(self):
        return self.first_line + self.expect[0] if self.expect else None


def generate_programs(count, seed):
    programs = []
    for index in range(count):
        mode = "script" if index % 2 == 0 else "trace"
        rng = random.Random("%d/%d" % (seed, index))
        gen = ProgramGenerator(rng, mode, seed * 100003 + index)
        # One program in six ends with a pattern slapoc must refuse.
        lines = gen.generate(statements=rng.randrange(6, 12), reject=rng.random() < 1 / 6)
        programs.append(Program(index, mode, lines, gen.expect))
    return programs


def write_module(programs, path):
    out = ["# Generated by inplace_diff.py; every class is one program.",
           "import torch", "import torch.nn as nn", "", ""]
    for program in programs:
        out += ["class P%d(nn.Module):" % program.index,
                "    def __init__(self):",
                "        super().__init__()",
                "        self.register_buffer('buf', torch.arange(24.0).reshape(4, 6))",
                "",
                "    def forward(self, a, b):"]
        program.first_line = len(out) + 1
        out += ["        " + line for line in program.lines]
        out += ["", ""]
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def export(program, module, workdir):
    """Saves the program as TorchScript; False if eager PyTorch does not run it."""
    gen = torch.Generator().manual_seed(program.index)
    inputs = (torch.randn(INPUT_SHAPE, generator=gen), torch.randn(VALUES_SHAPE, generator=gen))
    cls = getattr(module, "P%d" % program.index)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cls()(*[t.clone() for t in inputs])
            if program.mode == "script":
                exported = torch.jit.script(cls())
            else:
                exported = torch.jit.trace(cls(), tuple(t.clone() for t in inputs),
                                           check_trace=False)
            exported(*[t.clone() for t in inputs])
    except Exception:  # noqa: BLE001 - eager PyTorch refuses it: not a valid program
        return False
    program.path = os.path.join(workdir, "p%d.pt" % program.index)
    exported.save(program.path)
    return True


ERROR = re.compile(r"^(.*?):(\d+):(\d+): error: (.*)$")


def judge(program, slapoc, source):
    """(outcome, detail) for one program: outcome is 'match', 'rejected' or 'WRONG'."""
    run = subprocess.run([slapoc, program.path, "--emit=slapo", "--check-import"] +
                         INPUT_FLAGS, capture_output=True, text=True)
    output = run.stdout + run.stderr
    errors = [ERROR.match(line) for line in run.stderr.splitlines()]
    errors = [e for e in errors if e]
    if run.returncode == 0:
        if "EXCEEDS" in output or "within tolerance" not in output:
            return "WRONG", "exit 0 without a check-import match:\n" + output
        if program.expect:
            return "WRONG", "expected an error naming %s at line %d, got a match" % (
                program.expect[1], program.expected_line())
        return "match", ""
    if "check-import" in output:
        return "WRONG", "the imported IR computes another value:\n" + output
    if not errors or run.returncode != 1:
        return "WRONG", "exit %d without a located error:\n%s" % (run.returncode, output)
    for error in errors:
        path, line, message = error.group(1), int(error.group(2)), error.group(4)
        if os.path.abspath(path) != source or line < 1 or "'aten::" not in message:
            return "WRONG", "an error without the op and its Python line:\n" + output
    if not program.expect:
        return "WRONG", "rejected a program slapoc should model:\n" + output
    line, op = program.expected_line(), program.expect[1]
    if not any(int(e.group(2)) == line and op in e.group(4) for e in errors):
        return "WRONG", "expected an error naming %s at line %d:\n%s" % (op, line, output)
    return "rejected", ""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slapoc", required=True, help="the slapoc binary")
    parser.add_argument("--workdir", required=True, help="where programs and .pt files go")
    parser.add_argument("--count", type=int, default=100, help="number of programs")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2, help="slapoc processes at a time")
    args = parser.parse_args(argv)

    os.makedirs(args.workdir, exist_ok=True)
    source = os.path.abspath(os.path.join(args.workdir, "programs.py"))
    candidates = generate_programs(args.count * 2, args.seed)
    write_module(candidates, source)
    spec = importlib.util.spec_from_file_location("programs", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    programs = []
    for program in candidates:
        if len(programs) == args.count:
            break
        if export(program, module, args.workdir):
            programs.append(program)
    if len(programs) < args.count:
        print("inplace-diff: only %d of %d generated programs run in eager PyTorch"
              % (len(programs), args.count))
        return 1

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        verdicts = list(pool.map(lambda p: judge(p, args.slapoc, source), programs))
    counts = {"match": 0, "rejected": 0, "WRONG": 0}
    for program, (outcome, detail) in zip(programs, verdicts):
        counts[outcome] += 1
        if outcome == "WRONG":
            print("inplace-diff: WRONG: program P%d (%s, %s line %d): %s"
                  % (program.index, program.mode, source, program.first_line, detail))
    scripted = sum(p.mode == "script" for p in programs)
    print("inplace-diff: %d programs (%d scripted, %d traced): %d matched, %d rejected as "
          "expected, %d wrong" % (len(programs), scripted, len(programs) - scripted,
                                  counts["match"], counts["rejected"], counts["WRONG"]))
    expected_matches = sum(p.expect is None for p in programs)
    if expected_matches * 2 < len(programs):
        print("inplace-diff: only %d programs expect a match" % expected_matches)
        return 1
    return 1 if counts["WRONG"] else 0


if __name__ == "__main__":
    sys.exit(main())
