#!/usr/bin/env bash
# ECAPA-TDNN on 2 ranks learns the synthetic speakers: the loss falls, held-out speaker
# accuracy ends far above chance (1/20), and replicas stay identical; the audio-visual variant
# likewise, in float32 and in bf16.
. "$(dirname "$0")/lib.sh" "$@"

$SPKDDP synth --kind speakers --out sp.h5 --val-out spv.h5 --dim 16 --speakers 20 --utts-per-speaker 16 \
    --val-utts-per-speaker 4 --min-frames 60 --max-frames 120 >/dev/null || fail "synth"
run 2 $SPKDDP train --model ecapa --channels 32 --attention-channels 16 --se-channels 16 --emb-dim 32 --frames 48 \
    --data sp.h5 --val-data spv.h5 --epochs 8 --global-batch 32 --optimizer adam --lr 0.005 \
    --metrics m.jsonl >log 2>&1 || { cat log; fail "training"; }
# learned WHAT METRICS LOG: the loss fell to under 0.6 of the first epoch's, the held-out
# accuracy is clearly above chance, and the replicas stayed identical.
learned() {
    local first last acc
    field() { sed -nE "${1}s/.*\"$2\": ([-0-9.e+]+).*/\1/p" "$3"; }
    first=$(field 1 loss "$2")
    last=$(field '$' loss "$2")
    acc=$(field '$' val_accuracy "$2")
    echo "$1: loss $first -> $last, held-out accuracy $acc (chance 0.05)"
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.6 * a) }' || fail "$1: loss did not fall enough: $first -> $last"
    awk -v a="$acc" 'BEGIN { exit !(a >= 0.3) }' || fail "$1: held-out accuracy $acc is not clearly above chance"
    grep -q "replicas identical" "$3" || fail "$1: replicas differ"
}
learned ecapa m.jsonl log
[ "$(grep -c . m.jsonl)" -eq 8 ] || fail "metrics should have 8 epochs"

# The audio-visual variant on a dataset with a /visual stream (25 frames/s beside 100).
$SPKDDP synth --kind speakers --out av.h5 --val-out avv.h5 --dim 16 --visual-dim 12 --speakers 20 --utts-per-speaker 16 \
    --val-utts-per-speaker 4 --min-frames 60 --max-frames 120 >/dev/null || fail "synth av"
$SPKDDP inspect av.h5 | grep -q "1 visual frame per 4 audio frames" || fail "inspect does not show the visual stream"
av="--model ecapa-av --channels 32 --attention-channels 16 --se-channels 16 --emb-dim 32 --visual-channels 16 --frames 48
    --data av.h5 --global-batch 32 --optimizer adam --lr 0.005 --progress 0"
run 2 $SPKDDP train $av --val-data avv.h5 --epochs 8 --metrics av.jsonl --ckpt-dir ck_av >log_av 2>&1 \
    || { cat log_av; fail "ecapa-av training"; }
learned ecapa-av av.jsonl log_av
# Gradients averaged in ~16 small buckets during the backward (visual branch included) give
# bitwise what one bucket after the backward gives.
run 2 $SPKDDP train $av --epochs 1 --ckpt-dir ck_one >/dev/null 2>&1 || fail "ecapa-av one bucket"
SPKDDP_BUCKET_MB=0.01 run 2 $SPKDDP train $av --epochs 1 --ckpt-dir ck_many >/dev/null 2>&1 || fail "ecapa-av small buckets"
$SPKDDP diff ck_one/ckpt-000000000010.h5 ck_many/ckpt-000000000010.h5 >/dev/null \
    && echo "ok  ecapa-av: small overlapped buckets == one bucket (bitwise)" || fail "bucketed averaging changes ecapa-av"
run 2 $SPKDDP embed --ckpt "$(ls ck_av/ckpt-*.h5 | tail -1)" --data avv.h5 --out av_emb.h5 >/dev/null || fail "ecapa-av embed"
n_av=$($SPKDDP inspect avv.h5 | sed -n 's/^  utterances *\([0-9]*\).*/\1/p')
$SPKDDP inspect av_emb.h5 | grep -qE "^  embeddings +$n_av of dimension [0-9]+, from ecapa-av$" \
    && echo "ok  inspect summarises the embeddings file ($n_av utterances)" || fail "inspect av_emb.h5: $($SPKDDP inspect av_emb.h5 2>&1)"
# In bf16 the blocks write their convolutions' rounded operands straight from their outputs (the
# Res2Net branches, MFA, the BatchNorm-ReLU backward; docs/precision.md): the audio-visual model
# learns that way too, and embeds.
run 2 $SPKDDP train $av --val-data avv.h5 --epochs 8 --precision bf16 --metrics av16.jsonl --ckpt-dir ck_av16 \
    >log_av16 2>&1 || { cat log_av16; fail "ecapa-av bf16 training"; }
learned "ecapa-av bf16" av16.jsonl log_av16
run 2 $SPKDDP embed --ckpt "$(ls ck_av16/ckpt-*.h5 | tail -1)" --data avv.h5 --out av16_emb.h5 >/dev/null \
    || fail "ecapa-av bf16 embed"
expect_error 3 "needs a dataset with a /visual stream" -- run 2 $SPKDDP train --model ecapa-av --data sp.h5 --channels 32

# BatchNorm over the batch cannot train on one sample: 9 utterances in batches of 4 skip the
# last step (1 sample), and a batch of 1 is refused.
$SPKDDP synth --kind speakers --speakers 3 --utts-per-speaker 3 --dim 16 --min-frames 20 --max-frames 40 --out nine.h5 \
    >/dev/null || fail "synth nine"
small="--model ecapa --data nine.h5 --channels 16 --attention-channels 8 --se-channels 8 --emb-dim 8 --frames 20 --epochs 1"
run 1 $SPKDDP train $small --batch 4 >log_tail 2>&1 || { cat log_tail; fail "a 1-sample last step is not skipped"; }
grep -q "last step of each epoch would have 1 sample per rank" log_tail && grep -q "2 steps/epoch" log_tail \
    && echo "ok  a last step of 1 sample is skipped" || fail "no note about the skipped 1-sample step"
expect_error 2 "needs at least 2 samples per rank" -- run 1 $SPKDDP train $small --batch 1
finish
