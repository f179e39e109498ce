#!/usr/bin/env bash
# Every GPU check in one go, for a machine with a GPU (run from the repository root):
#   tools/gpu_check.sh [BUILD_DIR]        builds BUILD_DIR (default build) first if needed
# 1. ctest -L gpu: device discovery, every CUDA kernel against the CPU one, and training,
#    cross-device resume and embeddings on the GPU against the CPU (tests/e2e/e2e_device.sh)
# 2. spkddp bench --device cuda: ECAPA C=1024, batch 128, T=200 (the issue's figure) and
#    C=512, batch 32 (the CPU table's shape), in fp32 and with --tf32
# 3. PyTorch's same step on the same GPU, when a CUDA-enabled torch is installed
# Exit status: that of the gpu tests.
set -uo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -x "$build/app/spkddp" ]; then
    cmake -S "$here/.." -B "$build" -DCMAKE_BUILD_TYPE=Release && cmake --build "$build" -j"$(nproc)" || exit 1
fi
command -v nvidia-smi >/dev/null && nvidia-smi -L
(cd "$build" && ctest -L gpu --output-on-failure)
rc=$?
for shape in "--channels 1024 --batch 128" "--channels 512 --batch 32"; do
    for math in "" "--tf32"; do
        # shellcheck disable=SC2086
        "$build/app/spkddp" bench --device cuda $shape $math --frames 200 --steps 10 --warmup 3
    done
done
if python3 -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
    for shape in "--channels 1024 --batch 128" "--channels 512 --batch 32"; do
        # shellcheck disable=SC2086
        python3 "$here/bench_pytorch.py" --device cuda $shape --frames 200 --steps 10 --warmup 3
        # shellcheck disable=SC2086
        python3 "$here/bench_pytorch.py" --device cuda $shape --frames 200 --steps 10 --warmup 3 --tf32
        # shellcheck disable=SC2086
        python3 "$here/bench_pytorch.py" --device cuda $shape --frames 200 --steps 10 --warmup 3 --cudnn-benchmark --tf32
    done
else
    echo "pytorch: no CUDA-enabled torch here; no PyTorch figure"
fi
exit $rc
