"""Shared helpers for the test-model exporters.

Every model family module exposes ``SPECS``: a list of :class:`ModelSpec`.  A spec knows how to
build the eager model (with a fixed seed), which forward inputs it takes (in forward-argument
order, with static shapes) and which export modes it supports.
"""

from typing import Callable, List, Optional, Sequence

import torch
import torch.nn as nn

MODEL_SEED = 0  # torch.manual_seed() used before building every model
INPUT_SEED = 1  # seed of the generator used for example / check inputs

DTYPE_NAMES = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.bool: "i1",
}


class InputSpec:
    """One forward input.

    kind:
      "randn"   normal floats
      "int"     uniform integers in [low, high)
      "mask"    0/1 attention mask: 1s, then a run of trailing 0s that differs per batch row
                (every row keeps at least one 1)
      "mlm"     MLM labels: uniform in [low, high), about half of them set to -100 (ignored)
    """

    def __init__(self, name: str, dtype: torch.dtype, shape: Sequence[int], kind: str = "randn",
                 low: int = 0, high: int = 0):
        self.name = name
        self.dtype = dtype
        self.shape = list(shape)
        self.kind = kind
        self.low = low
        self.high = high

    def flag(self) -> str:
        return "--input %s=%s[%s]" % (self.name, DTYPE_NAMES[self.dtype],
                                      ",".join(str(d) for d in self.shape))

    def make(self, gen: torch.Generator) -> torch.Tensor:
        if self.kind == "randn":
            return torch.randn(self.shape, generator=gen, dtype=self.dtype)
        if self.kind == "int":
            return torch.randint(self.low, self.high, self.shape, generator=gen, dtype=self.dtype)
        if self.kind == "mask":
            batch, seq = self.shape
            mask = torch.ones(self.shape, dtype=self.dtype)
            for b in range(batch):
                n_pad = int(torch.randint(0, seq // 2, [1], generator=gen)) + b
                n_pad = min(n_pad, seq - 1)
                if n_pad:
                    mask[b, seq - n_pad:] = 0
            return mask
        if self.kind == "mlm":
            labels = torch.randint(self.low, self.high, self.shape, generator=gen, dtype=self.dtype)
            ignore = torch.rand(self.shape, generator=gen) < 0.5
            ignore.view(-1)[0] = False  # at least one real label, so the mean loss is finite
            return labels.masked_fill(ignore, -100)
        raise ValueError("unknown input kind " + self.kind)


class ModelSpec:
    def __init__(self, name: str, build: Callable[[], nn.Module], inputs: List[InputSpec],
                 modes: Sequence[str] = ("script", "trace"), mode_error: Optional[str] = None,
                 requires: Optional[str] = None,
                 post_save: Optional[Callable[[str], None]] = None):
        self.name = name
        self._build = build
        self.inputs = inputs
        self.modes = tuple(modes)
        self.mode_error = mode_error  # message used when an unsupported mode is requested
        self.requires = requires  # Python package the builder needs (checked by export.py)
        self.post_save = post_save  # called with the path after torch.jit.save

    def build(self, train: bool = False) -> nn.Module:
        torch.manual_seed(MODEL_SEED)
        model = self._build()
        model.train(train)
        return model

    def example_inputs(self, seed: int = INPUT_SEED) -> List[torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        return [inp.make(gen) for inp in self.inputs]

    def inputs_line(self) -> str:
        return " ".join(inp.flag() for inp in self.inputs)


def init_params_(module: nn.Module, std: float = 0.1) -> None:
    """Deterministic random init for the hand-written models (call after torch.manual_seed).

    Unlike Hugging Face's init, biases and norm weights are random too (not 0 / 1), so a
    compiler that drops a bias or a norm scale gets a visibly wrong answer.
    """
    with torch.no_grad():
        for name, p in module.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            is_norm = "norm" in name.lower() or ".ln_" in name or name.startswith("ln_")
            if p.dim() == 1 and is_norm and leaf == "weight":
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.normal_(0.0, std)
