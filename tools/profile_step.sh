#!/usr/bin/env bash
# Where a training step's time goes, per function, at each thread count: perf samples the timed
# steps of `spkddp bench` (one rank, random data) at THREADS="1 2" and prints the step's wall and CPU
# time, the parallel efficiency, and per function its CPU milliseconds per step at each count
# and, at the largest count, the share of its samples on the main thread. A function whose time
# is all on the main thread is a serial region (the other threads wait); one whose CPU time
# grows with the threads pays for them (synchronisation, memory traffic); with OpenMP's default
# wait policy (spin, then sleep) time waiting at barriers shows as libgomp's own functions.
#   tools/profile_step.sh [BUILD_DIR] [bench flags, e.g. --model ecapa --channels 512 --precision bf16]
# Environment: THREADS (default "1 2"), STEPS (timed steps, default 6), TOP (rows, default 25),
# OUT (where perf's files go, default a temporary folder). Needs perf (Debian: linux-perf) and
# permission to sample (root, or kernel.perf_event_paranoid <= 1).
set -euo pipefail
build=${1:-build}
shift || true
spkddp=$build/app/spkddp
[ -x "$spkddp" ] || { echo "profile_step.sh: $spkddp is missing: build first" >&2; exit 2; }
command -v perf >/dev/null || { echo "profile_step.sh: perf is not installed (apt-get install linux-perf)" >&2; exit 2; }
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
steps=${STEPS:-6}
for t in ${THREADS:-1 2}; do
    rm -f "$out/ctl" && mkfifo "$out/ctl"
    # perf starts disabled (-D -1); bench enables it for the timed steps through the fifo
    SPKDDP_PERF_CTL=$out/ctl SPKDDP_THREADS=$t perf record -q -F 997 -D -1 \
        --control "fifo:$out/ctl" -o "$out/t$t.data" -- "$spkddp" bench --steps "$steps" --warmup 1 "$@" \
        >"$out/t$t.bench" 2>&1 || { cat "$out/t$t.bench"; exit 1; }
    perf report -i "$out/t$t.data" --stdio -q --no-children --sort pid,sym 2>/dev/null >"$out/t$t.report"
done
python3 - "$out" ${THREADS:-1 2} <<'PY'
import re, sys
out, counts = sys.argv[1], [int(t) for t in sys.argv[2:]]
def bench(t):
    text = open(f"{out}/t{t}.bench").read()
    wall = float(re.search(r"([0-9.]+) s/step", text).group(1))
    cpu = float(re.search(r"rank 0 CPU ([0-9.]+) s/step", text).group(1))
    return wall, cpu
def profile(t):  # symbol -> (share of all samples, share of its samples on the main thread)
    rows = []
    for line in open(f"{out}/t{t}.report"):  # "pct%  tid:comm  [.] symbol" (perf's pid is the thread)
        m = re.match(r"\s*([0-9.]+)%\s+(\d+):\S+\s+\[.\]\s+(.*\S)", line)
        if m:  # code without a symbol is oneDNN's just-in-time kernels
            sym = "(jit code, oneDNN)" if re.fullmatch(r"0x[0-9a-f]+", m.group(3)) else m.group(3)
            rows.append((float(m.group(1)), int(m.group(2)), sym))
    first = min(tid for _, tid, _ in rows)  # the main thread's id is the process's
    total, main = {}, {}
    for pct, tid, sym in rows:
        total[sym] = total.get(sym, 0) + pct
        if tid == first: main[sym] = main.get(sym, 0) + pct
    return {s: (p / 100, main.get(s, 0) / p if p else 0) for s, p in total.items()}
b = {t: bench(t) for t in counts}
p = {t: profile(t) for t in counts}
t0, tn = counts[0], counts[-1]
print(f"step: " + ", ".join(f"{t} thread(s) {b[t][0]:.3f} s wall, {b[t][1]:.3f} s CPU" for t in counts))
if tn != t0:
    eff = b[t0][0] * t0 / (b[tn][0] * tn)
    print(f"parallel efficiency {t0} -> {tn} threads: {100 * eff:.0f}% (CPU time x{b[tn][1] / b[t0][1]:.2f})")
syms = sorted(set().union(*p.values()), key=lambda s: -max(p[t].get(s, (0, 0))[0] * b[t][1] for t in counts))
head = "".join(f"{str(t) + ' thr ms/step':>16}" for t in counts)
print(f"{'function':<48}{head}{'on main @' + str(tn):>12}")
for s in syms[: int(__import__('os').environ.get('TOP', '25'))]:
    row = "".join(f"{1e3 * p[t].get(s, (0, 0))[0] * b[t][1]:>16.1f}" for t in counts)
    print(f"{s[:47]:<48}{row}{100 * p[tn].get(s, (0, 0))[1]:>11.0f}%")
PY
