#!/usr/bin/env bash
# Export -> import is bitwise, and runs that start from another run's weights:
#  - export to safetensors, import it (export --ckpt file.safetensors): the same bytes; embed from
#    the checkpoint and from the file: the same embeddings;
#  - train --init-from the checkpoint and --init-from its export: bitwise the same run; stopped
#    and resumed, it resumes its own checkpoint (not the file again) and ends as the
#    uninterrupted one;
#  - average: one checkpoint averages to itself, two to a usable model that --resume refuses;
#  - bad files and flags: one line naming the file and the tensor, exit 2 or 4.
. "$(dirname "$0")/lib.sh" "$@"

small="--model ecapa --channels 32 --attention-channels 16 --se-channels 16 --emb-dim 24 --frames 40"
$SPKDDP synth --kind speakers --out train.h5 --dim 24 --speakers 12 --utts-per-speaker 6 --min-frames 40 \
    --max-frames 90 >/dev/null || fail "synth"
run 2 $SPKDDP train $small --data train.h5 --epochs 2 --global-batch 8 --optimizer adam --lr 0.005 --ckpt-dir base \
    --progress 0 >log_base || fail "base run"
base=base/ckpt-000000000018.h5

$SPKDDP export --ckpt $base --out a.safetensors >/dev/null || fail "export"
$SPKDDP export --ckpt a.safetensors --out b.safetensors >/dev/null || fail "export of the import"
cmp -s a.safetensors b.safetensors && echo "ok  export -> import -> export gives the same bytes" || fail "export of the import differs"
run 2 $SPKDDP embed --ckpt $base --data train.h5 --out e_ckpt.h5 >/dev/null || fail "embed checkpoint"
run 2 $SPKDDP embed --ckpt a.safetensors --data train.h5 --out e_st.h5 >/dev/null || fail "embed safetensors"
h5diff -q e_ckpt.h5 e_st.h5 /embeddings /embeddings && echo "ok  embeddings from the checkpoint and its export are identical" ||
    fail "embeddings differ between the checkpoint and its export"

ft="$small --data train.h5 --epochs 2 --global-batch 8 --optimizer adam --lr 0.0005 --margin 0.3 --progress 0"
run 2 $SPKDDP train $ft --init-from $base --ckpt-dir from_ckpt >log_c || fail "--init-from checkpoint"
grep -q "initialised from $base: weights and BatchNorm statistics, classifier kept" log_c || fail "no initialisation line"
run 2 $SPKDDP train $ft --init-from a.safetensors --ckpt-dir from_st >log_s || fail "--init-from safetensors"
$SPKDDP diff from_ckpt/ckpt-000000000018.h5 from_st/ckpt-000000000018.h5 >diff_init &&
    echo "ok  --init-from the checkpoint and from its export: bitwise the same run" || { cat diff_init; fail "runs differ"; }
if $SPKDDP diff $base from_ckpt/ckpt-000000000018.h5 >/dev/null; then fail "fine-tuning changed nothing"; fi
run 2 $SPKDDP train $ft --init-from a.safetensors --ckpt-dir leg --max-steps 5 >log_1 || fail "first leg"
run 2 $SPKDDP train $ft --init-from a.safetensors --ckpt-dir leg --resume auto >log_2 || fail "second leg"
grep -q "resumed from leg/ckpt-000000000005.h5" log_2 || fail "did not resume its own checkpoint"
! grep -q "initialised from" log_2 || fail "a resumed run took --init-from's weights again"
$SPKDDP diff from_st/ckpt-000000000018.h5 leg/ckpt-000000000018.h5 >/dev/null &&
    echo "ok  stopped and resumed, it ends as the uninterrupted run" || fail "resumed fine-tuning differs"
# The base run's checkpoints are another run's: the fine-tuning run never rotates them away.
run 2 $SPKDDP train $ft --init-from $base --ckpt-dir base --ckpt-every 2 --keep 1 --max-steps 4 >log_same_dir 2>&1 ||
    { cat log_same_dir; fail "fine-tuning into the base run's directory"; }
[ -f base/ckpt-000000000009.h5 ] && [ -f $base ] || fail "fine-tuning deleted the base run's checkpoints"
[ ! -f base/ckpt-000000000002.h5 ] && [ -f base/ckpt-000000000004.h5 ] || fail "--keep 1 did not rotate the run's own checkpoints"
rm base/ckpt-000000000004.h5
echo "ok  a run started from another's checkpoint rotates only its own"

# Averaging
$SPKDDP average --out avg1.h5 $base >/dev/null || fail "average of one"
$SPKDDP export --ckpt avg1.h5 --out avg1.safetensors >/dev/null || fail "export the average"
cmp -s a.safetensors avg1.safetensors && echo "ok  the average of one checkpoint is that checkpoint" || fail "average of one differs"
$SPKDDP average --out avg.h5 base/ckpt-000000000009.h5 $base >/dev/null || fail "average of two"
run 2 $SPKDDP embed --ckpt avg.h5 --data train.h5 --out e_avg.h5 >/dev/null || fail "embed the average"
expect_error 4 "avg.h5: the checkpoint has 0 optimizer slots \('none'\)" -- $SPKDDP train $ft --resume avg.h5
$SPKDDP train --data train.h5 --epochs 1 --batch 8 --ckpt-dir lin --progress 0 >/dev/null || fail "linear"
expect_error 4 "ckpt-000000000009.h5: holds another model than" -- $SPKDDP average --out x.h5 $base lin/ckpt-000000000009.h5
expect_error 2 "average: which checkpoints" -- $SPKDDP average --out x.h5

# Bad files and flags
expect_error 4 "nothing.safetensors: cannot read the checkpoint" -- $SPKDDP train $ft --init-from nothing.safetensors
expect_error 4 "lin/ckpt-000000000009.h5: has no tensor 'classifier.weight' \[12, 24\], which model ecapa needs" -- \
    $SPKDDP train $ft --init-from lin/ckpt-000000000009.h5
expect_error 4 "tensor 'fc.conv.weight' is \[24, 192, 1\], model ecapa has it as \[24, 384, 1\]" -- \
    $SPKDDP train $ft --init-from a.safetensors --channels 64
expect_error 2 "--init-head must be one of keep\|drop, got 'reset'" -- $SPKDDP train $ft --init-from a.safetensors --init-head reset
printf '\x08\x00\x00\x00\x00\x00\x00\x00{"a": 1}' >bad.safetensors
expect_error 4 "bad.safetensors: safetensors tensor 'a' needs 'dtype'" -- $SPKDDP train $ft --init-from bad.safetensors
expect_error 4 "has no 'spkddp_model'/'spkddp_config'" -- bash -c "printf '\x02\x00\x00\x00\x00\x00\x00\x00{}' >empty.safetensors && $SPKDDP embed --ckpt empty.safetensors --data train.h5 --out x.h5"
finish
