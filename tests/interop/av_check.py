"""ecapa-av's visual path against PyTorch, in float64: spkddp's export loads strictly into a
module built from SpeechBrain's own ECAPA blocks (TDNNBlock, AttentiveStatisticsPooling,
BatchNorm1d, Conv1d: the visual branch, the pooled statistics' BatchNorm and the embedding
layer) beside a PyTorch definition of spkddp's face encoder (app/model/layers/face_encoder.h:
ResNet18's trunk with a 3x3 stride-2 stem, BasicBlocks, mean and standard deviation over
positions), and its embeddings of each utterance's face frames alone equal what
`spkddp embed --modality visual` computed, to a relative 1e-5 (measured: 1e-7).

  check ST DATA EMB W    ST: spkddp export of an ecapa-av with --face-channels W, DATA: its
                         dataset of gray JPEG frames, EMB: embed --modality visual of DATA

The frames are decoded by the same libjpeg-turbo through ctypes (gray, the accurate integer IDCT)
and become (v - 127.5) / 128; an utterance of T audio frames takes ceil(T / r) visual frames, its
stored ones repeated from the first when fewer (the loader's rule for whole utterances).
"""
import ctypes
import math
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F
from interop_data import relative, spkddp_embeddings
from safetensors.torch import load_file
from speechbrain.lobes.models.ECAPA_TDNN import AttentiveStatisticsPooling, BatchNorm1d, Conv1d, TDNNBlock
from torch import nn

TOL = 1e-5


class BasicBlock(nn.Module):
    def __init__(self, cin, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class FaceEncoder(nn.Module):
    def __init__(self, channels, width):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, width, 3, 2, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        cin = width
        for s in range(4):
            planes = width << s
            blocks = [BasicBlock(cin, planes, 2 if s > 0 else 1), BasicBlock(planes, planes, 1)]
            setattr(self, "layer%d" % (s + 1), nn.Sequential(*blocks))
            cin = planes

    def forward(self, x):  # (N, C, S, S) -> (N, 2 x 8W)
        x = F.relu(self.bn1(self.conv1(x)))
        for s in range(4):
            x = getattr(self, "layer%d" % (s + 1))(x)
        x = x.flatten(2)
        return torch.cat((x.mean(-1), torch.sqrt(x.var(-1) + 1e-7)), 1)


class Visual(nn.Module):
    def __init__(self, width, fv, cv, att):
        super().__init__()
        self.face = FaceEncoder(1, width)
        self.blocks = nn.ModuleList([TDNNBlock(fv, cv, 3, 1), TDNNBlock(cv, cv, 3, 2)])
        self.asp = AttentiveStatisticsPooling(cv, attention_channels=att)


class VisualPath(nn.Module):
    def __init__(self, width, fv, cv, att, pooled, emb):
        super().__init__()
        self.visual = Visual(width, fv, cv, att)
        self.asp_bn = BatchNorm1d(input_size=pooled)
        self.fc = Conv1d(in_channels=pooled, out_channels=emb, kernel_size=1)

    def forward(self, pictures):  # (Tv, 1, S, S) -> (E,)
        v = self.visual.face(pictures).T.unsqueeze(0)  # (1, Fv, Tv)
        for b in self.visual.blocks:
            v = b(v)
        v = self.visual.asp(v)  # (1, 2 Cv, 1)
        audio = torch.zeros(1, self.asp_bn.norm.num_features - v.shape[1], 1, dtype=v.dtype)
        return self.fc(self.asp_bn(torch.cat((audio, v), 1))).flatten()


def jpeg_decoder():
    tj = ctypes.CDLL("libturbojpeg.so.0")
    tj.tjInitDecompress.restype = ctypes.c_void_p
    handle = tj.tjInitDecompress()

    def decode(data, size):
        out = np.empty((size, size), np.uint8)
        rc = tj.tjDecompress2(ctypes.c_void_p(handle), data, ctypes.c_ulong(len(data)),
                              out.ctypes.data_as(ctypes.c_void_p), size, 0, size, 6, 4096)  # TJPF_GRAY, ACCURATEDCT
        assert rc == 0, "libturbojpeg cannot decode a frame"
        return out
    return decode


def utterances(path):
    """[(id, pictures (Tv, 1, S, S) float64 as the loader gives them)]."""
    decode = jpeg_decoder()
    with h5py.File(path, "r") as f:
        g = f["visual"]
        size, ratio = int(g.attrs["image_size"]), round(f.attrs["frame_rate"] / g.attrs["frame_rate"])
        assert int(g.attrs["image_channels"]) == 1, "the check takes gray pictures"
        jpeg, joff, voff, off = g["jpeg"][...], g["jpeg_offsets"][...], g["offsets"][...], f["offsets"][...]
        ids = [s.decode() if isinstance(s, bytes) else s for s in f["utt_ids"][...]]
        if f.attrs["spkddp_format"] in ("audio", b"audio"):  # (frames of the samples' fbank)
            raise SystemExit("the check takes a feature dataset")
    out = []
    for i, u in enumerate(ids):
        blob, frames = jpeg[joff[i]:joff[i + 1]].tobytes(), []
        p = 0
        while p < len(blob):
            n = int.from_bytes(blob[p:p + 4], "little")
            frames.append(decode(blob[p + 4:p + 4 + n], size))
            p += 4 + n
        assert len(frames) == voff[i + 1] - voff[i]
        t = off[i + 1] - off[i]
        want, have = math.ceil(t / ratio), min(t // ratio, len(frames))
        take = [frames[k % have] for k in range(want)]
        x = (np.stack(take).astype(np.float64) - 127.5) / 128.0
        out.append((u, torch.from_numpy(x).unsqueeze(1)))
    return out


def check(st, data, emb, width):
    state = {k: v.double() if v.is_floating_point() else v for k, v in load_file(st).items()
             if k.startswith(("visual.", "asp_bn.", "fc."))}
    cv, fv = state["visual.blocks.0.conv.conv.weight"].shape[:2]
    att = state["visual.asp.tdnn.conv.conv.weight"].shape[0]
    e, p = state["fc.conv.weight"].shape[:2]
    model = VisualPath(width, fv, cv, att, p, e).double().eval()
    model.load_state_dict(state, strict=True)
    ours = spkddp_embeddings(emb)
    worst = 0.0
    with torch.no_grad():
        for u, x in utterances(data):
            worst = max(worst, relative(ours[u], model(x).numpy()))
    print("visual path: %d utterances, worst relative difference %.2e" % (len(ours), worst))
    if not worst <= TOL:
        raise SystemExit("spkddp's visual path differs from the PyTorch reference: %.2e > %g" % (worst, TOL))


if __name__ == "__main__":
    if sys.argv[1] != "check" or len(sys.argv) != 6:
        raise SystemExit(__doc__)
    check(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
