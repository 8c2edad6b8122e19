"""Reads a rank program's generated step (step.cpp or step.cu, blocks.cpp or blocks.cu) as the
benchmarks need it: its functions with their calls per step, the tensors each declares and the
kernel calls each makes. Shared by gemm_shapes.py and step_traffic.py."""

import collections
import os
import re

ELEMENT_BYTES = {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "BF16": 2, "F16": 2, "I8": 1,
                 "U8": 1, "Bool": 1}


def _read(rank_dir, name):
    for extension in ("cpp", "cu"):
        path = os.path.join(rank_dir, "%s.%s" % (name, extension))
        if os.path.exists(path):
            with open(path) as f:
                return f.read()
    raise FileNotFoundError("%s has no %s.cpp or %s.cu" % (rank_dir, name, name))


def functions(rank_dir):
    """(text, calls per step) of each function of blocks.* (as often as step.* runs it) and of
    step.* as a whole (once)."""
    step, blocks = _read(rank_dir, "step"), _read(rank_dir, "blocks")
    runs = collections.Counter(re.findall(r"\b(\w+Block\d+)\(ctx", step))
    for function in re.split(r"\n(?=void )", blocks):
        name = re.match(r"void (\w+)\(", function)
        if name:
            yield function, runs[name.group(1)]
    yield step, 1


def views(text):
    """{tensor name: (dtype, shape)} of the tensors `text` declares."""
    return {name: (dtype, tuple(int(d) for d in dims.split(",") if d.strip()))
            for name, dtype, dims in re.findall(
                r"Tensor (\w+) = view\(arena, [^,]+, DType::(\w+), \{([\d, ]*)\}\)", text)}


def kernel_calls(text):
    """(kernel, argument text) of each runtime call `kernel(ctx, ...);` in `text`, in order
    (calls of the block functions left out)."""
    for kernel, args in re.findall(r"^\s+(\w+)\(ctx, ([^;]*)\);", text, re.M):
        if not re.match(r"\w+Block\d+$", kernel):
            yield kernel, args
