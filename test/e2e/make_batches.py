#!/usr/bin/python3
"""Write a safetensors batch file of random inputs for a model's forward.

  PYTHONPATH=third_party/.pydeps /usr/bin/python3 test/e2e/make_batches.py [MODEL.pt] \\
      --input NAME=DTYPE[D0,D1,...][:BOUND] ... --steps S [--seed N] [--vocab V] \\
      -o batches.safetensors

The batch file is what a compiled program reads with `--data batches.safetensors` and what
test/e2e/torch_train.py reads with `--batches`: for every forward input NAME one tensor
[S, D0, D1, ...] of the input's dtype; training step s (1-based) uses batch (s - 1) mod S.

Inputs.  A TorchScript file records the forward's argument names but not their shapes or
dtypes, and test/models/export.py records nothing beside the model: it prints the inputs as
one `--input` flag per forward argument, in forward order, in slapoc's syntax
  --input input_ids=i64[2,16] --input labels=i64[2,16]
and that line can be passed here unchanged.  Given MODEL.pt, the flags must name exactly its
forward's arguments, in order.  Values by dtype:
  f32 f64 f16 bf16   standard normal (drawn in f32, then cast)
  i64 i32 i8         uniform in [0, BOUND): the spec's `:BOUND` suffix, else --vocab
                     (an integer input with neither is an error)
  i1                 bool, uniform 0 / 1
--padding NAME=VALUE ends every row of integer input NAME (along its last dim) in VALUE from a
random position on, keeping at least its first element: padded labels, as Hugging Face's -100
that the loss ignores.
Values are reproducible: one torch.Generator seeded with --seed draws the whole [S, ...] tensor
of each input, input by input in flag order.
"""

import argparse
import re
import sys

import torch
from safetensors.torch import save_file

DTYPES = {
    "f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
    "i64": torch.int64, "i32": torch.int32, "i8": torch.int8, "i1": torch.bool,
}
SPEC_RE = re.compile(r"^([^=]+)=([a-z0-9]+)\[([0-9,\s]*)\](?::([0-9]+))?$")


class InputSpec:
    def __init__(self, name, dtype, shape, bound):
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.bound = bound  # None: --vocab's


def parse_input(text):
    """Parses NAME=DTYPE[D0,D1,...][:BOUND] (an empty [] is a 0-d input)."""
    match = SPEC_RE.match(text.strip())
    if not match or match.group(2) not in DTYPES:
        raise argparse.ArgumentTypeError(
            "bad input spec %r: expected NAME=DTYPE[D0,D1,...][:BOUND] with DTYPE one of %s"
            % (text, " ".join(DTYPES)))
    dims = [int(d) for d in match.group(3).split(",") if d.strip()]
    bound = int(match.group(4)) if match.group(4) else None
    if bound == 0:
        raise argparse.ArgumentTypeError("bad input spec %r: BOUND must be >= 1" % text)
    return InputSpec(match.group(1), DTYPES[match.group(2)], dims, bound)


def check_against_model(model_path, specs):
    """Fails unless the specs name exactly MODEL.pt's forward arguments, in order."""
    model = torch.jit.load(model_path, map_location="cpu")
    names = [arg.name for arg in model.forward.schema.arguments[1:]]  # [0] is self
    given = [spec.name for spec in specs]
    for i in range(max(len(names), len(given))):
        want = names[i] if i < len(names) else "(nothing)"
        got = given[i] if i < len(given) else "(nothing)"
        if want != got:
            raise ValueError("forward argument %d of %s is %s, but --input %d is %s (the forward "
                             "takes: %s)" % (i + 1, model_path, want, i + 1, got,
                                             ", ".join(names)))


def make_batches(specs, steps, seed, vocab, padding=()):
    """{name: tensor [steps, *shape]} for every spec, drawn in spec order, then padded."""
    gen = torch.Generator().manual_seed(seed)
    batches = {}
    for spec in specs:
        shape = [steps] + spec.shape
        if spec.dtype.is_floating_point:
            batches[spec.name] = torch.randn(shape, generator=gen).to(spec.dtype)
        elif spec.dtype == torch.bool:
            batches[spec.name] = torch.randint(0, 2, shape, generator=gen).to(torch.bool)
        else:
            bound = spec.bound if spec.bound is not None else vocab
            if bound is None:
                raise ValueError("integer input %s needs a bound: --input %s=...:BOUND or --vocab V"
                                 % (spec.name, spec.name))
            batches[spec.name] = torch.randint(0, bound, shape, generator=gen, dtype=spec.dtype)
    for name, value in padding:
        batch = batches.get(name)
        if batch is None or batch.dtype.is_floating_point or batch.dtype == torch.bool \
                or batch.dim() < 2:
            raise ValueError("--padding %s=%d: %s is not an integer input of rank >= 1"
                             % (name, value, name))
        length = batch.shape[-1]
        starts = torch.randint(1, length + 1, batch.shape[:-1] + (1,), generator=gen)
        batch[torch.arange(length).expand_as(batch) >= starts] = value
    return batches


def parse_padding(text):
    name, _, value = text.partition("=")
    try:
        return name, int(value)
    except ValueError:
        raise argparse.ArgumentTypeError("bad --padding %r: expected NAME=INTEGER" % text)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Write a safetensors batch file ([S, ...] per forward input).")
    parser.add_argument("model", metavar="MODEL.pt", nargs="?",
                        help="TorchScript model: the --input names must be its forward's, in order")
    parser.add_argument("--input", dest="inputs", type=parse_input, action="append",
                        required=True, metavar="NAME=DTYPE[D0,...][:BOUND]",
                        help="one forward argument, in forward order (export.py's syntax, "
                             "optionally with the bound of an integer input)")
    parser.add_argument("--steps", type=int, required=True, help="number of batches S (>= 1)")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    parser.add_argument("--vocab", type=int,
                        help="bound of the integer inputs without :BOUND: values in [0, V)")
    parser.add_argument("--padding", type=parse_padding, action="append", default=[],
                        metavar="NAME=VALUE",
                        help="end each row of NAME in VALUE from a random position on")
    parser.add_argument("-o", "--out", required=True, help="output .safetensors file")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    if args.vocab is not None and args.vocab < 1:
        parser.error("--vocab must be >= 1")
    names = [spec.name for spec in args.inputs]
    if len(set(names)) != len(names):
        parser.error("an input is given twice: %s" % ", ".join(names))

    try:
        if args.model is not None:
            check_against_model(args.model, args.inputs)
        batches = make_batches(args.inputs, args.steps, args.seed, args.vocab, args.padding)
    except (ValueError, RuntimeError) as e:
        print("make_batches.py: error: %s" % e, file=sys.stderr)
        return 1
    save_file(batches, args.out, metadata={"seed": str(args.seed)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
