#!/usr/bin/env python3
"""A 3D-Speaker CAM++ checkpoint as a safetensors file spkddp reads (train --init-from, embed
--ckpt, export --ckpt).

3D-Speaker saves the encoder's state_dict on its own (its recipes' embedding_model.ckpt, the
released campplus_*.bin) and the classifier beside it (classifier.ckpt: speakerlab's
CosineClassifier, "weight" (speakers, embedding)); DDP checkpoints carry "module.". spkddp's
CAM++ has speakerlab's names, so this strips that prefix, names the head "classifier.weight" and
adds the metadata spkddp builds the model from (io/export/spkddp_meta.h): init_channels,
growth_rate, bn_size, the feature count and the embedding size, read off the tensor shapes.

    python3 tools/speakerlab_to_safetensors.py --checkpoint campplus.bin [--classifier classifier.ckpt] \\
        --out model.safetensors

Without a classifier the file has no head: embed with it, or fine-tune with --init-head drop.
Only CAMPPlus's dense blocks of 12, 24 and 16 layers exist in spkddp (the class has no other).
Needs torch and safetensors.

Features: 3D-Speaker computes Kaldi fbank (torchaudio.compliance.kaldi.fbank, 80 bins) and
subtracts each utterance's mean, as spkddp prepare and its loader do (docs/features.md).
"""
import argparse
import sys

import torch
from safetensors.torch import save_file

LAYERS = (12, 24, 16)


def fail(msg):
    sys.exit("speakerlab_to_safetensors: error: " + msg)


def load(path):
    sd = torch.load(path, map_location="cpu")
    if not isinstance(sd, dict) or not all(torch.is_tensor(v) for v in sd.values()):
        fail("%s: not a state_dict (a dict of tensors) as 3D-Speaker saves models" % path)
    return {k[len("module."):] if k.startswith("module.") else k: v for k, v in sd.items()}


def describe(sd, path):
    """init_channels, growth_rate, bn_size, the feature count and the embedding size of a CAMPPlus."""
    need = ["xvector.tdnn.linear.weight", "xvector.block1.tdnnd1.linear1.weight",
            "xvector.block1.tdnnd1.cam_layer.linear_local.weight", "xvector.dense.linear.weight", "head.conv1.weight"]
    missing = [k for k in need if k not in sd]
    if missing:
        fail("%s: no '%s'; is it the state_dict of 3D-Speaker's CAMPPlus?" % (path, missing[0]))
    layers = tuple(len({k.split(".")[2] for k in sd if k.startswith("xvector.block%d." % b)}) for b in (1, 2, 3))
    if layers != LAYERS:
        fail("%s: dense blocks of %s layers; CAMPPlus (and spkddp) has %s" % (path, list(layers), list(LAYERS)))
    init, front = sd["xvector.tdnn.linear.weight"].shape[:2]
    m = sd["head.conv1.weight"].shape[0]
    growth = sd["xvector.block1.tdnnd1.cam_layer.linear_local.weight"].shape[0]
    bneck = sd["xvector.block1.tdnnd1.linear1.weight"].shape[0]
    if m != 32 or front % m or bneck % growth:
        fail("%s: a front end of %d channels giving %d, a bottleneck of %d for growth %d: not CAMPPlus's shapes" %
             (path, m, front, bneck, growth))
    return dict(channels=init, growth=growth, bn_size=bneck // growth, feat=front // m * 8,
                emb=sd["xvector.dense.linear.weight"].shape[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True, help="3D-Speaker's CAMPPlus state_dict (.bin, .ckpt, .pt)")
    ap.add_argument("--classifier", help="its classifier's state_dict (CosineClassifier: 'weight')")
    ap.add_argument("--out", required=True, help="safetensors file to write")
    a = ap.parse_args()
    sd = load(a.checkpoint)
    d = describe(sd, a.checkpoint)
    tensors = {k: v.contiguous() for k, v in sd.items()}
    classes = 1
    if a.classifier:
        head = load(a.classifier)
        if set(head) != {"weight"}:
            fail("%s: tensors %s; a CosineClassifier without hidden blocks has 'weight' alone" %
                 (a.classifier, sorted(head)))
        classes, emb = head["weight"].shape
        if emb != d["emb"]:
            fail("%s: a classifier of %d-dimensional embeddings, the encoder makes %d" % (a.classifier, emb, d["emb"]))
        tensors["classifier.weight"] = head["weight"].float().contiguous()
    bad = [k for k, v in tensors.items() if v.dtype not in (torch.float32, torch.int64)]
    if bad:
        fail("%s: tensors of dtype %s (%s); spkddp reads float32" % (a.checkpoint, tensors[bad[0]].dtype, bad[0]))
    config = "model=campplus\nchannels=%d\nemb-dim=%d\ngrowth-rate=%d\nbn-size=%d\n" % (
        d["channels"], d["emb"], d["growth"], d["bn_size"])
    meta = {"spkddp_model": "campplus", "spkddp_config": config, "feature_dim": str(d["feat"]),
            "num_classes": str(classes), "visual_dim": "0", "visual_ratio": "0", "global_step": "0",
            "source": "3D-Speaker: %s" % a.checkpoint,
            "features": "Kaldi fbank, mean-normalised per utterance (3D-Speaker's)"}
    save_file(tensors, a.out, metadata=meta)
    print("wrote %s: %d tensors of a 3D-Speaker CAMPPlus (init_channels %d, growth %d, bn_size %d, %d features, "
          "embedding %d)%s" % (a.out, len(tensors), d["channels"], d["growth"], d["bn_size"], d["feat"], d["emb"],
                               ", classifier of %d speakers" % classes if a.classifier else ", no classifier"))


if __name__ == "__main__":
    main()
