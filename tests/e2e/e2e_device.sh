#!/usr/bin/env bash
# The device code path against the CPU path: e2e_device.sh SPKDDP MPIEXEC WORKDIR BAD DEVICE RTOL
#   DEVICE cpu-staged: the CPU kernels behind device-style copies, expected bitwise equal (RTOL 0)
#   DEVICE cuda: the GPU, equal within RTOL (different summation orders); exits 77 (skipped)
#                when no GPU is usable
# Device and CPU are compared only one step away from shared parameters, since rounding
# differences grow with training (measured on the CUDA stand-in, ECAPA from scratch, SGD with
# momentum: 2e-7 after one step, 3e-5 after two, 1e-3 after three; a GPU's are of that order):
#   - one step from scratch (2 ranks, the held-out set evaluated, gradients averaged in small
#     buckets during the backward on the device, in one bucket after it on the CPU);
#   - one step from a mid-training checkpoint written on the CPU, and one from a checkpoint
#     written on the device, each taken on both (so checkpoints cross devices both ways);
#   - embeddings (inference mode) of the held-out set score the same trials alike;
#   - the linear model (host pooling, staged), two steps.
# Long runs check what must hold exactly on the device itself: two epochs keep the replicas
# identical, and a run resumed mid-epoch equals the run that never stopped, bitwise.
# E2E_DEVICE_MODEL replaces the ECAPA size flags (the CUDA stand-in runs a smaller model).
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
model=${E2E_DEVICE_MODEL:---channels 64 --attention-channels 16 --se-channels 16 --emb-dim 32 --frames 40}
# 80 utterances / global batch 8 = 10 steps per epoch: step 13 is mid-epoch 2.
common="--data sp.h5 --val-data spv.h5 --model ecapa $model
        --epochs 2 --global-batch 8 --optimizer sgd --momentum 0.9 --lr 0.02 --lr-schedule cosine --progress 0"
ck() { printf 'ckpt-%012d.h5' "$1"; }
same() {  # same A B RTOL WHAT: checkpoints equal within RTOL (0: bitwise)
    if $SPKDDP diff "$1" "$2" --rtol "$3" >"diff_$4"; then
        echo "ok  $4 ($(grep params "diff_$4"))"
    else
        cat "diff_$4"
        fail "$4: $1 and $2 differ beyond rtol $3"
    fi
}
train() {  # train DEVICE DIR LOG [flags...]: 2-rank training into checkpoint directory DIR
    local dev=$1 dir=$2 log=$3
    shift 3
    run 2 $SPKDDP train $common --device "$dev" --ckpt-dir "$dir" "$@" >"$log" 2>&1 || { cat "$log"; fail "$log: $dev run"; }
}
# next_step FROM_DIR STEP DEVICE DIR: one more step, on DEVICE, from FROM_DIR's checkpoint at STEP
next_step() {
    mkdir -p "$4" && cp "$1/$(ck "$2")" "$4/" || fail "copy $1/$(ck "$2")"
    train "$3" "$4" "log_$4" --resume auto --max-steps $(($2 + 1))
    grep -q "resumed from $4/$(ck "$2")" "log_$4" || fail "$4: did not resume $1's step $2 on $3"
}

# One step from scratch. Small buckets (~20 of them) on the device: gradients are averaged
# while the backward runs, which must not change the result.
train cpu cpu1 log_cpu1 --max-steps 1
SPKDDP_BUCKET_MB=0.02 train "$DEVICE" dev1 log_dev1 --max-steps 1
same cpu1/$(ck 1) dev1/$(ck 1) "$RTOL" "one step from scratch on $DEVICE vs cpu"

# Two epochs on the device: replicas identical throughout; resumed at step 13, bitwise the same.
SPKDDP_BUCKET_MB=0.02 train "$DEVICE" dev log_dev --ckpt-every 13
grep -q "replicas identical" log_dev || fail "$DEVICE replicas differ"
grep -q "divergence 0" log_dev || fail "$DEVICE: no epoch reported divergence 0"
if grep -q "ranks share a GPU" log_dev; then
    echo "note: the two ranks share one GPU: gradients went through MPI on the host; NCCL and overlapped buckets were not exercised"
fi
mkdir -p resumed && cp dev/$(ck 13) resumed/ || fail "copy dev/$(ck 13)"
SPKDDP_BUCKET_MB=0.02 train "$DEVICE" resumed log_resumed --resume auto
grep -q "resumed from resumed/$(ck 13)" log_resumed || fail "the $DEVICE run did not resume step 13"
same dev/$(ck 20) resumed/$(ck 20) 0 "$DEVICE resumed at step 13 vs uninterrupted"

# One step from a checkpoint of either device, taken on both.
train cpu cpu13 log_cpu13 --max-steps 13
next_step cpu13 13 cpu c13_cpu
next_step cpu13 13 "$DEVICE" c13_dev
same c13_cpu/$(ck 14) c13_dev/$(ck 14) "$RTOL" "one step from a cpu checkpoint (step 13): $DEVICE vs cpu"
next_step dev 13 cpu d13_cpu
next_step dev 13 "$DEVICE" d13_dev
same d13_cpu/$(ck 14) d13_dev/$(ck 14) "$RTOL" "one step from a $DEVICE checkpoint (step 13): $DEVICE vs cpu"

if [ "$DEVICE" = cuda ]; then  # TF32 math: runs, replicas identical; how far from fp32 is printed
    train cuda tf32 log_tf32 --tf32
    grep -q "replicas identical" log_tf32 || fail "--tf32 replicas differ"
    $SPKDDP diff dev/$(ck 20) tf32/$(ck 20) --rtol 1 | grep params | sed 's/^/info: tf32 vs fp32 after 20 steps: /'
fi

# Embeddings of the held-out set: the trial scores agree.
run 2 $SPKDDP embed --ckpt cpu13/$(ck 13) --data spv.h5 --out emb_cpu.h5 --device cpu >/dev/null || fail "cpu embed"
run 2 $SPKDDP embed --ckpt cpu13/$(ck 13) --data spv.h5 --out emb_dev.h5 --device "$DEVICE" >/dev/null || fail "$DEVICE embed"
$SPKDDP trials --emb emb_cpu.h5 --out trials.txt >/dev/null || fail "trials"
[ -s trials.txt ] || fail "no trials to score"
$SPKDDP score --emb emb_cpu.h5 --trials trials.txt --out s_cpu.txt >/dev/null || fail "score cpu"
$SPKDDP score --emb emb_dev.h5 --trials trials.txt --out s_dev.txt >/dev/null || fail "score $DEVICE"
worst=$(paste s_cpu.txt s_dev.txt | awk '{ d = $3 - $7; if (d < 0) d = -d; if (d > m) m = d } END { printf "%.3g", m + 0 }')
awk -v w="$worst" -v r="$RTOL" 'BEGIN { exit !(w <= 10 * r) }' \
    && echo "ok  embeddings on $DEVICE score $(grep -c . trials.txt) trials like the cpu (worst |ds| $worst)" \
    || fail "embeddings on $DEVICE score differently: worst |ds| $worst"

# The linear model: pooling on the host, then the device.
lin="--data sp.h5 --epochs 2 --global-batch 8 --max-steps 2 --progress 0"
run 2 $SPKDDP train $lin --device cpu --ckpt-dir lin_cpu >/dev/null 2>&1 || fail "linear cpu"
run 2 $SPKDDP train $lin --device "$DEVICE" --ckpt-dir lin_dev >/dev/null 2>&1 || fail "linear $DEVICE"
same lin_cpu/$(ck 2) lin_dev/$(ck 2) "$RTOL" "linear model, two steps on $DEVICE vs cpu"
finish
