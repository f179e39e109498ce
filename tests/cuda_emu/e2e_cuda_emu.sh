#!/usr/bin/env bash
# The GPU training path on the CUDA stand-in: e2e_cuda_emu.sh SPKDDP_EMU MPIEXEC WORKDIR
# 2-rank ECAPA training, 2 steps, gradients averaged by NCCL in ~20 buckets during the
# backward (two emulated GPUs, so the ranks do not share one):
#   - equals the CPU path within rounding (different summation orders), replicas identical;
#   - bitwise the same in the forward and the reverse scheduling order;
#   - resumed from its step-1 checkpoint, bitwise the same as the run that never stopped;
#   - bitwise the same when the ranks share one GPU (gradients through MPI on the host);
#   - the classifier sharded across the ranks (--head sharded) as on the CPU, bitwise in both orders;
#   - one rank with SPKDDP_NCCL=1 (NCCL over one GPU) bitwise the same as without;
#   - with --invariant, in float32 and bf16 (the gradients' exact sums as words sent to the
#     share's GPU, merged and rounded there, the floats sent back; BatchNorm's by NCCL: int8 max,
#     a raise kernel, int64 sums; BatchNorm over the global batch), 1 rank, 2 ranks on 2 GPUs and
#     2 ranks sharing one GPU (exact sums through MPI on the host) end bitwise equal, and so do
#     the gradients in full (SPKDDP_EXACT_SUMS=full: 17 bytes a sum) and 3 GPUs against 1; the sharded head (exact sums over
#     the classes of both slices) on 1 rank and on 2 GPUs likewise; ResNet34 (per-sample cuDNN calls,
#     BatchNorm2d over the global batch) with groups of 2 on 1 rank and on 2 GPUs likewise; and
#     ECAPA, ResNet34 and CAM++ with BatchNorm by groups (--invariant-bn group) likewise, their
#     groups of the per-rank batch also against the default mode's local BatchNorm (1e-6, 1e-6
#     and, CAM++'s bias gradients cancelling, 1e-3);
#   - contrastive losses over the global batch (SimCLR, views of each utterance; embeddings
#     all-gathered and gradients reduce-scattered by NCCL) as on the CPU, and in the invariant
#     mode 1 rank and 2 GPUs bitwise alike;
#   - DINO (teacher, multi-crop, the head's synchronized BatchNorm and the centre as exact sums
#     reduced by NCCL) on 2 GPUs as on the CPU;
#   - an NCCL error, and an all-reduce that never finishes, end the job with a sentence.
# Small on purpose (tiny model, two steps): rounding differences from the CPU grow with steps.
. "$(dirname "$0")/../e2e/lib.sh" "$1" "$2" "$3"
RTOL=1e-4
ckpt=ckpt-000000000002.h5

$SPKDDP synth --kind speakers --out sp.h5 --dim 16 --speakers 8 --utts-per-speaker 4 --min-frames 20 \
    --max-frames 40 >/dev/null || fail "synth"
common="--data sp.h5 --model ecapa --channels 16 --attention-channels 8 --se-channels 8 --emb-dim 16 --frames 24
        --epochs 1 --global-batch 8 --optimizer sgd --momentum 0.9 --lr 0.02 --progress 0"
gpus() {  # gpus N ORDER command...: on the stand-in with N GPUs, small gradient buckets
    local n=$1 order=$2
    shift 2
    SPKDDP_CUDA_EMU_DEVICES=$n SPKDDP_CUDA_EMU_ORDER=$order SPKDDP_BUCKET_MB=0.002 "$@"
}
same() {  # same A B RTOL WHAT
    if $SPKDDP diff "$1" "$2" --rtol "$3" >"diff_$4"; then
        echo "ok  $4 ($(grep params "diff_$4"))"
    else
        cat "diff_$4"
        fail "$4: $1 and $2 differ beyond rtol $3"
    fi
}

run 2 $SPKDDP train $common --max-steps 2 --device cpu --ckpt-dir cpu >log_cpu 2>&1 || { cat log_cpu; fail "cpu run"; }
for order in forward reverse; do
    gpus 2 $order run 2 $SPKDDP train $common --max-steps 2 --device cuda --ckpt-dir $order >log_$order 2>&1 \
        || { cat log_$order; fail "cuda run ($order order)"; }
    grep -q "replicas identical" log_$order || fail "$order: replicas differ"
    ! grep -q "ranks share a GPU" log_$order || fail "$order: the ranks share a GPU, NCCL was not used"
done
same cpu/$ckpt forward/$ckpt $RTOL "2 steps on the stand-in vs cpu"
same forward/$ckpt reverse/$ckpt 0 "forward vs reverse scheduling order"

gpus 2 reverse run 2 $SPKDDP train $common --max-steps 1 --device cuda --ckpt-dir resumed >log_r1 2>&1 \
    || { cat log_r1; fail "first leg"; }
gpus 2 forward run 2 $SPKDDP train $common --max-steps 2 --device cuda --ckpt-dir resumed --resume auto >log_r2 2>&1 \
    || { cat log_r2; fail "resumed leg"; }
grep -q "resumed from resumed/ckpt-000000000001.h5" log_r2 || fail "the second leg did not resume step 1"
same forward/$ckpt resumed/$ckpt 0 "resumed at step 1 vs uninterrupted"

gpus 1 forward run 2 $SPKDDP train $common --max-steps 2 --device cuda --ckpt-dir shared >log_shared 2>&1 \
    || { cat log_shared; fail "shared-GPU run"; }
grep -q "ranks share a GPU" log_shared || fail "one GPU for two ranks did not take the host path"
same forward/$ckpt shared/$ckpt 0 "one shared GPU (MPI on the host) vs NCCL"

# The classifier sharded across the ranks (each slice on its GPU, the rest of the gradient by
# NCCL): the CPU's sharded run within rounding, the same bits in either scheduling order.
run 2 $SPKDDP train $common --max-steps 2 --device cpu --head sharded --ckpt-dir cpu_sh >log_cpu_sh 2>&1 ||
    { cat log_cpu_sh; fail "cpu sharded run"; }
for order in forward reverse; do
    gpus 2 $order run 2 $SPKDDP train $common --max-steps 2 --device cuda --head sharded --ckpt-dir sh_$order \
        >log_sh_$order 2>&1 || { cat log_sh_$order; fail "cuda sharded run ($order order)"; }
done
same cpu_sh/$ckpt sh_forward/$ckpt $RTOL "sharded head: 2 steps on the stand-in vs cpu"
same sh_forward/$ckpt sh_reverse/$ckpt 0 "sharded head: forward vs reverse scheduling order"

# One rank on one GPU: SPKDDP_NCCL=1 averages through NCCL anyway (a mean over one rank), which
# changes nothing, and its deadline still ends a hung all-reduce.
gpus 1 forward run 1 $SPKDDP train $common --max-steps 2 --device cuda --ckpt-dir one >log_one 2>&1 \
    || { cat log_one; fail "one-rank run"; }
SPKDDP_NCCL=1 gpus 1 reverse run 1 $SPKDDP train $common --max-steps 2 --device cuda --ckpt-dir one_nccl \
    >log_one_nccl 2>&1 || { cat log_one_nccl; fail "one-rank run with SPKDDP_NCCL=1"; }
grep -q "averaged by NCCL over 1 GPU" log_one_nccl || fail "SPKDDP_NCCL=1 did not use NCCL in a world of one"
! grep -q "averaged by NCCL" log_one || fail "a world of one used NCCL without SPKDDP_NCCL=1"
same one/$ckpt one_nccl/$ckpt 0 "one rank: NCCL over one GPU vs no averaging"

# The world-size-invariant mode (docs/invariant.md): the same run on 1 and 2 ranks.
# one_vs_two DIR WHAT train-flags...: on 1 rank (into DIR1) and on 2 GPUs in the reverse
# scheduling order (DIR2), bitwise the same checkpoint.
one_vs_two() {
    local dir=$1 what=$2
    shift 2
    gpus 1 forward run 1 $SPKDDP train "$@" --ckpt-dir "${dir}1" >"log_${dir}1" 2>&1 || { cat "log_${dir}1"; fail "$what: one rank"; }
    gpus 2 reverse run 2 $SPKDDP train "$@" --ckpt-dir "${dir}2" >"log_${dir}2" 2>&1 || { cat "log_${dir}2"; fail "$what: two GPUs"; }
    same "${dir}1/$ckpt" "${dir}2/$ckpt" 0 "$what: 1 rank vs 2 ranks on 2 GPUs"
}
one_vs_two inv "invariant (NCCL)" $common --max-steps 2 --device cuda --invariant
grep -q "summed exactly by NCCL over 2 GPUs" log_inv2 || fail "invariant: the exact sums did not go through NCCL"
gpus 1 forward run 2 $SPKDDP train $common --max-steps 2 --device cuda --invariant --ckpt-dir inv_shared \
    >log_inv_shared 2>&1 || { cat log_inv_shared; fail "invariant: two ranks sharing a GPU"; }
same inv1/$ckpt inv_shared/$ckpt 0 "invariant: 1 rank vs 2 ranks sharing a GPU (MPI on the host)"
# The gradients' words (12 bytes a sum: each share merged and rounded by its GPU) against the
# sums in full (17), and 3 GPUs, whose shares of a bucket differ in size, against 1.
SPKDDP_EXACT_SUMS=full gpus 2 forward run 2 $SPKDDP train $common --max-steps 2 --device cuda --invariant \
    --ckpt-dir inv2_full >log_inv2_full 2>&1 || { cat log_inv2_full; fail "invariant: two GPUs, sums in full"; }
same inv2/$ckpt inv2_full/$ckpt 0 "invariant on 2 GPUs: gradients as words vs as sums in full"
gpus 1 forward run 1 $SPKDDP train $common --global-batch 6 --max-steps 2 --device cuda --invariant --ckpt-dir inv1_6 \
    >log_inv1_6 2>&1 || { cat log_inv1_6; fail "invariant, global batch 6: one rank"; }
gpus 3 reverse run 3 $SPKDDP train $common --global-batch 6 --max-steps 2 --device cuda --invariant --ckpt-dir inv3 \
    >log_inv3 2>&1 || { cat log_inv3; fail "invariant, global batch 6: three GPUs"; }
same inv1_6/$ckpt inv3/$ckpt 0 "invariant: 1 rank vs 3 ranks on 3 GPUs (NCCL)"
# bf16 operands: each sample's cuBLAS calls of its own, the same exact sums; with groups, each
# group's calls and the operands folded by group (ECAPA's BatchNorm writing them so by groups).
one_vs_two invb "invariant bf16" $common --max-steps 2 --device cuda --invariant --precision bf16
one_vs_two invbg "invariant bf16, groups of 2, BatchNorm by groups" $common --max-steps 2 --device cuda --invariant \
    --invariant-group 2 --invariant-bn group --precision bf16
one_vs_two invs "invariant sharded head" $common --max-steps 2 --device cuda --invariant --head sharded --clip-grad-norm 1
r34="--data sp.h5 --model resnet34 --channels 8 --emb-dim 16 --frames 24 --epochs 1 --global-batch 8 --optimizer sgd
     --momentum 0.9 --lr 0.02 --progress 0 --max-steps 2 --device cuda --invariant --invariant-group 2"
one_vs_two r34_ "invariant resnet34, groups of 2" $r34
one_vs_two r34h "invariant resnet34 bf16, groups of 2 (cuDNN's calls of a group)" $r34 --precision bf16
# BatchNorm by groups (no exchange; the first group's running statistics): 1-D and 2-D.
one_vs_two gbn "invariant, BatchNorm by groups of 2" $common --max-steps 2 --device cuda --invariant --invariant-group 2 \
    --invariant-bn group
one_vs_two r34_g "invariant resnet34, BatchNorm2d by groups of 2" $r34 --invariant-bn group
cpp="--data sp.h5 --model campplus --channels 16 --growth-rate 8 --emb-dim 16 --frames 24 --epochs 1 --global-batch 8
     --optimizer sgd --momentum 0.9 --lr 0.02 --progress 0 --max-steps 2 --device cuda"
gpus 1 forward run 1 $SPKDDP train $cpp --recompute --ckpt-dir cpp_plain >log_cpp 2>&1 || { cat log_cpp; fail "campplus on a GPU"; }
one_vs_two cpp_ "invariant campplus" $cpp --invariant
# CAM++ with BatchNorm by groups: its dense blocks a set of statistics a group, through the
# default kernels (their sums fixed by a group's rows), as on the CPU and as every BatchNorm.
one_vs_two cpp_g "invariant campplus, BatchNorm by groups of 2" $cpp --invariant --invariant-group 2 --invariant-bn group
# Groups as large as the per-rank batch are the default mode's local BatchNorm, with
# speaker-balanced batches (which both modes cut into contiguous slices): one step.
# groups_vs_default NAME RTOL K1 K2 G WHAT flags...: the default mode on K1 GPUs against
# --invariant with BatchNorm by groups of G (the default's per-rank batch) on K2 GPUs.
groups_vs_default() {
    local name=$1 rtol=$2 k1=$3 k2=$4 g=$5 what=$6
    shift 6
    gpus "$k1" reverse run "$k1" $SPKDDP train "$@" --ckpt-dir "${name}_ddp" >"log_${name}_ddp" 2>&1 ||
        { cat "log_${name}_ddp"; fail "$what: the default mode on $k1 GPUs"; }
    gpus "$k2" forward run "$k2" $SPKDDP train "$@" --invariant --invariant-group "$g" --invariant-bn group \
        --ckpt-dir "${name}_byg" >"log_${name}_byg" 2>&1 || { cat "log_${name}_byg"; fail "$what: groups of $g"; }
    same "${name}_ddp/ckpt-000000000001.h5" "${name}_byg/ckpt-000000000001.h5" "$rtol" \
        "$what: BatchNorm by groups of $g on $k2 GPUs vs the default mode's $k1 ranks x $g"
}
balanced="--max-steps 1 --sampler balanced --utts-per-speaker 2"
groups_vs_default cpp 1e-3 2 2 4 "campplus" ${cpp/--max-steps 2/} $balanced
# ECAPA's and ResNet34's groups through the default kernels are the default mode's BatchNorm of a
# rank of 2 samples: within rounding of the weight gradients' sums (exact sums of one-pass
# statistics came 7.3e-5 and 7.5e-6 apart here, their small groups' variances cancelling).
groups_vs_default ec 1e-6 4 1 2 "ecapa on the GPU path" $common --device cuda $balanced
rb=${r34/--max-steps 2/}
groups_vs_default r34 1e-6 4 1 2 "resnet34 on the GPU path" ${rb/--invariant --invariant-group 2/} $balanced \
    --conv-algorithm direct

simclr="--loss supcon --labels utterance --views 2"
run 2 $SPKDDP train $common --max-steps 2 --device cpu $simclr --ckpt-dir cpu_sc >log_cpu_sc 2>&1 ||
    { cat log_cpu_sc; fail "cpu simclr run"; }
gpus 2 forward run 2 $SPKDDP train $common --max-steps 2 --device cuda $simclr --ckpt-dir sc >log_sc 2>&1 ||
    { cat log_sc; fail "cuda simclr run"; }
grep -q "reduce-scattered by NCCL" log_sc || fail "simclr: the global batch's collectives did not go through NCCL"
same cpu_sc/$ckpt sc/$ckpt $RTOL "simclr, global negatives (NCCL all-gather, reduce-scatter): 2 steps on the stand-in vs cpu"
one_vs_two sc "invariant simclr" $common --max-steps 2 --device cuda $simclr --invariant

dino="--loss dino --views 4 --local-frames 16 --dino-hidden 16 --dino-bottleneck 8 --dino-out 32"
run 2 $SPKDDP train $common --max-steps 2 --device cpu $dino --ckpt-dir cpu_dino >log_cpu_dino 2>&1 ||
    { cat log_cpu_dino; fail "cpu dino run"; }
gpus 2 forward run 2 $SPKDDP train $common --max-steps 2 --device cuda $dino --ckpt-dir dino >log_dino 2>&1 ||
    { cat log_dino; fail "cuda dino run"; }
same cpu_dino/$ckpt dino/$ckpt $RTOL "dino (teacher, multi-crop, exact sums by NCCL): 2 steps on the stand-in vs cpu"

export SPKDDP_NCCL_TIMEOUT=1
SPKDDP_NCCL=1 SPKDDP_CUDA_EMU_NCCL_FAULT=hang:2 expect_error 1 "did not finish in 1 s: a peer rank is dead or stuck" -- \
    gpus 1 forward run 1 $SPKDDP train $common --max-steps 2 --device cuda --ckpt-dir faulty
SPKDDP_CUDA_EMU_NCCL_FAULT=error:1 expect_error 1 "NCCL gradient allreduce failed .*injected" -- \
    gpus 2 forward run 2 $SPKDDP train $common --max-steps 2 --device cuda --ckpt-dir faulty
SPKDDP_CUDA_EMU_NCCL_FAULT=hang:1 expect_error 1 "did not finish in 1 s: a peer rank is dead or stuck" -- \
    gpus 2 forward run 2 $SPKDDP train $common --max-steps 2 --device cuda --ckpt-dir faulty
# NCCL's set-up never completing (a peer that never joins) ends the job too, with NCCL_DEBUG=WARN set.
SPKDDP_CUDA_EMU_NCCL_FAULT=init-hang expect_error 1 \
    "ncclCommInitRankConfig.* over 2 ranks did not finish in 1 s: a peer rank never joined.*NCCL_DEBUG=WARN" -- \
    gpus 2 forward run 2 $SPKDDP train $common --max-steps 2 --device cuda --ckpt-dir faulty
finish
