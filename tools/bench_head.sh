#!/usr/bin/env bash
# The classifier replicated against sharded (--head sharded) with `spkddp bench`: step time,
# payload bytes each rank sends per step, and the largest rank's peak memory, for each number of
# classes and ranks, the two heads interleaved over ROUNDS rounds (best step time kept).
#   tools/bench_head.sh [BUILD_DIR] [extra bench flags, e.g. --channels 512 --batch 32]
# Environment: CLASSES="100000 1000000", RANKS="2 4", ROUNDS=2, STEPS=3, THREADS (per rank,
# default cores / ranks). A run that does not fit in memory is reported as such, not retried.
set -uo pipefail
build=${1:-build}
shift || true
classes=${CLASSES:-100000 1000000}
ranks=${RANKS:-2 4}
rounds=${ROUNDS:-2}
steps=${STEPS:-3}
cores=$(nproc)
echo "classes ranks head       s/step  MB sent/rank/step  largest rank MiB"
for c in $classes; do
    for k in $ranks; do
        threads=${THREADS:-$((cores / k > 0 ? cores / k : 1))}
        declare -A best=() line=()
        for r in $(seq "$rounds"); do
            for h in replicated sharded; do
                out=$(OMP_NUM_THREADS=$threads mpiexec -n "$k" "$build/app/spkddp" bench --classes "$c" --head "$h" \
                    --steps "$steps" --warmup 1 "$@" 2>&1 | grep "^bench: .*samples/s")
                if [ -z "$out" ]; then line[$h]="did not run (memory?)"; continue; fi
                s=$(sed 's/.* \([0-9.]*\) s\/step.*/\1/' <<<"$out")
                mb=$(sed 's/.* \([0-9.]*\) MB sent.*/\1/' <<<"$out")
                mib=$(sed 's/.*largest rank \([0-9]*\) MiB.*/\1/' <<<"$out")
                if [ -z "${best[$h]:-}" ] || awk -v a="$s" -v b="${best[$h]}" 'BEGIN { exit !(a < b) }'; then
                    best[$h]=$s
                    line[$h]=$(printf '%-7s %-18s %s' "$s" "$mb" "$mib")
                fi
            done
        done
        for h in replicated sharded; do printf '%-7s %-5s %-10s %s\n' "$c" "$k" "$h" "${line[$h]:-}"; done
        if [ -n "${best[replicated]:-}" ] && [ -n "${best[sharded]:-}" ]; then
            awk -v a="${best[replicated]}" -v b="${best[sharded]}" 'BEGIN { printf "                        sharded %.2fx faster\n", a / b }'
        fi
        unset best line
    done
done
