#!/usr/bin/env python3
"""PyTorch reference of spkddp's CAM++ (app/model/campplus): campplus_golden.h5, one training
step in float64 (tests/golden/golden_common.py says what the file holds), for
tests/model/test_campplus_golden.c.

The model is 3D-Speaker's own class, speakerlab.models.campplus.DTDNN.CAMPPlus (PyPI's
speakerlab 0.0.6, which tests/interop/requirements.txt installs), at a small width (init
channels 16, growth rate 8, bottleneck 32) on 16 features, and 231 frames: 116 after the TDNN
layer's stride, so the CAM layers' 100-frame segments are two, the second a short one. The
script also asserts the parameter counts at 3D-Speaker's defaults (F 80: 7,176,224 at
embedding 512, 6,848,544 at 192).

Its ReLUs see about four million inputs in one step, so unlike the ResNets' generator this one
cannot draw inputs until none sits within rounding of zero: under float32 a few flip, each
moving a gradient by one whole term, and PyTorch's own float32 step lands about 1e-2 from the
float64 one (batch 8: the last BatchNorm normalises over the batch, amplifying rounding less than
over 3). The file records that distance (torch_f32_grad_error), which the test holds spkddp to.

So the dense blocks, the new part, are held to float32 accuracy too: campplus_dense_golden.h5 is
one of 3D-Speaker's CAMDenseTDNNBlock (3 CAM layers, dilation 2) and its TransitLayer alone,
small enough that the input is drawn again until no ReLU input lies within 1e-4 of its kink
(for tests/model/test_campplus_dense.c): a training forward from /input (B, T, C, channels-last),
the loss sum(out * /g_out), every gradient, the input's, the running statistics after it, and
the eval forward from the statistics before.

Usage: python3 tests/golden/make_campplus_golden.py [output_dir]   (torch, h5py, speakerlab:
the interop tests' venv, tests/interop/pyenv.sh; the same bytes on a rerun with torch 1.13)
"""
import copy
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from speakerlab.models.campplus.DTDNN import CAMPPlus
from speakerlab.models.campplus.layers import CAMDenseTDNNBlock, TransitLayer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_common import write_golden  # noqa: E402

COUNTS = {512: 7176224, 192: 6848544}


def relu_inputs_clear(run, margin=1e-4):
    """Whether no input of any ReLU that run() reaches lies within margin of zero (nn.ReLU calls
    F.relu, which this wraps while run() runs)."""
    inputs, relu = [], F.relu

    def recording(x, inplace=False):
        inputs.append(x.detach().abs().min().item())
        return relu(x, inplace=inplace)

    F.relu = recording
    try:
        run()
    finally:
        F.relu = relu
    return min(inputs) > margin


class DenseGolden(nn.Module):
    """One dense block and its transition under CAMPPlus's names (xvector.block1, xvector.transit1)."""

    def __init__(self, c0, layers, growth, bn_size, dilation):
        super().__init__()
        self.xvector = nn.Sequential()
        self.xvector.add_module("block1", CAMDenseTDNNBlock(layers, c0, growth, bn_size * growth, 3,
                                                            dilation=dilation))
        self.xvector.add_module("transit1", TransitLayer(c0 + layers * growth, (c0 + layers * growth) // 2,
                                                         bias=False))

    def forward(self, x):
        return self.xvector(x)


def write_dense_golden(path):
    import h5py
    torch.manual_seed(99)
    B, C0, T, layers, growth, bn_size, dilation = 4, 8, 210, 3, 4, 2, 2
    model = DenseGolden(C0, layers, growth, bn_size, dilation).double()
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, nn.BatchNorm1d):
                c = mod.num_features
                mod.weight.copy_(1.0 + 0.1 * torch.randn(c))
                mod.bias.copy_(0.1 * torch.randn(c))
                mod.running_mean.copy_(0.1 * torch.randn(c))
                mod.running_var.copy_(1.0 + 0.1 * torch.rand(c))
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    state = {n: b.detach().clone() for n, b in model.named_buffers() if not n.endswith("num_batches_tracked")}
    while True:
        x = torch.randn(B, C0, T, dtype=torch.float64) + 0.5
        trial = copy.deepcopy(model).train()
        if relu_inputs_clear(lambda: trial(x)):
            break
    model.eval()
    with torch.no_grad():
        out_eval = model(x)
    model.train()
    xin = x.clone().requires_grad_(True)
    out = model(xin)
    g_out = torch.randn_like(out)
    (out * g_out).sum().backward()
    last = lambda t: t.detach().permute(0, 2, 1).numpy().astype(np.float32)  # (B, C, T) -> (B, T, C)
    with h5py.File(path, "w") as h:
        for k, v in [("B", B), ("C0", C0), ("T", T), ("layers", layers), ("growth_rate", growth),
                     ("bn_size", bn_size), ("dilation", dilation)]:
            h.attrs[k] = v
        h.attrs["torch_version"] = str(torch.__version__)
        h["input"] = last(x)
        h["g_out"] = last(g_out)
        h["out"] = last(out)
        h["out_eval"] = last(out_eval)
        h["grad_input"] = last(xin.grad)
        for n, p in model.named_parameters():
            h[f"params/{n}"] = params[n].numpy().astype(np.float32)
            h[f"grads/{n}"] = p.grad.numpy().astype(np.float32)
        for n, b in model.named_buffers():
            if n in state:
                h[f"state/{n}"] = state[n].numpy().astype(np.float32)
                h[f"state_after/{n}"] = b.detach().numpy().astype(np.float32)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for emb, want in COUNTS.items():
        n = sum(p.numel() for p in CAMPPlus(feat_dim=80, embedding_size=emb).parameters())
        print(f"CAMPPlus(80, {emb}): {n:,} parameters")
        assert n == want, (emb, n, want)
    feats, emb, speakers, batch, frames = 16, 16, 7, 8, 231
    args = dict(feat_dim=feats, embedding_size=emb, growth_rate=8, bn_size=4, init_channels=16)
    attrs = [("model", "campplus"), ("F", feats), ("C", 16), ("growth_rate", 8), ("bn_size", 4), ("emb_dim", emb),
             ("num_speakers", speakers), ("batch", batch), ("frames", frames), ("margin", 0.2), ("scale", 30.0),
             ("seed", 1234)]
    write_golden(os.path.join(out_dir, "campplus_golden.h5"), lambda: CAMPPlus(**args, memory_efficient=False),
                 attrs, 1234, feats, emb, speakers, batch, frames, 0.2, 30.0, (nn.BatchNorm1d, nn.BatchNorm2d),
                 f32_errors=True)
    write_dense_golden(os.path.join(out_dir, "campplus_dense_golden.h5"))


if __name__ == "__main__":
    main()
