#!/usr/bin/env bash
# The invariant mode's BatchNorm by groups (--invariant-bn group, docs/invariant.md): each group
# of samples normalises with its own statistics, so no BatchNorm exchanges anything.
# - ECAPA (1-D; float32, and bf16 on 1 and 2 ranks, 2 threads and cpu-staged), ecapa-av and
#   ResNet34 (2-D, float32 and bf16; groups of 4 and of 8, whose weight gradients take plans of
#   8 samples) give bitwise the same checkpoint on 1, 2 and 4 ranks and
#   on 2 threads (ECAPA also on cpu-staged), running statistics included (rank 0's: the global
#   batch's first group's), and ECAPA the same held-out metrics; a run
#   resumed on another world size and micro-batches likewise. With one group a rank the gradient
#   sums hold their one term each (4 ranks: the same as words and in full, and with thousands
#   of small buckets in flight; 8 ranks).
# - What it computes is PyTorch DDP's local BatchNorm: with speaker-balanced batches, which both
#   modes cut into contiguous slices, 2 ranks x 8 of the default mode and groups of 8 give the
#   same step within 1e-5 (ECAPA and ResNet34; ECAPA in bf16 within its rounding, 5e-3); the
#   synchronized BatchNorm of --invariant-bn global does not (the comparison can fail).
# - One group of the whole batch on one rank is the global mode, within 1e-5 after an SGD step
#   (on the CPU the groups take the default mode's BatchNorm kernels, the global mode exact sums).
# - CAM++, whose dense blocks share each channel's statistics between their layers, likewise (1, 2
#   and 4 ranks, 2 threads, --recompute, bf16), and DDP's local BatchNorm within CAM++'s rounding sensitivity.
# - Refused: groups too small for BatchNorm, and a resume that changes the mode.
. "$(dirname "$0")/lib.sh" "$@"
export OMP_WAIT_POLICY=passive  # 4 ranks on few cores

$SPKDDP synth --kind speakers --out sp.h5 --val-out spv.h5 --dim 16 --speakers 10 --utts-per-speaker 16 \
    --val-utts-per-speaker 3 --min-frames 40 --max-frames 80 >/dev/null || fail "synth"
ecapa="--model ecapa --data sp.h5 --channels 64 --attention-channels 16 --se-channels 16 --emb-dim 32 --frames 40
    --global-batch 16 --optimizer adam --lr 0.002 --progress 0 --epochs 1"
grouped="--invariant --invariant-bn group --invariant-group 4"

# 160 utterances / 16: 2 epochs are 20 steps; the held-out loss and accuracy use rank 0's
# running statistics.
for k in 1 2 4; do
    run $k $SPKDDP train $ecapa $grouped --epochs 2 --val-data spv.h5 --metrics m$k.jsonl --ckpt-dir e$k >log_e$k 2>&1 ||
        { cat log_e$k; fail "ecapa on $k ranks"; }
done
SPKDDP_THREADS=2 run 1 $SPKDDP train $ecapa $grouped --max-steps 4 --ckpt-dir et >/dev/null 2>&1 || fail "ecapa, 2 threads"
run 1 $SPKDDP train $ecapa $grouped --max-steps 4 --ckpt-dir e1s >/dev/null 2>&1 || fail "ecapa, 4 steps"
run 2 $SPKDDP train $ecapa $grouped --max-steps 4 --device cpu-staged --ckpt-dir est >/dev/null 2>&1 ||
    fail "ecapa, cpu-staged"
final=ckpt-000000000020.h5
for k in 2 4; do
    same e1/$final e$k/$final "ecapa, BatchNorm by groups of 4: $k ranks == 1 rank after 20 steps (bitwise)"
    diff <(strip_timings m1.jsonl world_size) <(strip_timings m$k.jsonl world_size) >/dev/null && echo "ok  ecapa: $k-rank metrics == 1-rank metrics" ||
        fail "ecapa: the metrics of $k ranks differ from 1 rank's"
done
same e1s/ckpt-000000000004.h5 et/ckpt-000000000004.h5 "ecapa, BatchNorm by groups of 4: 2 threads == 1 thread (bitwise)"
# One group a rank: each gradient sum holds this rank's one term (SPKDDP_EXACT_SUMS' default),
# and the exchange halves recursively, the terms going as floats; the same as words and in full.
for form in terms words full; do
    SPKDDP_EXACT_SUMS=$form run 4 $SPKDDP train $ecapa $grouped --max-steps 4 --ckpt-dir e4_$form >/dev/null 2>&1 ||
        fail "ecapa, 4 ranks, sums as $form"
    same e1s/ckpt-000000000004.h5 e4_$form/ckpt-000000000004.h5 \
        "ecapa, one group a rank: 4 ranks with the sums as $form == 1 rank (bitwise)"
done
# Buckets of 52 sums, thousands in flight, their halvings moving on in any order.
SPKDDP_BUCKET_MB=0.0002 run 4 $SPKDDP train $ecapa $grouped --max-steps 4 --ckpt-dir e4_small >/dev/null 2>&1 ||
    fail "ecapa, 4 ranks, small buckets"
same e1s/ckpt-000000000004.h5 e4_small/ckpt-000000000004.h5 \
    "ecapa, one group a rank: 4 ranks with buckets of 52 sums == 1 rank (bitwise)"
# 8 ranks of one group of 2: the halvings past the second send words.
pairs="${grouped/--invariant-group 4/--invariant-group 2} --max-steps 2"
run 8 $SPKDDP train $ecapa $pairs --ckpt-dir e8 >/dev/null 2>&1 || fail "ecapa, 8 ranks"
run 1 $SPKDDP train $ecapa $pairs --ckpt-dir e8_1 >/dev/null 2>&1 || fail "ecapa, groups of 2, 1 rank"
same e8_1/ckpt-000000000002.h5 e8/ckpt-000000000002.h5 "ecapa, one group of 2 a rank: 8 ranks == 1 rank (bitwise)"
same e1s/ckpt-000000000004.h5 est/ckpt-000000000004.h5 "ecapa, BatchNorm by groups of 4: 2 ranks on cpu-staged == 1 on cpu (bitwise)"
grep -q "replicas identical" log_e4 || fail "the parameters differ across 4 ranks"
# bf16: each group's BatchNorm backward writes the convolutions' output gradients rounded
# (batchnorm1d_relu_backward_bf16), and the chunks go into their operands rounded in place.
for k in 1 2; do
    run $k $SPKDDP train $ecapa $grouped --precision bf16 --max-steps 4 --ckpt-dir eh$k >/dev/null 2>&1 ||
        fail "ecapa bf16 on $k ranks"
done
SPKDDP_THREADS=2 run 1 $SPKDDP train $ecapa $grouped --precision bf16 --max-steps 4 --ckpt-dir eht >/dev/null 2>&1 ||
    fail "ecapa bf16, 2 threads"
run 2 $SPKDDP train $ecapa $grouped --precision bf16 --max-steps 4 --device cpu-staged --ckpt-dir ehst >/dev/null 2>&1 ||
    fail "ecapa bf16, cpu-staged"
for d in eh2 eht ehst; do
    same eh1/ckpt-000000000004.h5 $d/ckpt-000000000004.h5 "ecapa bf16, BatchNorm by groups of 4: $d == 1 rank (bitwise)"
done
# Stopped at step 7 on 2 ranks, continued on 4; micro-batches (each forward's first group
# updates the running statistics) on 1 and 2 ranks.
run 2 $SPKDDP train $ecapa $grouped --epochs 2 --max-steps 7 --ckpt-dir el >/dev/null 2>&1 || fail "first leg on 2 ranks"
run 4 $SPKDDP train $ecapa $grouped --epochs 2 --ckpt-dir el --resume auto >/dev/null 2>&1 || fail "resume on 4 ranks"
same e2/$final el/$final "ecapa: stopped at step 7 on 2 ranks, resumed on 4 == uninterrupted (bitwise)"
for k in 1 2; do
    run $k $SPKDDP train $ecapa $grouped --grad-accum 2 --max-steps 2 --ckpt-dir ga$k >/dev/null 2>&1 ||
        fail "micro-batches on $k ranks"
done
same ga1/ckpt-000000000002.h5 ga2/ckpt-000000000002.h5 "ecapa, 2 micro-batches: 2 ranks == 1 rank (bitwise)"

$SPKDDP synth --kind speakers --out av.h5 --dim 16 --visual-dim 12 --speakers 10 --utts-per-speaker 8 \
    --min-frames 48 --max-frames 96 >/dev/null || fail "synth av"
for k in 1 2; do
    run $k $SPKDDP train --model ecapa-av --data av.h5 --channels 32 --attention-channels 16 --se-channels 16 \
        --emb-dim 32 --visual-channels 16 --frames 48 --global-batch 16 --optimizer adam --lr 0.002 --progress 0 \
        --epochs 1 --max-steps 3 $grouped --ckpt-dir av$k >/dev/null 2>&1 || fail "ecapa-av on $k ranks"
done
same av1/ckpt-000000000003.h5 av2/ckpt-000000000003.h5 "ecapa-av, BatchNorm by groups of 4: 2 ranks == 1 rank (bitwise)"

r34="--model resnet34 --data sp.h5 --channels 8 --emb-dim 16 --frames 32 --global-batch 16 --optimizer adam
    --lr 0.002 --progress 0 --epochs 1 --max-steps 3"
for k in 1 2; do
    run $k $SPKDDP train $r34 $grouped --ckpt-dir r$k >log_r$k 2>&1 || { cat log_r$k; fail "resnet34 on $k ranks"; }
done
SPKDDP_THREADS=2 run 1 $SPKDDP train $r34 $grouped --ckpt-dir r1t2 >/dev/null 2>&1 || fail "resnet34 on 2 threads"
for k in 1 2; do
    run $k $SPKDDP train $r34 $grouped --precision bf16 --ckpt-dir rh$k >/dev/null 2>&1 || fail "resnet34 bf16, $k ranks"
done
same r1/ckpt-000000000003.h5 r2/ckpt-000000000003.h5 "resnet34, BatchNorm2d by groups of 4: 2 ranks == 1 rank (bitwise)"
run 4 $SPKDDP train $r34 $grouped --ckpt-dir r4 >/dev/null 2>&1 || fail "resnet34 on 4 ranks"
same r1/ckpt-000000000003.h5 r4/ckpt-000000000003.h5 "resnet34, one group a rank: 4 ranks == 1 rank (bitwise)"
same r1/ckpt-000000000003.h5 r1t2/ckpt-000000000003.h5 "resnet34, BatchNorm2d by groups of 4: 2 threads == 1 (bitwise)"
same rh1/ckpt-000000000003.h5 rh2/ckpt-000000000003.h5 "resnet34 bf16, BatchNorm2d by groups of 4: 2 ranks == 1 rank (bitwise)"
# Groups of 8: the small maps' weight gradients by oneDNN plans of 8 samples, not of one
# (kernels/cpu/conv2d_dnnl_fixed.c); bf16 with its activations kept in bf16 on 2 threads too.
g8="--invariant --invariant-bn group --invariant-group 8"
for k in 1 2; do
    run $k $SPKDDP train $r34 $g8 --ckpt-dir r8_$k >/dev/null 2>&1 || fail "resnet34, groups of 8, $k ranks"
    run $k $SPKDDP train $r34 $g8 --precision bf16 --ckpt-dir rh8_$k >/dev/null 2>&1 ||
        fail "resnet34 bf16, groups of 8, $k ranks"
done
SPKDDP_THREADS=2 run 1 $SPKDDP train $r34 $g8 --precision bf16 --ckpt-dir rh8t2 >/dev/null 2>&1 ||
    fail "resnet34 bf16, groups of 8, 2 threads"
same r8_1/ckpt-000000000003.h5 r8_2/ckpt-000000000003.h5 "resnet34, groups of 8: 2 ranks == 1 rank (bitwise)"
for d in rh8_2 rh8t2; do
    same rh8_1/ckpt-000000000003.h5 $d/ckpt-000000000003.h5 "resnet34 bf16, groups of 8: $d == 1 rank (bitwise)"
done

# CAM++: its dense blocks' shared statistics by groups too (each group a batch of its own).
cam="--model campplus --data sp.h5 --channels 16 --frames 32 --global-batch 16 --optimizer adam --lr 0.002
    --progress 0 --epochs 1 --max-steps 3"
for k in 1 2 4; do
    run $k $SPKDDP train $cam $grouped --ckpt-dir cam$k >log_cam$k 2>&1 || { cat log_cam$k; fail "campplus on $k ranks"; }
done
SPKDDP_THREADS=2 run 1 $SPKDDP train $cam $grouped --ckpt-dir cam1t2 >/dev/null 2>&1 || fail "campplus on 2 threads"
run 2 $SPKDDP train $cam $grouped --recompute --ckpt-dir cam2rc >/dev/null 2>&1 || fail "campplus --recompute"
SPKDDP_EXACT_SUMS=full run 4 $SPKDDP train $cam $grouped --ckpt-dir cam4full >/dev/null 2>&1 ||
    fail "campplus on 4 ranks, the sums in full"
for k in 1 2; do
    run $k $SPKDDP train $cam $grouped --precision bf16 --ckpt-dir camh$k >/dev/null 2>&1 || fail "campplus bf16, $k ranks"
done
SPKDDP_THREADS=2 run 1 $SPKDDP train $cam $grouped --precision bf16 --ckpt-dir camh1t2 >/dev/null 2>&1 ||
    fail "campplus bf16 on 2 threads"
for d in cam2 cam4 cam4full cam1t2 cam2rc; do
    same cam1/ckpt-000000000003.h5 $d/ckpt-000000000003.h5 "campplus, BatchNorm by groups of 4: $d == 1 rank (bitwise)"
done
for d in camh2 camh1t2; do
    same camh1/ckpt-000000000003.h5 $d/ckpt-000000000003.h5 "campplus bf16, groups of 4: $d == 1 rank (bitwise)"
done

# PyTorch DDP's BatchNorm: one SGD step of the default mode against the two invariant ones.
ddp="$ecapa --optimizer sgd --lr 0.1 --max-steps 1 --sampler balanced --utts-per-speaker 2"
run 2 $SPKDDP train $ddp --ckpt-dir ddp >/dev/null 2>&1 || fail "default mode, 2 ranks"
run 2 $SPKDDP train $ddp --invariant --invariant-bn group --invariant-group 8 --ckpt-dir byg >/dev/null 2>&1 ||
    fail "groups of 8, 2 ranks"
run 2 $SPKDDP train $ddp --invariant --invariant-group 8 --ckpt-dir glob >/dev/null 2>&1 || fail "global, 2 ranks"
within ddp/ckpt-000000000001.h5 byg/ckpt-000000000001.h5 1e-5 "groups of 8 on 2 ranks == the default mode's 2 ranks x 8"
$SPKDDP diff ddp/ckpt-000000000001.h5 glob/ckpt-000000000001.h5 --rtol 1e-3 >/dev/null &&
    fail "the global BatchNorm matched the default mode's local one too: the comparison cannot fail"
# In bf16 the groups' convolutions read their operands folded by group in place
# (kernels/conv1d_bf16.h): groups of 8 on 2 ranks against the default's 2 x 8, and 4 groups of 4
# on one rank against its 4 x 4. bf16 rounds the activations, so a float32 rounding's difference
# now and then moves one by an ulp of bf16: 1.2e-3 and 1.5e-3 apart after this step (an operand
# read in the wrong layout: far more).
run 2 $SPKDDP train $ddp --precision bf16 --ckpt-dir ddph >/dev/null 2>&1 || fail "default mode bf16, 2 ranks"
run 4 $SPKDDP train $ddp --precision bf16 --ckpt-dir ddph4 >/dev/null 2>&1 || fail "default mode bf16, 4 ranks"
run 2 $SPKDDP train $ddp --precision bf16 --invariant --invariant-bn group --invariant-group 8 --ckpt-dir bygh \
    >/dev/null 2>&1 || fail "bf16, groups of 8, 2 ranks"
run 1 $SPKDDP train $ddp --precision bf16 --invariant --invariant-bn group --invariant-group 4 --ckpt-dir bygh4 \
    >/dev/null 2>&1 || fail "bf16, groups of 4, 1 rank"
within ddph/ckpt-000000000001.h5 bygh/ckpt-000000000001.h5 5e-3 "bf16: groups of 8 on 2 ranks == the default's 2 x 8"
within ddph4/ckpt-000000000001.h5 bygh4/ckpt-000000000001.h5 5e-3 "bf16: 4 groups of 4 on 1 rank == the default's 4 x 4"
# (Direct convolutions in both modes: where oneDNN has no Winograd of its own, oneDNN 3 on
# AVX-512, the default mode's 3x3 layers take kernels/cpu/conv2d_winograd.c, which rounds
# otherwise than the mode's oneDNN plans: 0.4% apart after this step.)
r34ddp="${r34/--max-steps 3/--max-steps 1} --optimizer sgd --lr 0.1 --sampler balanced --utts-per-speaker 2
    --conv-algorithm direct"
run 2 $SPKDDP train $r34ddp --ckpt-dir rddp >/dev/null 2>&1 || fail "resnet34, default mode, 2 ranks"
run 2 $SPKDDP train $r34ddp --invariant --invariant-bn group --invariant-group 8 --ckpt-dir rbyg >/dev/null 2>&1 ||
    fail "resnet34, groups of 8, 2 ranks"
within rddp/ckpt-000000000001.h5 rbyg/ckpt-000000000001.h5 1e-5 \
    "resnet34: groups of 8 on 2 ranks == the default mode's 2 ranks x 8"
# CAM++'s step is far more sensitive to rounding: the plain mode and the global BatchNorm over the
# same batch on one rank (the same computation) differ by 0.6% (biases whose gradients cancel), so
# 1e-2 here (groups of 8 come within 0.05%); the global BatchNorm on 2 ranks differs by 66%.
camddp="${cam/--max-steps 3/--max-steps 1} --optimizer sgd --lr 0.1 --sampler balanced --utts-per-speaker 2
    --conv-algorithm direct"
run 2 $SPKDDP train $camddp --ckpt-dir cddp >/dev/null 2>&1 || fail "campplus, default mode, 2 ranks"
run 2 $SPKDDP train $camddp --invariant --invariant-bn group --invariant-group 8 --ckpt-dir cbyg >/dev/null 2>&1 ||
    fail "campplus, groups of 8, 2 ranks"
run 2 $SPKDDP train $camddp --invariant --invariant-group 8 --ckpt-dir cglob >/dev/null 2>&1 ||
    fail "campplus, global, 2 ranks"
within cddp/ckpt-000000000001.h5 cbyg/ckpt-000000000001.h5 1e-2 \
    "campplus: groups of 8 on 2 ranks == the default mode's 2 ranks x 8"
$SPKDDP diff cddp/ckpt-000000000001.h5 cglob/ckpt-000000000001.h5 --rtol 0.1 >/dev/null &&
    fail "campplus: the global BatchNorm matched the default mode's local one too: the comparison cannot fail"

# One group of the whole batch on one rank: the global batch's statistics. On the CPU the groups
# take the default mode's BatchNorm kernels, so the same values to rounding, after one SGD step.
run 1 $SPKDDP train $ddp --invariant --invariant-group 16 --ckpt-dir one_g >/dev/null 2>&1 || fail "global"
run 1 $SPKDDP train $ddp --invariant --invariant-bn group --invariant-group 16 --ckpt-dir one_b >/dev/null 2>&1 ||
    fail "one group"
within one_g/ckpt-000000000001.h5 one_b/ckpt-000000000001.h5 1e-5 "one group of the whole batch == BatchNorm over it"

expect_error 2 "invariant-bn group normalises each --invariant-group of samples, and ecapa's BatchNorm needs at least 2" \
    -- run 1 $SPKDDP train $ecapa --invariant --invariant-bn group
expect_error 4 "invariant-bn" -- run 1 $SPKDDP train $ecapa --invariant --invariant-group 4 --epochs 2 \
    --resume e1s/ckpt-000000000004.h5 --ckpt-dir switch
finish
