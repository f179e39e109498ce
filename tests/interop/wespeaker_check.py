"""WeSpeaker's own ResNet classes against spkddp, on the same features.

WeSpeaker is not on PyPI; pyannote.audio ships its resnet.py (WeSpeaker's classes and state-dict
names, ResNet18 ... ResNet293), which is what this loads (tools/wespeaker_resnet.py).

  export ST DATA EMB     ST (spkddp export) loads into that ResNet with load_state_dict(strict=True)
                         (num_batches_tracked included); its embeddings of DATA match spkddp's EMB
                         (spkddp embed) to a relative 1e-5.
  make-ws DIR F E N      a WeSpeaker ResNet34 (m_channels 8, F features, embedding E) with random
                         weights and BatchNorm statistics and an N-speaker projection, saved as
                         WeSpeaker saves a model: DIR/model.pt ("projection.weight" beside the
                         encoder's tensors), DIR/args.json
  compare-ws DIR DATA EMB  that model's embeddings of DATA match EMB, what spkddp embed computed
                         from the converted file (tools/wespeaker_to_safetensors.py).

Pooling: pyannote.audio's copy replaced WeSpeaker's TSTP, sqrt(var + 1e-7), by its own
StatsPool, sqrt(var): the same but for channels that are constant over time (a ReLU that is off
for a whole row), where WeSpeaker and spkddp give 3.2e-4 and pyannote.audio 0. The check runs
the ResNet with WeSpeaker's TSTP (pooling_layers.TSTP as WeSpeaker defines it) and requires 1e-5
there, and prints the difference to the copy as pyannote.audio ships it too. Features: DATA's
frames, each utterance mean-normalised over its frames as spkddp's loader does; the ResNet runs in
float64, so the difference is spkddp's float32 rounding.
"""
import json
import os
import sys

import torch
from interop_data import cmn, relative, spkddp_embeddings, utterances
from safetensors import safe_open
from safetensors.torch import load_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import wespeaker_resnet  # noqa: E402

TOL = 1e-5


def build(args):
    return wespeaker_resnet.build(args["depth"], args["feat_dim"], args["embed_dim"], args.get("m_channels", 32))


class WeSpeakerTSTP(torch.nn.Module):
    """WeSpeaker's TSTP (wespeaker/models/pooling_layers.py): the mean and sqrt(var + 1e-7) over
    the last axis of (B, C, H, T), flattened."""

    def forward(self, x, weights=None):
        return torch.cat((x.mean(dim=-1).flatten(1), torch.sqrt(torch.var(x, dim=-1) + 1e-7).flatten(1)), 1)


def compare(encoder, data, emb_path):
    encoder.eval().double()
    ours = spkddp_embeddings(emb_path)
    utts = utterances(data)
    shipped_pool, worst = encoder.pool, {}
    for name, pool in [("WeSpeaker's TSTP", WeSpeakerTSTP()), ("pyannote.audio's StatsPool", shipped_pool)]:
        encoder.pool = pool
        worst[name] = 0.0
        with torch.no_grad():
            for uid, x in utts:
                _, ws = encoder(torch.from_numpy(cmn(x)[None]).double())
                worst[name] = max(worst[name], relative(ours[uid], ws.reshape(-1).numpy()))
    encoder.pool = shipped_pool
    lengths = [len(x) for _, x in utts]
    print("WeSpeaker's ResNet vs spkddp: %d utterances (%d to %d frames), largest relative difference %.3g with "
          "WeSpeaker's TSTP (tolerance %g), %.3g with pyannote.audio's StatsPool" %
          (len(utts), min(lengths), max(lengths), worst["WeSpeaker's TSTP"], TOL, worst["pyannote.audio's StatsPool"]))
    return worst["WeSpeaker's TSTP"] <= TOL


def check_export(st, data, emb):
    with safe_open(st, "pt") as f:
        meta = f.metadata()
    sd = load_file(st)
    args = json.loads(meta["wespeaker_model_args"])
    args["depth"] = meta["spkddp_model"]
    enc = build(args)
    enc.load_state_dict({k: v for k, v in sd.items() if k != "classifier.weight"}, strict=True)
    steps = int(meta["global_step"])
    counters = [v for k, v in sd.items() if k.endswith("num_batches_tracked")]
    ok = len(counters) > 0 and all(c.dtype == torch.int64 and c.shape == () and int(c) == steps for c in counters)
    print("%s: strict load of %d tensors into %s; %d num_batches_tracked = %d: %s" %
          (st, len(sd) - 1, meta["wespeaker_model"], len(counters), steps, "ok" if ok else "WRONG"))
    return compare(enc, data, emb) and ok


def make_ws(out, feat, emb, speakers):
    torch.manual_seed(11)
    args = dict(depth="resnet34", feat_dim=feat, embed_dim=emb, m_channels=8)
    enc = build(args)
    with torch.no_grad():  # BatchNorm affine and running statistics away from 1 and 0
        for bn in (mod for mod in enc.modules() if isinstance(mod, torch.nn.BatchNorm2d)):
            bn.running_var.uniform_(0.5, 1.5)
            bn.running_mean.normal_(0.0, 0.2)
            bn.bias.normal_(0.0, 0.2)
            bn.weight.uniform_(0.7, 1.3)
    sd = dict(enc.state_dict())
    sd["projection.weight"] = torch.nn.init.xavier_uniform_(torch.empty(speakers, emb))
    torch.save(sd, out + "/model.pt")
    json.dump(args, open(out + "/args.json", "w"))
    return True


def compare_ws(d, data, emb):
    enc = build(json.load(open(d + "/args.json")))
    sd = torch.load(d + "/model.pt")
    sd.pop("projection.weight")
    enc.load_state_dict(sd, strict=True)
    return compare(enc, data, emb)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    ok = {"export": lambda: check_export(*args),
          "make-ws": lambda: make_ws(args[0], int(args[1]), int(args[2]), int(args[3])),
          "compare-ws": lambda: compare_ws(*args)}[cmd]()
    sys.exit(0 if ok else 1)
