"""Models whose forward writes tensors in place. slapoc must import them with value
semantics: every later reader of a written tensor, and of every view of it, sees the write.

scales_input:       writes its input in place; --check-import must run the TorchScript
                    forward on copies of the inputs, not on the ones the IR then reads.
"""

import torch
import torch.nn as nn

from common import InputSpec, ModelSpec


class ScalesInput(nn.Module):
    """forward(x f32[2,3]) -> 2x + 1, doubling x in place."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return x + 1


SPECS = [
    ModelSpec("scales_input", ScalesInput, [InputSpec("x", torch.float32, [2, 3])]),
]
