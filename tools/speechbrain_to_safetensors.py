#!/usr/bin/env python3
"""A SpeechBrain ECAPA-TDNN checkpoint as a safetensors file spkddp reads (train --init-from,
embed --ckpt, export --ckpt).

SpeechBrain's speaker recipes and pretrained speaker models keep the encoder as
embedding_model.ckpt (the state_dict of speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN) and
the AAM-softmax weights as classifier.ckpt (Classifier: "weight", (speakers, embedding)).
spkddp's ECAPA has the same tensor names: this puts them in one file, the classifier's as
"classifier.weight", with the metadata spkddp builds the model from (io/export/spkddp_meta.h),
its widths read off the tensor shapes.

    python3 tools/speechbrain_to_safetensors.py --embedding-model CKPT/embedding_model.ckpt \\
        [--classifier CKPT/classifier.ckpt] --out model.safetensors

It checks what the shapes can tell (Res2Net scale 8, kernel sizes 5,3,3,3,1, the MFA layer
3 x channels, one classifier block); the dilations are SpeechBrain's defaults (1,2,3,4,1),
which its VoxCeleb recipes use and spkddp implements. Without --classifier the file has no
head: embed with it, or fine-tune with --init-head drop. Needs torch and safetensors.

Features: SpeechBrain's recipes feed its own Fbank (speechbrain.lobes.features.Fbank), not
Kaldi's; a converted model computes exactly what SpeechBrain would on the same frames, but
on spkddp's Kaldi fbank it is not what it was trained on: fine-tune it (docs/interop.md).
"""
import argparse
import sys

import torch
from safetensors.torch import save_file

KERNELS = [5, 3, 3, 3, 1]


def fail(msg):
    sys.exit("speechbrain_to_safetensors: error: " + msg)


def load(path):
    sd = torch.load(path, map_location="cpu")
    if not isinstance(sd, dict) or not all(torch.is_tensor(v) for v in sd.values()):
        fail("%s: not a state_dict (a dict of tensors) as SpeechBrain saves modules" % path)
    return sd


def shape(sd, name, path):
    if name not in sd:
        fail("%s: no tensor '%s'; is it speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN's state_dict?" % (path, name))
    return tuple(sd[name].shape)


def widths(enc, path):
    """spkddp's flags for this encoder, from its shapes."""
    out, feat, k0 = shape(enc, "blocks.0.conv.conv.weight", path)
    C = out
    kernels = [k0] + [shape(enc, "blocks.%d.res2net_block.blocks.0.conv.conv.weight" % i, path)[2] for i in (1, 2, 3)]
    kernels.append(shape(enc, "mfa.conv.conv.weight", path)[2])
    if kernels != KERNELS:
        fail("%s: kernel sizes %s; spkddp's ECAPA has %s" % (path, kernels, KERNELS))
    if any("blocks.1.res2net_block.blocks.%d.conv.conv.weight" % i not in enc for i in range(7)) or \
            "blocks.1.res2net_block.blocks.7.conv.conv.weight" in enc:
        fail("%s: spkddp's ECAPA has Res2Net scale 8 (7 blocks per Res2Net layer)" % path)
    if shape(enc, "mfa.conv.conv.weight", path)[0] != 3 * C:
        fail("%s: the MFA layer has %d channels; spkddp's ECAPA has 3 x %d" % (path, shape(enc, "mfa.conv.conv.weight", path)[0], C))
    return dict(feat=feat, channels=C, att=shape(enc, "asp.tdnn.conv.conv.weight", path)[0],
                se=shape(enc, "blocks.1.se_block.conv1.conv.weight", path)[0], emb=shape(enc, "fc.conv.weight", path)[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--embedding-model", required=True, help="SpeechBrain's embedding_model.ckpt (ECAPA_TDNN state_dict)")
    ap.add_argument("--classifier", help="SpeechBrain's classifier.ckpt (Classifier state_dict)")
    ap.add_argument("--out", required=True, help="safetensors file to write")
    a = ap.parse_args()
    enc = load(a.embedding_model)
    w = widths(enc, a.embedding_model)
    tensors = {k: v.contiguous() for k, v in enc.items()}
    classes = 1
    if a.classifier:
        cls = load(a.classifier)
        if set(cls) != {"weight"}:
            fail("%s: holds %s; spkddp's head is one AAM-softmax weight (Classifier with lin_blocks=0)" % (a.classifier, sorted(cls)))
        classes, emb = cls["weight"].shape
        if emb != w["emb"]:
            fail("%s: classifier of %d-dimensional embeddings, the encoder makes %d" % (a.classifier, emb, w["emb"]))
        tensors["classifier.weight"] = cls["weight"].float().contiguous()
    bad = [k for k, v in tensors.items() if v.dtype not in (torch.float32, torch.int64)]
    if bad:
        fail("%s: tensors of dtype %s (%s); spkddp reads float32" % (a.embedding_model, tensors[bad[0]].dtype, bad[0]))
    config = "model=ecapa\nchannels=%d\nemb-dim=%d\nattention-channels=%d\nse-channels=%d\n" % (
        w["channels"], w["emb"], w["att"], w["se"])
    meta = {"spkddp_model": "ecapa", "spkddp_config": config, "feature_dim": str(w["feat"]), "num_classes": str(classes),
            "visual_dim": "0", "visual_ratio": "0", "global_step": "0",
            "source": "SpeechBrain: %s%s" % (a.embedding_model, ", " + a.classifier if a.classifier else ""),
            "features": "SpeechBrain's Fbank as its recipe computed them (not Kaldi's fbank)"}
    save_file(tensors, a.out, metadata=meta)
    print("wrote %s: %d tensors of a SpeechBrain ECAPA_TDNN (input %d, channels %d, embedding %d)%s" %
          (a.out, len(tensors), w["feat"], w["channels"], w["emb"],
           ", classifier of %d speakers" % classes if a.classifier else ", no classifier"))


if __name__ == "__main__":
    main()
