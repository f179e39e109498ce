#!/usr/bin/env bash
# ECAPA-TDNN on 2 ranks learns the synthetic speakers: the loss falls, held-out speaker
# accuracy ends far above chance (1/20), and replicas stay identical.
. "$(dirname "$0")/lib.sh" "$@"

$SPKDDP synth --kind speakers --out sp.h5 --val-out spv.h5 --dim 16 --speakers 20 --utts-per-speaker 16 \
    --val-utts-per-speaker 4 --min-frames 60 --max-frames 120 >/dev/null || fail "synth"
run 2 $SPKDDP train --model ecapa --channels 32 --attention-channels 16 --se-channels 16 --emb-dim 32 --frames 48 \
    --data sp.h5 --val-data spv.h5 --epochs 8 --global-batch 32 --optimizer adam --lr 0.005 \
    --metrics m.jsonl >log 2>&1 || { cat log; fail "training"; }
field() { sed -nE "${1}s/.*\"$2\": ([-0-9.e+]+).*/\1/p" m.jsonl; }
first=$(field 1 loss)
last=$(field '$' loss)
acc=$(field '$' val_accuracy)
echo "loss $first -> $last, held-out accuracy $acc (chance 0.05)"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.6 * a) }' || fail "loss did not fall enough: $first -> $last"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.3) }' || fail "held-out accuracy $acc is not clearly above chance"
grep -q "replicas identical" log || fail "replicas differ"
[ "$(grep -c . m.jsonl)" -eq 8 ] || fail "metrics should have 8 epochs"
finish
