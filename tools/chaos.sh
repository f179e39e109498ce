#!/usr/bin/env bash
# Chaos: SIGKILL one random rank of a training run at a random moment, again and again, and
# check what a user relies on afterwards:
#   - the job ends by itself, and how fast (from the kill to mpiexec's exit);
#   - every checkpoint left in --ckpt-dir loads (`spkddp inspect`), and no temp file is
#     mistaken for one;
#   - `--resume auto` from what is left finishes bitwise equal to an uninterrupted run
#     (`spkddp diff` without a tolerance).
# Each trial is a fresh run in its own directory with a checkpoint every CKPT_EVERY steps,
# so a kill lands in a step, a checkpoint write, a rotation or the start-up alike.
#
# usage: tools/chaos.sh [KILLS] [MODEL]     (MODEL: linear or ecapa; default 20 linear)
# environment: SPKDDP (default build/app/spkddp), MPIEXEC (mpiexec), NP (ranks, 2), SEED (1),
#   WORK (a fresh temp folder), CKPT_EVERY (2). Exit 0 when every trial passed.
set -u
KILLS=${1:-20} MODEL=${2:-linear}
SPKDDP=$(realpath "${SPKDDP:-build/app/spkddp}") MPIEXEC=${MPIEXEC:-mpiexec} NP=${NP:-2}
SEED=${SEED:-1} CKPT_EVERY=${CKPT_EVERY:-2}
WORK=${WORK:-$(mktemp -d /tmp/spkddp-chaos.XXXXXX)}
mkdir -p "$WORK" && cd "$WORK" && WORK=$PWD || exit 1
rm -rf ref ref.out t[0-9]* data.h5  # a previous run's (only what this script names)
RANDOM=$SEED

case $MODEL in
    linear) DIM=16 ARGS="--model linear --epochs 6 --global-batch 8 --optimizer sgd --momentum 0.9 --lr 0.05" ;;
    ecapa) DIM=16 ARGS="--model ecapa --channels 8 --emb-dim 8 --attention-channels 8 --se-channels 4 --frames 20 \
--epochs 4 --global-batch 8 --optimizer adam --lr 1e-3" ;;
    *) echo "chaos.sh: MODEL must be linear or ecapa" >&2; exit 2 ;;
esac
"$SPKDDP" synth --kind speakers --out data.h5 --dim $DIM --speakers 8 --utts-per-speaker 40 --min-frames 20 \
    --max-frames 40 >/dev/null || exit 1
TRAIN="train --data data.h5 $ARGS --ckpt-every $CKPT_EVERY --progress 0"

now() { date +%s.%N; }
saves() { local n; n=$(grep -c '^checkpoint ' "$1" 2>/dev/null); echo "${n:-0}"; }  # 0 before the file exists
sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }
# The pid of rank R of the run with --ckpt-dir $WORK/D (hydra puts PMI_RANK in each rank's
# environment; the absolute directory tells these runs from any others on the machine).
rank_pid() {
    local p
    for p in $(pgrep -f "$SPKDDP train .*--ckpt-dir $WORK/$2( |$)"); do
        tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "PMI_RANK=$1" && { echo "$p"; return; }
    done
}

# The uninterrupted run: the reference end and the length of a run.
t0=$(now)
"$MPIEXEC" -n "$NP" "$SPKDDP" $TRAIN --ckpt-dir ref --keep 1 >ref.out 2>&1 || { cat ref.out; exit 1; }
LENGTH=$(sub "$(now)" "$t0")
SAVES=$(grep -c '^checkpoint ' ref.out)
FINAL=$(cd ref && ls ckpt-*.h5 | tail -1)
echo "chaos: $MODEL on $NP ranks, $(grep -o '[0-9]* steps/epoch' ref.out), final $FINAL, an uninterrupted run takes $LENGTH s; $KILLS kills, seed $SEED, in $WORK, load average $(cut -d' ' -f1 /proc/loadavg)"
printf '%-5s %-5s %-9s %-8s %-6s %-7s %-6s %-8s %s\n' trial rank kill_at end_s exit ckpts tmp resumed verdict

ends=() bad_loads=0 not_bitwise=0 no_end=0 missed=0 failed=0 tmps=0
i=0
# A kill that comes after the run ended does not count; KILLS kills that landed are made,
# within 4 x KILLS tries.
while [ $((i - missed)) -lt "$KILLS" ] && [ "$i" -lt $((4 * KILLS)) ]; do
    i=$((i + 1)) d=t$i rank=$((RANDOM % NP))
    # The moment: after a random number of the run's checkpoints (0: during the start-up),
    # then a random part of the time between two of them. Counting checkpoints, not seconds,
    # keeps the kills inside the run however loaded the machine is.
    after=$((RANDOM % SAVES))
    at=$(awk -v r=$RANDOM -v l="$LENGTH" -v n="$SAVES" 'BEGIN { printf "%.3f", l / (n + 1) * r / 32767 }')
    t0=$(now)
    "$MPIEXEC" -n "$NP" "$SPKDDP" $TRAIN --ckpt-dir "$WORK/$d" >$d.out 2>$d.err &
    m=$!
    while [ "$(saves $d.out)" -lt "$after" ] && kill -0 $m 2>/dev/null; do sleep 0.01; done
    sleep "$at"
    p=""
    while [ -z "$p" ] && kill -0 $m 2>/dev/null; do p=$(rank_pid $rank $d); done
    killed_at=$(sub "$(now)" "$t0")
    if [ -z "$p" ] || ! kill -KILL "$p" 2>/dev/null; then
        wait $m
        missed=$((missed + 1))
        printf '%-5s %-5s %-9s %s\n' $i $rank "$killed_at" "(the run had ended: no kill)"
        continue
    fi
    tk=$(now)
    # A job that does not end within 60 s counts as hung: its processes are then killed here.
    ( sleep 60 && touch $d.hung && kill -KILL $m && for r in $(seq 0 $((NP - 1))); do kill -KILL "$(rank_pid $r $d)"; done ) \
        >/dev/null 2>&1 &
    w=$!
    wait $m
    rc=$? end=$(sub "$(now)" "$tk")
    kill $w 2>/dev/null
    wait $w 2>/dev/null
    if [ -e $d.hung ]; then no_end=$((no_end + 1)) end=hung; else ends+=("$end"); fi
    ck=0 badk=0
    for f in "$d"/ckpt-*.h5; do
        [ -e "$f" ] || continue
        ck=$((ck + 1))
        "$SPKDDP" inspect "$f" >/dev/null 2>&1 || badk=$((badk + 1))
    done
    bad_loads=$((bad_loads + badk))
    tmp=$(ls -A "$d" 2>/dev/null | grep -c '\.tmp$')
    tmps=$((tmps + tmp))
    from=$( { "$MPIEXEC" -n "$NP" "$SPKDDP" $TRAIN --ckpt-dir $d --resume auto >$d.resume 2>&1; } && \
        grep -o 'resumed from [^:]*\|starting from scratch' $d.resume | sed -E 's|resumed from .*/ckpt-0*([0-9]+)\.h5|step \1|')
    verdict=ok
    if [ -z "$from" ]; then verdict="resume failed: $(grep -m1 'error' $d.resume)"
    elif ! "$SPKDDP" diff "ref/$FINAL" "$d/$FINAL" >$d.diff 2>&1; then verdict="NOT BITWISE: $(grep params $d.diff)"; not_bitwise=$((not_bitwise + 1))
    fi
    [ "$badk" -gt 0 ] && verdict="$verdict; $badk checkpoint(s) do not load"
    [ "$end" = hung ] && verdict="$verdict; the job hung"
    [ "$verdict" = ok ] || failed=$((failed + 1))
    printf '%-5s %-5s %-9s %-8s %-6s %-7s %-6s %-8s %s\n' $i $rank "$killed_at" "$end" $rc $ck $tmp \
        "${from:-none}" "$verdict"
    [ "$verdict" = ok ] && rm -rf "$d" "$d".*
done

killed=$((i - missed))
stats=$(printf '%s\n' "${ends[@]:-}" | sort -g | awk 'NF { a[n++] = $1 } END { if (n) printf "median %.3f s, max %.3f s", a[int((n - 1) / 2)], a[n - 1]; else printf "none" }')
echo "chaos: $killed kills ($missed landed after the run ended), time from the kill to the job's end: $stats;" \
    "$no_end hung; checkpoints that did not load: $bad_loads; temp files left by a killed write: $tmps;" \
    "resumes not bitwise equal: $not_bitwise; failed trials: $failed; load average $(cut -d' ' -f1 /proc/loadavg)"
[ "$failed" -eq 0 ] && [ "$no_end" -eq 0 ] && [ "$killed" -eq "$KILLS" ]
