#!/usr/bin/env bash
# The device code path against the CPU path: e2e_device.sh SPKDDP MPIEXEC WORKDIR BAD DEVICE RTOL
#   DEVICE cpu-staged: the CPU kernels behind device-style copies, expected bitwise equal (RTOL 0)
#   DEVICE cuda: the GPU, equal within RTOL (different summation orders); exits 77 (skipped)
#                when no GPU is usable
# Checks: 2-rank ECAPA training with a held-out set (gradients averaged in small buckets
# during the backward; NCCL on two GPUs, MPI through the host when the ranks share one GPU,
# which the log says) equals the CPU run (one bucket after it) and keeps replicas identical;
# a checkpoint written on the device resumes on the CPU and one written on the CPU resumes
# on the device; embeddings (inference mode) score the same trials alike; the linear model
# (host pooling, staged) trains alike.
. "$(dirname "$0")/lib.sh" "$1" "$2" "$3" "$4"
DEVICE=$5
RTOL=$6

if ! $SPKDDP bench --device "$DEVICE" --channels 8 --batch 2 --frames 20 --steps 1 --warmup 0 >probe 2>&1; then
    if grep -qE "no usable CUDA device|no CUDA device is visible|built without CUDA" probe; then
        echo "SKIPPED: $(grep -E "device" probe | head -1)"
        exit 77
    fi
    cat probe
    fail "--device $DEVICE does not run"
    finish
fi

$SPKDDP synth --kind speakers --out sp.h5 --val-out spv.h5 --dim 16 --speakers 8 --utts-per-speaker 10 \
    --val-utts-per-speaker 2 --min-frames 20 --max-frames 60 >/dev/null || fail "synth"
common="--data sp.h5 --val-data spv.h5 --model ecapa --channels 64 --attention-channels 16 --se-channels 16 --emb-dim 32 --frames 40
        --epochs 2 --global-batch 8 --optimizer sgd --momentum 0.9 --lr 0.02 --lr-schedule cosine --progress 0"
final=ckpt-000000000020.h5
same() {  # same A B WHAT: checkpoints equal within RTOL (0: bitwise)
    if $SPKDDP diff "$1" "$2" --rtol "$RTOL" >"diff_$3"; then
        echo "ok  $3 ($(grep params "diff_$3"))"
    else
        cat "diff_$3"
        fail "$3: $1 and $2 differ beyond rtol $RTOL"
    fi
}

run 2 $SPKDDP train $common --device cpu --ckpt-dir cpu >log_cpu 2>&1 || { cat log_cpu; fail "cpu run"; }
# Small buckets (~20 of them): gradients are averaged while the backward runs, which must not
# change the result (the cpu run averages its one bucket after the backward).
SPKDDP_BUCKET_MB=0.02 run 2 $SPKDDP train $common --device "$DEVICE" --ckpt-dir dev >log_dev 2>&1 \
    || { cat log_dev; fail "$DEVICE run"; }
grep -q "replicas identical" log_dev || fail "$DEVICE replicas differ"
if grep -q "ranks share a GPU" log_dev; then
    echo "note: the two ranks share one GPU: gradients went through MPI on the host; NCCL and overlapped buckets were not exercised"
fi
same cpu/$final dev/$final "2 ranks x 2 epochs on $DEVICE vs cpu"

if [ "$DEVICE" = cuda ]; then  # TF32 math: runs, replicas identical; how far from fp32 is printed
    run 2 $SPKDDP train $common --device cuda --tf32 --ckpt-dir tf32 >log_tf32 2>&1 || { cat log_tf32; fail "--tf32 run"; }
    grep -q "replicas identical" log_tf32 || fail "--tf32 replicas differ"
    $SPKDDP diff dev/$final tf32/$final --rtol 1 | grep params | sed 's/^/info: tf32 vs fp32 /'
fi

# 80 utterances / global batch 8 = 10 steps per epoch: step 13 is mid-epoch 2.
run 2 $SPKDDP train $common --device "$DEVICE" --ckpt-dir d2c --max-steps 13 >log_d2c_a 2>&1 || fail "$DEVICE first leg"
run 2 $SPKDDP train $common --device cpu --ckpt-dir d2c --resume auto >log_d2c_b 2>&1 || fail "cpu resume"
grep -q "resumed from d2c/ckpt-000000000013.h5" log_d2c_b || fail "cpu did not resume the $DEVICE checkpoint"
same dev/$final d2c/$final "$DEVICE checkpoint at step 13 resumed on cpu"
run 2 $SPKDDP train $common --device cpu --ckpt-dir c2d --max-steps 13 >log_c2d_a 2>&1 || fail "cpu first leg"
run 2 $SPKDDP train $common --device "$DEVICE" --ckpt-dir c2d --resume auto >log_c2d_b 2>&1 || fail "$DEVICE resume"
grep -q "resumed from c2d/ckpt-000000000013.h5" log_c2d_b || fail "$DEVICE did not resume the cpu checkpoint"
same cpu/$final c2d/$final "cpu checkpoint at step 13 resumed on $DEVICE"

# Embeddings of the held-out set: the trial scores agree.
run 2 $SPKDDP embed --ckpt cpu/$final --data spv.h5 --out emb_cpu.h5 --device cpu >/dev/null || fail "cpu embed"
run 2 $SPKDDP embed --ckpt cpu/$final --data spv.h5 --out emb_dev.h5 --device "$DEVICE" >/dev/null || fail "$DEVICE embed"
$SPKDDP trials --emb emb_cpu.h5 --out trials.txt >/dev/null || fail "trials"
[ -s trials.txt ] || fail "no trials to score"
$SPKDDP score --emb emb_cpu.h5 --trials trials.txt --out s_cpu.txt >/dev/null || fail "score cpu"
$SPKDDP score --emb emb_dev.h5 --trials trials.txt --out s_dev.txt >/dev/null || fail "score $DEVICE"
worst=$(paste s_cpu.txt s_dev.txt | awk '{ d = $3 - $7; if (d < 0) d = -d; if (d > m) m = d } END { printf "%.3g", m + 0 }')
awk -v w="$worst" -v r="$RTOL" 'BEGIN { exit !(w <= 10 * r) }' \
    && echo "ok  embeddings on $DEVICE score $(grep -c . trials.txt) trials like the cpu (worst |ds| $worst)" \
    || fail "embeddings on $DEVICE score differently: worst |ds| $worst"

# The linear model: pooling on the host, then the device.
lin="--data sp.h5 --epochs 2 --global-batch 8 --progress 0"
run 2 $SPKDDP train $lin --device cpu --ckpt-dir lin_cpu >/dev/null 2>&1 || fail "linear cpu"
run 2 $SPKDDP train $lin --device "$DEVICE" --ckpt-dir lin_dev >/dev/null 2>&1 || fail "linear $DEVICE"
same lin_cpu/$final lin_dev/$final "linear model on $DEVICE vs cpu"
finish
