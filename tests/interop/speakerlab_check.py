"""3D-Speaker's own CAM++ class (speakerlab.models.campplus.DTDNN.CAMPPlus, PyPI's speakerlab)
against spkddp, on the same features.

  export ST DATA EMB     ST (spkddp export) loads into CAMPPlus with load_state_dict(strict=True)
                         (num_batches_tracked included); its embeddings of DATA match spkddp's EMB
                         (spkddp embed) to a relative 1e-5.
  make DIR F E           a CAMPPlus (F features, embedding E, growth rate 16) with random weights
                         and BatchNorm statistics, saved as 3D-Speaker saves an encoder
                         (DIR/model.pt, its state dict; DIR/args.json, the class's arguments)
  compare DIR DATA EMB   that model's embeddings of DATA match EMB, what spkddp embed computed from
                         the converted file (tools/speakerlab_to_safetensors.py).

Features: DATA's frames, each utterance mean-normalised over its frames as spkddp's loader does;
CAMPPlus runs in float64, so the difference is spkddp's float32 rounding.
"""
import json
import sys

import torch
from interop_data import cmn, relative, spkddp_embeddings, utterances
from safetensors import safe_open
from safetensors.torch import load_file
from speakerlab.models.campplus.DTDNN import CAMPPlus

TOL = 1e-5


def compare(model, data, emb_path):
    model.eval().double()
    ours = spkddp_embeddings(emb_path)
    utts = utterances(data)
    worst = 0.0
    with torch.no_grad():
        for uid, x in utts:
            theirs = model(torch.from_numpy(cmn(x)[None]).double())
            worst = max(worst, relative(ours[uid], theirs.reshape(-1).numpy()))
    lengths = [len(x) for _, x in utts]
    print("3D-Speaker's CAMPPlus vs spkddp: %d utterances (%d to %d frames), largest relative difference %.3g "
          "(tolerance %g)" % (len(utts), min(lengths), max(lengths), worst, TOL))
    return worst <= TOL


def check_export(st, data, emb):
    with safe_open(st, "pt") as f:
        meta = f.metadata()
    sd = load_file(st)
    model = CAMPPlus(**json.loads(meta["3d-speaker_model_args"]))
    model.load_state_dict({k: v for k, v in sd.items() if k != "classifier.weight"}, strict=True)
    steps = int(meta["global_step"])
    counters = [v for k, v in sd.items() if k.endswith("num_batches_tracked")]
    ok = len(counters) > 0 and all(c.dtype == torch.int64 and c.shape == () and int(c) == steps for c in counters)
    params = sum(p.numel() for p in model.parameters())
    print("%s: strict load of %d tensors (%d parameters) into %s; %d num_batches_tracked = %d: %s" %
          (st, len(sd) - 1, params, meta["3d-speaker_model"], len(counters), steps, "ok" if ok else "WRONG"))
    return compare(model, data, emb) and ok


def make(out, feat, emb):
    torch.manual_seed(7)
    args = dict(feat_dim=feat, embedding_size=emb, growth_rate=16, bn_size=4, init_channels=32)
    model = CAMPPlus(**args)
    with torch.no_grad():  # BatchNorm affine and running statistics away from 1 and 0
        for bn in (mod for mod in model.modules() if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm)):
            bn.running_var.uniform_(0.5, 1.5)
            bn.running_mean.normal_(0.0, 0.2)
            if bn.affine:
                bn.bias.normal_(0.0, 0.2)
                bn.weight.uniform_(0.7, 1.3)
    torch.save(model.state_dict(), out + "/model.pt")
    json.dump(args, open(out + "/args.json", "w"))
    return True


def compare_saved(d, data, emb):
    model = CAMPPlus(**json.load(open(d + "/args.json")))
    model.load_state_dict(torch.load(d + "/model.pt"), strict=True)
    return compare(model, data, emb)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    ok = {"export": lambda: check_export(*args),
          "make": lambda: make(args[0], int(args[1]), int(args[2])),
          "compare": lambda: compare_saved(*args)}[cmd]()
    sys.exit(0 if ok else 1)
