#!/usr/bin/env bash
# WeSpeaker's ResNet34 on 2 ranks: it learns the synthetic speakers (the loss falls, the
# training accuracy rises well above chance) with replicas identical. Slowly: the synthetic
# features have no frequency locality for its 2-D convolutions to use, and PyTorch's ResNet34
# of the same width learns them as slowly (training accuracy 0.27 after 12 epochs where an
# ECAPA-TDNN reaches 0.91), and --zero-init-residual much faster; gradients averaged in many
# small buckets during the backward give bitwise what one bucket gives (the blocks report their
# gradients ready in order); a run stopped and resumed ends bitwise where the uninterrupted run
# ends; --conv-algorithm direct takes other bits within rounding of Winograd's; bf16 (its activations
# stored in bf16, as PyTorch AMP's) learns as fp32 does, and the bottleneck depths run; a feature count that does not halve three
# times is refused with one sentence (tests/e2e/e2e_invariant.sh has the invariant mode).
. "$(dirname "$0")/lib.sh" "$@"

$SPKDDP synth --kind speakers --out sp.h5 --dim 16 --speakers 10 --utts-per-speaker 16 --min-frames 40 \
    --max-frames 80 >/dev/null || fail "synth"
r34="--model resnet34 --channels 8 --emb-dim 32 --frames 32 --data sp.h5 --global-batch 16 --optimizer adam --lr 0.003
    --scale 16 --progress 0"
run 2 $SPKDDP train $r34 --epochs 24 --metrics m.jsonl >log 2>&1 || { cat log; fail "training"; }
field() { sed -nE "${1}s/.*\"$2\": ([-0-9.e+]+).*/\1/p" "$3"; }
first=$(field 1 loss m.jsonl) last=$(field '$' loss m.jsonl) acc=$(field '$' accuracy m.jsonl)
echo "resnet34: loss $first -> $last, training accuracy $acc (chance 0.1)"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.7 * a) }' || fail "the loss did not fall enough: $first -> $last"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.25) }' || fail "training accuracy $acc is not well above chance"
grep -q "replicas identical" log || fail "replicas differ"

# --zero-init-residual: every block starts as its shortcut, and the same run learns several times
# faster (here 24 epochs end at loss 2.2, accuracy 0.76, against 4.7 and 0.29).
run 2 $SPKDDP train $r34 --epochs 24 --zero-init-residual --metrics mz.jsonl >logz 2>&1 || { cat logz; fail "zero-init"; }
zlast=$(field '$' loss mz.jsonl) zacc=$(field '$' accuracy mz.jsonl)
echo "resnet34 --zero-init-residual: loss $(field 1 loss mz.jsonl) -> $zlast, training accuracy $zacc"
awk -v a="$last" -v b="$zlast" -v x="$acc" -v y="$zacc" 'BEGIN { exit !(b < 0.8 * a && y > x) }' ||
    fail "--zero-init-residual ends at loss $zlast, accuracy $zacc; the default init at $last, $acc"
expect_error 2 "^spkddp: error: --zero-init-residual: ecapa has no 2-D residual blocks" -- \
    $SPKDDP train --model ecapa --channels 16 --data sp.h5 --batch 4 --epochs 1 --zero-init-residual

run 2 $SPKDDP train $r34 --epochs 1 --ckpt-dir ck_one >/dev/null 2>&1 || fail "one bucket"
SPKDDP_BUCKET_MB=0.01 run 2 $SPKDDP train $r34 --epochs 1 --ckpt-dir ck_many >/dev/null 2>&1 || fail "small buckets"
$SPKDDP diff ck_one/ckpt-000000000010.h5 ck_many/ckpt-000000000010.h5 >/dev/null ||
    fail "gradients averaged in small buckets differ from one bucket"
echo "ok  small gradient buckets bitwise one bucket's"

# The 3x3 layers of channels in sixteens run as Winograd by default (oneDNN's on AVX-512 CPUs,
# our own elsewhere): --conv-algorithm direct takes the direct convolution, other bits, the same
# step within float32's rounding (2 SGD steps: Adam's first steps and 10 of them amplify the few
# ReLUs that flip to 2% apart, as any change of rounding does).
sgd2="${r34/--optimizer adam/--optimizer sgd} --epochs 1 --max-steps 2"
for a in winograd direct; do
    run 2 $SPKDDP train $sgd2 --ckpt-dir ck_$a --conv-algorithm $a >log_$a 2>&1 || fail "--conv-algorithm $a"
done
! $SPKDDP diff ck_winograd/ckpt-000000000002.h5 ck_direct/ckpt-000000000002.h5 >/dev/null 2>&1 ||
    fail "--conv-algorithm direct gave Winograd's bits"
$SPKDDP diff ck_winograd/ckpt-000000000002.h5 ck_direct/ckpt-000000000002.h5 --rtol 1e-3 >/dev/null ||
    fail "--conv-algorithm direct strays from Winograd by more than rounding after 2 steps"
echo "ok  --conv-algorithm direct: within 1e-3 of Winograd after 2 steps"
run 2 $SPKDDP train ${sgd2/--max-steps 2/--max-steps 3} --ckpt-dir ck_winograd --resume auto --conv-algorithm direct \
    >log_algo 2>&1 && fail "a resume that changes --conv-algorithm was not refused"
grep -q "resume-allow conv-algorithm" log_algo || { cat log_algo; fail "the refusal does not name --resume-allow conv-algorithm"; }
echo "ok  a resume under another --conv-algorithm is refused (its bits would differ)"

run 2 $SPKDDP train $r34 --epochs 3 --ckpt-dir ck_full >/dev/null 2>&1 || fail "uninterrupted run"
run 2 $SPKDDP train $r34 --epochs 3 --ckpt-dir ck_stop --max-steps 14 >/dev/null 2>&1 || fail "stopped run"
run 2 $SPKDDP train $r34 --epochs 3 --ckpt-dir ck_stop --resume auto >/dev/null 2>&1 || fail "resumed run"
$SPKDDP diff ck_full/ckpt-000000000030.h5 ck_stop/ckpt-000000000030.h5 >/dev/null ||
    fail "stop at step 14 and resume does not end where the uninterrupted run ends"
echo "ok  stopped at step 14 and resumed: bitwise the uninterrupted run"

run 2 $SPKDDP train $r34 --epochs 24 --precision bf16 --metrics m_bf16.jsonl >log_bf16 2>&1 || { cat log_bf16; fail "bf16"; }
grep -q "replicas identical" log_bf16 || fail "bf16: replicas differ"
hfirst=$(field 1 loss m_bf16.jsonl) hlast=$(field '$' loss m_bf16.jsonl) hacc=$(field '$' accuracy m_bf16.jsonl)
echo "resnet34 bf16: loss $hfirst -> $hlast, training accuracy $hacc"
awk -v a="$last" -v b="$hlast" 'BEGIN { exit !(b < 1.1 * a) }' || fail "bf16 ends at loss $hlast, fp32 at $last"
awk -v a="$hacc" 'BEGIN { exit !(a >= 0.25) }' || fail "bf16 training accuracy $hacc is not well above chance"
run 2 $SPKDDP train --model resnet50 --channels 8 --emb-dim 16 --frames 32 --data sp.h5 --global-batch 8 --epochs 1 \
    --progress 0 >log_r50 2>&1 || { cat log_r50; fail "resnet50"; }
echo "ok  bf16 ResNet34 and a Bottleneck ResNet50 train"

$SPKDDP synth --kind speakers --out f20.h5 --dim 20 --speakers 4 --utts-per-speaker 4 >/dev/null || fail "synth f20"
expect_error 3 "f20.h5: resnet34 needs features whose count F is a multiple of 8" -- \
    $SPKDDP train --model resnet34 --data f20.h5 --batch 4 --epochs 1
finish
