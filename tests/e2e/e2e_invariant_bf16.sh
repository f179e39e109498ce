#!/usr/bin/env bash
# The world-size-invariant mode with bf16 operands (--invariant --precision bf16, docs/invariant.md):
# ECAPA (C=64) on 1, 2, 4 and 8 ranks ends with bitwise the same checkpoint, so do 1 and 2
# threads, cpu-staged, micro-batches (--grad-accum 2) and a run stopped on 2 ranks and resumed on
# 4; ResNet34 and CAM++ likewise on 1, 2 and 4 ranks and 2 threads; SupCon, DINO and ecapa-av on 1
# and 2. The run is a bf16 one (it differs from the float32 invariant run, within bf16's
# rounding), the widened path of CPUs without native bf16 is invariant in itself, and a plain
# float allreduce in place of the exact one breaks the identity.
. "$(dirname "$0")/lib.sh" "$@"
export OMP_WAIT_POLICY=passive  # 4 and 8 ranks on few cores

$SPKDDP synth --kind speakers --out sp.h5 --dim 16 --speakers 10 --utts-per-speaker 16 --min-frames 40 \
    --max-frames 80 >/dev/null || fail "synth"
ecapa="--model ecapa --data sp.h5 --channels 64 --attention-channels 16 --se-channels 16 --emb-dim 32 --frames 40
    --global-batch 16 --optimizer adam --lr 0.002 --invariant --precision bf16 --progress 0 --epochs 1"
ck=ckpt-000000000006.h5

for k in 1 2 4; do
    run $k $SPKDDP train $ecapa --max-steps 6 --ckpt-dir e$k >log_e$k 2>&1 || { cat log_e$k; fail "ecapa on $k ranks"; }
done
for k in 2 4; do same e1/$ck e$k/$ck "ecapa bf16: $k ranks x batch $((16 / k)) == 1 rank x batch 16 (bitwise)"; done
grep -q "replicas identical" log_e4 || fail "replicas differ on 4 ranks"
run 8 $SPKDDP train $ecapa --max-steps 3 --ckpt-dir e8 >log_e8 2>&1 || { cat log_e8; fail "ecapa on 8 ranks"; }
run 1 $SPKDDP train $ecapa --max-steps 3 --ckpt-dir e1s >/dev/null 2>&1 || fail "ecapa, 3 steps"
same e1s/ckpt-000000000003.h5 e8/ckpt-000000000003.h5 "ecapa bf16: 8 ranks x batch 2 == 1 rank x batch 16 (bitwise)"

# Threads, the device path's data movement, micro-batches, an elastic resume.
SPKDDP_THREADS=2 run 1 $SPKDDP train $ecapa --max-steps 6 --ckpt-dir t2 >/dev/null 2>&1 || fail "2 threads"
run 2 $SPKDDP train $ecapa --max-steps 6 --device cpu-staged --ckpt-dir st >/dev/null 2>&1 || fail "cpu-staged"
same e1/$ck t2/$ck "ecapa bf16: 1 rank, 2 threads == 1 thread (bitwise)"
same e1/$ck st/$ck "ecapa bf16: 2 ranks on cpu-staged == 1 rank on cpu (bitwise)"
for k in 1 2 4; do
    run $k $SPKDDP train $ecapa --max-steps 3 --grad-accum 2 --ckpt-dir a$k >/dev/null 2>&1 || fail "--grad-accum on $k"
done
for k in 2 4; do same a1/ckpt-000000000003.h5 a$k/ckpt-000000000003.h5 "ecapa bf16 --grad-accum 2: $k ranks == 1 rank (bitwise)"; done
run 2 $SPKDDP train $ecapa --max-steps 3 --ckpt-dir el >/dev/null 2>&1 || fail "first leg on 2 ranks"
run 4 $SPKDDP train $ecapa --max-steps 6 --ckpt-dir el --resume auto >log_el 2>&1 || { cat log_el; fail "resume on 4"; }
grep -q "written by 2 ranks, now 4" log_el || fail "the resume did not start from the 2-rank checkpoint"
same e1/$ck el/$ck "ecapa bf16: stopped at step 3 on 2 ranks, resumed on 4 == uninterrupted (bitwise)"

# A bf16 run: not the float32 one, but within bf16's rounding of it after 6 steps.
run 1 $SPKDDP train ${ecapa/--precision bf16/} --max-steps 6 --ckpt-dir f32 >/dev/null 2>&1 || fail "float32 run"
if $SPKDDP diff e1/$ck f32/$ck >/dev/null; then fail "the bf16 run has the float32 run's bits: bf16 was not used"; fi
params=$($SPKDDP diff e1/$ck f32/$ck | awk '$1 == "params" { print $NF }')
awk -v r="$params" 'BEGIN { exit !(r > 0 && r < 0.05) }' &&
    echo "ok  ecapa: the bf16 run differs from the float32 one, parameters within rel $params" ||
    fail "bf16 against float32: parameters rel $params"

# CPUs without native bf16 widen the operands (another run, invariant in itself).
for k in 1 2; do
    ONEDNN_MAX_CPU_ISA=AVX512_CORE run $k $SPKDDP train $ecapa --max-steps 3 --ckpt-dir w$k >/dev/null 2>&1 ||
        fail "widened on $k ranks"
done
same w1/ckpt-000000000003.h5 w2/ckpt-000000000003.h5 "ecapa bf16 without native bf16: 2 ranks == 1 rank (bitwise)"

# The 2-D encoders (their convolutions widened to the float32 fixed ones, BatchNorm2d global).
r34="--model resnet34 --data sp.h5 --channels 8 --emb-dim 16 --frames 32 --global-batch 16 --optimizer adam
    --lr 0.002 --invariant --precision bf16 --progress 0 --epochs 1 --max-steps 3"
cpp="--model campplus --data sp.h5 --channels 16 --growth-rate 8 --emb-dim 16 --frames 32 --global-batch 16
    --optimizer adam --lr 0.002 --invariant --precision bf16 --progress 0 --epochs 1 --max-steps 3"
for k in 1 2 4; do
    SPKDDP_THREADS=1 run $k $SPKDDP train $r34 --ckpt-dir r$k >log_r$k 2>&1 || { cat log_r$k; fail "resnet34 on $k"; }
    SPKDDP_THREADS=1 run $k $SPKDDP train $cpp --ckpt-dir c$k >log_c$k 2>&1 || { cat log_c$k; fail "campplus on $k"; }
done
SPKDDP_THREADS=2 run 1 $SPKDDP train $r34 --ckpt-dir r1t2 >/dev/null 2>&1 || fail "resnet34 on 2 threads"
SPKDDP_THREADS=2 run 1 $SPKDDP train $cpp --ckpt-dir c1t2 >/dev/null 2>&1 || fail "campplus on 2 threads"
for d in r2 r4 r1t2; do same r1/ckpt-000000000003.h5 $d/ckpt-000000000003.h5 "resnet34 bf16: $d == 1 rank (bitwise)"; done
for d in c2 c4 c1t2; do same c1/ckpt-000000000003.h5 $d/ckpt-000000000003.h5 "campplus bf16: $d == 1 rank (bitwise)"; done

# The contrastive and self-supervised losses and the audio-visual encoder, 1 and 2 ranks.
$SPKDDP synth --kind speakers --out av.h5 --dim 16 --visual-dim 12 --speakers 10 --utts-per-speaker 8 \
    --min-frames 48 --max-frames 96 >/dev/null || fail "synth av"
small="--channels 32 --attention-channels 16 --se-channels 16 --emb-dim 32 --optimizer adam --lr 0.002 --invariant
    --precision bf16 --progress 0 --epochs 1 --max-steps 3"
supcon="--model ecapa --data sp.h5 $small --frames 40 --global-batch 16 --loss supcon"
dino="--model ecapa --data sp.h5 $small --frames 40 --global-batch 8 --loss dino --views 4 --local-frames 24
    --dino-hidden 64 --dino-bottleneck 16 --dino-out 128 --freeze-last-layer 0"
av="--model ecapa-av --data av.h5 $small --visual-channels 16 --frames 48 --global-batch 16"
for name in supcon dino av; do
    for k in 1 2; do
        run $k $SPKDDP train ${!name} --ckpt-dir ${name}$k >log_${name}$k 2>&1 || { cat log_${name}$k; fail "$name on $k"; }
    done
    same ${name}1/ckpt-000000000003.h5 ${name}2/ckpt-000000000003.h5 "$name bf16: 2 ranks == 1 rank (bitwise)"
done

# The comparisons can fail: a float allreduce of each rank's rounded sums.
SPKDDP_EXACT_ALLREDUCE=float run 2 $SPKDDP train $ecapa --max-steps 6 --ckpt-dir mut >/dev/null 2>&1 ||
    fail "float allreduce run"
if $SPKDDP diff e1/$ck mut/$ck >/dev/null; then
    fail "a float allreduce in place of the exact one still gave 1 rank's bits: the comparison cannot fail"
else
    echo "ok  with a float allreduce instead of the exact one, 2 ranks differ from 1 rank"
fi
finish
