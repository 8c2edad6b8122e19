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
        return torch.cumprod(x, dim=1)


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
# traced_size:     a size computed from the data of an input, which the tracer turns into an
#                  aten::Int that has no Python line of its own (a size computed from sizes
#                  alone imports: zoo_ops.py's size_from_positions).
# In-place writes slapoc cannot model exactly, each an error naming the op, its module and
# its Python line rather than a model that computes something else:
# writes_parameter: updates a trained parameter in forward (buffers may be written: the step
#                  updates them; parameters only the optimizer updates).
# writes_diagonal: writes run-time values through diagonal(), a view that slicing, indexing,
#                  view, reshape, permute and expand do not describe.
# stale_diagonal:  reads a diagonal() view after its tensor was written at run time.
# writes_out:      writes an `out=` argument.


class TracedSize(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first = x[0, 0]
        length = (first > 0).long() + 3
        return torch.zeros(x.shape[0], length) + x.sum()


class WritesParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.scale.add_(1)
        return x * self.scale


class WritesDiagonal(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        square = torch.zeros(4, 4)
        square.diagonal().add_(x[0])
        return square


class StaleDiagonal(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        square = torch.zeros(4, 4)
        diagonal = square.diagonal()
        square[0] = x[0]
        return diagonal * 2


class WritesOut(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result = torch.zeros(2, 4)
        torch.neg(x, out=result)
        return result


X = [InputSpec("x", torch.float32, [2, 4])]

SPECS = [
    ModelSpec("unsupported", Unsupported, [InputSpec("x", torch.float32, [2, 4])]),
    ModelSpec("data_dependent", DataDependent, [InputSpec("x", torch.float32, [2, 4])],
              modes=("script",), mode_error="data_dependent is scripted only: tracing "
              "would freeze its data-dependent branch"),
    ModelSpec("traced_size", TracedSize, X, modes=("trace",),
              mode_error="traced_size is traced only: it is about nodes the tracer adds"),
    ModelSpec("writes_parameter", WritesParameter, X, modes=("script",),
              mode_error="writes_parameter is scripted only: tracing runs its forward, and "
              "PyTorch refuses the in-place write of a leaf that requires grad"),
    ModelSpec("writes_diagonal", WritesDiagonal, X),
    ModelSpec("stale_diagonal", StaleDiagonal, X),
    ModelSpec("writes_out", WritesOut, X, modes=("script",),
              mode_error="writes_out is scripted only: tracing records no out= argument"),
]
