#!/usr/bin/env bash
# Contrastive losses over the global batch (docs/contrastive.md), end to end, ECAPA C=64:
#  - in the invariant mode, --loss supcon (plain sampler) and --loss ge2e (speaker-balanced
#    batches) train bitwise alike on 1, 2 and 4 ranks, and through the staged device path; ge2e
#    stopped on 2 ranks and resumed on 4 is the uninterrupted run;
#  - SimCLR (--loss supcon --labels utterance --views 2) likewise, and stopped mid-epoch and
#    resumed it ends bitwise as the uninterrupted run;
#  - on one rank global and local negatives are the same run; on 2 ranks they are not;
#  - aam+angleproto learns (the loss falls), and stopped and resumed it ends bitwise as the
#    uninterrupted run; its checkpoint exports like any other;
#  - refusals: a grouped loss without --sampler balanced, local negatives with --invariant, the
#    linear model, a sharded head without the AAM-softmax, a per-rank batch that the groups do
#    not divide, fewer speakers than a balanced batch needs, utterance labels without views or with
#    another loss, views with a grouped loss, a grouped loss over a single group, a mid-epoch
#    resume of balanced batches with another global batch.
. "$(dirname "$0")/lib.sh" "$@"
export OMP_WAIT_POLICY=passive  # 4 ranks on few cores

$SPKDDP synth --kind speakers --out sp.h5 --dim 16 --speakers 12 --utts-per-speaker 16 --min-frames 40 \
    --max-frames 80 >/dev/null || fail "synth"
ecapa="--model ecapa --data sp.h5 --channels 64 --attention-channels 16 --se-channels 16 --emb-dim 32 --frames 40
    --global-batch 16 --optimizer adam --lr 0.002 --progress 0"

# Invariant: 1, 2, 4 ranks bitwise.
for loss in supcon ge2e simclr; do
    extra="--loss $loss --invariant --epochs 1 --max-steps 6"
    [ $loss = ge2e ] && extra="$extra --sampler balanced --utts-per-speaker 4"
    [ $loss = simclr ] && extra="--loss supcon --labels utterance --views 2 --invariant --epochs 1 --max-steps 6"
    for k in 1 2 4; do
        run $k $SPKDDP train $ecapa $extra --ckpt-dir ${loss}_$k >log_${loss}_$k 2>&1 ||
            { cat log_${loss}_$k; fail "$loss on $k ranks"; }
    done
    for k in 2 4; do
        same ${loss}_1/ckpt-000000000006.h5 ${loss}_$k/ckpt-000000000006.h5 \
            "$loss --invariant: $k ranks x batch $((16 / k)) == 1 rank x batch 16 (bitwise)"
    done
done
# Speaker-balanced batches resume on another world size: stopped at step 3 on 2 ranks, continued
# on 4, bitwise the uninterrupted 2-rank run.
run 2 $SPKDDP train $ecapa --loss ge2e --invariant --epochs 1 --max-steps 3 --sampler balanced --utts-per-speaker 4 \
    --ckpt-dir el >/dev/null 2>&1 || fail "ge2e, first leg on 2 ranks"
run 4 $SPKDDP train $ecapa --loss ge2e --invariant --epochs 1 --max-steps 6 --sampler balanced --utts-per-speaker 4 \
    --ckpt-dir el --resume auto >log_el 2>&1 || { cat log_el; fail "ge2e, resumed on 4 ranks"; }
same ge2e_2/ckpt-000000000006.h5 el/ckpt-000000000006.h5 \
    "ge2e, balanced batches: stopped at step 3 on 2 ranks, resumed on 4 == uninterrupted on 2 (bitwise)"
run 2 $SPKDDP train $ecapa --loss supcon --invariant --epochs 1 --max-steps 6 --device cpu-staged --ckpt-dir staged \
    >/dev/null 2>&1 || fail "cpu-staged"
same supcon_1/ckpt-000000000006.h5 staged/ckpt-000000000006.h5 "--loss supcon: 2 ranks on cpu-staged == 1 rank (bitwise)"

# SimCLR stopped mid-epoch (step 5 of 12) and resumed.
simclr="$ecapa --loss supcon --labels utterance --views 2 --epochs 2"
run 2 $SPKDDP train $simclr --ckpt-dir sc >/dev/null 2>&1 || fail "simclr"
run 2 $SPKDDP train $simclr --ckpt-dir sc_leg --max-steps 5 >/dev/null 2>&1 || fail "simclr, first leg"
run 2 $SPKDDP train $simclr --ckpt-dir sc_leg --resume auto >/dev/null 2>&1 || fail "simclr, second leg"
same sc/ckpt-000000000024.h5 sc_leg/ckpt-000000000024.h5 "simclr: stopped at step 5 and resumed == uninterrupted (bitwise)"

# Global against local negatives.
plain="$ecapa --loss supcon --epochs 1 --max-steps 4"
run 1 $SPKDDP train $plain --negatives global --ckpt-dir g1 >/dev/null 2>&1 || fail "global, 1 rank"
run 1 $SPKDDP train $plain --negatives local --ckpt-dir l1 >/dev/null 2>&1 || fail "local, 1 rank"
same g1/ckpt-000000000004.h5 l1/ckpt-000000000004.h5 "one rank: global negatives == local negatives (bitwise)"
run 2 $SPKDDP train $plain --negatives global --ckpt-dir g2 >/dev/null 2>&1 || fail "global, 2 ranks"
run 2 $SPKDDP train $plain --negatives local --ckpt-dir l2 >/dev/null 2>&1 || fail "local, 2 ranks"
$SPKDDP diff g2/ckpt-000000000004.h5 l2/ckpt-000000000004.h5 >/dev/null &&
    fail "2 ranks: global and local negatives trained the same weights" ||
    echo "ok  2 ranks: global and local negatives train differently"

# aam+angleproto learns; stopped and resumed it is the uninterrupted run.
ap="$ecapa --loss aam+angleproto --contrastive-weight 0.5 --sampler balanced --utts-per-speaker 2 --epochs 3
    --log-every 1"
run 2 $SPKDDP train $ap --ckpt-dir ap --step-log ap.jsonl >log_ap 2>&1 || { cat log_ap; fail "aam+angleproto"; }
steps=$(wc -l <ap.jsonl)
final=$(printf 'ap/ckpt-%012d.h5' "$steps")
python3 - ap.jsonl <<'PY' || fail "aam+angleproto does not learn"
import json, sys
s = [json.loads(l)["loss"] for l in open(sys.argv[1])]
a, b = sum(s[:3]) / 3, sum(s[-3:]) / 3
print("ok  aam+angleproto learns: loss %.3f -> %.3f over %d steps" % (a, b, len(s)))
sys.exit(not b < 0.8 * a)
PY
run 2 $SPKDDP train $ap --ckpt-dir leg --max-steps 5 >/dev/null 2>&1 || fail "first leg"
run 2 $SPKDDP train $ap --ckpt-dir leg --resume auto >/dev/null 2>&1 || fail "second leg"
same "$final" "leg/$(basename "$final")" "aam+angleproto: stopped at step 5 and resumed == uninterrupted (bitwise)"
$SPKDDP export --ckpt "$final" --out ap.safetensors >/dev/null && echo "ok  its checkpoint exports" || fail "export"

expect_error 2 "needs --sampler balanced" -- run 1 $SPKDDP train $ecapa --loss ge2e --epochs 1
expect_error 2 "negatives local depends on how the global batch" -- \
    run 1 $SPKDDP train $ecapa --loss supcon --negatives local --invariant --epochs 1
expect_error 2 "linear model has none" -- run 1 $SPKDDP train --data sp.h5 --loss supcon --epochs 1
expect_error 2 "which --loss supcon does not use" -- run 1 $SPKDDP train $ecapa --loss supcon --head sharded --epochs 1
expect_error 2 "must be a multiple of --utts-per-speaker" -- \
    run 2 $SPKDDP train $ecapa --loss ge2e --sampler balanced --utts-per-speaker 3 --epochs 1
expect_error 2 "needs 16 speakers with at least 4 utterances" -- \
    run 1 $SPKDDP train $ecapa --global-batch 64 --loss ge2e --sampler balanced --utts-per-speaker 4 --epochs 1
expect_error 2 "holds only one group of 8" -- \
    run 1 $SPKDDP train $ecapa --global-batch 8 --loss ge2e --sampler balanced --utts-per-speaker 8 --epochs 1
expect_error 4 "another global batch \(32\) makes other batches" -- run 2 $SPKDDP train $ecapa --loss ge2e --invariant \
    --epochs 1 --sampler balanced --utts-per-speaker 4 --ckpt-dir el --resume el/ckpt-000000000003.h5 \
    --global-batch 32 --resume-allow global-batch --set-aside-newer
expect_error 2 "labels utterance contrasts each utterance's views" -- \
    run 1 $SPKDDP train $ecapa --loss supcon --labels utterance --epochs 1
expect_error 2 "labels utterance contrasts each utterance's views" -- \
    run 1 $SPKDDP train $ecapa --loss aam --labels utterance --views 2 --epochs 1
expect_error 2 "views must be 1" -- \
    run 1 $SPKDDP train $ecapa --loss ge2e --sampler balanced --utts-per-speaker 4 --views 2 --epochs 1
finish
