#!/usr/bin/python3
"""Export one of slapoc's test models to a TorchScript file.

  /usr/bin/python3 test/models/export.py --model NAME --mode {script,trace} [--train] --out FILE.pt
  /usr/bin/python3 test/models/export.py --model NAME --print-inputs
  /usr/bin/python3 test/models/export.py --list

The model is built after torch.manual_seed(0), put in eval mode (or train mode with --train, so
dropout is active) and exported with torch.jit.script or torch.jit.trace (traced on fixed example
inputs).  On success the only output is one stdout line with the forward inputs in the
compiler's flag syntax, in forward-argument order, e.g.
  --input input_ids=i64[2,16] --input labels=i64[2,16]
On failure: one line on stderr starting with "export.py: error:", exit status 1.

The hf_* models need `transformers`: PYTHONPATH=third_party/.pydeps /usr/bin/python3 ...
(see third_party/python-requirements.txt).
"""

import argparse
import importlib
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import bad  # noqa: E402
import bert  # noqa: E402
import gpt2  # noqa: E402
import hf  # noqa: E402
import inplace  # noqa: E402
import layernorms  # noqa: E402
import llama  # noqa: E402
import mlp  # noqa: E402
import weird_names  # noqa: E402
import wideresnet  # noqa: E402
import zoo_ops  # noqa: E402

SPECS = {spec.name: spec
         for module in (mlp, gpt2, bert, llama, weird_names, hf, inplace, bad, zoo_ops,
                        wideresnet, layernorms)
         for spec in module.SPECS}

INSTALL_HINT = ("install it with `/usr/bin/python3 -m pip install --no-deps --target "
                "third_party/.pydeps -r third_party/python-requirements.txt` and run with "
                "PYTHONPATH=third_party/.pydeps")


class ExportError(Exception):
    pass


def check_requirements(spec):
    if spec.requires is None:
        return
    try:
        importlib.import_module(spec.requires)
    except ImportError as e:
        raise ExportError("model %s needs the Python package '%s', which is not importable (%s); %s"
                          % (spec.name, spec.requires, e, INSTALL_HINT))


def export_model(spec, mode, train, out_path):
    """Builds spec's model and writes it to out_path; returns the saved ScriptModule."""
    if mode not in spec.modes:
        raise ExportError("model %s cannot be exported with --mode %s: %s"
                          % (spec.name, mode, spec.mode_error or "unsupported mode"))
    check_requirements(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings etc.: stdout/stderr stay clean
        model = spec.build(train=train)
        if mode == "script":
            exported = torch.jit.script(model)
        else:
            # With dropout active the re-run check of the trace would fail spuriously.
            exported = torch.jit.trace(model, tuple(spec.example_inputs()), check_trace=not train)
    out_dir = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(out_dir, exist_ok=True)
    exported.save(out_path)
    if spec.post_save is not None:
        spec.post_save(out_path)
    return exported


def main(argv=None):
    parser = argparse.ArgumentParser(description="Export a slapoc test model to TorchScript.")
    parser.add_argument("--model", choices=sorted(SPECS), help="model to export")
    parser.add_argument("--mode", choices=("script", "trace"), help="torch.jit.script or trace")
    parser.add_argument("--train", action="store_true", help="export in train mode (dropout on)")
    parser.add_argument("--out", help="output TorchScript file")
    parser.add_argument("--print-inputs", action="store_true",
                        help="only print the --input flags line, export nothing")
    parser.add_argument("--list", action="store_true", help="list the model names and modes")
    args = parser.parse_args(argv)

    if args.list:
        for name in sorted(SPECS):
            print("%s %s" % (name, ",".join(SPECS[name].modes)))
        return 0
    if args.model is None:
        parser.error("--model is required")
    spec = SPECS[args.model]
    if args.print_inputs:
        print(spec.inputs_line())
        return 0
    if args.mode is None or args.out is None:
        parser.error("--mode and --out are required unless --print-inputs is given")
    try:
        export_model(spec, args.mode, args.train, args.out)
    except ExportError as e:
        print("export.py: error: %s" % e, file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - one clear line instead of a traceback
        msg = str(e).strip().splitlines()
        print("export.py: error: exporting %s with --mode %s failed: %s: %s"
              % (spec.name, args.mode, type(e).__name__, msg[0] if msg else ""), file=sys.stderr)
        if os.environ.get("EXPORT_DEBUG"):
            raise
        return 1
    print(spec.inputs_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
