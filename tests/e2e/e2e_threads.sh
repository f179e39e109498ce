#!/usr/bin/env bash
# The threads a run makes stay few, whatever its shapes: the kernels thread on the process's
# OpenMP pool, and none opens a team inside a region of one thread, where libgomp makes a nested
# team's threads afresh each time (ECAPA's embedding of single utterances made 2,820 threads for
# 128 utterances, and ran 4x slower on 2 threads than on 1). Counted by an LD_PRELOAD shim
# (tests/e2e/count_threads.c) on 2 threads: embedding (one utterance a call), training and
# bench at batch 2, for each encoder family.
. "$(dirname "$0")/lib.sh" "$1" "$2" "$3" "${4:-}"
SHIM=$5

$SPKDDP synth --kind speakers --out sp.h5 --dim 80 --speakers 4 --utts-per-speaker 6 --min-frames 60 \
    --max-frames 120 >/dev/null || fail "synth"
counted() {  # counted WHAT command...: the threads the command made, at most 16
    rm -f count.txt
    SPKDDP_COUNT_THREADS_OUT=$PWD/count.txt OMP_NUM_THREADS=2 SPKDDP_THREADS=2 LD_PRELOAD=$SHIM "${@:2}" \
        >out.log 2>&1 || { cat out.log; fail "$1: the command failed"; return; }
    local n
    n=$(awk '{ s += $1 } END { print s + 0 }' count.txt 2>/dev/null)
    [ -s count.txt ] && [ "$n" -le 16 ] && echo "ok  $1: $n threads made" || fail "$1: $n threads made (at most 16)"
}
for model in "ecapa --channels 64" "resnet34 --channels 8" "campplus --channels 32 --growth-rate 8 --bn-size 2"; do
    name=${model%% *}
    for p in fp32 bf16; do
        $SPKDDP train --data sp.h5 --model $model --emb-dim 16 --frames 50 --global-batch 8 --epochs 1 \
            --precision $p --progress 0 --ckpt-dir ck_${name}_$p >/dev/null 2>&1 || { fail "train $name $p"; continue; }
        counted "$name $p: train" $SPKDDP train --data sp.h5 --model $model --emb-dim 16 --frames 50 --global-batch 8 \
            --epochs 1 --precision $p --progress 0 --ckpt-dir ck2_${name}_$p
        counted "$name $p: embed, one utterance a call" $SPKDDP embed --ckpt "$(ls ck_${name}_$p/ckpt-*.h5 | tail -1)" \
            --data sp.h5 --out emb_${name}_$p.h5 --precision $p --batch 1
        counted "$name $p: bench at batch 2" $SPKDDP bench --model ${model% --growth*} --precision $p --batch 2 --steps 2
    done
done
finish
