"""Layer norms written out by hand, as ConvNeXt, older BERT ports and many research models write
them, beside nn.LayerNorm: what replace("fused_layernorm") matches (test/e2e/fused_layernorm.test).

  norm_div     (x - u) / sqrt(mean((x - u)^2) + eps), then weight * x + bias  (BERT's old
               BertLayerNorm, ConvNeXt's channels-last LayerNorm)
  norm_rsqrt   (x - u) * rsqrt(var(x, unbiased=False) + eps), weight only, no bias
  norm_module  nn.LayerNorm
and, for the refusals, a norm whose variance is unbiased (it divides by n - 1), which is no
layer norm.
"""

import torch
import torch.nn as nn

from common import InputSpec, ModelSpec, init_params_


class DivLayerNorm(nn.Module):
    """Parameters: weight [d], bias [d]; eps 1e-12 as BERT's."""

    def __init__(self, d: int, eps: float = 1e-12):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))
        self.variance_epsilon = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u = x.mean(-1, keepdim=True)
        s = (x - u).pow(2).mean(-1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.variance_epsilon)
        return self.weight * x + self.bias


class RsqrtLayerNorm(nn.Module):
    """Parameters: weight [d]; no bias."""

    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        centered = x - x.mean(-1, keepdim=True)
        variance = x.var(-1, unbiased=False, keepdim=True)
        return centered * torch.rsqrt(variance + self.eps) * self.weight


class UnbiasedLayerNorm(nn.Module):
    """Not a layer norm: the variance divides by n - 1."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        u = x.mean(-1, keepdim=True)
        variance = x.var(-1, keepdim=True)
        return self.weight * ((x - u) / torch.sqrt(variance + self.eps)) + self.bias


class LayerNorms(nn.Module):
    """x [4, 8, 16] -> linear -> norm_div -> gelu -> linear -> norm_rsqrt -> linear ->
    norm_module -> head; the loss is the mean squared distance to the target [4, 8, 4]."""

    def __init__(self, d: int = 16, unbiased: bool = False):
        super().__init__()
        self.fc1 = nn.Linear(d, 32)
        self.norm_div = UnbiasedLayerNorm(32) if unbiased else DivLayerNorm(32)
        self.fc2 = nn.Linear(32, 24)
        self.norm_rsqrt = RsqrtLayerNorm(24)
        self.fc3 = nn.Linear(24, 24)
        self.norm_module = nn.LayerNorm(24)
        self.head = nn.Linear(24, 4)
        init_params_(self)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.gelu(self.norm_div(self.fc1(x)))
        h = self.norm_rsqrt(self.fc2(h))
        h = self.norm_module(self.fc3(h))
        return (self.head(h) - target).pow(2).mean()


INPUTS = [InputSpec("x", torch.float32, [4, 8, 16]), InputSpec("target", torch.float32, [4, 8, 4])]

SPECS = [
    ModelSpec("layernorms", LayerNorms, INPUTS),
    ModelSpec("layernorms_unbiased", lambda: LayerNorms(unbiased=True), INPUTS),
]
