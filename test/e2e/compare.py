#!/usr/bin/python3
"""Compare a compiled program's training run with PyTorch's (torch_train.py).

  compare.py --reference REF.json --run LOG.json [--rtol 1e-4] [--steps A:B] [--exact]
      [--grads REF.safetensors RUN.safetensors [--grad-rtol 1e-4]]
      [--weights REF.safetensors RUN.safetensors] [--skip-grads REGEX]

REF.json is torch_train.py's {"losses": [...], "lrs": [...]}, or another run's --log-json
file (one JSON object per line); LOG.json is a --log-json file.  Losses and learning rates of
the steps both cover (or --steps A:B, 1-based and inclusive) must agree within relative
--rtol, or bit for bit with --exact.  Gradients agree when, for every tensor,
max|run - ref| <= rtol * max(max|ref|, 1e-4 * the largest max|ref| of all tensors): an error
relative to the tensor's scale, so that entries near zero do not dominate.  --skip-grads leaves
out the gradients whose names match REGEX (ones that are zero but for rounding, to be checked
in another call with a looser tolerance).  --weights compares
two files of final parameters and buffers (--save-weights) the same way, within --grad-rtol.  Prints the worst offender; exit status 1 on any mismatch.
"""

import argparse
import json
import re
import sys


def load_run(path):
    """{step: (loss, lr)} from a reference JSON or a --log-json file."""
    with open(path) as f:
        text = f.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict) and "losses" in data:
        return {i + 1: (loss, lr) for i, (loss, lr) in enumerate(zip(data["losses"], data["lrs"]))}
    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    return {r["step"]: (r["loss"], r["lr"]) for r in records}


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def compare_losses(args):
    reference, run = load_run(args.reference), load_run(args.run)
    steps = sorted(set(reference) & set(run))
    if args.steps:
        first, last = (int(s) for s in args.steps.split(":"))
        wanted = list(range(first, last + 1))
        missing = [s for s in wanted if s not in steps]
        if missing:
            sys.exit("compare.py: error: steps %s are missing from a run" % missing)
        steps = wanted
    if not steps:
        sys.exit("compare.py: error: the runs have no step in common")
    ok = True
    for step in steps:
        (ref_loss, ref_lr), (loss, lr) = reference[step], run[step]
        if args.exact:
            good = ref_loss == loss and ref_lr == lr
        else:
            good = relative(loss, ref_loss) <= args.rtol and relative(lr, ref_lr) <= args.rtol
        print("step %d: loss %.9g vs %.9g (rel %.2e), lr %.9g vs %.9g %s"
              % (step, loss, ref_loss, relative(loss, ref_loss), lr, ref_lr,
                 "ok" if good else "MISMATCH"))
        ok = ok and good
    return ok


def compare_grads(ref_path, run_path, rtol, what="gradient", skip=None):
    from safetensors.numpy import load_file
    reference, run = load_file(ref_path), load_file(run_path)
    if skip:
        reference = {n: t for n, t in reference.items() if not re.search(skip, n)}
        run = {n: t for n, t in run.items() if not re.search(skip, n)}
    if set(reference) != set(run):
        print("%s names differ: only in reference %s, only in run %s"
              % (what, sorted(set(reference) - set(run)), sorted(set(run) - set(reference))))
        return False
    # Some gradients are zero but for rounding (attention's key bias: softmax ignores a shift
    # shared by all keys); they are judged against 1e-4 of the largest gradient.
    floor = 1e-4 * max([float(abs(ref).max()) for ref in reference.values()] + [1e-30])
    worst_name, worst = None, -1.0
    for name, ref in reference.items():
        got = run[name]
        if got.shape != ref.shape:
            print("%s %s: shape %s vs %s" % (what, name, got.shape, ref.shape))
            return False
        scale = max(float(abs(ref).max()), floor)
        error = float(abs(got.astype("float64") - ref.astype("float64")).max()) / scale
        if error > worst:
            worst_name, worst = name, error
    good = worst <= rtol
    print("%ss: %d tensors, worst %s with relative error %.2e (tolerance %.0e) %s"
          % (what, len(reference), worst_name, worst, rtol, "ok" if good else "MISMATCH"))
    return good


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", required=True, help="torch_train.py JSON or a log")
    parser.add_argument("--run", required=True, help="the compiled program's --log-json file")
    parser.add_argument("--rtol", type=float, default=1e-4, help="relative tolerance")
    parser.add_argument("--steps", help="A:B, the steps to compare (default: all in common)")
    parser.add_argument("--exact", action="store_true", help="require bitwise equal losses")
    parser.add_argument("--grads", nargs=2, metavar=("REF", "RUN"),
                        help="gradient files of step 1 (reference, run)")
    parser.add_argument("--grad-rtol", type=float, default=1e-4,
                        help="relative tolerance of gradients (and weights)")
    parser.add_argument("--skip-grads", metavar="REGEX",
                        help="leave out the gradients whose names match REGEX")
    parser.add_argument("--weights", nargs=2, metavar=("REF", "RUN"),
                        help="final parameters and buffers (reference, run)")
    args = parser.parse_args()
    ok = compare_losses(args)
    if args.grads:
        ok = compare_grads(args.grads[0], args.grads[1], args.grad_rtol,
                           skip=args.skip_grads) and ok
    if args.weights:
        ok = compare_grads(args.weights[0], args.weights[1], args.grad_rtol, "weight") and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
