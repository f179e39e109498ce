#!/usr/bin/env bash
# Every GPU check and benchmark in one go, on a machine with one GPU, from a tree built
# elsewhere: the GPU bundle (tools/gpu_bundle.sh; its gpu_check.sh unpacks it and calls this) or
# a build directory configured with -DSPKDDP_NATIVE=OFF.
#   tools/gpu_check.sh BUILD_DIR [OUT_DIR]
# The key figures come first and each lands in OUT_DIR/summary.txt the moment it is measured,
# so a run cut short still answers: versions and library paths, the device, one training step
# on the GPU against the CPU, the throughput of spkddp and PyTorch side by side (bf16, tf32,
# fp32, each ratio at once), then the kernel checks, the production shapes, determinism and
# NCCL, TF32, the sanitizers and a per-kernel profile. Every step and every external call has
# a time limit, the whole run a budget (GPU_CHECK_BUDGET seconds, default 400: a step that no
# longer fits is skipped, with the reason). OUT_DIR (default ./gpu_check_out) receives at most
# 8 files: summary.txt, logs.tar.gz (every step's log, re-packed after each step), and
# kernels.txt (the profile's per-kernel times, when ncu ran). Work files go to GPU_CHECK_WORK
# (default a temporary folder, removed at the end). Nothing is downloaded or installed.
#   preflight   nvidia-smi's view of the GPU and driver, the shared libraries each binary
#               resolves (cuBLAS, cuDNN, NCCL from where?), PyTorch's versions
#   device      the GPU is found and starts
#   step1       one ECAPA C=512 training step on the GPU and on the CPU from the same
#               initialisation, within 4 times what data one ulp away moves the CPU's step
#               (and 1e-5)
#   bench-P, torch-P, ratio-P   for P = bf16, tf32, fp32: spkddp bench and PyTorch's same step
#               (tools/bench_pytorch.py, cudnn.benchmark on, AMP for bf16) at C=1024, batch 128,
#               T=200, samples/s and memory; bench-P-timed: spkddp with SPKDDP_CUDNN_SEARCH=time;
#               bench-P-gemm1x1, ratio-P-gemm1x1: with the 1x1 convolutions on cuBLAS
#               (SPKDDP_CONV1X1_GEMM=1), against bench-P;
#               bench-resnet34-bf16, torch-resnet34-bf16, ratio-resnet34-bf16: WeSpeaker's
#               ResNet34 (m 32, 80 features) at batch 128, T=200; bench-campplus-bf16 likewise
#               3D-Speaker's CAM++ (PyTorch's side where speakerlab is installed);
#               bench-ecapa512-bf16, ratio-resnet34-ecapa512-bf16: ECAPA C=512 at that batch,
#               and ResNet34's rate over it
#   kernels     every op's test on the GPU against the CPU kernels (small shapes)
#   shapes-32, shapes-128   every op at C=1024, T=200, batch 32 (then 128) against the CPU,
#               every backward twice for the same bits; shapes-gemm1x1: batch 32 with the 1x1
#               convolutions on cuBLAS
#   determinism three training steps twice for the same bits; one rank with SPKDDP_NCCL=1
#               (NCCL's setup, events and deadline on one GPU) for the same bits as without
#   tf32        TF32 reaches every convolution pass and the GEMM at production shapes; the
#               cuDNN plan cache
#   invariant2d the world-size-invariant mode's 2-D ops at ResNet's shapes: a sample alone the
#               same bits as in the batch, split batches the same exact sums, groups 1, 2, 4
#   bench-ecapa512-invariant-bf16, ratio-ecapa512-invariant-bf16   bench-ecapa512-bf16's step with
#               --invariant (one group a rank, BatchNorm by groups), and its rate over the default's
#   e2e         gpu_e2e_cuda (tests/e2e/e2e_device.sh) when mpiexec is there
#   memcheck, racecheck   compute-sanitizer over our kernels (names ending in _kernel)
#   profile     ncu --clock-control none over one timed step of each profiled bench: time per
#               kernel
# GPU_CHECK_PROFILE="bench flags; ..." sets the profiled benches (default ECAPA's bench shape in
# fp32 and bf16, and ResNet34's in bf16);
# GPU_CHECK_SKIP="step ..." leaves steps out; TORCH_PYTHON (default python3) is the Python
# with a CUDA PyTorch; SANITIZER and NCU name the tools when they are not on the PATH or in
# CUDA's bin. GPU_CHECK_SCALE=small shrinks every shape (and stretches the limits) for a run on
# the CUDA stand-in (tests/cuda_emu), which checks this script itself.
# Exit status: 0 when no step failed or timed out (skipped steps say why).
set -u
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [OUT_DIR]" >&2; exit 2; }
build=$(cd "$1" && pwd) || exit 2
out=$(mkdir -p "${2:-gpu_check_out}" && cd "${2:-gpu_check_out}" && pwd) || exit 2
here=$(cd "$(dirname "$0")" && pwd)
spk=$build/app/spkddp
budget=${GPU_CHECK_BUDGET:-400}
slow=1  # limit multiplier
if [ "${GPU_CHECK_SCALE:-}" = small ]; then
    slow=10
    budget=${GPU_CHECK_BUDGET:-3000}
    shapes32="32 4 24" shapes128="32 8 24" tf32_args="64 4 100" sanitize_args="32 4 24" plans_args=small
    invariant2d_args="8 8 9 10"
    train_model="--channels 16 --attention-channels 8 --se-channels 8 --emb-dim 16 --frames 24"
    train_data="--dim 16 --speakers 8 --utts-per-speaker 4 --min-frames 24 --max-frames 40"
    bench_shape="--channels 16 --batch 4 --frames 24" bench_steps="--steps 2 --warmup 1"
    resnet_shape="--channels 8 --batch 4 --frames 24 --feat 16"
    campplus_shape="--channels 8 --growth-rate 4 --bn-size 2 --batch 2 --frames 24 --feat 16 --steps 1 --warmup 1"
    ecapa512_shape="--channels 16 --batch 4 --frames 24" ecapa512_batch=4
    export E2E_DEVICE_MODEL=$train_model
else
    shapes32="1024 32 200" shapes128="1024 128 200" tf32_args="" sanitize_args="64 4 50" plans_args=""
    invariant2d_args=""
    train_model="--channels 512 --frames 200"
    train_data="--dim 80 --speakers 40 --utts-per-speaker 4 --min-frames 200 --max-frames 300"
    bench_shape="--channels 1024 --batch 128 --frames 200" bench_steps="--steps 10 --warmup 3"
    resnet_shape="--batch 128 --frames 200"
    campplus_shape="--batch 128 --frames 200 $bench_steps"
    ecapa512_shape="--channels 512 --batch 128 --frames 200" ecapa512_batch=128
fi
bench_args="$bench_shape $bench_steps"
if [ -n "${GPU_CHECK_WORK:-}" ]; then
    work=$GPU_CHECK_WORK
    mkdir -p "$work" || exit 2
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX") || exit 2
    trap 'rm -rf "$work"' EXIT
fi
logs=$work/logs
mkdir -p "$logs" || exit 2
export build spk here train_model train_data work
t_start=$(date +%s)
failed=0
summary=$out/summary.txt
: >"$summary"
rm -f "$out/logs.tar.gz" "$out/kernels.txt"
cd "$work" || exit 2

# note NAME TEXT: one line of the summary, written at once (a run cut short keeps it).
note() { printf '%-16s %s\n' "$1" "$2" | tee -a "$summary"; }
# The logs so far, packed into OUT_DIR (atomically: a reader never sees half an archive).
pack_logs() {
    timeout 30 tar -czf "$out/.logs.tar.gz" -C "$work" logs 2>/dev/null && mv -f "$out/.logs.tar.gz" "$out/logs.tar.gz"
}
left() { echo $((budget - ($(date +%s) - t_start))); }

# step NAME LIMIT_S command...: runs it (a program or an exported function) with the smaller
# of its limit and the budget left; the log is logs/NAME.log. Sets $rc (77: skipped by the
# command itself) and $dt; the summary line is written by `finish_step` (the caller may add
# figures first through $extra).
step() {
    local name=$1 limit=$(($2 * slow)) t0
    shift 2
    extra=""
    if [[ " ${GPU_CHECK_SKIP:-} " == *" $name "* ]]; then
        rc=77 why="GPU_CHECK_SKIP"
        return
    fi
    if [ "$(left)" -lt 10 ]; then
        rc=77 why="the budget of ${budget} s is spent"
        return
    fi
    [ "$limit" -gt "$(left)" ] && limit=$(left)
    t0=$(date +%s)
    echo "== $name (limit ${limit} s): $*"
    timeout -k 5 "$limit" bash -c '"$@"' _ "$@" >"$logs/$name.log" 2>&1
    rc=$?
    dt=$(($(date +%s) - t0))
    why=""
    [ $rc -eq 77 ] && why=$(grep -m1 -i skipped "$logs/$name.log" | sed 's/.*SKIPPED: //')
    tail -3 "$logs/$name.log" | sed 's/^/   /'
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && limit_hit=$limit
}
finish_step() {
    local name=$1
    case $rc in
    0) note "$name" "ok (${dt} s)${extra}" ;;
    77) note "$name" "SKIP: ${why}" ;;
    124 | 137) note "$name" "TIMEOUT after ${limit_hit} s${extra} (logs.tar.gz: logs/$name.log)"; failed=1 ;;
    *) note "$name" "FAIL (exit $rc, ${dt} s)${extra} (logs.tar.gz: logs/$name.log)"; failed=1 ;;
    esac
    pack_logs
}
run_step() {  # run_step NAME LIMIT command...: step and its summary line
    step "$@"
    finish_step "$1"
}

figure() { sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' "$logs/$1.log" 2>/dev/null | tail -1; }

# ---- preflight: versions, and where each library comes from ------------------------------------
note gpu_check "$(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname 2>/dev/null), budget ${budget} s"
smi="no nvidia-smi on the PATH"
command -v nvidia-smi >/dev/null &&
    smi=$(timeout 15 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 | head -2)
note gpu "$smi"
note spkddp "$(timeout 30 "$spk" --version 2>&1 | paste -sd ';')"
# The CUDA libraries are the module's (kernels/cuda_module.h): beside spkddp in a build, in the
# bundle's lib/.
module=$(ls "$(dirname "$spk")/libspkddp_cuda.so" "$(dirname "$spk")/../lib/libspkddp_cuda.so" 2>/dev/null | head -1)
{
    for f in "$spk" $module; do
        echo "ldd $f"
        timeout 20 ldd "$f" 2>&1
    done
    for t in "$build"/tests/test_gpu_shapes; do
        echo "ldd $t"
        timeout 20 ldd "$t" 2>&1
    done
    echo "mpiexec: $(command -v mpiexec || echo none)"
    command -v mpiexec >/dev/null && timeout 10 mpiexec --version 2>&1 | head -3
} >"$logs/preflight.log"
libs=$(grep -E '^\s(libcublas|libcublasLt|libcudnn|libnccl|libcudart|libmpich|libopenblas)\.' "$logs/preflight.log" |
    while read -r name _ path _; do echo "$name=$(readlink -f "$path" 2>/dev/null || echo "$path")"; done | sort -u | tr '\n' ' ')
note libraries "${libs:-none of cuBLAS, cuDNN, NCCL linked (a build without CUDA?)}"
missing=$(grep "not found" "$logs/preflight.log" | awk '{print $1}' | sort -u | tr '\n' ' ')
if [ -n "$missing" ]; then
    note preflight "FAIL: libraries missing on this machine: ${missing}(the bundle's env.sh says where it looks; set SPKDDP_CUDA_LIBS)"
    pack_logs
    exit 1
fi
torch_py=${TORCH_PYTHON:-python3}
torch_info="no Python at '$torch_py'"
command -v "$torch_py" >/dev/null && torch_info=$(timeout 90 "$torch_py" -c "import torch
print(torch.__version__, 'CUDA', torch.version.cuda, 'cuDNN', torch.backends.cudnn.version(), 'GPU', torch.cuda.is_available())" 2>&1 | tail -1)
torch_ok=0
[[ "$torch_info" == *" GPU True" ]] && torch_ok=1
note torch "$torch_info"
pack_logs

run_step device 30 "$build/tests/test_gpu_device"
[ "$rc" -eq 0 ] || exit 1

# ---- one step on the GPU against the CPU ----------------------------------------------------
train_args="--model ecapa $train_model --global-batch 32 --epochs 5 --optimizer sgd --momentum 0.9 --lr 0.02 --progress 0"
export train_args
one_step() {
    # shellcheck disable=SC2086
    "$spk" synth --kind speakers --out sp.h5 $train_data >/dev/null || return 1
    # The same data moved one ulp: the CPU against itself on it says how far this model's own
    # rounding sensitivity moves one step (ECAPA C=512 at initialisation: 9e-6 of the
    # parameters, 6e-4 of the gradients), the yardstick for the GPU's other summation orders.
    cp sp.h5 sp_ulp.h5 && "$build/tests/make_bad_data" ulp-features sp_ulp.h5 || return 1
    local d
    for d in cpu:sp cuda:sp cpu:sp_ulp; do
        # shellcheck disable=SC2086
        "$spk" train --data "${d#*:}.h5" $train_args --max-steps 1 --device "${d%:*}" --ckpt-dir "t_${d/:/_}" \
            >"t_${d/:/_}.log" 2>&1 || { cat "t_${d/:/_}.log"; return 1; }
    done
    local ck=ckpt-000000000001.h5 rel_ulp rel_gpu
    rel_ulp=$("$spk" diff "t_cpu_sp/$ck" "t_cpu_sp_ulp/$ck" --rtol 1 | sed -n 's/^params .*rel \([^ ]*\)$/\1/p')
    echo "one step, the CPU on data one ulp away: params rel $rel_ulp"
    echo "one step, GPU vs CPU:"
    "$spk" diff "t_cpu_sp/$ck" "t_cuda_sp/$ck" --rtol 1 --worst 12 | tee diff.out
    rel_gpu=$(sed -n 's/^params .*rel \([^ ]*\)$/\1/p' diff.out)
    # Within 4 times the model's own sensitivity (and always within 1e-5).
    awk -v g="$rel_gpu" -v u="$rel_ulp" 'BEGIN { t = 4 * u; if (t < 1e-5) t = 1e-5;
        printf "GPU vs CPU %s, allowed %.3g (4 x the one-ulp change, at least 1e-5)\n", g, t; exit !(g != "" && g + 0 <= t) }'
}
export -f one_step
step step1 120 one_step
rel=$(sed -nE '/one step, GPU vs CPU/{n;s/.*rel ([^ ]+).*/\1/p}' "$logs/step1.log")
rel_ulp=$(sed -nE 's/^one step, the CPU on data one ulp away: params rel (.*)/\1/p' "$logs/step1.log")
[ -n "$rel" ] && extra="; one step GPU vs CPU: rel ${rel} (the CPU on data one ulp away: ${rel_ulp:-?})"
finish_step step1

# ---- throughput, spkddp and PyTorch side by side, each ratio at once -----------------------
bench() {  # bench NAME PRECISION [ENV=VALUE ...]
    local name=$1 p=$2
    shift 2
    # shellcheck disable=SC2086
    step "$name" 90 env "$@" "$spk" bench --device cuda $bench_args --precision "$p"
    local f mem
    f=$(figure "$name")
    mem=$(sed -nE 's/.*GPU memory in use ([0-9]+) MiB.*/\1/p' "$logs/$name.log")
    [ -n "$f" ] && extra="; ${f} samples/s, GPU memory in use ${mem} MiB"
    finish_step "$name"
    ours=$f
}
# note_ratio NAME LABEL A B: "LABEL = A/Bx" in the summary, when both figures were measured.
note_ratio() {
    [ -n "$3" ] && [ -n "$4" ] && note "$1" "$(awk -v a="$3" -v b="$4" -v l="$2" 'BEGIN { printf "%s = %.2fx", l, a / b }')"
    return 0
}
# torch_pair NAME PRECISION [bench_pytorch.py flags]: PyTorch's run beside the spkddp run just
# made (its samples/s in $ours), and the ratio.
torch_pair() {
    local name=$1 p=$2
    shift 2
    if [ "$torch_ok" -eq 1 ]; then
        step "torch-$name" 120 "$torch_py" "$here/bench_pytorch.py" --device cuda "$@" --precision "$p" --cudnn-benchmark
        theirs=$(figure "torch-$name")
        mem=$(sed -nE 's/.*peak memory ([0-9]+) MiB.*/\1/p' "$logs/torch-$name.log")
        [ -n "$theirs" ] && extra="; ${theirs} samples/s, peak memory ${mem} MiB"
        finish_step "torch-$name"
        note_ratio "ratio-$name" "spkddp / pytorch" "$ours" "$theirs"
    else
        note "torch-$name" "SKIP: no CUDA PyTorch in '$torch_py' (set TORCH_PYTHON; nothing is installed here)"
    fi
}
for p in bf16 tf32 fp32; do
    bench "bench-$p" "$p" SPKDDP_CUDNN_SEARCH=heuristic
    # shellcheck disable=SC2086
    torch_pair "$p" "$p" $bench_args
    if [ "$p" = bf16 ]; then  # WeSpeaker's ResNet34 at the same batch, bf16 against AMP
        bench_args_ecapa=$bench_args
        bench_args="--model resnet34 $resnet_shape $bench_steps"
        bench "bench-resnet34-$p" "$p" SPKDDP_CUDNN_SEARCH=heuristic
        # shellcheck disable=SC2086
        torch_pair "resnet34-$p" "$p" $bench_args
        # 3D-Speaker's CAM++ (init_channels 128, 80 features, embedding 512); PyTorch's side
        # needs speakerlab, which the lent machines do not have
        bench_args="--model campplus $campplus_shape"
        bench "bench-campplus-$p" "$p" SPKDDP_CUDNN_SEARCH=heuristic
        if [ "$torch_ok" -eq 1 ] && timeout 60 "$torch_py" -c "import speakerlab" >/dev/null 2>&1; then
            # shellcheck disable=SC2086
            torch_pair "campplus-$p" "$p" $bench_args
        else
            note "torch-campplus-$p" "SKIP: no speakerlab (3D-Speaker's CAMPPlus) beside '$torch_py'"
        fi
        # ECAPA C=512 at the same batch: at equal epochs ResNet34 reaches its EER on synthetic
        # speech (docs/models.md), so their rates here say which is ahead at equal time
        bench_args="$ecapa512_shape $bench_steps"
        bench "bench-ecapa512-$p" "$p" SPKDDP_CUDNN_SEARCH=heuristic
        note_ratio "ratio-resnet34-ecapa512-$p" "ResNet34 / ECAPA C=512 samples/s" "$(figure "bench-resnet34-$p")" "$ours"
        bench_args=$bench_args_ecapa
    fi
done
for p in tf32 fp32; do
    bench "bench-$p-timed" "$p" SPKDDP_CUDNN_SEARCH=time
done
# The 1x1 convolutions on cuBLAS (SPKDDP_CONV1X1_GEMM=1, kernels/cuda/conv1d.cu) against
# cuDNN's (bench-P above).
for p in tf32 fp32; do
    ref=$(figure "bench-$p")
    bench "bench-$p-gemm1x1" "$p" SPKDDP_CUDNN_SEARCH=heuristic SPKDDP_CONV1X1_GEMM=1
    note_ratio "ratio-$p-gemm1x1" "1x1 on cuBLAS / on cuDNN" "$ours" "$ref"
done

# ---- correctness at depth ----------------------------------------------------------------------
kernel_tests() {
    local bad=0 t
    for t in "$build"/tests/test_kernel_*; do
        case $t in *_emu | *cuda_check) continue ;; esac
        echo "-- $(basename "$t") cuda"
        timeout -k 5 "$KERNEL_LIMIT" "$t" cuda || { echo "FAILED or timed out: $(basename "$t")"; bad=1; }
    done
    return $bad
}
export -f kernel_tests
export KERNEL_LIMIT=$((45 * slow))
worst() { grep -h "worst normalised error" "$logs/$1.log" 2>/dev/null | awk '{print $NF}' | sort -g | tail -1; }
step kernels 150 kernel_tests
w=$(worst kernels)
[ -n "$w" ] && extra="; worst normalised error ${w}"
finish_step kernels

for b in 32 128; do
    args=shapes$b
    # shellcheck disable=SC2086
    step "shapes-$b" 120 "$build/tests/test_gpu_shapes" ${!args}
    w=$(worst "shapes-$b")
    [ -n "$w" ] && extra="; worst normalised error ${w}"
    finish_step "shapes-$b"
done
# shellcheck disable=SC2086
step shapes-gemm1x1 120 env SPKDDP_CONV1X1_GEMM=1 "$build/tests/test_gpu_shapes" $shapes32
w=$(worst shapes-gemm1x1)
[ -n "$w" ] && extra="; worst normalised error ${w}"
finish_step shapes-gemm1x1

determinism() {
    [ -s sp.h5 ] || { echo "no dataset: step1 did not run"; return 1; }
    local ok=0 run
    for run in a b; do
        # shellcheck disable=SC2086
        "$spk" train --data sp.h5 $train_args --max-steps 3 --device cuda --ckpt-dir "t_det_$run" >"t_det_$run.log" 2>&1 ||
            { cat "t_det_$run.log"; return 1; }
    done
    echo "three steps on the GPU, twice:"
    "$spk" diff t_det_a/ckpt-000000000003.h5 t_det_b/ckpt-000000000003.h5 || ok=1
    # shellcheck disable=SC2086
    SPKDDP_NCCL=1 SPKDDP_NCCL_TIMEOUT=60 "$spk" train --data sp.h5 $train_args --max-steps 3 --device cuda \
        --ckpt-dir t_nccl >t_nccl.log 2>&1 || { cat t_nccl.log; return 1; }
    grep "averaged by NCCL" t_nccl.log || { echo "SPKDDP_NCCL=1 did not use NCCL"; ok=1; }
    echo "three steps with NCCL over one GPU vs without:"
    "$spk" diff t_det_a/ckpt-000000000003.h5 t_nccl/ckpt-000000000003.h5 || ok=1
    rm -rf t_det_a t_det_b t_nccl t_cpu_sp t_cuda_sp t_cpu_sp_ulp
    return $ok
}
export -f determinism
run_step determinism 120 determinism

# shellcheck disable=SC2086
tf32_checks() { "$build/tests/test_gpu_tf32" $TF32_ARGS && "$build/tests/test_gpu_conv_plans" $PLANS_ARGS; }
export -f tf32_checks
export TF32_ARGS=$tf32_args PLANS_ARGS=$plans_args
run_step tf32 90 tf32_checks
# shellcheck disable=SC2086
run_step invariant2d 90 "$build/tests/test_gpu_invariant2d" $invariant2d_args
# The world-size-invariant mode's cost on a GPU (docs/invariant.md): bench-ecapa512-bf16's step
# with its per-sample cuDNN and cuBLAS calls and exact sums, in the configuration the CPU figures
# are of (the rank's batch one group, BatchNorm by groups: the default mode's BatchNorm) (late: a
# secondary figure, whose per-sample calls may be slow)
bench_args="$ecapa512_shape --steps 3 --warmup 1 --invariant --invariant-group $ecapa512_batch --invariant-bn group"
bench bench-ecapa512-invariant-bf16 bf16 SPKDDP_CUDNN_SEARCH=heuristic
note_ratio ratio-ecapa512-invariant-bf16 "invariant / default samples/s" "$ours" "$(figure bench-ecapa512-bf16)"

if command -v mpiexec >/dev/null; then
    run_step e2e 150 bash "$here/../tests/e2e/e2e_device.sh" "$spk" mpiexec "$work/e2e_work" "$build/tests/make_bad_data" cuda 1e-5
else
    note e2e "SKIP: no mpiexec here (gpu_e2e_cuda runs two ranks)"
fi

# A tool: $1 if set, else on the PATH, else in CUDA's bin, else in a PyPI wheel under nvidia/.
find_tool() {
    local name=$1 given=$2 p
    [ -n "$given" ] && { echo "$given"; return; }
    p=$(command -v "$name" 2>/dev/null) && { echo "$p"; return; }
    for p in "${CUDA_HOME:-/usr/local/cuda}/bin/$name" /usr/local/cuda/bin/"$name" /opt/nvidia/nsight-compute/*/"$name"; do
        [ -f "$p" ] && [ -x "$p" ] && { echo "$p"; return; }
    done
    timeout 30 "$torch_py" -c "import nvidia, os
for root in nvidia.__path__:
    for d, _, files in os.walk(root):
        if '$name' in files and os.access(os.path.join(d, '$name'), os.X_OK):
            print(os.path.join(d, '$name')); raise SystemExit" 2>/dev/null | head -1
}
sanitizer=$(find_tool compute-sanitizer "${SANITIZER:-}")
if [ -n "$sanitizer" ]; then
    for tool in memcheck racecheck; do
        # shellcheck disable=SC2086
        run_step "$tool" 90 "$sanitizer" --tool "$tool" --kernel-name kns=_kernel --error-exitcode 99 \
            "$build/tests/test_gpu_shapes" $sanitize_args
    done
else
    note sanitizer "SKIP: no compute-sanitizer (set SANITIZER; CUDA's bin and the PyPI wheel nvidia-cuda-sanitizer-api carry one)"
fi

ncu=$(find_tool ncu "${NCU:-}")
profile() {
    # Per bench of PROFILES (';' between their flags): one timed step (cudaProfilerStart/Stop
    # around it), one metric, each kernel's time; kernels.txt holds a table for each.
    local args
    : >kernels.txt
    while IFS= read -r args; do
        [ -n "${args// /}" ] || continue
        echo "== spkddp bench --device cuda $args --steps 1 --warmup 2" >>kernels.txt
        # shellcheck disable=SC2086
        "$NCU_BIN" --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv \
            "$spk" bench --device cuda $args --steps 1 --warmup 2 >ncu.csv || return 1
        kernel_table ncu.csv >>kernels.txt || return 1
    done < <(tr ';' '\n' <<<"$PROFILES")
}
kernel_table() {
    "$TORCH_PY" - "$1" <<'EOF'
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
by = {}
for r in rows:
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    v = float(r["Metric Value"].replace(",", ""))
    scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}.get(r.get("Metric Unit", "nsecond"), 1e-3)
    t, n = by.get(r["Kernel Name"], (0.0, 0))
    by[r["Kernel Name"]] = (t + v * scale, n + 1)
total = sum(t for t, _ in by.values())
print(f"{len(rows)} kernel launches in one step, {total / 1e3:.3f} ms of kernel time (serialised by ncu)")
print(f"{'us':>10} {'share':>6} {'calls':>6}  kernel")
for name, (t, n) in sorted(by.items(), key=lambda kv: -kv[1][0]):
    print(f"{t:10.1f} {100 * t / total:5.1f}% {n:6d}  {name[:150]}")
EOF
}
export -f profile kernel_table
if [ -n "$ncu" ]; then
    export NCU_BIN=$ncu TORCH_PY=$torch_py
    export PROFILES=${GPU_CHECK_PROFILE:-"$bench_shape --precision fp32; $bench_shape --precision bf16; --model resnet34 $resnet_shape --precision bf16"}
    step profile 150 profile
    if [ -s kernels.txt ]; then
        cp kernels.txt "$out/kernels.txt"
        extra="; $(grep -c '^== ' kernels.txt) bench(es): $(grep -h 'kernel launches' kernels.txt | sed 's/ in one step, / /; s/ of kernel time.*//' | paste -sd';' | sed 's/;/; /g')"
    fi
    finish_step profile
else
    note profile "SKIP: no ncu (set NCU; Nsight Compute ships it in CUDA's bin)"
fi

note done "$(($(date +%s) - t_start)) s, $([ $failed -eq 0 ] && echo "no step failed" || echo "SOME STEPS FAILED")"
pack_logs
exit $failed
