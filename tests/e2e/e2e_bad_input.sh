#!/usr/bin/env bash
# Every bad input gets one clear line naming the file or field, a distinct non-zero exit
# code, all ranks end, and no checkpoint is left behind.
. "$(dirname "$0")/lib.sh" "$@"
BAD=$MAKE_BAD_DATA

$SPKDDP synth --out toy.h5 >/dev/null
$SPKDDP synth --out toy32.h5 --dim 32 >/dev/null
for k in no-features features-1d dim-mismatch offsets-not-increasing labels-out-of-range nan-features \
         wrong-format missing-labels labels-length; do
    "$BAD" $k $k.h5 || fail "make_bad_data $k"
done
echo "not hdf5" >text.h5

T="run 2 $SPKDDP train --ckpt-dir ck --batch 2"
expect_error 3 "missing.h5: cannot read the dataset file"       -- $T --data missing.h5
expect_error 3 "text.h5: not an HDF5 file"                      -- $T --data text.h5
expect_error 3 "no-features.h5: dataset '/features' is missing" -- $T --data no-features.h5
expect_error 3 "features-1d.h5: dataset '/features' must have shape" -- $T --data features-1d.h5
expect_error 3 "dim-mismatch.h5: .*feature_dim"                 -- $T --data dim-mismatch.h5
expect_error 3 "offsets-not-increasing.h5: '/offsets' is not strictly increasing at index 3" -- $T --data offsets-not-increasing.h5
expect_error 3 "labels-out-of-range.h5: '/labels'\[6\] = 7 is outside" -- $T --data labels-out-of-range.h5
expect_error 3 "nan-features.h5: '/features' holds NaN or Inf in utterance 5 \(frame 3, dim 2\)" -- $T --data nan-features.h5 --no-shuffle
expect_error 3 "wrong-format.h5: root attribute 'spkddp_format'" -- $T --data wrong-format.h5
expect_error 3 "missing-labels.h5: dataset '/labels'"           -- $T --data missing-labels.h5
expect_error 3 "labels-length.h5: '/labels' has a different length" -- $T --data labels-length.h5
[ -z "$(ls -A ck 2>/dev/null)" ] || fail "a failed run left files in the checkpoint directory: $(ls -A ck)"

expect_error 2 "global batch 256 .* is larger than the 128 utterances of toy.h5" -- run 2 $SPKDDP train --data toy.h5 --batch 128
expect_error 2 "global-batch 33 is not divisible by the 2 ranks" -- run 2 $SPKDDP train --data toy.h5 --global-batch 33
expect_error 2 "train: --lr must be positive"                   -- run 2 $SPKDDP train --data toy.h5 --lr -1
expect_error 2 "train: --batch expects an integer, got 'abc'"   -- run 2 $SPKDDP train --data toy.h5 --batch abc
expect_error 2 "train: --epochs must be in \[1,"                -- run 2 $SPKDDP train --data toy.h5 --epochs 0
expect_error 2 "train: unknown option '--bogus'"                -- run 2 $SPKDDP train --data toy.h5 --bogus 1
expect_error 2 "train: --model must be one of"                  -- run 2 $SPKDDP train --data toy.h5 --model resnet
expect_error 2 "train: --optimizer must be one of"              -- run 2 $SPKDDP train --data toy.h5 --optimizer lion
expect_error 2 "train: --data is required"                      -- run 2 $SPKDDP train
expect_error 2 "--max-steps stops with a checkpoint, so it needs --ckpt-dir" -- run 2 $SPKDDP train --data toy.h5 --max-steps 3
expect_error 2 "unknown command 'trian'"                        -- run 2 $SPKDDP trian
if $SPKDDP bench --device cuda --channels 8 --batch 2 --frames 20 --steps 1 --warmup 0 >/dev/null 2>&1; then
    echo "--  a GPU is usable here: the no-GPU device errors are not checked"
else
    expect_error 2 "train: --device cuda: "                      -- run 2 $SPKDDP train --data toy.h5 --device cuda
    out=$(run 2 $SPKDDP train --data toy.h5 --epochs 1 --device auto 2>&1) || fail "--device auto without a GPU"
    # a line only when an NVIDIA GPU is on the bus but unusable (docs/cuda.md)
    if grep -qs 0x10de /sys/bus/pci/devices/*/vendor; then
        grep -q "^device: " <<<"$out" || fail "--device auto did not say why it leaves the GPU"
    else
        grep -q "^device: " <<<"$out" && fail "--device auto printed a device line without a GPU: $(grep '^device' <<<"$out")"
    fi
fi
expect_error 2 "device 'gpu' \(from SPKDDP_DEVICE\)"               -- env SPKDDP_DEVICE=gpu $SPKDDP train --data toy.h5

# Checkpoints: incompatible model, corrupt file, missing file, different seed.
run 2 $SPKDDP train --data toy.h5 --epochs 1 --ckpt-dir good >/dev/null || fail "making a good checkpoint"
ck=$(ls good/ckpt-*.h5 | tail -1)
expect_error 4 "incompatible model: parameter 'fc.weight' \(128 values\) in the checkpoint, 'fc.weight' \(64 values\)" -- \
    run 2 $SPKDDP train --data toy32.h5 --resume "$ck"
expect_error 4 "missing.h5: cannot read the checkpoint"         -- run 2 $SPKDDP train --data toy.h5 --resume missing.h5
expect_error 4 "written with --seed 1234, this run has --seed 5" -- run 2 $SPKDDP train --data toy.h5 --resume "$ck" --seed 5
cp "$ck" corrupt.h5
"$BAD" corrupt-ckpt corrupt.h5 || fail "corrupting a checkpoint"
expect_error 4 "corrupt.h5: checksum mismatch: the checkpoint is corrupt" -- run 2 $SPKDDP train --data toy.h5 --resume corrupt.h5
head -c 3000 "$ck" >truncated.h5
expect_error 4 "truncated.h5: not an HDF5 file"                 -- run 2 $SPKDDP train --data toy.h5 --resume truncated.h5
# --resume auto skips the corrupt one and takes the newest complete checkpoint.
mkdir -p mixed && cp "$ck" mixed/ckpt-000000000004.h5 && cp corrupt.h5 mixed/ckpt-000000000009.h5
out=$(run 1 $SPKDDP train --data toy.h5 --epochs 1 --global-batch 32 --ckpt-dir mixed --resume auto 2>&1)
grep -q "resumed from mixed/ckpt-000000000004.h5" <<<"$out" || fail "auto did not skip the corrupt checkpoint: $out"
grep -q "skipping mixed/ckpt-000000000009.h5" <<<"$out" || fail "auto did not say it skipped the corrupt checkpoint"
echo "ok  --resume auto skips a corrupt checkpoint"

# A rank that dies ends the job (no hang): kill one rank of a long run.
$SPKDDP synth --kind speakers --out big.h5 --dim 8 --speakers 4 --utts-per-speaker 64 --min-frames 10 --max-frames 20 >/dev/null
start=$(date +%s)
( run 2 $SPKDDP train --data big.h5 --epochs 100000 --batch 4 >/dev/null 2>&1 & echo $! >job.pid; wait ) &
sleep 2
victim=$(pgrep -f "spkddp train --data big.h5" | grep -v "^$(cat job.pid)\$" | tail -1)
[ -n "$victim" ] && kill -9 "$victim"
while pgrep -f "spkddp train --data big.h5" >/dev/null && [ $(( $(date +%s) - start )) -lt 60 ]; do sleep 0.5; done
if pgrep -f "spkddp train --data big.h5" >/dev/null; then
    fail "the job kept running 60 s after a rank was killed"
    pkill -9 -f "spkddp train --data big.h5"
else
    echo "ok  killing one rank ended the job in $(( $(date +%s) - start )) s"
fi

# A report that cannot reach stdout fails the command.
out=$($SPKDDP inspect toy.h5 2>&1 >/dev/full)
rc=$?
[ "$rc" -eq 1 ] && grep -q "inspect: cannot write its output to stdout" <<<"$out" \
    && echo "ok  [1] inspect >/dev/full: $(grep -o 'inspect: cannot write.*stdout' <<<"$out")" \
    || fail "inspect >/dev/full: exit $rc: $out"

# A rank that stops (SIGSTOP: no exit the launcher could see) ends the job too: the others'
# wait in the gradient allreduce outlasts SPKDDP_MPI_TIMEOUT and they end it with a message
# (or, stopped inside a collective HDF5 read, where that deadline does not reach, the
# trainer's watchdog does at twice the timeout: app/train/step_watchdog.h).
start=$(date +%s)
( SPKDDP_MPI_TIMEOUT=3 run 2 $SPKDDP train --data big.h5 --ckpt-dir stopped --epochs 100000 --batch 4 >stopped.out 2>&1 ) &
for i in $(seq 1 100); do [ -s stopped/metrics.jsonl ] && break; sleep 0.1; done
victim=$(pgrep -f "^$SPKDDP train --data big.h5 --ckpt-dir stopped " | tail -1)
[ -n "$victim" ] && kill -STOP "$victim"
while pgrep -f "^$SPKDDP train --data big.h5 --ckpt-dir stopped " >/dev/null && [ $(( $(date +%s) - start )) -lt 60 ]; do sleep 0.5; done
if pgrep -f "^$SPKDDP train --data big.h5 --ckpt-dir stopped " >/dev/null; then
    fail "the job kept running 60 s after a rank was stopped"
    pkill -9 -f "^$SPKDDP train --data big.h5 --ckpt-dir stopped "
elif ! grep -qE "an MPI collective has waited 3 s for the other ranks|the ranks have not met for [0-9]+ s" stopped.out; then
    fail "a stopped rank ended the job without the deadline's message: $(tail -3 stopped.out)"
else
    echo "ok  a stopped rank ended the job in $(( $(date +%s) - start )) s: $(grep -m1 -oE 'rank [0-9]*.*(waited 3 s|not met for [0-9]* s)' stopped.out)"
fi

# The same for embed, stopped while it reads the dataset collectively (its watchdog).
run 2 $SPKDDP train --data big.h5 --model ecapa --channels 8 --emb-dim 4 --attention-channels 4 --se-channels 4 \
    --frames 10 --epochs 1 --batch 4 --ckpt-dir emb_ck >/dev/null 2>&1 || fail "train a model to embed with"
$SPKDDP synth --kind speakers --out many.h5 --dim 8 --speakers 4 --utts-per-speaker 10000 --min-frames 300 \
    --max-frames 600 >/dev/null
start=$(date +%s)
( SPKDDP_MPI_TIMEOUT=2 run 2 $SPKDDP embed --ckpt emb_ck/ckpt-000000000032.h5 --data many.h5 --out many_emb.h5 \
    >embed_stopped.out 2>&1 ) &
for i in $(seq 1 50); do pgrep -f "^$SPKDDP embed --ckpt emb_ck" >/dev/null && break; sleep 0.1; done
sleep 1
victim=$(pgrep -f "^$SPKDDP embed --ckpt emb_ck" | tail -1)
[ -n "$victim" ] && kill -STOP "$victim"
while pgrep -f "^$SPKDDP embed --ckpt emb_ck" | grep -qv "^$victim\$" && [ $(( $(date +%s) - start )) -lt 60 ]; do
    sleep 0.5
done
if pgrep -f "^$SPKDDP embed --ckpt emb_ck" | grep -qv "^$victim\$"; then
    fail "embed kept running 60 s after a rank was stopped"
elif [ -e many_emb.h5 ]; then
    fail "embed finished before its rank was stopped (make many.h5 larger)"
elif ! grep -qE "the ranks have not met for [0-9]+ s|has waited 2 s for the other ranks" embed_stopped.out; then
    fail "a stopped rank ended embed without the deadline's message: $(tail -3 embed_stopped.out)"
else
    echo "ok  a stopped rank ended embed in $(( $(date +%s) - start )) s: $(grep -m1 -oE 'rank [0-9]*.*(not met for [0-9]* s|waited 2 s)' embed_stopped.out)"
fi
pkill -9 -f "^$SPKDDP embed --ckpt emb_ck"
finish
