"""Models the frontend must reject, each with a precise diagnostic.

unsupported:     ops slapoc does not import, in two different submodules (all reported in one
                 run, each naming the op, its module path and Python line).
data_dependent:  control flow and a slice bound that depend on tensor values, so no static
                 program exists.
"""

import torch
import torch.nn as nn

from common import InputSpec, ModelSpec


class CumulativeBlock(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=1)


class SortBlock(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sort(x, dim=1)[0] + torch.erfinv(x)


class Unsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = CumulativeBlock()
        self.second = SortBlock()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x))


class DataDependent(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.sum() > 0):
            x = x * 2
        return x[:, : int(x[0, 0])]


# More models the frontend must reject (after the others, whose lines tests name):
# traced_size:     a size computed from run-time data (Mistral's target_length), which the
#                  tracer turns into an aten::Int that has no Python line of its own.


class TracedSize(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[1])
        length = positions[-1] + 1
        return torch.zeros(x.shape[0], length) + x.sum()


X = [InputSpec("x", torch.float32, [2, 4])]

SPECS = [
    ModelSpec("unsupported", Unsupported, [InputSpec("x", torch.float32, [2, 4])]),
    ModelSpec("data_dependent", DataDependent, [InputSpec("x", torch.float32, [2, 4])],
              modes=("script",), mode_error="data_dependent is scripted only: tracing "
              "would freeze its data-dependent branch"),
    ModelSpec("traced_size", TracedSize, X, modes=("trace",),
              mode_error="traced_size is traced only: it is about nodes the tracer adds"),
]
