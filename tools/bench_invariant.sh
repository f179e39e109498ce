#!/usr/bin/env bash
# The cost of --invariant against the default training step (spkddp bench: forward, backward,
# gradient averaging, Adam on random data), interleaved runs on the same machine:
#   samples/s     of `mpiexec -n NP spkddp bench` (wall clock), median (min-max) of REPS runs
#   CPU s/step    CPU time (user + sys of every process) of STEPS steps minus that of 1 step,
#                 per step: the work, whatever the machine's other load does to the wall clock;
#                 median (min-max) of REPS runs
#   MB/step       payload this rank sends per step (gradients, and BatchNorm's sums)
#
#   tools/bench_invariant.sh BUILD_DIR [NP=2] [REPS=3] [STEPS=6] -- [bench flags...]
#   e.g. tools/bench_invariant.sh build 2 3 6 -- --batch 16            # ECAPA C=512, T=200
#        tools/bench_invariant.sh build 2 3 6 -- --batch 16 --channels 64
# Modes: default, --invariant, --invariant --invariant-group 4 and 16 (16: the whole per-rank
# batch of 16, which allows 1 or 2 ranks only), and groups of 16 with BatchNorm by groups
# (--invariant-bn group: each rank's batch of 16 normalised as the default mode does).
set -euo pipefail
build=$(cd "${1:?usage: tools/bench_invariant.sh BUILD_DIR [NP] [REPS] [STEPS] -- [bench flags]}" && pwd)
np=${2:-2}
reps=${3:-3}
steps=${4:-6}
shift $(($# < 4 ? $# : 4))
[ "${1:-}" = "--" ] && shift
spkddp=$build/app/spkddp
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
modes=("" "--invariant" "--invariant --invariant-group 4" "--invariant --invariant-group 16"
    "--invariant --invariant-group 16 --invariant-bn group")
declare -A sps cpu mb
load0=$(cut -d' ' -f1 /proc/loadavg)

# CPU seconds (user + sys) of a command; its output goes to out.tmp.
cpu_of() {
    /usr/bin/time -f "%U %S" -o time.tmp "$@" >out.tmp 2>/dev/null
    awk '{ print $1 + $2 }' time.tmp
}

for rep in $(seq "$reps"); do
    for i in "${!modes[@]}"; do
        m=${modes[$i]}
        c=$(cpu_of mpiexec -n "$np" "$spkddp" bench --device cpu --warmup 1 --steps "$steps" "$@" $m)
        out=$(cat out.tmp)
        sps[$i]+="$(sed -nE 's/.*: ([0-9.]+) samples\/s.*/\1/p' <<<"$out") "
        mb[$i]=$(sed -nE 's/.* ([0-9.]+) MB sent.*/\1/p' <<<"$out")
        c1=$(cpu_of mpiexec -n "$np" "$spkddp" bench --device cpu --warmup 1 --steps 1 "$@" $m)
        cpu[$i]+="$(awk -v a="$c" -v b="$c1" -v n="$steps" 'BEGIN { print (a - b) / (n - 1) }') "
    done
done
rm -f out.tmp time.tmp
# "median (min-max)" of the numbers on stdin
spread() {
    tr ' ' '\n' | grep . | sort -g | awk -v f="$1" '{ a[NR] = $1 } END {
        printf f " (" f "-" f ")", a[int((NR + 1) / 2)], a[1], a[NR] }'
}
echo "spkddp bench --device cpu $* on $np ranks, $(nproc) cores, load average $load0 at the start, $(cut -d' ' -f1 /proc/loadavg) at the end, $reps runs each:"
printf "%-54s %22s %22s %8s\n" mode "samples/s" "CPU s/step" MB/step
for i in "${!modes[@]}"; do
    printf "%-54s %22s %22s %8s\n" "${modes[$i]:-default}" "$(spread %.2f <<<"${sps[$i]}")" \
        "$(spread %.3f <<<"${cpu[$i]}")" "${mb[$i]:--}"
done
