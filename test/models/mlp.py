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


class SequentialMLP(nn.Module):
    """Nested containers: parameters layers.0.weight, layers.2.0.weight (Sequential in
    Sequential) and blocks.1.weight (ModuleList), so module paths keep the container names."""

    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(16, 32), nn.GELU(),
                                    nn.Sequential(nn.Linear(32, 16), nn.Tanh()))
        self.blocks = nn.ModuleList([nn.Linear(16, 16), nn.Linear(16, 8, bias=False)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(x)
        for block in self.blocks:
            x = block(x)
        return x


SPECS = [
    ModelSpec("mlp_sequential", SequentialMLP, [InputSpec("x", torch.float32, [4, 16])]),
    ModelSpec("mlp", MLP, [InputSpec("x", torch.float32, [4, 16])]),
    ModelSpec("mlp_loss", MLPLoss, [
        InputSpec("x", torch.float32, [4, 16]),
        InputSpec("target", torch.int64, [4], kind="int", low=0, high=8),
    ]),
]
