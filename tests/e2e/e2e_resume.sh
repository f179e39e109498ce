#!/usr/bin/env bash
# Resume: stop mid-epoch with --max-steps, resume, and compare with the uninterrupted run:
# parameters and optimizer state bitwise equal, metrics equal but for timings. Also resume
# on a different world size with the same global batch, and --resume auto with no
# checkpoint yet.
. "$(dirname "$0")/lib.sh" "$@"

$SPKDDP synth --kind speakers --out sp.h5 --val-out spv.h5 --dim 16 --speakers 8 --utts-per-speaker 10 \
    --val-utts-per-speaker 2 --min-frames 20 --max-frames 60 >/dev/null || fail "synth"
common="--data sp.h5 --val-data spv.h5 --epochs 3 --global-batch 8 --optimizer adamw --lr 0.01 --weight-decay 0.01 --lr-schedule cosine --warmup-steps 3"

run 2 $SPKDDP train $common --ckpt-dir full --metrics full.jsonl >log_full || fail "uninterrupted run"
steps=$(grep -c . full.jsonl)
[ "$steps" -eq 3 ] || fail "uninterrupted metrics has $steps lines"

# 80 utterances / global batch 8 = 10 steps per epoch: step 13 is mid-epoch 2.
run 2 $SPKDDP train $common --ckpt-dir part --metrics part.jsonl --max-steps 13 --ckpt-every 5 >log_a || fail "first leg"
grep -q "stopped at global step 13" log_a || fail "first leg did not stop at step 13"
[ -f part/ckpt-000000000013.h5 ] || fail "no checkpoint at step 13"
cp -r part four  # for the world-size change below
run 2 $SPKDDP train $common --ckpt-dir part --metrics part.jsonl --resume auto >log_b || fail "second leg"
grep -q "resumed from part/ckpt-000000000013.h5" log_b || fail "did not resume from step 13"
final=ckpt-000000000030.h5
if $SPKDDP diff full/$final part/$final >diff_same; then
    echo "ok  stop at step 13 + resume == uninterrupted (bitwise)"
else
    cat diff_same
    fail "resumed run differs from the uninterrupted one"
fi
diff <(strip_timings full.jsonl) <(strip_timings part.jsonl) >/dev/null || fail "metrics differ after resume"
[ "$(grep -c . part.jsonl)" -eq 3 ] || fail "resumed metrics does not have each epoch exactly once"
echo "ok  metrics identical but for timings, each epoch once"

# Resume from the step-10 checkpoint on 4 ranks with the same global batch. The directory
# also holds step 13, the future this resume abandons: it is moved aside, not deleted.
[ -f four/ckpt-000000000010.h5 ] || fail "step-10 checkpoint kept"
run 4 $SPKDDP train $common --ckpt-dir four --resume four/ckpt-000000000010.h5 --set-aside-newer >log_four || fail "resume on 4 ranks"
grep -q "written by 2 ranks, now 4" log_four || fail "world-size change not reported"
[ -f four/abandoned-after-000000000010/ckpt-000000000013.h5 ] || fail "step 13 was not set aside: $(ls -R four)"
if $SPKDDP diff full/$final four/$final --rtol 1e-6 >diff_four; then
    echo "ok  resume on 4 ranks continues the 2-rank run ($(grep params diff_four))"
else
    cat diff_four
    fail "4-rank resume diverged from the 2-rank run"
fi

# diff --worst N lists the N tensors that differ most, largest first (two steps of one run).
$SPKDDP diff full/ckpt-000000000010.h5 full/$final --worst 3 >diff_worst
rows=$(awk '/^rel +max/ {on = 1; next} on && NF == 4' diff_worst)
if [ "$(grep -c . <<<"$rows")" -eq 3 ] && sort -g -r -c -k1,1 <<<"$rows"; then
    echo "ok  diff --worst 3: $(head -1 <<<"$rows")"
else
    fail "diff --worst 3 did not list 3 tensors, largest first: $(cat diff_worst)"
fi

# What a resume refuses by default (the battery's ck_*_changed cases) goes through when
# --resume-allow names it, and the run says what changed.
run 2 $SPKDDP train ${common/adamw/adam} --global-batch 16 --ckpt-dir allow --resume full/ckpt-000000000010.h5 \
    --resume-allow global-batch,optimizer --max-steps 12 >log_allow || fail "resume with --resume-allow"
grep -q "changed from the checkpoint, as --resume-allow lets it: global-batch, optimizer" log_allow \
    && grep -q "the optimizer state starts afresh (the checkpoint's is adamw's)" log_allow || fail "allowed changes not reported: $(cat log_allow)"
echo "ok  --resume-allow global-batch,optimizer resumes and says so"

# --resume auto with an empty directory starts from scratch.
run 1 $SPKDDP train --data sp.h5 --epochs 1 --batch 8 --ckpt-dir empty --resume auto >log_empty || fail "auto without checkpoint"
grep -q "starting from scratch" log_empty || fail "auto without checkpoint did not say so"
# A half-written checkpoint (temp file) is never picked up.
touch part/.ckpt-000000000099.h5.tmp
run 1 $SPKDDP train $common --ckpt-dir part --resume auto --epochs 3 >log_tmp || fail "resume with stray temp"
grep -q "resumed from part/ckpt-000000000030.h5" log_tmp || fail "stray temp file was considered"
finish
