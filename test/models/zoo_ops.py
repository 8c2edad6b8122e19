"""Ops that Hugging Face's model zoo needs beyond GPT-2, BERT and LLaMA (transformers 4.44),
each written as those models write it, and the forms of them slapoc refuses.

zoo_ops:             tensor indexing of a table (Qwen2's `cos[position_ids]`, here with
                     negative ids too), bool `|`, `&=` and `~` (Mistral's sliding-window mask
                     is ORed in place),
                     elementwise and reduced min and max (T5's relative position buckets),
                     repeat (the causal mask of T5's decoder), cumsum (RoBERTa's position
                     ids, on int32; and on floats, for its gradient), gather along either dim
                     repeat_interleave with and without a dim and stack along a negative dim
                     (GPT-J's rotary embedding)
                     in one trainable model whose loss reaches every parameter.
size_from_positions: a size read from the data of positions that are an arange of a size, which
                     the tracer records as aten::Int of a tensor (as it records Mistral's
                     cache positions): known at compile time all the same.
zoo_ops_unsupported: the forms with no exact lowering, each in a submodule of its own: indexing
                     by a mask (a data-dependent shape), indexing a dim other than the first,
                     bitwise ops on integers, the minimum of integers over dims, min with
                     indices, repeat_interleave by a tensor of repeats, gather of integers.
"""

import torch
import torch.nn as nn

from common import InputSpec, ModelSpec, init_params_


class ZooOps(nn.Module):
    """forward(x f32[2,4], ids i64[2,3] in [0, 2)) -> scalar."""

    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.empty(5, 4))
        self.scale = nn.Parameter(torch.empty(5))
        self.weight = nn.Parameter(torch.empty(4))
        init_params_(self, std=1.0)

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        rows = self.table[ids * 3 - 2] * self.scale[ids].unsqueeze(-1)
        ends = self.scale[torch.tensor([4, 0])]
        keep = (x > 0) | (x < -1)
        keep &= ~(x > 1)
        bounded = torch.where(keep, torch.min(x, self.weight), torch.max(x, -self.weight))
        tiled = bounded.repeat(2, 1, 2)
        positions = torch.cumsum((ids > 0).int(), dim=1).type_as(ids)
        running = torch.cumsum(bounded, dim=0) * positions.sum(dim=1, keepdim=True)
        picked = torch.gather(bounded, 1, ids) * torch.gather(self.table, 0, ids)
        doubled = bounded.repeat_interleave(2, dim=1) * self.scale.repeat_interleave(2)[:8]
        pairs = torch.stack((-bounded, bounded * 2), dim=-1).flatten(-2)
        return ((rows * bounded.unsqueeze(1)).sum() + tiled.amin(dim=-1).sum()
                + torch.min(bounded) + (running * self.weight).sum() + ends[0] * ends[1]
                + picked.sum() + (pairs * doubled).sum())


class SizeFromPositions(nn.Module):
    """forward(x f32[2,4]) -> x + zeros(2, last position + 1)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[1])
        length = positions[-1] + 1
        return torch.zeros(x.shape[0], length) + x


class IndexByMask(nn.Module):
    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return x[x > 0].sum()


class IndexColumns(nn.Module):
    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return x[:, ids].sum()


class IntegerBits(nn.Module):
    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return (ids | 1).sum() + x.sum()


class IntegerMin(nn.Module):
    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return ids.amin(dim=0).sum() + x.sum()


class MinWithIndices(nn.Module):
    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return torch.min(x, dim=1)[0].sum()


class RepeatsByTensor(nn.Module):
    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return x.repeat_interleave(torch.tensor([1, 2]), dim=0).sum()


class IntegerGather(nn.Module):
    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return torch.gather(ids, 1, ids).sum() + x.sum()


class ZooOpsUnsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.mask = IndexByMask()
        self.columns = IndexColumns()
        self.bits = IntegerBits()
        self.integer_min = IntegerMin()
        self.indices = MinWithIndices()
        self.repeats = RepeatsByTensor()
        self.integer_gather = IntegerGather()

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return (self.mask(x, ids) + self.columns(x, ids) + self.bits(x, ids)
                + self.integer_min(x, ids) + self.indices(x, ids) + self.repeats(x, ids)
                + self.integer_gather(x, ids))


INPUTS = [
    InputSpec("x", torch.float32, [2, 4]),
    InputSpec("ids", torch.int64, [2, 3], kind="int", low=0, high=2),
]

SPECS = [
    ModelSpec("zoo_ops", ZooOps, INPUTS),
    ModelSpec("size_from_positions", SizeFromPositions, INPUTS[:1], modes=("trace",),
              mode_error="size_from_positions is traced only: it is about nodes the tracer "
              "adds"),
    ModelSpec("zoo_ops_unsupported", ZooOpsUnsupported, INPUTS),
]
