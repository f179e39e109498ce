#!/usr/bin/python3
"""Reference generator for the ECAPA-TDNN speaker encoder + AAM-softmax head.

Re-implements the SpeechBrain ECAPA_TDNN module structure (and its state_dict
parameter names) in plain PyTorch, runs one eval-mode forward and one
training-mode forward+backward in float64, and writes the tensors the C
implementation is checked against to ecapa_golden.h5 (stored as float32).

Usage:  /usr/bin/python3 tests/golden/make_ecapa_golden.py [output.h5]
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_common import aam_logits, write_golden  # noqa: E402,F401 (aam_logits: tools/bench_pytorch.py)

# ---------------------------------------------------------------- sizes
SEED = 1234
FEATS = 20          # F: input features per frame
CHANNELS = 32       # C
ATT_CHANNELS = 16
SE_CHANNELS = 16
EMB_DIM = 24        # E
NUM_SPEAKERS = 7    # S
BATCH = 4           # B
FRAMES = 40         # T
RES2NET_SCALE = 8
MARGIN = 0.2
SCALE = 30.0


# ---------------------------------------------------------------- modules
class Conv1d(nn.Module):
    """Conv over (B, C, T) with 'same' reflect padding done before the conv."""

    def __init__(self, in_channels, out_channels, kernel_size, dilation=1):
        super().__init__()
        self.pad = dilation * (kernel_size - 1) // 2
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size,
                              dilation=dilation, padding=0, bias=True)

    def forward(self, x):
        if self.pad > 0:
            x = F.pad(x, (self.pad, self.pad), mode="reflect")
        return self.conv(x)


class BatchNorm1d(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.norm = nn.BatchNorm1d(channels, eps=1e-5, momentum=0.1)

    def forward(self, x):
        return self.norm(x)


class TDNNBlock(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, dilation):
        super().__init__()
        self.conv = Conv1d(in_channels, out_channels, kernel_size, dilation)
        self.activation = nn.ReLU()
        self.norm = BatchNorm1d(out_channels)

    def forward(self, x):
        return self.norm(self.activation(self.conv(x)))


class Res2NetBlock(nn.Module):
    def __init__(self, in_channels, out_channels, scale, kernel_size, dilation):
        super().__init__()
        assert in_channels % scale == 0 and out_channels % scale == 0
        self.scale = scale
        cin, cout = in_channels // scale, out_channels // scale
        self.blocks = nn.ModuleList(
            [TDNNBlock(cin, cout, kernel_size, dilation) for _ in range(scale - 1)])

    def forward(self, x):
        ys = []
        y = None
        for i, xi in enumerate(torch.chunk(x, self.scale, dim=1)):
            if i == 0:
                y = xi
            elif i == 1:
                y = self.blocks[0](xi)
            else:
                y = self.blocks[i - 1](xi + y)
            ys.append(y)
        return torch.cat(ys, dim=1)


class SEBlock(nn.Module):
    def __init__(self, in_channels, se_channels, out_channels):
        super().__init__()
        self.conv1 = Conv1d(in_channels, se_channels, 1)
        self.relu = nn.ReLU()
        self.conv2 = Conv1d(se_channels, out_channels, 1)
        self.sigmoid = nn.Sigmoid()

    def forward(self, x):
        s = x.mean(dim=2, keepdim=True)
        s = self.relu(self.conv1(s))
        s = self.sigmoid(self.conv2(s))
        return s * x


class SERes2NetBlock(nn.Module):
    def __init__(self, in_channels, out_channels, res2net_scale, se_channels,
                 kernel_size, dilation):
        super().__init__()
        assert in_channels == out_channels  # no shortcut conv in this config
        self.tdnn1 = TDNNBlock(in_channels, out_channels, 1, 1)
        self.res2net_block = Res2NetBlock(out_channels, out_channels,
                                          res2net_scale, kernel_size, dilation)
        self.tdnn2 = TDNNBlock(out_channels, out_channels, 1, 1)
        self.se_block = SEBlock(out_channels, se_channels, out_channels)

    def forward(self, x):
        residual = x
        x = self.tdnn1(x)
        x = self.res2net_block(x)
        x = self.tdnn2(x)
        x = self.se_block(x)
        return x + residual


class AttentiveStatisticsPooling(nn.Module):
    def __init__(self, channels, attention_channels, global_context=True):
        super().__init__()
        assert global_context
        self.eps = 1e-12
        self.tdnn = TDNNBlock(channels * 3, attention_channels, 1, 1)
        self.tanh = nn.Tanh()
        self.conv = Conv1d(attention_channels, channels, 1)

    def _stats(self, x, m):
        mean = (m * x).sum(dim=2)
        std = torch.sqrt((m * (x - mean.unsqueeze(2)).pow(2)).sum(dim=2).clamp(self.eps))
        return mean, std

    def forward(self, x):
        L = x.shape[-1]
        m = torch.ones_like(x[:, :1, :]) / L
        mean, std = self._stats(x, m)
        mean_r = mean.unsqueeze(2).repeat(1, 1, L)
        std_r = std.unsqueeze(2).repeat(1, 1, L)
        attn = torch.cat([x, mean_r, std_r], dim=1)
        attn = self.conv(self.tanh(self.tdnn(attn)))
        attn = F.softmax(attn, dim=2)
        mean, std = self._stats(x, attn)
        return torch.cat((mean, std), dim=1).unsqueeze(2)


class ECAPA_TDNN(nn.Module):
    def __init__(self, input_size, lin_neurons, channels, kernel_sizes, dilations,
                 attention_channels, res2net_scale, se_channels, global_context=True):
        super().__init__()
        self.blocks = nn.ModuleList()
        self.blocks.append(TDNNBlock(input_size, channels[0], kernel_sizes[0], dilations[0]))
        for i in range(1, len(channels) - 1):
            self.blocks.append(SERes2NetBlock(channels[i - 1], channels[i], res2net_scale,
                                              se_channels, kernel_sizes[i], dilations[i]))
        self.mfa = TDNNBlock(channels[-2] * (len(channels) - 2), channels[-1],
                             kernel_sizes[-1], dilations[-1])
        self.asp = AttentiveStatisticsPooling(channels[-1], attention_channels,
                                              global_context)
        self.asp_bn = BatchNorm1d(channels[-1] * 2)
        self.fc = Conv1d(channels[-1] * 2, lin_neurons, 1)

    def forward(self, x):
        x = x.transpose(1, 2)           # (B, T, F) -> (B, F, T)
        xl = []
        for layer in self.blocks:
            x = layer(x)
            xl.append(x)
        x = torch.cat(xl[1:], dim=1)
        x = self.mfa(x)
        x = self.asp(x)
        x = self.asp_bn(x)
        x = self.fc(x)
        return x.transpose(1, 2)        # (B, 1, E)


def build_ecapa(feats, C, att, se, emb):
    return ECAPA_TDNN(feats, lin_neurons=emb, channels=[C, C, C, C, 3 * C],
                      kernel_sizes=[5, 3, 3, 3, 1], dilations=[1, 2, 3, 4, 1],
                      attention_channels=att, res2net_scale=RES2NET_SCALE,
                      se_channels=se, global_context=True)


def count_params(model):
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------- main
def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "ecapa_golden.h5")

    # Parameter-count sanity checks against the published SpeechBrain sizes.
    n512 = count_params(build_ecapa(80, 512, 128, 128, 192))
    n1024 = count_params(build_ecapa(80, 1024, 128, 128, 192))
    print(f"encoder params F=80 C=512 : {n512:,}")
    print(f"encoder params F=80 C=1024: {n1024:,}")
    assert n512 == 6194048, n512
    assert n1024 == 20767552, n1024

    attrs = [("F", FEATS), ("C", CHANNELS), ("attention_channels", ATT_CHANNELS), ("se_channels", SE_CHANNELS),
             ("emb_dim", EMB_DIM), ("num_speakers", NUM_SPEAKERS), ("batch", BATCH), ("frames", FRAMES),
             ("margin", MARGIN), ("scale", SCALE), ("seed", SEED)]
    write_golden(out_path, lambda: build_ecapa(FEATS, CHANNELS, ATT_CHANNELS, SE_CHANNELS, EMB_DIM), attrs, SEED,
                 FEATS, EMB_DIM, NUM_SPEAKERS, BATCH, FRAMES, MARGIN, SCALE, nn.BatchNorm1d)


if __name__ == "__main__":
    main()
