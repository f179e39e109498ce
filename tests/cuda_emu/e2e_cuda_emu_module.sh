#!/usr/bin/env bash
# The CUDA backend as the spkddp program loads it (kernels/cuda_module.h), on the stand-in:
#   e2e_cuda_emu_module.sh SPKDDP_EMU_MODULE SPKDDP_EMU MPIEXEC WORKDIR
# spkddp_emu_module opens the module beside it, built from the same objects as spkddp_emu's
# kernels, as spkddp opens libspkddp_cuda.so on a GPU machine:
#   - with no GPU to see it opens nothing: --device cuda says there is none, --device auto trains
#     on the CPU, and the module is not in the process;
#   - --version opens it and names the stand-in's libraries;
#   - with SPKDDP_CUDA_PROBE=1, 2-rank --device cuda trainings (two emulated GPUs, gradients by
#     NCCL in small buckets; the invariant mode's exact sums reduced by NCCL; the classifier
#     sharded across the ranks) end bitwise equal to spkddp_emu's, which links the kernels:
#     every call reaches the module through its table as it is.
. "$(dirname "$0")/../e2e/lib.sh" "$1" "$3" "$4"
EMU=$2
ckpt=ckpt-000000000002.h5

$SPKDDP synth --kind speakers --out sp.h5 --dim 16 --speakers 8 --utts-per-speaker 4 --min-frames 20 \
    --max-frames 40 >/dev/null || fail "synth"
common="--data sp.h5 --model ecapa --channels 16 --attention-channels 8 --se-channels 8 --emb-dim 16 --frames 24
        --epochs 1 --global-batch 8 --optimizer sgd --momentum 0.9 --lr 0.02 --progress 0 --max-steps 2"
gpus() { SPKDDP_CUDA_EMU_DEVICES=2 SPKDDP_BUCKET_MB=0.002 "$@"; }  # two emulated GPUs, small buckets

nm "$SPKDDP" | grep -q " conv1d_forward_cuda$" && fail "spkddp_emu_module links the CUDA kernels itself"
nm "$EMU" | grep -q " conv1d_forward_cuda$" || fail "spkddp_emu does not link the CUDA kernels (the check above reads nothing)"
expect_error 2 "no usable CUDA device: this machine has no NVIDIA GPU" -- gpus $SPKDDP train $common --device cuda \
    --ckpt-dir none
gpus $SPKDDP train $common --device auto --ckpt-dir auto >log_auto 2>&1 || { cat log_auto; fail "--device auto"; }
grep -q "^device: CUDA" log_auto && fail "--device auto without a GPU to see: $(grep -m1 device log_auto)"
SPKDDP_CUDA_PROBE=1 gpus $SPKDDP train $common --device auto --ckpt-dir probed >log_probed 2>&1 \
    || { cat log_probed; fail "--device auto, SPKDDP_CUDA_PROBE=1"; }
grep -q "^device: CUDA, rank 0 on GPU 0 of 2: spkddp CUDA stand-in" log_probed \
    && echo "ok  --device auto: the CPU without a GPU to see, the stand-in's GPU with SPKDDP_CUDA_PROBE=1" \
    || fail "--device auto, SPKDDP_CUDA_PROBE=1: $(head -2 log_probed)"
LD_DEBUG=files gpus $SPKDDP train $common --device auto --ckpt-dir auto2 >/dev/null 2>ld.log
grep -q "libspkddp_cuda.so" ld.log && fail "a run without a GPU to see opened the module"
grep -q "cuda_emu/module/libspkddp_cuda.so" <(LD_DEBUG=files $SPKDDP --version 2>&1) \
    && echo "ok  the module opened by --version only" || fail "--version did not open the module beside the program"
version=$($SPKDDP --version | grep '^CUDA:')
[ "$version" = "$($EMU --version | grep '^CUDA:')" ] && echo "ok  $version" \
    || fail "--version through the module: '$version'"

for mode in plain invariant sharded; do
    case $mode in
        plain) extra="" ;;
        invariant) extra="--invariant --invariant-group 2" ;;
        sharded) extra="--head sharded" ;;
    esac
    gpus run 2 $EMU train $common $extra --device cuda --ckpt-dir linked_$mode >log_linked_$mode 2>&1 \
        || { cat log_linked_$mode; fail "$mode: spkddp_emu"; }
    SPKDDP_CUDA_PROBE=1 gpus run 2 $SPKDDP train $common $extra --device cuda --ckpt-dir module_$mode \
        >log_module_$mode 2>&1 || { cat log_module_$mode; fail "$mode: spkddp_emu_module"; }
    grep -q "ranks share a GPU" log_module_$mode && fail "$mode: the ranks share a GPU, NCCL was not used"
    same linked_$mode/$ckpt module_$mode/$ckpt "$mode: 2 ranks on 2 GPUs through the module, bitwise as linked"
done
finish
