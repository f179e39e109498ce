#!/usr/bin/env bash
# Where a training step's oneDNN time goes, per primitive and shape, at each thread count: runs
# `spkddp bench` (one rank, random data) under DNNL_VERBOSE=1 at THREADS="1 2" and prints, for the
# timed steps only, each kind of primitive (convolution forward / input gradient / weight
# gradient, matmul, reorder) and then each shape: milliseconds per step at every count, its
# GFLOP/s and share of the machine's peak (tools/bench_peak.c, bf16 or fp32 by the operands) at
# the largest count, and how its CPU time grows with the threads (ms x threads against the first
# count: 1.00 scales perfectly). A Winograd convolution's GFLOP/s count the direct convolution's
# FLOPs (so above 100% of the peak). Primitives that the threads run side by side, each planned
# for one thread (the 1-D models' bf16 chunks on 2 or more threads, the invariant mode's
# blocks), add up as CPU time: their milliseconds are the threads' together and their GFLOP/s a
# single thread's, so their share of one core's peak is the share shown times the threads. The
# perf profile (tools/profile_step.sh) shows oneDNN's just-in-time code as one row; this splits
# it. The float32 GEMMs of the 1-D models (dnnl_sgemm) are no primitives and do not show: their
# bf16 ones (matmul) do.
#   tools/profile_dnnl.sh [BUILD_DIR] [bench flags, e.g. --model campplus --precision bf16]
# Environment: THREADS (default "1 2"), STEPS (timed steps, default 4), TOP (shape rows, 25),
# OUT (where the logs go, default a temporary folder). Every timed step runs the same shapes,
# so the first WARMUP/(WARMUP+STEPS) of each shape's executions are the warm-up's and are left out
# (their first runs include the kernels' generation).
set -euo pipefail
build=${1:-build}
shift || true
spkddp=$build/app/spkddp
[ -x "$spkddp" ] || { echo "profile_dnnl.sh: $spkddp is missing: build first" >&2; exit 2; }
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
steps=${STEPS:-4} warmup=2
threads=${THREADS:-1 2}
for t in $threads; do
    DNNL_VERBOSE=1 SPKDDP_THREADS=$t "$spkddp" bench --steps "$steps" --warmup $warmup "$@" >"$out/t$t.log" 2>&1 ||
        { tail -5 "$out/t$t.log"; exit 1; }
done
peaks=""
[ -x "$build/tests/bench_peak" ] && peaks=$("$build/tests/bench_peak" "${threads##* }")
# shellcheck disable=SC2086  # one argument per thread count
PEAKS=$peaks python3 - "$out" "$steps" "$warmup" $threads <<'PY'
import collections, os, re, sys
out, steps, warmup, counts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), [int(t) for t in sys.argv[4:]]
peak = {k: float(v) for k, v in re.findall(r"peak (fp32|bf16) ([0-9.]+) GFLOP/s", os.environ.get("PEAKS", ""))}

def flops(prim, problem):
    if prim == "convolution":  # mb32_ic32oc32_ih40oh40kh3..._iw200ow200kw3...; g: groups
        d = dict((k, int(v)) for k, v in re.findall(r"([a-z]+)(\d+)", problem))
        return 2.0 * d.get("g", 1) * d["mb"] * (d["ic"] // d.get("g", 1)) * (d["oc"] // d.get("g", 1)) * \
            d.get("kd", 1) * d.get("kh", 1) * d["kw"] * d.get("od", 1) * d.get("oh", 1) * d["ow"]
    if prim == "matmul":  # [batch x]M x K : [batch x]K x N : ...
        a, b = problem.split(":")[:2]
        a, b = [int(v) for v in a.split("x")], [int(v) for v in b.split("x")]
        batch = 1
        for v in a[:-2]: batch *= v
        return 2.0 * batch * a[-2] * a[-1] * b[-1]
    return 0.0

def load(t):  # shape -> [ms per timed step, calls per step, GFLOP per step, impl, operand type]
    text = open(f"{out}/t{t}.log").read()
    wall = float(re.search(r"([0-9.]+) s/step", text).group(1))
    times = collections.defaultdict(list)
    meta = {}
    for line in text.splitlines():
        if not line.startswith("onednn_verbose,exec,"): continue
        f = line.split(",")  # exec, engine, primitive, impl, prop, memory descs, attrs, aux, problem, time
        prim, impl, prop, mds, problem = f[3], f[4], f[5], f[6], f[9]
        key = (prim, prop if prim != "reorder" else "", problem if prim != "reorder" else mds)
        times[key].append(float(f[-1]))
        meta[key] = (impl, "bf16" if "bf16" in mds else "fp32")
    rows = {}
    for key, v in times.items():
        per = len(v) // (steps + warmup)
        kept = v[len(v) - per * steps:] if per else v
        rows[key] = (sum(kept) / steps, per, flops(key[0], key[2]) * per / 1e9) + meta[key]
    return wall, rows

data = {t: load(t) for t in counts}
tn = counts[-1]
print("step: " + ", ".join(f"{t} thread(s) {data[t][0]:.3f} s, oneDNN {sum(r[0] for r in data[t][1].values()):.0f} ms"
                           f" ({sum(r[0] for r in data[t][1].values()) / 10 / data[t][0]:.0f}%)" for t in counts))

def table(rows_of, label, keys, describe):
    head = "".join(f"{str(t) + ' thr ms':>10}" for t in counts)
    print(f"\n{head}{'GFLOP/s':>9}{'of peak':>8}{'CPU x':>7}  {label}")
    for k in keys:
        ms = [rows_of(t).get(k, (0, 0, 0, "", ""))[0] for t in counts]
        r = rows_of(tn).get(k, (0, 0, 0, "", "fp32"))
        gf = r[2] / (ms[-1] / 1e3) if ms[-1] and r[2] else 0
        rate = f"{gf:.0f}" if gf else ""
        share = f"{100 * gf / peak[r[4]]:.0f}%" if gf and r[4] in peak else ""
        grow = f"{ms[-1] * tn / (ms[0] * counts[0]):.2f}" if ms[0] else ""
        print("".join(f"{v:>10.1f}" for v in ms) + f"{rate:>9}{share:>8}{grow:>7}  {describe(k, r)}")

def kinds(t):
    acc = {}
    for (prim, prop, _), r in data[t][1].items():
        k = (prim, prop if prop != "undef" else "", r[4])
        a = acc.get(k, [0.0, 0, 0.0, "", r[4]])
        a[0] += r[0]; a[1] += r[1]; a[2] += r[2]
        acc[k] = a
    return acc
kind_keys = sorted(kinds(tn), key=lambda k: -kinds(tn)[k][0])
table(kinds, "primitive (operands)", kind_keys, lambda k, r: f"{k[0]} {k[1]} ({k[2]})")
shape_keys = sorted(data[tn][1], key=lambda k: -data[tn][1][k][0])[: int(os.environ.get("TOP", "25"))]
table(lambda t: data[t][1], "shape (calls per step)", shape_keys,
      lambda k, r: f"{k[0][:4]} {k[1].replace('_training', '').replace('undef', '')} {r[1]}x {k[2] if k[0] != 'reorder' else r[3]}")
PY
