#!/usr/bin/python3
"""Self-check of the test-model exporters.

  PYTHONPATH=third_party/.pydeps /usr/bin/python3 test/models/selfcheck.py [--keep DIR] [--node-kinds]

For every model and every supported mode this runs the export.py CLI into a temporary directory,
then checks that
  * the CLI printed exactly the --input line on stdout and nothing on stderr;
  * torch.jit.load accepts the file, parameter / buffer / submodule names survive, tied weights
    are still one tensor;
  * forward on several random valid inputs matches the eager model (eval mode) within 1e-6;
  * the --train export loads, is in training mode and (for models with dropout) is random;
  * unsupported modes and a missing `transformers` fail with exit 1 and one stderr line.
When transformers is importable it also loads the hand-written gpt2 / bert / llama weights into
transformers' GPT2LMHeadModel / BertForMaskedLM / LlamaForCausalLM with strict=True (so the
parameter names are exactly HF's) and compares the losses.
--node-kinds prints the distinct node kinds of each inlined graph.
Ends with a line "N passed, N failed"; exit status 1 if anything failed.
"""

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import export  # noqa: E402

EXPORT = os.path.join(HERE, "export.py")
TOL = 1e-6
DROPOUT_MODELS = {"gpt2", "bert", "hf_gpt2", "hf_bert"}
TIED = {  # model -> pairs of state_dict keys that must be one tensor
    "gpt2": [("transformer.wte.weight", "lm_head.weight")],
    "bert": [("bert.embeddings.word_embeddings.weight", "cls.predictions.decoder.weight"),
             ("cls.predictions.bias", "cls.predictions.decoder.bias")],
}


class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.skipped = 0

    def check(self, name, fn):
        try:
            detail = fn()
        except Exception as e:  # noqa: BLE001
            self.failed += 1
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e))
            if os.environ.get("SELFCHECK_DEBUG"):
                traceback.print_exc()
            return False
        self.passed += 1
        print("PASS %s%s" % (name, (": " + detail) if detail else ""))
        return True

    def skip(self, name, why):
        self.skipped += 1
        print("SKIP %s: %s" % (name, why))


def run_cli(args, env=None):
    return subprocess.run([sys.executable, EXPORT] + args, capture_output=True, text=True, env=env)


def node_kinds(graph):
    kinds = set()

    def walk(block):
        for node in block.nodes():
            kinds.add(node.kind())
            for sub in node.blocks():
                walk(sub)

    walk(graph)
    return sorted(kinds)


def inlined_graph(module):
    graph = module.forward.graph.copy()
    torch._C._jit_pass_inline(graph)
    return graph


def run_model(module, inputs):
    with torch.no_grad():
        return module(*inputs)


def check_export(spec, mode, path):
    proc = run_cli(["--model", spec.name, "--mode", mode, "--out", path])
    if proc.returncode != 0:
        raise AssertionError("export failed (rc %d): %s" % (proc.returncode, proc.stderr.strip()))
    if proc.stdout != spec.inputs_line() + "\n":
        raise AssertionError("unexpected stdout %r" % proc.stdout)
    if proc.stderr:
        raise AssertionError("unexpected stderr %r" % proc.stderr)


def check_matches_eager(spec, path):
    loaded = torch.jit.load(path)
    eager = spec.build(train=False)
    if loaded.training:
        raise AssertionError("exported module is in training mode")
    # Every path to a module: one reached by two paths (T5's shared embedding) is one object
    # in eager PyTorch, two in TorchScript.
    names = lambda m: ([n for n, _ in m.named_parameters()], [n for n, _ in m.named_buffers()],  # noqa: E731
                       [n for n, _ in m.named_modules(remove_duplicate=False)])
    if names(loaded) != names(eager):
        raise AssertionError("names differ: %r vs %r" % (names(loaded), names(eager)))
    sd = loaded.state_dict()
    for a, b in TIED.get(spec.name, []):
        if sd[a].data_ptr() != sd[b].data_ptr():
            raise AssertionError("%s and %s are no longer one tensor" % (a, b))
    worst = 0.0
    for seed in (1, 2, 3):
        inputs = spec.example_inputs(seed)
        want = run_model(eager, inputs)
        got = run_model(loaded, inputs)
        if got.shape != want.shape or got.dtype != want.dtype:
            raise AssertionError("output %s %s, eager %s %s" % (got.dtype, list(got.shape),
                                                                 want.dtype, list(want.shape)))
        if not torch.isfinite(want).all():
            raise AssertionError("eager output is not finite")
        worst = max(worst, (got - want).abs().max().item())
    if worst > TOL:
        raise AssertionError("max |exported - eager| = %g > %g" % (worst, TOL))
    return "max abs diff %.3g, output %s%s" % (worst, str(want.dtype).replace("torch.", ""),
                                              list(want.shape))


def check_train_export(spec, mode, path):
    proc = run_cli(["--model", spec.name, "--mode", mode, "--train", "--out", path])
    if proc.returncode != 0 or proc.stderr or proc.stdout != spec.inputs_line() + "\n":
        raise AssertionError("export failed (rc %d): %s" % (proc.returncode, proc.stderr.strip()))
    loaded = torch.jit.load(path)
    if not loaded.training:
        raise AssertionError("--train export is not in training mode")
    inputs = spec.example_inputs(1)
    outs = [run_model(loaded, inputs) for _ in range(3)]
    if not all(torch.isfinite(o).all() for o in outs):
        raise AssertionError("non-finite output")
    if spec.name in DROPOUT_MODELS:
        if all(torch.equal(outs[0], o) for o in outs[1:]):
            raise AssertionError("dropout seems inactive: three runs gave identical outputs")
        if not any(k == "aten::dropout" for k in node_kinds(inlined_graph(loaded))):
            raise AssertionError("no aten::dropout in the graph")
    return None


def check_fails(args, must_contain, env=None):
    proc = run_cli(args, env=env)
    if proc.returncode != 1:
        raise AssertionError("expected exit 1, got %d (stderr %r)" % (proc.returncode, proc.stderr))
    lines = proc.stderr.strip().splitlines()
    if len(lines) != 1 or must_contain not in lines[0] or proc.stdout:
        raise AssertionError("expected one stderr line mentioning %r, got %r" % (must_contain,
                                                                                 proc.stderr))
    return lines[0]


def check_weird_getattr_names(path):
    import weird_names
    graph = inlined_graph(torch.jit.load(path))
    got = {n.s("name") for n in graph.nodes() if n.kind() == "prim::GetAttr"}
    missing = [n for n in weird_names.NAMES if n not in got]
    if missing:
        raise AssertionError("GetAttr names missing: %r (have %r)" % (missing, sorted(got)))


def compare_with_hf(name):
    """Loads the hand-written model's weights into the transformers class (strict) and compares."""
    import transformers
    transformers.logging.set_verbosity_error()
    spec = export.SPECS[name]
    ours = spec.build(train=False)
    if name == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=2,
                                      n_head=2, attn_implementation="eager")
        theirs = transformers.GPT2LMHeadModel(cfg)
        call = lambda ids, labels: theirs(input_ids=ids, labels=labels).loss  # noqa: E731
    elif name == "bert":
        cfg = transformers.BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2,
                                      num_attention_heads=2, intermediate_size=64,
                                      max_position_embeddings=32, attn_implementation="eager")
        theirs = transformers.BertForMaskedLM(cfg)
        call = lambda ids, mask, labels: theirs(input_ids=ids, attention_mask=mask,  # noqa: E731
                                                labels=labels).loss
    else:
        cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                                       num_hidden_layers=2, num_attention_heads=4,
                                       num_key_value_heads=2, rms_norm_eps=1e-6,
                                       rope_theta=10000.0, max_position_embeddings=32,
                                       tie_word_embeddings=False, attn_implementation="eager")
        theirs = transformers.LlamaForCausalLM(cfg)
        call = lambda ids, labels: theirs(input_ids=ids, labels=labels).loss  # noqa: E731
    theirs.load_state_dict(ours.state_dict(), strict=True)
    theirs.eval()
    if sorted(theirs.state_dict()) != sorted(ours.state_dict()):
        raise AssertionError("state_dict keys differ")
    worst = 0.0
    for seed in (1, 2, 3):
        inputs = spec.example_inputs(seed)
        with torch.no_grad():
            worst = max(worst, (call(*inputs) - ours(*inputs)).abs().item())
    if worst > 1e-5:
        raise AssertionError("loss differs from transformers by %g" % worst)
    return "state_dict loads strictly into transformers, loss diff %.3g" % worst


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--keep", help="export into this directory instead of a temporary one")
    parser.add_argument("--node-kinds", action="store_true",
                        help="print the distinct node kinds of each inlined graph")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    have_hf = importlib.util.find_spec("transformers") is not None
    res = Results()
    kinds_report = []

    with tempfile.TemporaryDirectory() as tmp:
        out_dir = args.keep or tmp
        os.makedirs(out_dir, exist_ok=True)
        for name in sorted(export.SPECS):
            spec = export.SPECS[name]
            res.check("%s --print-inputs" % name, lambda: _check_print_inputs(spec))
            if spec.requires and not have_hf:
                res.skip(name, "%s is not importable (PYTHONPATH=third_party/.pydeps?)"
                         % spec.requires)
                continue
            for mode in ("script", "trace"):
                path = os.path.join(out_dir, "%s.%s.pt" % (name, mode))
                label = "%s --mode %s" % (name, mode)
                if mode not in spec.modes:
                    res.check(label + " fails cleanly",
                              lambda: check_fails(["--model", name, "--mode", mode, "--out", path],
                                                  "--mode " + mode))
                    continue
                if not res.check(label + " export", lambda: check_export(spec, mode, path)):
                    continue
                res.check(label + " matches eager", lambda: check_matches_eager(spec, path))
                if name == "weird_names":
                    res.check(label + " GetAttr names", lambda: check_weird_getattr_names(path))
                res.check(label + " --train", lambda: check_train_export(
                    spec, mode, os.path.join(out_dir, "%s.%s.train.pt" % (name, mode))))
                if args.node_kinds:
                    kinds_report.append((label, node_kinds(inlined_graph(torch.jit.load(path)))))

        # transformers missing -> one clear line, exit 1
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        probe = subprocess.run([sys.executable, "-c", "import transformers"], env=env,
                               capture_output=True)
        if probe.returncode == 0:
            res.skip("hf_gpt2 without transformers", "transformers is importable without PYTHONPATH")
        else:
            res.check("hf_gpt2 without transformers fails cleanly", lambda: check_fails(
                ["--model", "hf_gpt2", "--mode", "trace", "--out", os.path.join(out_dir, "x.pt")],
                "transformers", env=env))

        for name in ("gpt2", "bert", "llama"):
            label = "%s has Hugging Face's names and numerics" % name
            if have_hf:
                res.check(label, lambda: compare_with_hf(name))
            else:
                res.skip(label, "transformers is not importable")

    for label, kinds in kinds_report:
        print("KINDS %s: %s" % (label, " ".join(kinds)))
    print("%d passed, %d failed, %d skipped" % (res.passed, res.failed, res.skipped))
    return 1 if res.failed else 0


def _check_print_inputs(spec):
    proc = run_cli(["--model", spec.name, "--print-inputs"])
    if proc.returncode != 0 or proc.stderr or proc.stdout != spec.inputs_line() + "\n":
        raise AssertionError("rc %d stdout %r stderr %r" % (proc.returncode, proc.stdout, proc.stderr))
    return proc.stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
