"""SpeechBrain's own ECAPA_TDNN against spkddp, on the same features.

  export ST DATA EMB     ST (spkddp export) loads into speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN
                         and Classifier with load_state_dict(strict=True); its embeddings of DATA
                         match spkddp's EMB (spkddp embed) to a relative 1e-5.
  make-sb DIR F N        a SpeechBrain ECAPA_TDNN (input_size F, small widths) and Classifier (N
                         speakers) with random weights and BatchNorm statistics, saved as a
                         SpeechBrain recipe saves them: DIR/embedding_model.ckpt, DIR/classifier.ckpt
  compare-sb DIR DATA EMB  that model's embeddings of DATA match EMB, what spkddp embed computed
                         from the converted file (tools/speechbrain_to_safetensors.py).

Features: DATA's frames, each utterance mean-normalised over its frames as spkddp's loader
does (mean in float64, subtracted in float32); SpeechBrain runs in float64, so the difference
is spkddp's float32 rounding alone.
"""
import json
import sys

import speechbrain
import torch
from interop_data import cmn, relative, spkddp_embeddings, utterances
from safetensors import safe_open
from safetensors.torch import load_file
from speechbrain.lobes.models.ECAPA_TDNN import ECAPA_TDNN, Classifier

TOL = 1e-5


def compare(encoder, data, emb_path):
    encoder.eval().double()
    ours = spkddp_embeddings(emb_path)
    utts = utterances(data)
    worst = 0.0
    with torch.no_grad():
        for uid, x in utts:
            sb = encoder(torch.from_numpy(cmn(x)[None]).double()).reshape(-1).numpy()
            worst = max(worst, relative(ours[uid], sb))
    lengths = [len(x) for _, x in utts]
    print("SpeechBrain %s vs spkddp: %d utterances (%d to %d frames), largest relative difference %.3g (tolerance %g)" %
          (speechbrain.__version__, len(utts), min(lengths), max(lengths), worst, TOL))
    return worst <= TOL


def check_export(st, data, emb):
    with safe_open(st, "pt") as f:
        meta = f.metadata()
    sd = load_file(st)
    enc = ECAPA_TDNN(**json.loads(meta["speechbrain_encoder_args"]))
    enc.load_state_dict({k: v for k, v in sd.items() if not k.startswith("classifier.")}, strict=True)
    cls = Classifier(**json.loads(meta["speechbrain_classifier_args"]))
    cls.load_state_dict({"weight": sd["classifier.weight"]}, strict=True)
    steps = int(meta["global_step"])
    counters = [v for k, v in sd.items() if k.endswith("num_batches_tracked")]
    ok = len(counters) > 0 and all(c.dtype == torch.int64 and c.shape == () and int(c) == steps for c in counters)
    print("strict load: %d encoder tensors, classifier %s; %d num_batches_tracked = %d: %s" %
          (len(sd) - 1, tuple(sd["classifier.weight"].shape), len(counters), steps, "ok" if ok else "WRONG"))
    return compare(enc, data, emb) and ok


def make_sb(out, feat, speakers):
    torch.manual_seed(7)
    args = dict(input_size=feat, channels=[32, 32, 32, 32, 96], attention_channels=16, se_channels=16, lin_neurons=24)
    enc = ECAPA_TDNN(**args)
    with torch.no_grad():
        for name, t in enc.state_dict().items():  # BatchNorm affine and running statistics away from 1 and 0
            if name.endswith("running_var"):
                t.uniform_(0.5, 1.5)
            elif name.endswith("running_mean") or name.endswith("norm.bias"):
                t.normal_(0.0, 0.2)
            elif name.endswith("norm.weight"):
                t.uniform_(0.7, 1.3)
    cls = Classifier(input_size=24, out_neurons=speakers)
    torch.save(enc.state_dict(), out + "/embedding_model.ckpt")
    torch.save(cls.state_dict(), out + "/classifier.ckpt")
    json.dump(args, open(out + "/args.json", "w"))
    return True


def compare_sb(d, data, emb):
    enc = ECAPA_TDNN(**json.load(open(d + "/args.json")))
    enc.load_state_dict(torch.load(d + "/embedding_model.ckpt"), strict=True)
    return compare(enc, data, emb)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    ok = {"export": lambda: check_export(*args), "make-sb": lambda: make_sb(args[0], int(args[1]), int(args[2])),
          "compare-sb": lambda: compare_sb(*args)}[cmd]()
    sys.exit(0 if ok else 1)
