#!/usr/bin/python3
"""spkddp's training recipe in PyTorch, on the same feature datasets: the toolkits' own model
classes trained the way `spkddp train` trains them, then the cosine EER of their embeddings on
unseen speakers. It tells a property of a model (how fast it learns a corpus) from a property of
spkddp's implementation of it: the same recipe on both sides should land close.
  train_pytorch.py --model ecapa|campplus|resnet34 --train train.h5 --test test.h5
                   --trials trials.txt [--epochs 20] [--frames 100] [--global-batch 32]
                   [--ranks 2] [--lr 0.002] [--warmup-steps 20] [--lr-min 0.0002]
                   [--margin 0.2] [--scale 30] [--seed 1] [--threads N] [--precision fp32|bf16]
                   [--optimizer adam] [--lr-schedule cosine]
What it matches (app/train, io/loader): per epoch a shuffled order cut into global batches;
each sample a random crop of --frames (a shorter utterance repeated to fill it), the crop's mean
frame subtracted; --ranks micro-batches per step, each with its own BatchNorm statistics (as each
rank's, under data parallelism), their gradients averaged; Adam (0.9, 0.999, 1e-8); the learning
rate cosine from --lr to --lr-min over the run after a linear warmup that scales it by
(step + 1) / warmup; AAM-softmax (margin, scale; tests/golden/golden_common.py) over a classifier
initialised Xavier-uniform. Embeddings: whole utterances, mean frame subtracted, eval mode.
What it does not: spkddp's random streams (other crops and orders), so compare EERs over seeds.
Trials: the lines `enroll test target|nontarget` of `spkddp trials`.
"""
import argparse
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "golden"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "interop"))
sys.path.insert(0, HERE)
from bench_pytorch import build  # noqa: E402
from golden_common import aam_logits  # noqa: E402
from interop_data import utterances  # noqa: E402


def speakers(path):
    import h5py
    with h5py.File(path, "r") as f:
        return np.asarray(f["labels"][...], np.int64)


def crop(x, frames, rng):
    """A random crop of `frames` (a shorter utterance repeated), its mean frame subtracted."""
    if len(x) >= frames:
        s = int(rng.integers(0, len(x) - frames + 1))
        x = x[s:s + frames]
    else:
        x = np.concatenate([x] * (frames // len(x) + 1))[:frames]
    return x - x.astype(np.float64).mean(axis=0).astype(np.float32)


def lr_at(step, total, a):
    t = max(step - a.warmup_steps, 0)
    horizon = total - a.warmup_steps
    p = min(t / horizon, 1.0) if horizon > 0 else 1.0
    lr = a.lr_min + 0.5 * (a.lr - a.lr_min) * (1.0 + math.cos(math.pi * p))
    if a.warmup_steps > 0 and step < a.warmup_steps:
        lr *= (step + 1) / a.warmup_steps
    return lr


def embed(model, x, precision):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        e = model(x)
    e = e[-1] if isinstance(e, tuple) else e
    return e.float().reshape(x.shape[0], -1)


def eer(scores, target):
    """Equal error rate, %: where the miss and false-alarm rates cross, between two thresholds."""
    order = np.argsort(-scores, kind="stable")
    t = target[order]
    nt, nn_ = t.sum(), (~t).sum()
    miss = 1.0 - np.cumsum(t) / nt  # accepting the first k+1
    fa = np.cumsum(~t) / nn_
    k = int(np.argmin(np.abs(miss - fa)))
    return 100.0 * (miss[k] + fa[k]) / 2.0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="ecapa")
    p.add_argument("--channels", type=int, default=0)
    p.add_argument("--train", required=True)
    p.add_argument("--test", required=True)
    p.add_argument("--trials", required=True)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--frames", type=int, default=100)
    p.add_argument("--global-batch", type=int, default=32)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.002)
    p.add_argument("--lr-min", type=float, default=0.0002)
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--margin", type=float, default=0.2)
    p.add_argument("--scale", type=float, default=30.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    # spkddp's spelling of the one recipe this trains, so tools/compare_encoders.sh passes its flags as they are
    p.add_argument("--optimizer", default="adam", choices=["adam"])
    p.add_argument("--lr-schedule", default="cosine", choices=["cosine"])
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)

    train = [x for _, x in utterances(a.train)]
    labels = speakers(a.train)
    nspk = int(labels.max()) + 1
    feat = train[0].shape[1]
    bench_args = argparse.Namespace(model=a.model, feat=feat, channels=a.channels, growth_rate=32, bn_size=4,
                                    recompute=False)
    model, emb_dim, where = build(bench_args)
    W = nn.Parameter(torch.empty(nspk, emb_dim))
    nn.init.xavier_uniform_(W)
    params = list(model.parameters()) + [W]
    opt = torch.optim.Adam(params, lr=a.lr, betas=(0.9, 0.999), eps=1e-8)
    steps_per_epoch = len(train) // a.global_batch
    total = steps_per_epoch * a.epochs
    print("train_pytorch: %s (%s), %d parameters, %d utterances of %d speakers, %d steps of %d in %d micro-batches"
          % (a.model, where, sum(q.numel() for q in model.parameters()), len(train), nspk, total, a.global_batch,
             a.ranks), flush=True)
    t0, step = time.time(), 0
    for epoch in range(a.epochs):
        order = rng.permutation(len(train))
        model.train()
        loss_sum = correct = seen = 0
        for s in range(steps_per_epoch):
            for g in opt.param_groups:
                g["lr"] = lr_at(step, total, a)
            opt.zero_grad(set_to_none=True)
            idx = order[s * a.global_batch:(s + 1) * a.global_batch]
            for part in np.array_split(idx, a.ranks):
                x = torch.from_numpy(np.stack([crop(train[i], a.frames, rng) for i in part]))
                y = torch.from_numpy(labels[part])
                logits, cos = aam_logits(embed(model, x, a.precision), W, y, a.margin, a.scale)
                loss = F.cross_entropy(logits, y)
                (loss * len(part) / len(idx)).backward()
                loss_sum += float(loss) * len(part)
                correct += int((cos.argmax(1) == y).sum())
                seen += len(part)
            opt.step()
            step += 1
        print("epoch %d loss %.4f acc %.4f lr %.6f time %.0f s" % (epoch + 1, loss_sum / seen, correct / seen,
                                                                   lr_at(step - 1, total, a), time.time() - t0),
              flush=True)
    train_s = time.time() - t0

    model.eval()
    embs = {}
    with torch.no_grad():
        for uid, x in utterances(a.test):
            x = x - x.astype(np.float64).mean(axis=0).astype(np.float32)
            embs[uid] = F.normalize(embed(model, torch.from_numpy(x)[None], a.precision), dim=1)[0].numpy()
    scores, target = [], []
    with open(a.trials) as f:
        for line in f:
            e, t, kind = line.split()
            scores.append(float(np.dot(embs[e], embs[t])))
            target.append(kind == "target")
    print("%s: %d epochs, training %.0f s, cosine EER %.2f%% (%d trials)"
          % (a.model, a.epochs, train_s, eer(np.array(scores), np.array(target)), len(scores)))


if __name__ == "__main__":
    main()
