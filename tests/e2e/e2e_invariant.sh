#!/usr/bin/env bash
# World-size-invariant training (--invariant, docs/invariant.md). ECAPA (C=64) on synthetic
# speakers, 20 steps of Adam with a global batch of 16: 1, 2 and 4 ranks end with bitwise the same
# checkpoint (8 ranks on a shorter run) and the same metrics, held-out loss and accuracy included,
# but for timings; a run stopped at step 7 on 2 ranks and resumed on 4 equals the uninterrupted
# 2-rank run; 1 and 2 threads per rank agree; the GPU code path's data movement (cpu-staged) changes
# nothing; a global batch of 160, whose sums exceed the exchange's one word and are partly redone in
# full, is the same on 1 and 2 ranks; groups of 2 samples per exact term (--invariant-group) agree
# on 1, 2 and 8 ranks; an epoch that global batches do not divide is padded to whole ones the same
# on 1 and 4 ranks (or cut with --drop-last); and at C=512 (a layer past L2, folded in groups) on 1
# and 2 ranks and 2 and 8 threads, and in bf16 on 1 and 8 threads. The linear model, ecapa-av,
# resnet34 and campplus on 1, 2 and 4 ranks likewise; resnet34 and campplus with the gradient sums
# in full (SPKDDP_EXACT_SUMS=full) as with the words they take up to 32 terms in, campplus also with
# two CAM segments a sample (240-frame crops). With a plain float allreduce in place of the exact
# one (SPKDDP_EXACT_ALLREDUCE=float) 2 ranks disagree with one rank: the comparison can fail.
# Micro-batches (--grad-accum 2): bitwise on 1, 2 and 4 ranks.
. "$(dirname "$0")/lib.sh" "$@"
export OMP_WAIT_POLICY=passive  # 4 and 8 ranks on few cores

$SPKDDP synth --kind speakers --out sp.h5 --val-out spv.h5 --dim 16 --speakers 10 --utts-per-speaker 16 \
    --val-utts-per-speaker 3 --min-frames 40 --max-frames 80 >/dev/null || fail "synth"
$SPKDDP synth --kind speakers --out av.h5 --dim 16 --visual-dim 12 --speakers 10 --utts-per-speaker 8 \
    --min-frames 48 --max-frames 96 >/dev/null || fail "synth av"
ecapa="--model ecapa --data sp.h5 --channels 64 --attention-channels 16 --se-channels 16 --emb-dim 32 --frames 40
    --global-batch 16 --optimizer adam --lr 0.002 --invariant --progress 0"

# same A B WHAT: the two checkpoints are bitwise equal.

# 160 utterances / 16 = 10 steps per epoch: 2 epochs are the 20 steps.
for k in 1 2 4; do
    run $k $SPKDDP train $ecapa --epochs 2 --val-data spv.h5 --ckpt-dir ck$k --metrics m$k.jsonl >log$k 2>&1 \
        || { cat log$k; fail "$k ranks"; }
done
final=ckpt-000000000020.h5
for k in 2 4; do
    same ck1/$final ck$k/$final "ecapa: $k ranks x batch $((16 / k)) == 1 rank x batch 16 after 20 steps (bitwise)"
    diff <(strip_timings m1.jsonl world_size) <(strip_timings m$k.jsonl world_size) >/dev/null && echo "ok  ecapa: $k-rank metrics == 1-rank metrics" \
        || fail "ecapa: metrics of $k ranks differ from 1 rank's"
done
grep -q "replicas identical" log4 || fail "replicas differ on 4 ranks"
grep -q "note: --invariant in its slowest form here" log4 || fail "no note on --invariant-group 4 --invariant-bn group"

run 8 $SPKDDP train $ecapa --epochs 1 --max-steps 3 --ckpt-dir ck8 >log8 2>&1 || { cat log8; fail "8 ranks"; }
run 1 $SPKDDP train $ecapa --epochs 1 --max-steps 3 --ckpt-dir ck1s >/dev/null 2>&1 || fail "1 rank, 3 steps"
same ck1s/ckpt-000000000003.h5 ck8/ckpt-000000000003.h5 "ecapa: 8 ranks x batch 2 == 1 rank x batch 16 after 3 steps (bitwise)"

# Elastic resume: stopped at step 7 on 2 ranks, continued on 4.
run 2 $SPKDDP train $ecapa --epochs 2 --max-steps 7 --ckpt-dir el >/dev/null 2>&1 || fail "first leg on 2 ranks"
run 4 $SPKDDP train $ecapa --epochs 2 --ckpt-dir el --resume auto >log_el 2>&1 || { cat log_el; fail "resume on 4 ranks"; }
grep -q "written by 2 ranks, now 4" log_el || fail "the resume did not start from the 2-rank checkpoint"
same ck2/$final el/$final "ecapa: stopped at step 7 on 2 ranks, resumed on 4 == uninterrupted on 2 (bitwise)"

# Threads per rank, and the device code path's data movement.
SPKDDP_THREADS=1 run 1 $SPKDDP train $ecapa --epochs 1 --max-steps 4 --ckpt-dir th1 >/dev/null 2>&1 || fail "1 thread"
SPKDDP_THREADS=2 run 1 $SPKDDP train $ecapa --epochs 1 --max-steps 4 --ckpt-dir th2 >/dev/null 2>&1 || fail "2 threads"
SPKDDP_THREADS=2 run 2 $SPKDDP train $ecapa --epochs 1 --max-steps 4 --ckpt-dir th22 >/dev/null 2>&1 || fail "2 x 2 threads"
run 2 $SPKDDP train $ecapa --epochs 1 --max-steps 4 --device cpu-staged --ckpt-dir st >/dev/null 2>&1 || fail "cpu-staged"
same th1/ckpt-000000000004.h5 th2/ckpt-000000000004.h5 "ecapa: 1 rank, 1 thread == 2 threads (bitwise)"
same th1/ckpt-000000000004.h5 th22/ckpt-000000000004.h5 "ecapa: 2 ranks x 2 threads == 1 rank x 1 thread (bitwise)"
same th1/ckpt-000000000004.h5 st/ckpt-000000000004.h5 "ecapa: 2 ranks on cpu-staged == 1 rank on cpu (bitwise)"

# A global batch of 160 (80 terms a sum on each of 2 ranks): some sums do not fit the exchange's
# one word and are reduced in full (13 of them in this step); the same as on one rank.
for k in 1 2; do
    run $k $SPKDDP train $ecapa --global-batch 160 --epochs 1 --max-steps 1 --ckpt-dir wide$k >/dev/null 2>&1 \
        || fail "global batch 160 on $k ranks"
done
same wide1/ckpt-000000000001.h5 wide2/ckpt-000000000001.h5 \
    "ecapa: 2 ranks x 80 == 1 rank x 160, sums past one word redone (bitwise)"

# Groups of 2 samples per exact term: the same on 1, 2 and 8 ranks (8 x 2 keeps the groups whole);
# a group that does not divide the per-rank batch is refused.
for k in 1 2 8; do
    run $k $SPKDDP train $ecapa --invariant-group 2 --epochs 1 --max-steps 3 --ckpt-dir g$k >/dev/null 2>&1 \
        || fail "groups of 2 on $k ranks"
done
for k in 2 8; do
    same g1/ckpt-000000000003.h5 g$k/ckpt-000000000003.h5 "ecapa, groups of 2: $k ranks == 1 rank (bitwise)"
done
expect_error 2 "invariant-group 3 does not divide the per-rank batch 8" -- run 2 $SPKDDP train $ecapa --invariant-group 3
# An epoch that global batches do not divide (160 = 3 x 48 + 16): its order wraps around to fill
# a fourth batch, the same on 1 and 4 ranks; --drop-last leaves the 16 out (3 steps).
for k in 1 4; do
    run $k $SPKDDP train ${ecapa/--global-batch 16/--global-batch 48} --epochs 1 --ckpt-dir pad$k >log_pad$k 2>&1 \
        || { cat log_pad$k; fail "global batch 48 on $k ranks"; }
done
grep -q "fills each epoch's last global batch of 48 with the first 32 samples" log_pad4 || fail "no note on the padding"
same pad1/ckpt-000000000004.h5 pad4/ckpt-000000000004.h5 "ecapa: 160 samples in 4 global batches of 48, 4 ranks == 1 rank (bitwise)"
for k in 1 2; do  # the padded last update in two micro-batches of 24
    run $k $SPKDDP train ${ecapa/--global-batch 16/--global-batch 48} --grad-accum 2 --epochs 1 --ckpt-dir pada$k \
        >/dev/null 2>&1 || fail "global batch 48 in 2 micro-batches on $k ranks"
done
same pada1/ckpt-000000000004.h5 pada2/ckpt-000000000004.h5 "ecapa: 4 padded updates of 2 micro-batches, 2 ranks == 1 rank (bitwise)"
run 2 $SPKDDP train ${ecapa/--global-batch 16/--global-batch 48} --drop-last --epochs 1 --ckpt-dir padd >log_padd 2>&1 \
    || { cat log_padd; fail "--drop-last"; }
[ -f padd/ckpt-000000000003.h5 ] && [ ! -f padd/ckpt-000000000004.h5 ] && grep -q "16 of the 160 samples" log_padd \
    && echo "ok  --drop-last: 3 whole global batches of 48, 16 samples left out" || fail "--drop-last did not cut the epoch"
# At C=512 the 1536 x 1536 layer's weights exceed L2: in groups its forward and input gradient
# fold each group's samples into one GEMM (threads take whole chunks). 1 rank, 2 ranks and 1
# rank of 2 threads alike.
wide=${ecapa/--channels 64/--channels 512}
for k in 1 2; do
    run $k $SPKDDP train $wide --invariant-group 8 --epochs 1 --max-steps 2 --ckpt-dir w$k >/dev/null 2>&1 \
        || fail "C=512, groups of 8 on $k ranks"
done
SPKDDP_THREADS=2 run 1 $SPKDDP train $wide --invariant-group 8 --epochs 1 --max-steps 2 --ckpt-dir wt >/dev/null 2>&1 \
    || fail "C=512, groups of 8 on 2 threads"
same w1/ckpt-000000000002.h5 w2/ckpt-000000000002.h5 "ecapa C=512, groups of 8: 2 ranks == 1 rank (bitwise)"
same w1/ckpt-000000000002.h5 wt/ckpt-000000000002.h5 "ecapa C=512, groups of 8: 2 threads == 1 thread (bitwise)"
# 8 threads, more than most layers' weight-gradient blocks: tiles of their rows, where the GEMM
# gives them the blocks' bits (the 512-channel layers in float32, all in bf16).
SPKDDP_THREADS=8 run 1 $SPKDDP train $wide --invariant-group 8 --epochs 1 --max-steps 2 --ckpt-dir wt8 >/dev/null 2>&1 \
    || fail "C=512, groups of 8 on 8 threads"
same w1/ckpt-000000000002.h5 wt8/ckpt-000000000002.h5 "ecapa C=512, groups of 8: 8 threads == 1 thread (bitwise)"
for t in 1 8; do
    SPKDDP_THREADS=$t run 1 $SPKDDP train $wide --invariant-group 8 --precision bf16 --epochs 1 --max-steps 2 \
        --ckpt-dir wb$t >/dev/null 2>&1 || fail "C=512 bf16, groups of 8 on $t threads"
done
same wb1/ckpt-000000000002.h5 wb8/ckpt-000000000002.h5 "ecapa C=512 bf16, groups of 8: 8 threads == 1 thread (bitwise)"
# A resume leaving the mode would not continue the checkpoint's trajectory: refused.
plain=${ecapa/--invariant /}
expect_error 4 "written with --invariant 1, this run has --invariant 0" -- \
    run 1 $SPKDDP train $plain --epochs 3 --resume ck1/ckpt-000000000010.h5 --ckpt-dir leave

# The linear model and ecapa-av.
for k in 1 2 4; do
    run $k $SPKDDP train --data sp.h5 --epochs 2 --global-batch 16 --lr 0.05 --momentum 0.9 --invariant --progress 0 \
        --ckpt-dir lin$k >/dev/null 2>&1 || fail "linear on $k ranks"
    run $k $SPKDDP train --model ecapa-av --data av.h5 --channels 32 --attention-channels 16 --se-channels 16 \
        --emb-dim 32 --visual-channels 16 --frames 48 --global-batch 16 --optimizer adam --lr 0.002 --invariant \
        --progress 0 --epochs 1 --max-steps 4 --ckpt-dir av$k >/dev/null 2>&1 || fail "ecapa-av on $k ranks"
done
for k in 2 4; do
    same lin1/ckpt-000000000020.h5 lin$k/ckpt-000000000020.h5 "linear: $k ranks == 1 rank (bitwise)"
    same av1/ckpt-000000000004.h5 av$k/ckpt-000000000004.h5 "ecapa-av: $k ranks == 1 rank (bitwise)"
done

# WeSpeaker's ResNet34 (BatchNorm2d over the global batch, the 2-D convolutions per sample):
# 1, 2 and 4 ranks, and 1 rank on 2 threads.
r34="--model resnet34 --data sp.h5 --channels 8 --emb-dim 16 --frames 32 --global-batch 16 --optimizer adam
    --lr 0.002 --invariant --progress 0 --epochs 1 --max-steps 3"
for k in 1 2 4; do
    SPKDDP_THREADS=1 run $k $SPKDDP train $r34 --ckpt-dir r$k >log_r$k 2>&1 || { cat log_r$k; fail "resnet34 on $k ranks"; }
done
SPKDDP_THREADS=2 run 1 $SPKDDP train $r34 --ckpt-dir r1t2 >/dev/null 2>&1 || fail "resnet34 on 2 threads"
SPKDDP_EXACT_SUMS=full SPKDDP_THREADS=1 run 2 $SPKDDP train $r34 --ckpt-dir r2f >/dev/null 2>&1 || fail "resnet34, full"
for d in r2 r4 r1t2 r2f; do
    same r1/ckpt-000000000003.h5 $d/ckpt-000000000003.h5 "resnet34: $d == 1 rank, 1 thread (bitwise)"
done

# 3D-Speaker's CAM++ (the dense blocks' shared statistics and their readers' sums over the global
# batch): 1, 2 and 4 ranks, and 1 rank on 2 threads.
cpp="--model campplus --data sp.h5 --channels 16 --growth-rate 8 --emb-dim 16 --frames 32 --global-batch 16
    --optimizer adam --lr 0.002 --invariant --progress 0 --epochs 1 --max-steps 3"
for k in 1 2 4; do
    SPKDDP_THREADS=1 run $k $SPKDDP train $cpp --ckpt-dir c$k >log_c$k 2>&1 || { cat log_c$k; fail "campplus on $k ranks"; }
done
SPKDDP_THREADS=2 run 1 $SPKDDP train $cpp --ckpt-dir c1t2 >/dev/null 2>&1 || fail "campplus on 2 threads"
SPKDDP_EXACT_SUMS=full SPKDDP_THREADS=1 run 2 $SPKDDP train $cpp --ckpt-dir c2f >/dev/null 2>&1 || fail "campplus, full"
# 240-frame crops: two segments a sample in the CAM layers, whose sums take a term per segment
long=${cpp/--frames 32/--frames 240}
for form in words full; do
    SPKDDP_EXACT_SUMS=$form run 2 $SPKDDP train $long --ckpt-dir cl_$form >/dev/null 2>&1 || fail "campplus, 240 frames, $form"
done
same cl_words/ckpt-000000000003.h5 cl_full/ckpt-000000000003.h5 "campplus, 2 segments a sample: the sums as words == in full (bitwise)"
for d in c2 c4 c1t2 c2f; do
    same c1/ckpt-000000000003.h5 $d/ckpt-000000000003.h5 "campplus: $d == 1 rank, 1 thread (bitwise)"
done

# The check that the comparisons can fail: a float allreduce of each rank's rounded sums.
SPKDDP_EXACT_ALLREDUCE=float run 2 $SPKDDP train $ecapa --epochs 1 --max-steps 4 --ckpt-dir mut >/dev/null 2>&1 \
    || fail "float allreduce run"
if $SPKDDP diff th1/ckpt-000000000004.h5 mut/ckpt-000000000004.h5 >/dev/null; then
    fail "a float allreduce in place of the exact one still gave 1 rank's bits: the comparison cannot fail"
else
    echo "ok  with a float allreduce instead of the exact one, 2 ranks differ from 1 rank"
fi
# Micro-batches (--grad-accum): their exact sums add up across the update's backwards, rounded
# once; 1, 2 and 4 ranks bitwise; the linear model (no BatchNorm) within rounding of one batch.
for k in 1 2 4; do
    run $k $SPKDDP train $ecapa --epochs 1 --max-steps 5 --grad-accum 2 --ckpt-dir acc$k >log_acc$k 2>&1 ||
        { cat log_acc$k; fail "--grad-accum 2 on $k ranks"; }
done
same acc1/ckpt-000000000005.h5 acc2/ckpt-000000000005.h5 "ecapa --grad-accum 2: 2 ranks == 1 rank (bitwise)"
same acc1/ckpt-000000000005.h5 acc4/ckpt-000000000005.h5 "ecapa --grad-accum 2: 4 ranks == 1 rank (bitwise)"
lin="--data sp.h5 --global-batch 16 --optimizer sgd --lr 0.05 --progress 0 --invariant --epochs 1"
run 2 $SPKDDP train $lin --ckpt-dir linacc1 >/dev/null 2>&1 || fail "linear, one batch"
run 2 $SPKDDP train $lin --grad-accum 2 --ckpt-dir linacc2 >/dev/null 2>&1 || fail "linear, 2 micro-batches"
$SPKDDP diff linacc1/ckpt-000000000010.h5 linacc2/ckpt-000000000010.h5 --rtol 1e-5 >/dev/null &&
    echo "ok  linear: 2 micro-batches == one global batch (within 1e-5)" || fail "linear: micro-batches differ"
finish
