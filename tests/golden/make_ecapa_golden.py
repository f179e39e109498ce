#!/usr/bin/python3
"""Reference generator for the ECAPA-TDNN speaker encoder + AAM-softmax head.

Re-implements the SpeechBrain ECAPA_TDNN module structure (and its state_dict
parameter names) in plain PyTorch, runs one eval-mode forward and one
training-mode forward+backward in float64, and writes the tensors the C
implementation is checked against to ecapa_golden.h5 (stored as float32).

Usage:  /usr/bin/python3 tests/golden/make_ecapa_golden.py [output.h5]
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

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


def aam_logits(emb, weight, labels, margin, scale):
    cos = F.linear(F.normalize(emb, dim=1), F.normalize(weight, dim=1))
    sin = torch.sqrt(torch.clamp(1.0 - cos.pow(2), 0.0, 1.0))
    phi = cos * math.cos(margin) - sin * math.sin(margin)
    th = math.cos(math.pi - margin)
    mm = math.sin(math.pi - margin) * margin
    phi = torch.where(cos > th, phi, cos - mm)
    onehot = F.one_hot(labels, weight.shape[0]).to(cos.dtype)
    return scale * (onehot * phi + (1.0 - onehot) * cos), cos


# ---------------------------------------------------------------- main
def main():
    import h5py  # here, not at the top: tools/bench_pytorch.py imports the modules without it

    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "ecapa_golden.h5")

    # Parameter-count sanity checks against the published SpeechBrain sizes.
    n512 = count_params(build_ecapa(80, 512, 128, 128, 192))
    n1024 = count_params(build_ecapa(80, 1024, 128, 128, 192))
    print(f"encoder params F=80 C=512 : {n512:,}")
    print(f"encoder params F=80 C=1024: {n1024:,}")
    assert n512 == 6194048, n512
    assert n1024 == 20767552, n1024

    # Everything random is drawn in float32, so every stored value is exactly
    # the value the float64 reference computation starts from.
    torch.manual_seed(SEED)
    model = build_ecapa(FEATS, CHANNELS, ATT_CHANNELS, SE_CHANNELS, EMB_DIM)
    classifier_weight = torch.empty(NUM_SPEAKERS, EMB_DIM)
    nn.init.xavier_uniform_(classifier_weight)

    bn_names = []
    with torch.no_grad():
        for name, mod in model.named_modules():
            if isinstance(mod, nn.BatchNorm1d):
                bn_names.append(name)
                c = mod.num_features
                mod.weight.copy_(1.0 + 0.1 * torch.randn(c))
                mod.bias.copy_(0.1 * torch.randn(c))
                mod.running_mean.copy_(0.1 * torch.randn(c))
                mod.running_var.copy_(1.0 + 0.1 * torch.rand(c))

    x = torch.randn(BATCH, FRAMES, FEATS) + (0.5 + 1.5 * torch.rand(BATCH, 1, 1))
    labels = torch.randint(0, NUM_SPEAKERS, (BATCH,))
    if len(set(labels.tolist())) == BATCH:
        labels[BATCH - 1] = labels[0]
    assert len(set(labels.tolist())) < BATCH

    param_order = [n for n, _ in model.named_parameters()] + ["classifier.weight"]
    state_names = [n for n, _ in model.named_buffers() if not n.endswith("num_batches_tracked")]

    model = model.double()
    W = nn.Parameter(classifier_weight.double())
    xd = x.double()

    params_before = {n: p.detach().clone() for n, p in model.named_parameters()}
    params_before["classifier.weight"] = W.detach().clone()
    state_before = {n: b.detach().clone() for n, b in model.named_buffers()
                    if n in state_names}

    # Eval-mode embedding, using the initial running statistics.
    model.eval()
    with torch.no_grad():
        emb_eval = model(xd).squeeze(1)

    # One training-mode forward + backward.
    model.train()
    xin = xd.clone().requires_grad_(True)
    emb = model(xin).squeeze(1)
    logits, cos = aam_logits(emb, W, labels, MARGIN, SCALE)
    loss = F.cross_entropy(logits, labels)
    loss.backward()

    grads = {n: p.grad.detach() for n, p in model.named_parameters()}
    grads["classifier.weight"] = W.grad.detach()
    state_after = {n: b.detach().clone() for n, b in model.named_buffers()
                   if n in state_names}

    print(f"loss = {loss.item():.10f}")

    f32 = lambda t: t.detach().cpu().numpy().astype(np.float32)
    sdt = h5py.string_dtype(encoding="utf-8")
    with h5py.File(out_path, "w") as h:
        a = h.attrs
        a["F"] = FEATS
        a["C"] = CHANNELS
        a["attention_channels"] = ATT_CHANNELS
        a["se_channels"] = SE_CHANNELS
        a["emb_dim"] = EMB_DIM
        a["num_speakers"] = NUM_SPEAKERS
        a["batch"] = BATCH
        a["frames"] = FRAMES
        a["margin"] = MARGIN
        a["scale"] = SCALE
        a["seed"] = SEED
        a["torch_version"] = str(torch.__version__)

        h["input"] = f32(x)
        h["labels"] = labels.numpy().astype(np.int32)
        h.create_dataset("order", data=np.array(param_order, dtype=object), dtype=sdt)
        h.create_dataset("state_order", data=np.array(state_names, dtype=object), dtype=sdt)
        for n in param_order:
            h[f"params/{n}"] = f32(params_before[n])
            h[f"grads/{n}"] = f32(grads[n])
        for n in state_names:
            h[f"state/{n}"] = f32(state_before[n])
            h[f"state_after/{n}"] = f32(state_after[n])
        h["emb"] = f32(emb)
        h["emb_eval"] = f32(emb_eval)
        h["loss"] = np.float32(loss.item())
        h["cos"] = f32(cos)
        h["grad_input"] = f32(xin.grad)

    for n in param_order:
        print(f"  {n} {tuple(params_before[n].shape)}")
    print(f"trainable params (C={CHANNELS}): {sum(v.numel() for v in params_before.values())}")
    print(f"labels = {labels.tolist()}")
    print(f"wrote {out_path} ({os.path.getsize(out_path)} bytes)")


if __name__ == "__main__":
    main()
