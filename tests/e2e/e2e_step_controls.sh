#!/usr/bin/env bash
# Training controls (app/train/step_controls.h, --grad-accum in the trainer):
#   --grad-accum  the linear model (no BatchNorm: where the math allows it) trained with
#                 micro-batches equals the large batch (relative 1e-6), also when the epoch
#                 ends in a short micro-batch (2 ranks) or in an update of fewer micro-batches
#                 (1 rank), and so do the epoch's loss and accuracy, also on the device path
#                 (cpu-staged: statistics read an update late); a run stopped mid-epoch and
#                 resumed equals the uninterrupted one bitwise, metrics (with the gradient
#                 norms) and the per-step log included: resumed from a checkpoint older than
#                 the log's last line, the log is cut back to it and each step is logged once;
#   --clip-grad-norm  every logged update above the bound is scaled to it, those below are
#                 untouched, and it changes the result;
#   --skip-nonfinite  one utterance whose logits overflow: the default stops at that step,
#                 one allowed skip finishes the epoch, a second occurrence stops the run.
. "$(dirname "$0")/lib.sh" "$@"
$SPKDDP synth --kind toy --out toy.h5 --separation 0.5 >/dev/null || fail "synth toy"
common="--data toy.h5 --epochs 2 --optimizer adam --lr 0.01 --weight-decay 1e-4 --progress 0"
final=ckpt-000000000022.h5  # 64 samples per rank in updates of 6: 11 per epoch

run 2 $SPKDDP train $common --batch 6 --ckpt-dir big --metrics big.jsonl >log_big || fail "large batch"
run 2 $SPKDDP train $common --batch 3 --grad-accum 2 --ckpt-dir acc2 --metrics acc2.jsonl >log_acc2 || fail "2 ranks x 3 x 2 micro-batches"
run 1 $SPKDDP train $common --global-batch 12 --grad-accum 3 --ckpt-dir acc3 >log_acc3 || fail "1 rank x 4 x 3 micro-batches"
grep -q "2 ranks x batch 3 x 2 micro-batches = global batch 12, 11 steps/epoch" log_acc2 || fail "start line: $(grep 'spkddp train' log_acc2)"
for d in acc2 acc3; do
    if $SPKDDP diff big/$final $d/$final --rtol 1e-6 >diff_$d; then echo "ok  $d == one batch of 12 ($(grep params diff_$d))"
    else cat diff_$d; fail "$d differs from the large batch"; fi
done

# The epoch's loss and accuracy with micro-batches are the large batch's (each update's
# statistics gathered from its micro-batches), on the CPU and on the device path (cpu-staged:
# separate memory, statistics read an update late, no gradient norm unless a control asks),
# whose parameters are also bitwise the CPU's.
run 2 $SPKDDP train $common --batch 3 --grad-accum 2 --metrics staged.jsonl --ckpt-dir staged --device cpu-staged \
    >/dev/null || fail "cpu-staged"
$SPKDDP diff acc2/$final staged/$final >/dev/null || fail "cpu-staged with micro-batches differs from the CPU"
figures() { sed -E 's/.*"loss": ([^,]*), "accuracy": ([^,]*),.*/\1 \2/' "$1"; }
for f in acc2 staged; do
    paste -d' ' <(figures big.jsonl) <(figures $f.jsonl) | awk 'NF != 4 || $2 != $4 || ($1 - $3) ^ 2 > 1e-12 * $1 ^ 2 { bad = 1 }
        END { exit bad || NR != 2 }' || fail "$f's epoch loss/accuracy $(figures $f.jsonl | tr '\n' ' ')differ from $(figures big.jsonl)"
done
grep -q grad_norm staged.jsonl && fail "cpu-staged measured the gradient norm without a control asking for it"
echo "ok  epoch loss and accuracy with micro-batches equal the large batch's, on cpu and cpu-staged (bitwise the CPU)"

# Resume mid-epoch with micro-batches: bitwise, metrics and step log included. The first leg
# logs 17 steps but the second resumes from step 15's checkpoint (as after a crash between
# checkpoints): steps 16 and 17 must leave the log and be logged once again.
acc="$common --batch 3 --grad-accum 2 --log-every 1"
run 2 $SPKDDP train $acc --ckpt-dir full --metrics full.jsonl --step-log full_steps.jsonl >/dev/null || fail "uninterrupted"
run 2 $SPKDDP train $acc --ckpt-dir part --metrics part.jsonl --step-log part_steps.jsonl --max-steps 17 --ckpt-every 5 \
    >/dev/null || fail "first leg"
[ "$(grep -c . part_steps.jsonl)" -eq 17 ] || fail "the first leg logged $(grep -c . part_steps.jsonl) steps, not 17"
run 2 $SPKDDP train $acc --ckpt-dir part --metrics part.jsonl --step-log part_steps.jsonl \
    --resume part/ckpt-000000000015.h5 --set-aside-newer >log_b || fail "second leg"
grep -q "resumed from part/ckpt-000000000015.h5" log_b || fail "did not resume from step 15"
[ "$(grep -o '"global_step": [0-9]*' part_steps.jsonl | cut -d' ' -f2 | tr '\n' ' ')" = "$(seq -s ' ' 1 22) " ] ||
    fail "the step log does not hold steps 1..22 once each, in order"
$SPKDDP diff full/$final part/$final >diff_resume || { cat diff_resume; fail "resumed run differs"; }
diff <(strip_timings full.jsonl step_seconds) <(strip_timings part.jsonl step_seconds) >/dev/null || fail "metrics differ after resume"
diff <(strip_timings full_steps.jsonl step_seconds) <(strip_timings part_steps.jsonl step_seconds) >/dev/null || fail "step logs differ after resume"
[ "$(grep -c . part_steps.jsonl)" -eq 22 ] && grep -q '"grad_norm": [0-9]' part.jsonl || fail "22 step lines, grad_norm in the metrics"
echo "ok  resume with micro-batches: bitwise, metrics with gradient norms and the step log equal"

# Clipping: each update whose norm exceeds 0.9 is scaled to it, the others are left alone
# (the norms run from about 1.8 down to 0.2 here, so both kinds occur).
run 2 $SPKDDP train $common --batch 6 --clip-grad-norm 0.9 --log-every 1 --step-log clip.jsonl --ckpt-dir clip >/dev/null ||
    fail "clipped run"
awk -F'"grad_norm": |, "clip_scale": |, "skipped"' '{ n = $2; s = $3; want = n > 0.9 ? 0.9 / (n + 1e-6) : 1
    if (s - want > 1e-6 || want - s > 1e-6) { print "step " NR ": norm " n " scale " s " want " want; bad = 1 } }
    END { exit bad }' clip.jsonl || fail "clip scales"
grep -q '"clip_scale": 0\.' clip.jsonl && grep -q '"clip_scale": 1[,}]' clip.jsonl ||
    fail "want clipped and unclipped updates both"
$SPKDDP diff big/$final clip/$final --rtol 1e-6 >/dev/null && fail "clipping changed nothing"
echo "ok  clipping to norm 0.9: $(grep -c '"clip_scale": 0\.' clip.jsonl) of 22 updates scaled"

# Non-finite steps: utterance 5's features overflow its logits.
$MAKE_BAD_DATA one-huge-utterance huge.h5 || fail "make_bad_data"
expect_error 5 "loss is NaN at epoch 1, global step [0-9]+; lower --lr" -- run 1 $SPKDDP train --data huge.h5 --batch 2 --epochs 1
run 1 $SPKDDP train --data huge.h5 --batch 2 --epochs 1 --skip-nonfinite 1 --metrics skip.jsonl >log_skip || fail "one skip allowed"
grep -q "update skipped (1 of at most 1)" log_skip && grep -q '"skipped_steps": 1' skip.jsonl || fail "the skip is not logged"
expect_error 5 "the updates --skip-nonfinite allows are used up" -- run 2 $SPKDDP train --data huge.h5 --batch 1 --epochs 2 --skip-nonfinite 1
expect_error 2 "--global-batch 10 is not divisible by the 2 ranks x --grad-accum" -- run 2 $SPKDDP train --data toy.h5 --global-batch 10 --grad-accum 2
finish
