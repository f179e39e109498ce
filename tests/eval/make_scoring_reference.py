#!/usr/bin/python3
"""Independent NumPy reference for spkddp's scoring and calibration (tests/eval/test_scoring_reference.c).

Writes tests/eval/scoring_reference.txt: random float32 embeddings of a few speakers, a cohort,
trials, per-utterance durations, and what NumPy computes from them in float64:
  - cosine, S-norm and AS-norm (top-k) scores, stored rounded to float32 (what spkddp keeps);
  - from those float32 scores: EER, minDCF at several target priors, the miss rate at fixed
    false-alarm rates (the DET table), Cllr and minCllr (pool-adjacent-violators), and the
    logistic-regression calibration (offset and scale at two priors; with the log durations of
    both sides as quality measures) with the calibrated log-likelihood ratios.
The definitions are spkddp's (README, app/eval/*.h), written again here without its code.
Regenerate: /usr/bin/python3 tests/eval/make_scoring_reference.py (Debian python3-numpy);
the output is the same on every run.
"""
import os

import numpy as np

PRIORS = [0.01, 0.05, 0.001, 0.5]
PFA = [0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2]
TOP = 10
L2 = 1e-6  # calibration's penalty on everything but the offset (app/eval/calibration.h)


def unit_rows(x):
    return x / np.sqrt((x * x).sum(axis=1, keepdims=True))


def cohort_stats(emb, cohort, top):
    s = np.sort(emb @ cohort.T, axis=1)[:, ::-1][:, :top]
    return s.mean(axis=1), np.maximum(s.std(axis=1), 1e-6)


def det(scores, target):
    """(Pmiss, Pfa) as the threshold rises past each distinct score: at -inf, then after each."""
    t, n = scores[target == 1], scores[target == 0]
    thresholds = np.concatenate([[-np.inf], np.unique(scores)])
    pm = np.searchsorted(np.sort(t), thresholds, side="right") / len(t)
    pf = 1.0 - np.searchsorted(np.sort(n), thresholds, side="right") / len(n)
    return pm, pf


def eer(pm, pf):
    k = int(np.argmax(pm >= pf))
    d = (pm[k] - pm[k - 1]) - (pf[k] - pf[k - 1])
    a = (pf[k - 1] - pm[k - 1]) / d if d != 0 else 0.0
    return pm[k - 1] + a * (pm[k] - pm[k - 1])


def min_dcf(pm, pf, p):
    return np.min(p * pm + (1 - p) * pf) / min(p, 1 - p)


def pmiss_at(pm, pf, x):
    return np.min(pm[pf <= x])


def cllr(llr, target):
    return (np.mean(np.logaddexp(0, -llr[target == 1])) + np.mean(np.logaddexp(0, llr[target == 0]))) / (2 * np.log(2))


def min_cllr(scores, target):
    """Cllr of the optimal monotone calibration: PAV over tie groups, then llr = logit p - logit(Nt/N)."""
    values, inverse = np.unique(scores, return_inverse=True)
    tar = np.bincount(inverse, weights=target, minlength=len(values))
    cnt = np.bincount(inverse, minlength=len(values)).astype(float)
    blocks = []  # [targets, count, first group, last group]
    for g in range(len(values)):
        blocks.append([tar[g], cnt[g], g, g])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]:
            b = blocks.pop()
            blocks[-1][0] += b[0]
            blocks[-1][1] += b[1]
            blocks[-1][3] = b[3]
    post = np.empty(len(values))
    for b in blocks:
        post[b[2]:b[3] + 1] = b[0] / b[1]
    nt = target.sum()
    with np.errstate(divide="ignore"):
        llr = np.log(post[inverse]) - np.log1p(-post[inverse]) - np.log(nt / (len(target) - nt))
    return cllr(llr, target)


def calibrate(scores, quality, target, prior):
    """Newton's method on the prior-weighted logistic loss (+ L2 on all but the offset)."""
    x = np.column_stack([np.ones_like(scores), scores] + ([quality] if quality is not None else []))
    nt = target.sum()
    weight = np.where(target == 1, prior / nt, (1 - prior) / (len(target) - nt))
    sign = np.where(target == 1, -1.0, 1.0)  # loss softplus(sign * z)
    penalty = np.full(x.shape[1], L2)
    penalty[0] = 0
    w = np.zeros(x.shape[1])
    for _ in range(200):
        z = x @ w + np.log(prior / (1 - prior))
        sig = 1 / (1 + np.exp(-z))
        g = x.T @ (weight * np.where(target == 1, sig - 1, sig)) + penalty * w
        h = (x * (weight * sig * (1 - sig))[:, None]).T @ x + np.diag(penalty)
        step = np.linalg.solve(h, -g)
        loss = lambda v: np.sum(weight * np.logaddexp(0, sign * (x @ v + np.log(prior / (1 - prior))))) + 0.5 * np.sum(penalty * v * v)
        t = 1.0
        while loss(w + t * step) > loss(w) + 1e-4 * t * (g @ step) and t > 1e-12:
            t /= 2
        w = w + t * step
        if np.max(np.abs(t * step)) < 1e-14:
            break
    return w, x @ w


def main():
    rng = np.random.default_rng(20240607)
    speakers, per, d, m = 9, 4, 8, 30
    centres = rng.standard_normal((speakers, d))
    emb = (np.repeat(centres, per, axis=0) + 0.9 * rng.standard_normal((speakers * per, d))).astype(np.float32)
    cohort = rng.standard_normal((m, d)).astype(np.float32)
    dur = np.round(rng.uniform(2.0, 20.0, speakers * per), 2)
    labels = np.repeat(np.arange(speakers), per)
    pairs = [(i, j) for i in range(len(emb)) for j in range(i + 1, len(emb))]
    targets = [p for p in pairs if labels[p[0]] == labels[p[1]]]
    others = [p for p in pairs if labels[p[0]] != labels[p[1]]]
    chosen = targets + [others[k] for k in rng.choice(len(others), 300, replace=False)]
    order = rng.permutation(len(chosen))
    a = np.array([chosen[k][0] for k in order])
    b = np.array([chosen[k][1] for k in order])
    target = (labels[a] == labels[b]).astype(int)

    e = unit_rows(emb.astype(np.float64))
    c = unit_rows(cohort.astype(np.float64))
    raw = np.sum(e[a] * e[b], axis=1)
    systems = {"cosine": raw}
    for name, top in (("snorm", m), ("asnorm", TOP)):
        mu, sd = cohort_stats(e, c, top)
        systems[name] = 0.5 * ((raw - mu[a]) / sd[a] + (raw - mu[b]) / sd[b])
    quality = np.column_stack([np.log(np.minimum(dur[a], dur[b])), np.log(np.maximum(dur[a], dur[b]))])

    out = []
    put = lambda name, values, fmt="%.17g": out.append("%s %d\n%s\n" % (name, len(values), " ".join(fmt % v for v in values)))
    put("sizes", [len(emb), d, m, len(a), TOP], "%d")
    put("priors", PRIORS)
    put("pfa", PFA)
    put("emb", emb.ravel(), "%.9g")
    put("cohort", cohort.ravel(), "%.9g")
    put("dur", dur, "%.2f")
    put("trial_a", a, "%d")
    put("trial_b", b, "%d")
    put("target", target, "%d")
    for name, s64 in systems.items():
        s = s64.astype(np.float32)
        put(name, s, "%.9g")
        s = s.astype(np.float64)  # the metrics start from the float32 scores spkddp has
        pm, pf = det(s, target)
        put(name + ".eer", [eer(pm, pf)])
        put(name + ".mindcf", [min_dcf(pm, pf, p) for p in PRIORS])
        put(name + ".pmiss", [pmiss_at(pm, pf, x) for x in PFA])
        put(name + ".cllr", [cllr(s, target), min_cllr(s, target)])
        w50, llr50 = calibrate(s, None, target, 0.5)
        w05, _ = calibrate(s, None, target, 0.05)
        wq, llrq = calibrate(s, quality, target, 0.5)
        put(name + ".cal", list(w50) + list(w05) + [cllr(llr50, target)])
        put(name + ".calq", list(wq) + [cllr(llrq, target)])
        put(name + ".llrq", llrq)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scoring_reference.txt")
    with open(path, "w") as f:
        f.write("# spkddp scoring reference: written by tests/eval/make_scoring_reference.py (NumPy %s)\n" % np.__version__)
        f.write("# each block: NAME COUNT, then COUNT values\n")
        f.write("".join(out))
    print("wrote", path)


if __name__ == "__main__":
    main()
