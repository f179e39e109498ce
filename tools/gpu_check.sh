#!/usr/bin/env bash
# Every GPU check and benchmark in one go, on a machine with one GPU, from a tree built
# elsewhere (configure it with -DSPKDDP_NATIVE=OFF so the host code runs on any x86-64):
#   tools/gpu_check.sh BUILD_DIR [OUT_DIR]
# Binaries are called directly (ctest files hold the build machine's paths). Each step has its
# own time limit, the whole run a budget (GPU_CHECK_BUDGET seconds, default 330: steps that no
# longer fit are skipped), and all output lands in OUT_DIR (default ./gpu_check_out), one log
# per step, with a summary at the end (also OUT_DIR/summary.txt). Nothing is downloaded.
#   device      the GPU is found and starts
#   kernels     every op's test on the GPU against the CPU kernels (small shapes)
#   shapes      every op at production shapes (C=1024, batch 128, T=200) against the CPU, and
#               every backward twice for the same bits
#   train       one training step on the GPU vs the CPU (spkddp diff, rtol 1e-5); three steps
#               twice for the same bits; one rank with SPKDDP_NCCL=1 (NCCL's setup, events and
#               deadline on one GPU) for the same bits as without
#   bench-*     spkddp bench at C=1024, batch 128, T=200: fp32, tf32 (bf16 when built): samples/s,
#               GPU memory, the cuDNN algorithms chosen
#   torch-*     PyTorch's same step on the same GPU (fp32, tf32, AMP bf16; cudnn.benchmark on),
#               with a CUDA PyTorch from TORCH_PYTHON (default python3); the ratio
#   tf32        TF32 reaches every convolution pass and the GEMM; the cuDNN plan cache
#   e2e         gpu_e2e_cuda (tests/e2e/e2e_device.sh) with mpiexec (two ranks share the GPU)
#   memcheck, racecheck   compute-sanitizer (SANITIZER, else on the PATH, in CUDA's bin or
#               from the PyPI wheel nvidia-cuda-sanitizer-api) over every op at small shapes
# GPU_CHECK_SKIP="step ..." leaves steps out (e.g. "e2e torch-bf16").
# GPU_CHECK_SCALE=small shrinks every shape (and stretches the limits) for a run on the CUDA
# stand-in (tests/cuda_emu), which checks this script itself.
# Exit status: 0 when no step failed or timed out (skipped steps say why).
set -u
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [OUT_DIR]" >&2; exit 2; }
build=$(cd "$1" && pwd) || exit 2
out=$(mkdir -p "${2:-gpu_check_out}" && cd "${2:-gpu_check_out}" && pwd) || exit 2
here=$(cd "$(dirname "$0")" && pwd)
spk=$build/app/spkddp
budget=${GPU_CHECK_BUDGET:-330}
slow=1  # limit multiplier
if [ "${GPU_CHECK_SCALE:-}" = small ]; then
    slow=10
    budget=${GPU_CHECK_BUDGET:-3000}
    shapes_args="32 4 24"
    train_model="--channels 16 --attention-channels 8 --se-channels 8 --emb-dim 16 --frames 24"
    train_data="--dim 16 --speakers 8 --utts-per-speaker 4 --min-frames 24 --max-frames 40"
    bench_args="--channels 16 --batch 4 --frames 24 --steps 2 --warmup 1"
    export E2E_DEVICE_MODEL=$train_model
else
    shapes_args=""
    train_model="--channels 512 --frames 200"
    train_data="--dim 80 --speakers 40 --utts-per-speaker 4 --min-frames 200 --max-frames 300"
    bench_args="--channels 1024 --batch 128 --frames 200 --steps 20 --warmup 5"
fi
export build spk here train_model train_data
t_start=$(date +%s)
summary=()
failed=0
cd "$out" || exit 2

note() { summary+=("$(printf '%-12s %s' "$1" "$2")"); }

# step NAME LIMIT_S command...: runs it (a program or an exported function) with the smaller
# of its limit and the budget left; the log is OUT_DIR/NAME.log. Sets $rc (77: skipped by the
# command itself).
step() {
    local name=$1 limit=$(($2 * slow)) t0 dt
    shift 2
    local left=$((budget - ($(date +%s) - t_start)))
    if [[ " ${GPU_CHECK_SKIP:-} " == *" $name "* ]]; then
        note "$name" "SKIP: GPU_CHECK_SKIP"
        rc=77
        return
    fi
    if [ "$left" -lt 10 ]; then
        note "$name" "SKIP: the budget of ${budget} s is spent"
        rc=77
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    t0=$(date +%s)
    echo "== $name (limit ${limit} s): $*"
    timeout -k 5 "$limit" bash -c '"$@"' _ "$@" >"$name.log" 2>&1
    rc=$?
    dt=$(($(date +%s) - t0))
    case $rc in
    0) note "$name" "ok (${dt} s)" ;;
    77) note "$name" "SKIP: $(grep -m1 -i skipped "$name.log" | sed 's/.*SKIPPED: //')" ;;
    124 | 137) note "$name" "TIMEOUT after ${limit} s (log: $out/$name.log)"; failed=1 ;;
    *) note "$name" "FAIL (exit $rc, ${dt} s; log: $out/$name.log)"; failed=1 ;;
    esac
    tail -3 "$name.log" | sed 's/^/   /'
}

figure() { sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' "$1" 2>/dev/null | tail -1; }

# ---- preflight: the binaries run here --------------------------------------------------------
command -v nvidia-smi >/dev/null && nvidia-smi -L
missing=$(ldd "$spk" "$build/tests/test_gpu_shapes" 2>&1 | grep "not found" | sort -u)
if [ -n "$missing" ]; then
    echo "$missing" >preflight.log
    note preflight "FAIL: libraries missing on this machine (set LD_LIBRARY_PATH): $(awk '{print $1}' preflight.log | tr '\n' ' ')"
    printf '%s\n' "${summary[@]}" | tee summary.txt
    exit 1
fi

step device 30 "$build/tests/test_gpu_device"
if [ "$rc" -ne 0 ]; then
    printf '%s\n' "${summary[@]}" | tee summary.txt
    exit 1
fi

kernel_tests() {
    local bad=0 t
    for t in "$build"/tests/test_kernel_*; do
        case $t in *_emu | *cuda_check) continue ;; esac
        echo "-- $(basename "$t") cuda"
        "$t" cuda || bad=1
    done
    return $bad
}
export -f kernel_tests
step kernels 60 kernel_tests
worst=$(grep -h "worst normalised error" kernels.log | awk '{print $NF}' | sort -g | tail -1)
[ -n "$worst" ] && summary[-1]="${summary[-1]}; worst normalised error ${worst}"

# shellcheck disable=SC2086
step shapes 90 "$build/tests/test_gpu_shapes" $shapes_args
worst=$(grep -h "worst normalised error" shapes.log | awk '{print $NF}')
[ -n "$worst" ] && summary[-1]="${summary[-1]}; worst normalised error ${worst}"

# One step GPU vs CPU from the same initialisation; three steps twice; NCCL over one rank.
train_checks() {
    # shellcheck disable=SC2086
    "$spk" synth --kind speakers --out sp.h5 $train_data >/dev/null || return 1
    local args="--data sp.h5 --model ecapa $train_model --global-batch 32 --epochs 5
                --optimizer sgd --momentum 0.9 --lr 0.02 --progress 0"
    local ok=0
    # shellcheck disable=SC2086
    "$spk" train $args --max-steps 1 --device cpu --ckpt-dir t_cpu >t_cpu.log 2>&1 || { cat t_cpu.log; return 1; }
    # shellcheck disable=SC2086
    "$spk" train $args --max-steps 1 --device cuda --ckpt-dir t_gpu >t_gpu.log 2>&1 || { cat t_gpu.log; return 1; }
    echo "one step, GPU vs CPU:"
    "$spk" diff t_cpu/ckpt-000000000001.h5 t_gpu/ckpt-000000000001.h5 --rtol 1e-5 || ok=1
    for run in a b; do
        # shellcheck disable=SC2086
        "$spk" train $args --max-steps 3 --device cuda --ckpt-dir t_det_$run >t_det_$run.log 2>&1 || return 1
    done
    echo "three steps on the GPU, twice:"
    "$spk" diff t_det_a/ckpt-000000000003.h5 t_det_b/ckpt-000000000003.h5 || ok=1
    # shellcheck disable=SC2086
    SPKDDP_NCCL=1 SPKDDP_NCCL_TIMEOUT=60 "$spk" train $args --max-steps 3 --device cuda --ckpt-dir t_nccl \
        >t_nccl.log 2>&1 || { cat t_nccl.log; return 1; }
    grep "averaged by NCCL" t_nccl.log || { echo "SPKDDP_NCCL=1 did not use NCCL"; ok=1; }
    echo "three steps with NCCL over one GPU vs without:"
    "$spk" diff t_det_a/ckpt-000000000003.h5 t_nccl/ckpt-000000000003.h5 || ok=1
    return $ok
}
export -f train_checks
step train 90 train_checks
rel=$(sed -nE '/one step, GPU vs CPU/{n;s/.*rel ([^ ]+).*/\1/p}' train.log)
[ -n "$rel" ] && summary[-1]="${summary[-1]}; one step GPU vs CPU: rel ${rel}"

# ---- throughput --------------------------------------------------------------------------------
precisions="fp32 tf32"
"$spk" bench --help 2>&1 | grep -q -- "--precision" && precisions="fp32 tf32 bf16"
declare -A ours theirs
for p in $precisions; do
    case $p in fp32) flag="" ;; tf32) flag="--tf32" ;; *) flag="--precision $p" ;; esac
    # shellcheck disable=SC2086
    step "bench-$p" 60 "$spk" bench --device cuda $bench_args $flag
    ours[$p]=$(figure "bench-$p.log")
    mem=$(sed -nE 's/.*GPU memory in use ([0-9]+) MiB.*/\1/p' "bench-$p.log")
    [ -n "${ours[$p]}" ] && summary[-1]="${summary[-1]}; ${ours[$p]} samples/s, GPU memory in use ${mem} MiB"
done

torch_py=${TORCH_PYTHON:-python3}
if "$torch_py" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" >/dev/null 2>&1; then
    for p in fp32 tf32 bf16; do
        # shellcheck disable=SC2086
        step "torch-$p" 60 "$torch_py" "$here/bench_pytorch.py" --device cuda $bench_args --precision $p \
            --cudnn-benchmark
        theirs[$p]=$(figure "torch-$p.log")
        mem=$(sed -nE 's/.*peak memory ([0-9]+) MiB.*/\1/p' "torch-$p.log")
        [ -n "${theirs[$p]}" ] && summary[-1]="${summary[-1]}; ${theirs[$p]} samples/s, peak memory ${mem} MiB"
    done
else
    note torch "SKIP: no CUDA PyTorch in '$torch_py' (set TORCH_PYTHON to a venv's python; nothing is installed here)"
fi

# ---- the rest ----------------------------------------------------------------------------------
tf32_checks() { "$build/tests/test_gpu_tf32" && "$build/tests/test_gpu_conv_plans"; }
export -f tf32_checks
step tf32 30 tf32_checks

if command -v mpiexec >/dev/null; then
    step e2e 120 bash "$here/../tests/e2e/e2e_device.sh" "$spk" mpiexec "$out/e2e_work" "$build/tests/make_bad_data" cuda 1e-5
else
    note e2e "SKIP: no mpiexec here (gpu_e2e_cuda runs two ranks)"
fi

sanitizer=${SANITIZER:-$(command -v compute-sanitizer || true)}
[ -z "$sanitizer" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && sanitizer=/usr/local/cuda/bin/compute-sanitizer
if [ -z "$sanitizer" ]; then
    sanitizer=$("$torch_py" -c "import nvidia, os, glob; print(next(iter(glob.glob(os.path.join(nvidia.__path__[0], \
'cuda_sanitizer_api', '**', 'compute-sanitizer'), recursive=True)), ''))" 2>/dev/null)
fi
if [ -n "$sanitizer" ]; then
    for tool in memcheck racecheck; do
        step "$tool" 60 "$sanitizer" --tool "$tool" --error-exitcode 99 "$build/tests/test_gpu_shapes" 64 4 50
    done
else
    note sanitizer "SKIP: no compute-sanitizer (set SANITIZER; the PyPI wheel nvidia-cuda-sanitizer-api carries one)"
fi

# ---- summary -----------------------------------------------------------------------------------
for p in fp32 tf32 bf16; do
    if [ -n "${ours[$p]:-}" ] && [ -n "${theirs[$p]:-}" ]; then
        note "ratio-$p" "$(awk -v a="${ours[$p]}" -v b="${theirs[$p]}" 'BEGIN { printf "spkddp / pytorch = %.2fx", a / b }')"
    fi
done
{
    echo "gpu_check: $(nvidia-smi -L 2>/dev/null | head -1 | grep . || echo "no nvidia-smi"), $(($(date +%s) - t_start)) s"
    printf '%s\n' "${summary[@]}"
} | tee summary.txt
exit $failed
