#!/usr/bin/env python3
"""A WeSpeaker ResNet checkpoint as a safetensors file spkddp reads (train --init-from, embed
--ckpt, export --ckpt).

WeSpeaker saves its speaker model's state_dict with the AAM-softmax head beside it as
"projection.weight" (speakers, embedding) (wespeaker/bin/train.py adds the projection to the
model); pyannote.audio's WeSpeakerResNet34 keeps the same encoder under "resnet.", and DDP
checkpoints under "module.". spkddp's ResNets carry WeSpeaker's names, so this strips those
prefixes, names the head "classifier.weight" and adds the metadata spkddp builds the model
from (io/export/spkddp_meta.h): the depth, m_channels, the feature count and the embedding size,
read off the tensor shapes.

    python3 tools/wespeaker_to_safetensors.py --checkpoint avg_model.pt --out model.safetensors

Without a projection the file has no head: embed with it, or fine-tune with --init-head drop.
Only two_emb_layer False and TSTP pooling exist in spkddp (WeSpeaker's ResNet recipes). Needs
torch and safetensors.

Features: WeSpeaker computes Kaldi fbank (torchaudio.compliance.kaldi.fbank, 80 bins, dither
1.0 in training) on waveforms scaled to 16-bit and subtracts each utterance's mean, as spkddp
prepare and its loader do (docs/features.md, docs/interop.md).
"""
import argparse
import sys

import torch
from safetensors.torch import save_file

DEPTHS = {(1, (2, 2, 2, 2)): "resnet18", (1, (3, 4, 6, 3)): "resnet34", (4, (3, 4, 6, 3)): "resnet50",
          (4, (3, 4, 23, 3)): "resnet101", (4, (3, 8, 36, 3)): "resnet152", (4, (6, 16, 48, 3)): "resnet221",
          (4, (10, 20, 64, 3)): "resnet293"}


def fail(msg):
    sys.exit("wespeaker_to_safetensors: error: " + msg)


def load(path):
    sd = torch.load(path, map_location="cpu")
    if isinstance(sd, dict) and "state_dict" in sd and isinstance(sd["state_dict"], dict):
        sd = sd["state_dict"]  # a Lightning checkpoint (pyannote.audio)
    if not isinstance(sd, dict) or not all(torch.is_tensor(v) for v in sd.values()):
        fail("%s: not a state_dict (a dict of tensors) as WeSpeaker saves models" % path)
    out = {}
    for k, v in sd.items():
        for prefix in ("module.", "resnet."):
            if k.startswith(prefix):
                k = k[len(prefix):]
        out[k] = v
    return out


def describe(sd, path):
    """The depth, m_channels, feature count and embedding size of a WeSpeaker ResNet."""
    if "conv1.weight" not in sd or "seg_1.weight" not in sd:
        fail("%s: no 'conv1.weight' or 'seg_1.weight'; is it a WeSpeaker ResNet's state_dict?" % path)
    if "seg_2.weight" in sd:
        fail("%s: two_emb_layer=True (seg_2); spkddp's ResNets have one embedding layer" % path)
    m = sd["conv1.weight"].shape[0]
    expansion = 4 if "layer1.0.conv3.weight" in sd else 1
    blocks = tuple(len({k.split(".")[1] for k in sd if k.startswith("layer%d." % s)}) for s in (1, 2, 3, 4))
    depth = DEPTHS.get((expansion, blocks))
    if depth is None:
        fail("%s: blocks %s of %s; spkddp has WeSpeaker's depths 18, 34, 50, 101, 152, 221, 293" %
             (path, list(blocks), "Bottlenecks" if expansion == 4 else "BasicBlocks"))
    emb, pooled = sd["seg_1.weight"].shape
    rows = pooled // (2 * m * 8 * expansion)
    if rows * 2 * m * 8 * expansion != pooled:
        fail("%s: seg_1 takes %d values, not the TSTP statistics of %d channels" % (path, pooled, m * 8 * expansion))
    return dict(depth=depth, m=m, feat=rows * 8, emb=emb)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True, help="WeSpeaker's model .pt (a state_dict)")
    ap.add_argument("--out", required=True, help="safetensors file to write")
    a = ap.parse_args()
    sd = load(a.checkpoint)
    d = describe(sd, a.checkpoint)
    tensors = {k: v.contiguous() for k, v in sd.items() if k != "projection.weight"}
    classes = 1
    if "projection.weight" in sd:
        classes, emb = sd["projection.weight"].shape
        if emb != d["emb"]:
            fail("%s: projection of %d-dimensional embeddings, the encoder makes %d" % (a.checkpoint, emb, d["emb"]))
        tensors["classifier.weight"] = sd["projection.weight"].float().contiguous()
    bad = [k for k, v in tensors.items() if v.dtype not in (torch.float32, torch.int64)]
    if bad:
        fail("%s: tensors of dtype %s (%s); spkddp reads float32" % (a.checkpoint, tensors[bad[0]].dtype, bad[0]))
    config = "model=%s\nchannels=%d\nemb-dim=%d\n" % (d["depth"], d["m"], d["emb"])
    meta = {"spkddp_model": d["depth"], "spkddp_config": config, "feature_dim": str(d["feat"]),
            "num_classes": str(classes), "visual_dim": "0", "visual_ratio": "0", "global_step": "0",
            "source": "WeSpeaker: %s" % a.checkpoint,
            "features": "Kaldi fbank of 16-bit-scaled waveforms, mean-normalised per utterance (WeSpeaker's)"}
    save_file(tensors, a.out, metadata=meta)
    print("wrote %s: %d tensors of a WeSpeaker %s (m_channels %d, %d features, embedding %d)%s" %
          (a.out, len(tensors), d["depth"], d["m"], d["feat"], d["emb"],
           ", classifier of %d speakers" % classes if "projection.weight" in sd else ", no classifier"))


if __name__ == "__main__":
    main()
