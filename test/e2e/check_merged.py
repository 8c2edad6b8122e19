#!/usr/bin/python3
"""Load slapo-merge's state_dict into a TorchScript model and compute one step's loss.

  PYTHONPATH=third_party/.pydeps /usr/bin/python3 test/e2e/check_merged.py MODEL.pt \\
      --weights merged.safetensors --batches batches.safetensors --step N --out-json FILE

The merged file must be a complete state_dict of the model: load_state_dict(strict=True) takes
it, tied tensors included under each of their names.  The forward then runs on the batch that
training step N uses, (N - 1) mod S as in torch_train.py, and FILE gets one --log-json line
{"step": N, "loss": L, "lr": 0}: what a compiled program's `--resume CKPT --steps N
--forward-only --log-json` writes for step N, so that compare.py can compare the two.
"""

import argparse
import json
import sys

import torch
from safetensors.torch import load_file

from torch_train import TrainError, as_loss, forward_input_names, load_batches


def check(args):
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    model = torch.jit.load(args.model, map_location="cpu")
    merged = load_file(args.weights)
    model.load_state_dict(merged, strict=True)
    # A script module's load_state_dict must have reached the tensors the forward uses.
    for name, tensor in model.state_dict().items():
        if not torch.equal(tensor, merged[name]):
            raise TrainError("%s: %s was not loaded into the model" % (args.weights, name))
    names = forward_input_names(model)
    batches, num_batches = load_batches(args.batches, names)
    batch = (args.step - 1) % num_batches
    with torch.no_grad():
        loss = as_loss(model(*[batches[name][batch] for name in names])).item()
    print("step %d (batch %d): loss %.9g with %s" % (args.step, batch, loss, args.weights))
    with open(args.out_json, "w") as f:
        f.write(json.dumps({"step": args.step, "loss": loss, "lr": 0.0}) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="the TorchScript model")
    parser.add_argument("--weights", required=True, help="slapo-merge's safetensors file")
    parser.add_argument("--batches", required=True, help="make_batches.py's batch file")
    parser.add_argument("--step", type=int, required=True, help="the training step (1-based)")
    parser.add_argument("--out-json", required=True, help="where the loss goes")
    args = parser.parse_args()
    try:
        check(args)
    except (TrainError, RuntimeError) as e:
        sys.exit("check_merged.py: error: %s" % e)


if __name__ == "__main__":
    main()
