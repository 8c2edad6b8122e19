"""A Wide ResNet (Zagoruyko and Komodakis, 2016) for CIFAR-sized images, and the convolution
and pooling forms it does not use, as test models of conv2d, batch_norm and pooling.

wideresnet:       WRN-depth-width with pre-activation basic blocks (BatchNorm, ReLU, 3x3
                  convolutions, 1x1 projection shortcuts where the shape changes), a final
                  BatchNorm and ReLU, adaptive average pooling to 1x1 and a linear classifier;
                  forward(x, labels) returns the cross-entropy loss.  Tiny by default
                  (depth 10, width 2, 8x8 images, batch 4) so that it trains in CI.
                  Exported with --train, its BatchNorms normalize by batch statistics and
                  update their running statistics (buffers) in the forward.
conv_pool_ops:    convolutions with bias, padding, dilation, stride and groups; max pooling
                  with padding and with ceil_mode; average pooling whose windows tile the
                  input; a 1-d BatchNorm on [N, C] features (added to them); in one model whose
                  loss reaches every parameter.
avg_pool_overlap: average pooling whose windows overlap (stride 1), which slapoc refuses.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import InputSpec, ModelSpec


def init_vision_(module: nn.Module) -> None:
    """Deterministic random init (call after torch.manual_seed): convolutions and linear
    weights with He's std, biases and BatchNorm shifts random, BatchNorm scales near 1, and
    running statistics that are not PyTorch's zeros and ones, so that a compiler that mixes
    up batch and running statistics, or drops one, gets a visibly wrong answer."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                fan_in = m.weight[0].numel()
                m.weight.normal_(0.0, (2.0 / fan_in) ** 0.5)
                if m.bias is not None:
                    m.bias.normal_(0.0, 0.1)
            elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                m.weight.copy_(1.0 + 0.1 * torch.randn_like(m.weight))
                m.bias.normal_(0.0, 0.1)
                m.running_mean.normal_(0.0, 0.1)
                m.running_var.copy_(1.0 + 0.5 * torch.rand_like(m.running_var))


class BasicBlock(nn.Module):
    """BN-ReLU-conv3x3-BN-ReLU-conv3x3 plus the input, projected by a 1x1 convolution of the
    activated input where the channels or the stride change."""

    def __init__(self, in_planes: int, out_planes: int, stride: int):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.conv1 = nn.Conv2d(in_planes, out_planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_planes)
        self.conv2 = nn.Conv2d(out_planes, out_planes, 3, stride=1, padding=1, bias=False)
        self.shortcut = None
        if in_planes != out_planes or stride != 1:
            self.shortcut = nn.Conv2d(in_planes, out_planes, 1, stride=stride, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        activated = F.relu(self.bn1(x))
        out = self.conv2(F.relu(self.bn2(self.conv1(activated))))
        if self.shortcut is not None:
            return out + self.shortcut(activated)
        return out + x


class WideResNet(nn.Module):
    """forward(x f32[N, 3, H, W], labels i64[N] in [0, classes)) -> scalar loss."""

    def __init__(self, depth: int = 10, width: int = 2, classes: int = 10):
        super().__init__()
        assert (depth - 4) % 6 == 0, "a WRN's depth is 6n + 4"
        blocks = (depth - 4) // 6
        channels = [16, 16 * width, 32 * width, 64 * width]
        self.conv1 = nn.Conv2d(3, channels[0], 3, padding=1, bias=False)
        groups = []
        for i, stride in enumerate((1, 2, 2)):
            layers = [BasicBlock(channels[i] if b == 0 else channels[i + 1], channels[i + 1],
                                 stride if b == 0 else 1) for b in range(blocks)]
            groups.append(nn.Sequential(*layers))
        self.block1, self.block2, self.block3 = groups
        self.bn = nn.BatchNorm2d(channels[3])
        self.fc = nn.Linear(channels[3], classes)
        init_vision_(self)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        out = self.block3(self.block2(self.block1(self.conv1(x))))
        out = F.adaptive_avg_pool2d(F.relu(self.bn(out)), 1)
        return F.cross_entropy(self.fc(out.flatten(1)), labels)


class ConvPoolOps(nn.Module):
    """forward(x f32[2, 3, 8, 8], labels i64[2] in [0, 5)) -> scalar loss."""

    def __init__(self):
        super().__init__()
        self.dilated = nn.Conv2d(3, 4, 3, padding=2, dilation=2)
        self.grouped = nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=2)
        self.norm = nn.BatchNorm1d(32)
        self.fc = nn.Linear(32, 5)
        init_vision_(self)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        y = F.max_pool2d(F.relu(self.dilated(x)), 3, stride=1, padding=1)
        y = self.grouped(y)
        pooled = F.avg_pool2d(y, 2) + F.max_pool2d(y, 3, stride=2, ceil_mode=True)
        features = pooled.flatten(1)
        # Beside the features, not instead of them: a BatchNorm would cancel any shift of its
        # input by the batch, and the convolutions' bias gradients with it.
        return F.cross_entropy(self.fc(features + self.norm(features)), labels)


class AvgPoolOverlap(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(x, 3, stride=1)


SPECS = [
    ModelSpec("wideresnet", WideResNet, [
        InputSpec("x", torch.float32, [4, 3, 8, 8]),
        InputSpec("labels", torch.int64, [4], kind="int", low=0, high=10),
    ]),
    ModelSpec("conv_pool_ops", ConvPoolOps, [
        InputSpec("x", torch.float32, [2, 3, 8, 8]),
        InputSpec("labels", torch.int64, [2], kind="int", low=0, high=5),
    ]),
    ModelSpec("avg_pool_overlap", AvgPoolOverlap, [InputSpec("x", torch.float32, [2, 3, 8, 8])]),
]
