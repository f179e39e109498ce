#!/usr/bin/env python3
"""PyTorch references of spkddp's ResNet encoders (app/model/resnet): resnet18_golden.h5 (a
BasicBlock network) and resnet50_golden.h5 (Bottlenecks), one training step each in float64
(tests/golden/golden_common.py says what the files hold), for tests/model/test_resnet_golden.c.

The model is a plain-PyTorch ResNet written from WeSpeaker's published topology
(wespeaker/models/resnet.py: a 3x3 stem of m channels on the (B, 1, F, T) fbank image, four
stages of BasicBlocks or Bottlenecks with m, 2m, 4m, 8m planes and strides 1, 2, 2, 2, a 1x1
convolution + BatchNorm shortcut where a block changes the shape, TSTP pooling with
sqrt(var + 1e-7), seg_1 linear) under its state-dict names; tests/interop checks the same
against WeSpeaker's own class as pyannote.audio ships it. The script also asserts the
parameter counts of every depth at WeSpeaker's defaults (F 80, m 32, embedding 256).

Usage: /usr/bin/python3 tests/golden/make_resnet_golden.py [output_dir]   (torch, h5py; the same
bytes on a rerun with torch 1.13)
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_common import write_golden  # noqa: E402

DEPTHS = {  # expansion, blocks per stage
    "resnet18": (1, [2, 2, 2, 2]), "resnet34": (1, [3, 4, 6, 3]), "resnet50": (4, [3, 4, 6, 3]),
    "resnet101": (4, [3, 4, 23, 3]), "resnet152": (4, [3, 8, 36, 3]), "resnet221": (4, [6, 16, 48, 3]),
    "resnet293": (4, [10, 20, 64, 3]),
}
# Encoder parameters at F 80, m 32, embedding 256 (WeSpeaker quotes 6.63 M for ResNet34,
# 23.79 M for ResNet221 and 28.62 M for ResNet293).
COUNTS = {"resnet18": 4105440, "resnet34": 6634336, "resnet50": 11131360, "resnet101": 15892448,
          "resnet152": 19814880, "resnet221": 23792224, "resnet293": 28626016}


RELU_INPUTS = None  # while recording: every ReLU's input


def relu(x):
    if RELU_INPUTS is not None:
        RELU_INPUTS.append(x.detach())
    return F.relu(x)


def clear_of_kinks(model, x, margin=1e-4):
    """Whether no ReLU input of a training forward lies within margin of zero: float32 rounding
    (ours, or PyTorch's own) cannot then flip a ReLU, which would change the gradients by whole
    terms. The smallest inputs of a random network sit near 1e-5 otherwise."""
    global RELU_INPUTS
    RELU_INPUTS = []
    model.train()
    model(x)
    low = min(t.abs().min().item() for t in RELU_INPUTS)
    RELU_INPUTS = None
    return low > margin


class Block(nn.Module):
    """BasicBlock (expansion 1) or Bottleneck (expansion 4) with WeSpeaker's member names."""

    def __init__(self, cin, planes, stride, expansion):
        super().__init__()
        out = planes * expansion
        if expansion == 1:
            shapes = [(cin, planes, 3, stride), (planes, planes, 3, 1)]
        else:
            shapes = [(cin, planes, 1, 1), (planes, planes, 3, stride), (planes, out, 1, 1)]
        self.n = len(shapes)
        for i, (a, b, k, s) in enumerate(shapes):
            setattr(self, f"conv{i + 1}", nn.Conv2d(a, b, k, stride=s, padding=k // 2, bias=False))
            setattr(self, f"bn{i + 1}", nn.BatchNorm2d(b))
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != out:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x):
        y = x
        for i in range(1, self.n + 1):
            y = getattr(self, f"bn{i}")(getattr(self, f"conv{i}")(y))
            if i < self.n:
                y = relu(y)
        return relu(y + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, depth, feats, m, emb):
        super().__init__()
        expansion, blocks = DEPTHS[depth]
        self.conv1 = nn.Conv2d(1, m, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(m)
        cin = m
        for s, n in enumerate(blocks):
            layer = []
            for j in range(n):
                layer.append(Block(cin, m << s, 2 if j == 0 and s > 0 else 1, expansion))
                cin = (m << s) * expansion
            setattr(self, f"layer{s + 1}", nn.Sequential(*layer))
        self.seg_1 = nn.Linear(2 * (feats // 8) * m * 8 * expansion, emb)

    def forward(self, x):  # (B, T, F)
        y = relu(self.bn1(self.conv1(x.permute(0, 2, 1).unsqueeze(1))))
        for s in range(1, 5):
            y = getattr(self, f"layer{s}")(y)
        stats = torch.cat((y.mean(dim=-1).flatten(1), torch.sqrt(torch.var(y, dim=-1) + 1e-7).flatten(1)), 1)
        return self.seg_1(stats)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for depth, want in COUNTS.items():
        n = sum(p.numel() for p in ResNet(depth, 80, 32, 256).parameters())
        print(f"{depth}: {n:,} encoder parameters")
        assert n == want, (depth, n, want)
    # Small networks: odd frame counts, so the stride-2 stages round up in time; inputs drawn
    # again until no ReLU sits at its kink.
    for name, depth, m in [("resnet18_golden.h5", "resnet18", 4), ("resnet50_golden.h5", "resnet50", 2)]:
        feats, emb, speakers, batch, frames = 16, 12, 7, 3, 21
        attrs = [("model", depth), ("F", feats), ("C", m), ("emb_dim", emb), ("num_speakers", speakers),
                 ("batch", batch), ("frames", frames), ("margin", 0.2), ("scale", 30.0), ("seed", 1234)]
        write_golden(os.path.join(out_dir, name), lambda: ResNet(depth, feats, m, emb), attrs, 1234, feats, emb,
                     speakers, batch, frames, 0.2, 30.0, nn.BatchNorm2d, accept=clear_of_kinks)


if __name__ == "__main__":
    main()
