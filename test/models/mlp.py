"""Two-layer MLP: fc1 -> relu -> fc2 (named attributes), plus a variant that returns a loss."""

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import InputSpec, ModelSpec


class MLP(nn.Module):
    """Parameters: fc1.weight [32,16], fc1.bias [32], fc2.weight [8,32], fc2.bias [8]."""

    def __init__(self, d_in: int = 16, d_hidden: int = 32, d_out: int = 8):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


class MLPLoss(nn.Module):
    """Same parameters as MLP (fc1.*, fc2.*); returns the mean cross-entropy, a 0-d tensor."""

    def __init__(self, d_in: int = 16, d_hidden: int = 32, d_out: int = 8):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits = self.fc2(self.relu(self.fc1(x)))
        return F.cross_entropy(logits, target)


SPECS = [
    ModelSpec("mlp", MLP, [InputSpec("x", torch.float32, [4, 16])]),
    ModelSpec("mlp_loss", MLPLoss, [
        InputSpec("x", torch.float32, [4, 16]),
        InputSpec("target", torch.int64, [4], kind="int", low=0, high=8),
    ]),
]
