"""Models whose forward writes tensors in place, as Hugging Face's LLaMA and Qwen2 do
(transformers 4.44, LlamaModel._update_causal_mask). slapoc must import them with value
semantics: every later reader of a written tensor, and of every view of it, sees the write.

scales_input:       writes its input in place; --check-import must run the TorchScript
                    forward on copies of the inputs, not on the ones the IR then reads.
causal_mask:        a compile-time constant (full, then triu) multiplied in place by a
                    comparison of run-time tensors. This mask once imported as a zero
                    constant: the in-place multiply was lost.
padded_causal_mask: the same mask expanded to [B, 1, T, T], cloned, and the columns an
                    attention mask covers written through a slice (copy_ of a
                    masked_fill).
list_writes:        lists written in place: appended to by a submodule, and a shape list
                    assigned by index (scripted only; a trace keeps no lists).
writes_buffer:      updates a buffer in forward, as BatchNorm's num_batches_tracked in
                    training, and reads it after: model state the step updates
                    (slapo.update_buffer), read as written.
"""

from typing import List

import torch
import torch.nn as nn

from common import InputSpec, ModelSpec

T = 8
# torch.finfo(torch.float32).min, which HF fills masks with (TorchScript has no finfo).
MIN = -3.4028234663852886e38


class ScalesInput(nn.Module):
    """forward(x f32[2,3]) -> 2x + 1, doubling x in place."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return x + 1


class CausalMask(nn.Module):
    """forward(scores f32[2,T,T], cache_position i64[T]) -> scores + mask."""

    def __init__(self):
        super().__init__()
        self.min_value = MIN

    def forward(self, scores: torch.Tensor, cache_position: torch.Tensor) -> torch.Tensor:
        length = scores.shape[-1]
        mask = torch.full((length, length), self.min_value)
        mask = mask.triu(1)
        mask *= torch.arange(length) > cache_position.reshape(-1, 1)
        return scores + mask


class PaddedCausalMask(nn.Module):
    """forward(scores f32[2,1,T,T], attention_mask i64[2,T-2]) -> scores + mask."""

    def __init__(self):
        super().__init__()
        self.min_value = MIN

    def forward(self, scores: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        batch, length = scores.shape[0], scores.shape[-1]
        mask = torch.full((length, length), self.min_value).triu(1)
        mask = mask[None, None, :, :].expand(batch, 1, -1, -1)
        mask = mask.clone()
        columns = attention_mask.shape[-1]
        padding = mask[:, :, :, :columns] + attention_mask[:, None, None, :]
        padding = padding == 0
        mask[:, :, :, :columns] = mask[:, :, :, :columns].masked_fill(padding,
                                                                      self.min_value)
        return scores + mask


class AppendTwice(nn.Module):
    def forward(self, outputs: List[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        outputs.append(x * 2)
        return x


class ListWrites(nn.Module):
    """forward(x f32[2,3]) -> [x; 2x] reshaped to [3, 4]."""

    def __init__(self):
        super().__init__()
        self.append_twice = AppendTwice()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs: List[torch.Tensor] = [x]
        self.append_twice(outputs, x)
        shape: List[int] = [x.shape[0], x.shape[1]]
        shape[0] = x.shape[1]
        shape[1] = 2 * x.shape[0]
        return torch.cat(outputs, 0).reshape(shape)


class WritesBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        return x * self.calls


SPECS = [
    ModelSpec("writes_buffer", WritesBuffer, [InputSpec("x", torch.float32, [2, 4])]),
    ModelSpec("scales_input", ScalesInput, [InputSpec("x", torch.float32, [2, 3])]),
    ModelSpec("causal_mask", CausalMask, [
        InputSpec("scores", torch.float32, [2, T, T]),
        InputSpec("cache_position", torch.int64, [T], kind="int", low=0, high=T),
    ]),
    ModelSpec("padded_causal_mask", PaddedCausalMask, [
        InputSpec("scores", torch.float32, [2, 1, T, T]),
        InputSpec("attention_mask", torch.int64, [2, T - 2], kind="mask"),
    ]),
    ModelSpec("list_writes", ListWrites, [InputSpec("x", torch.float32, [2, 3])],
              modes=("script",), mode_error="list_writes is scripted only: a trace keeps no "
              "lists"),
]
