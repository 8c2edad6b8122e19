#!/usr/bin/python3
"""Train a TorchScript model with PyTorch exactly as a slapoc-compiled training program should.

  PYTHONPATH=third_party/.pydeps /usr/bin/python3 test/e2e/torch_train.py MODEL.pt \\
      --batches batches.safetensors --steps N --optimizer sgd|adamw --lr F \\
      [--momentum F] [--weight-decay F] [--beta1 F --beta2 F --eps F] [--grad-clip F] \\
      [--lr-schedule constant|warmup_cosine] [--warmup-steps W] [--threads T] \\
      [--load-weights W.safetensors] [--save-grads G.safetensors] [--save-weights W.safetensors] \\
      [--dp N] [--autocast bf16] [--cross-entropy-targets NAME] --out-json FILE

This is the reference the compiled program's losses, learning rates, gradients and weights are
compared against.  The contract, step by step:

Model.  torch.jit.load(MODEL.pt), float32 parameters.  The module keeps the mode it was saved
in (neither .train() nor .eval() is called): slapoc folds each module's `training` flag as
saved, so an eval-mode export trains without dropout in both.  The trained parameters are
model.named_parameters() (state_dict names, in module order; a tied parameter appears once,
under its first name).  --load-weights replaces their values (and those of any buffers in the
file) with a safetensors file's, e.g. a compiled program's weights.safetensors.

Inputs.  The forward's arguments (its TorchScript schema, `self` excluded) are passed
positionally in schema order; each comes from the batch file's tensor of that name (see
make_batches.py): step s (1-based) uses batch (s - 1) mod S, S being the smallest leading
dimension of the inputs' tensors.

Step s = 1..N:
  loss = model(*inputs)          a 0-d float tensor; of a tuple, element 0 (with --autocast
                                 bf16: under torch.autocast("cpu", torch.bfloat16), PyTorch's
                                 CPU mixed precision, the reference of train(precision="bf16").
                                 TorchScript's own autocast pass is turned off so that the
                                 dispatcher's applies to the model's ops.  It knows ops by name:
                                 a traced model's aten::_convolution stays f32 where a scripted
                                 one's aten::conv2d runs in bf16, so pass a scripted export
                                 (with --load-weights of the traced one's state).)
                                 With --cross-entropy-targets NAME (train(loss=
                                 "cross_entropy")), the forward returns logits [..., C] and
                                 loss = F.cross_entropy(logits.flatten(0, -2),
                                 NAME.flatten(), ignore_index=-100), NAME being the batch
                                 file's tensor of that name, not a forward argument.
  record loss.item()             before the update
  loss.backward()
  (with --dp N: as PyTorch DDP trains N replicas without SyncBatchNorm, each on its 1/N of the
  batch's rows: the forward and backward run on each share in turn, the recorded loss is the
  mean of their losses and the gradients are the mean of theirs.  A forward in training mode
  updates buffers (BatchNorm's running statistics) from its own share alone; as DDP broadcasts
  rank 0's buffers before each forward, the model keeps those of share 0.)
  --save-grads (step 1 only)     every parameter's .grad, unclipped (zeros if it has none)
  clip_grad_norm_(params, C)     if --grad-clip C > 0: grads *= min(1, C / (norm + 1e-6))
  record the lr of the step      optimizer.param_groups[0]["lr"]
  optimizer.step()               torch.optim.SGD(lr, momentum, weight_decay) or
                                 torch.optim.AdamW(lr, (beta1, beta2), eps, weight_decay),
                                 foreach=False; weight decay defaults to 0 (slapoc's default,
                                 not AdamW's 0.01)
  scheduler.step()               LambdaLR: constant, or Hugging Face's
                                 get_cosine_schedule_with_warmup with W warmup steps over N:
                                 c / max(1, W) if c < W, else
                                 max(0, 0.5 * (1 + cos(pi * (c - W) / max(1, N - W)))),
                                 c = optimizer steps taken before this one (0 at step 1)
  optimizer.zero_grad(set_to_none=True)
As in slapoc's train(...), an option of the other optimizer or schedule is an error.

Determinism: torch.manual_seed(0), torch.use_deterministic_algorithms(True) and --threads
(default 1: CPU reductions, hence the losses, can differ in the last bits between thread
counts).

Outputs.  --out-json: {"losses": [step 1..N], "lrs": [step 1..N], "params": [names, in
order], "num_params": their total number of elements}.  --save-weights: the final parameters
and buffers (state_dict) with each tied tensor once, under its first name, as the compiled
program's --save-weights writes them.
"""

import argparse
import json
import math
import sys

import torch
from safetensors.torch import load_file, save_file


class TrainError(Exception):
    pass


def lr_multiplier(schedule, warmup, steps):
    """LambdaLR's multiplier of the base lr, given c = optimizer steps already taken."""
    if schedule == "constant":
        return lambda c: 1.0

    def warmup_cosine(c):
        if c < warmup:
            return c / max(1, warmup)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * (c - warmup) / max(1, steps - warmup))))
    return warmup_cosine


def storage_key(tensor):
    return (tensor.data_ptr(), tensor.dtype, tuple(tensor.shape), tuple(tensor.stride()))


def unique_state(model):
    """state_dict entries with each tied tensor once, under its first name."""
    seen = set()
    state = {}
    for name, tensor in model.state_dict().items():
        key = storage_key(tensor)
        if key not in seen:
            seen.add(key)
            state[name] = tensor
    return state


def load_weights(model, path):
    """Copies path's tensors into the model; every parameter must be given (under any name)."""
    weights = load_file(path)
    state = model.state_dict()
    unknown = sorted(set(weights) - set(state))
    if unknown:
        raise TrainError("%s: not parameters or buffers of the model: %s"
                         % (path, ", ".join(unknown)))
    loaded = set()
    with torch.no_grad():
        for name, value in weights.items():
            target = state[name]
            if value.dtype != target.dtype or value.shape != target.shape:
                raise TrainError("%s: %s is %s%s, the model's is %s%s"
                                 % (path, name, value.dtype, list(value.shape),
                                    target.dtype, list(target.shape)))
            target.copy_(value)
            loaded.add(storage_key(target))
    missing = [name for name, p in model.named_parameters() if storage_key(p) not in loaded]
    if missing:
        raise TrainError("%s lacks parameters: %s" % (path, ", ".join(missing)))


def forward_input_names(model):
    names = []
    for arg in model.forward.schema.arguments[1:]:  # [0] is self
        if str(arg.type) != "Tensor":
            raise TrainError("forward argument %s is a %s; only tensor inputs are supported"
                             % (arg.name, arg.type))
        names.append(arg.name)
    return names


def load_batches(path, names):
    """({name: tensor [S_name, ...]}, S) for the forward's inputs."""
    batches = load_file(path)
    missing = [name for name in names if name not in batches]
    if missing:
        raise TrainError("%s has no batches for forward input(s) %s (it has: %s)"
                         % (path, ", ".join(missing), ", ".join(sorted(batches))))
    for name in names:
        if batches[name].dim() == 0 or batches[name].shape[0] == 0:
            raise TrainError("%s: %s is %s; batches must be [S, ...] with S >= 1"
                             % (path, name, list(batches[name].shape)))
    return {name: batches[name] for name in names}, min(batches[n].shape[0] for n in names)


def as_loss(output):
    if isinstance(output, (tuple, list)):
        output = output[0]
    if not isinstance(output, torch.Tensor) or output.dim() != 0 or \
            not output.is_floating_point():
        raise TrainError("the forward must return a 0-d float loss (or a tuple starting with "
                         "one), not %s" % (list(output.shape) if isinstance(output, torch.Tensor)
                                           else type(output).__name__))
    return output


def replica_steps(model, inputs, replicas, autocast, cross_entropy):
    """Forward and backward of `replicas` data-parallel replicas, each on its share of the
    inputs' rows, as DDP runs them: the gradients averaged, the buffers of replica 0 kept.
    With `cross_entropy` the last input is the targets of the loss of the logits the forward
    returns.  Returns the mean loss."""
    if any(tensor.dim() == 0 or tensor.shape[0] % replicas for tensor in inputs):
        raise TrainError("--dp %d does not divide the batch dim of every input" % replicas)
    shares = zip(*[tensor.chunk(replicas) for tensor in inputs])
    total, kept = 0.0, None
    for replica, share in enumerate(shares):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            if cross_entropy:
                logits = model(*share[:-1])
                loss = torch.nn.functional.cross_entropy(
                    logits.flatten(0, -2), share[-1].flatten(), ignore_index=-100)
            else:
                loss = as_loss(model(*share))
        total += loss.item()
        (loss / replicas if replicas > 1 else loss).backward()
        if replica == 0:
            kept = {name: buffer.clone() for name, buffer in model.named_buffers()}
    with torch.no_grad():
        for name, buffer in model.named_buffers():
            buffer.copy_(kept[name])
    return total / replicas


def make_optimizer(args, params):
    if args.optimizer == "sgd":
        return torch.optim.SGD(params, lr=args.lr, momentum=args.momentum or 0.0,
                               weight_decay=args.weight_decay, foreach=False)
    betas = (0.9 if args.beta1 is None else args.beta1, 0.999 if args.beta2 is None else args.beta2)
    return torch.optim.AdamW(params, lr=args.lr, betas=betas,
                             eps=1e-8 if args.eps is None else args.eps,
                             weight_decay=args.weight_decay, foreach=False)


def train(args):
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(args.threads)
    if args.autocast:
        torch._C._jit_set_autocast_mode(False)
    model = torch.jit.load(args.model, map_location="cpu")
    if args.load_weights:
        load_weights(model, args.load_weights)
    named = list(model.named_parameters())
    wrong = ["%s (%s)" % (n, p.dtype) for n, p in named if p.dtype != torch.float32]
    if wrong:
        raise TrainError("parameters must be float32: %s" % ", ".join(wrong))
    params = [p for _, p in named]
    names = forward_input_names(model)
    if args.cross_entropy_targets:
        names.append(args.cross_entropy_targets)
    batches, num_batches = load_batches(args.batches, names)

    optimizer = make_optimizer(args, params)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lr_multiplier(args.lr_schedule, args.warmup_steps or 0, args.steps))
    losses, lrs = [], []
    for step in range(1, args.steps + 1):
        batch = (step - 1) % num_batches
        inputs = [batches[name][batch] for name in names]
        losses.append(replica_steps(model, inputs, args.dp, args.autocast == "bf16",
                                    args.cross_entropy_targets is not None))
        if step == 1 and args.save_grads:
            save_file({n: (p.grad if p.grad is not None else torch.zeros_like(p))
                       .detach().clone().contiguous() for n, p in named}, args.save_grads)
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, args.grad_clip)
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)

    if args.save_weights:
        save_file({n: t.detach().clone().contiguous() for n, t in unique_state(model).items()},
                  args.save_weights)
    with open(args.out_json, "w") as f:
        json.dump({"losses": losses, "lrs": lrs, "params": [n for n, _ in named],
                   "num_params": sum(p.numel() for p in params)}, f)
        f.write("\n")


def check_options(parser, args):
    """Rejects what slapoc's train(...) rejects: options of the other optimizer or schedule."""
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    if not (math.isfinite(args.lr) and args.lr > 0):
        parser.error("--lr must be positive")
    if args.grad_clip < 0 or args.weight_decay < 0:
        parser.error("--grad-clip and --weight-decay must not be negative")
    if args.threads < 1:
        parser.error("--threads must be >= 1")
    if args.dp < 1:
        parser.error("--dp must be >= 1")
    if args.optimizer == "adamw" and args.momentum is not None:
        parser.error("--momentum is an sgd option")
    if args.optimizer == "sgd" and (args.beta1, args.beta2, args.eps) != (None, None, None):
        parser.error("--beta1, --beta2 and --eps are adamw options")
    if args.lr_schedule == "constant" and args.warmup_steps is not None:
        parser.error("--warmup-steps is a warmup_cosine option")
    if args.warmup_steps is not None and args.warmup_steps < 0:
        parser.error("--warmup-steps must not be negative")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="PyTorch reference training run of a TorchScript loss model (JSON out).")
    parser.add_argument("model", metavar="MODEL.pt", help="TorchScript model returning the loss")
    parser.add_argument("--batches", required=True,
                        help="safetensors batch file ([S, ...] per forward input)")
    parser.add_argument("--steps", type=int, required=True, help="number of training steps N")
    parser.add_argument("--optimizer", choices=("sgd", "adamw"), required=True, help="optimizer")
    parser.add_argument("--lr", type=float, required=True, help="peak learning rate")
    parser.add_argument("--momentum", type=float, help="sgd momentum (default 0)")
    parser.add_argument("--weight-decay", type=float, default=0.0,
                        help="weight decay: L2 for sgd, decoupled for adamw (default 0)")
    parser.add_argument("--beta1", type=float, help="adamw beta1 (default 0.9)")
    parser.add_argument("--beta2", type=float, help="adamw beta2 (default 0.999)")
    parser.add_argument("--eps", type=float, help="adamw eps (default 1e-8)")
    parser.add_argument("--grad-clip", type=float, default=0.0,
                        help="largest global gradient L2 norm; 0 (default) clips nothing")
    parser.add_argument("--lr-schedule", choices=("constant", "warmup_cosine"),
                        default="constant", help="learning-rate schedule (default constant)")
    parser.add_argument("--warmup-steps", type=int,
                        help="warmup steps W of warmup_cosine (default 0)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--load-weights", metavar="FILE.safetensors",
                        help="initial weights instead of MODEL.pt's")
    parser.add_argument("--save-grads", metavar="FILE.safetensors",
                        help="write step 1's gradients (before clipping), by parameter name")
    parser.add_argument("--save-weights", metavar="FILE.safetensors",
                        help="write the final parameters and buffers (tied ones once)")
    parser.add_argument("--dp", type=int, default=1,
                        help="train as N data-parallel replicas would, each on its share of "
                             "every batch (default 1)")
    parser.add_argument("--autocast", choices=("bf16",),
                        help="run the forward under PyTorch's CPU autocast to bfloat16")
    parser.add_argument("--cross-entropy-targets", metavar="NAME",
                        help="the forward returns logits; the loss is their cross-entropy "
                             "against the batch file's NAME")
    parser.add_argument("--out-json", required=True, help="where to write losses, lrs, params")
    args = parser.parse_args(argv)
    check_options(parser, args)
    try:
        train(args)
    except TrainError as e:
        print("torch_train.py: error: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
