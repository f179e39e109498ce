#!/usr/bin/env bash
# One command, both sides: spkddp's training step and PyTorch's on the same cores.
#   tools/bench.sh [BUILD_DIR] [extra spkddp bench flags]
# Threads: all cores (THREADS=N to change). PyTorch runs twice: as installed, and with
# OPENBLAS_NUM_THREADS=1 and glibc malloc tuned to keep freed activations (what its
# allocator otherwise returns to the kernel and page-faults back every step).
set -euo pipefail
build=${1:-build}
shift || true
threads=${THREADS:-$(nproc)}
here=$(cd "$(dirname "$0")" && pwd)
# Both sides get the same flags (shape, --device, --tf32); the CPU unless they say otherwise.
set -- --device cpu "$@"
ours=$(SPKDDP_THREADS=$threads "$build/app/spkddp" bench "$@")
echo "$ours"
spk=$(sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' <<<"$ours")
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
    echo "pytorch: not installed (Debian: apt-get install python3-torch); no ratio"
    exit 0
fi
plain=$(/usr/bin/python3 "$here/bench_pytorch.py" --threads "$threads" "$@")
echo "$plain (as installed)"
tuned=$(OPENBLAS_NUM_THREADS=1 GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296 \
    /usr/bin/python3 "$here/bench_pytorch.py" --threads "$threads" "$@")
echo "$tuned (OPENBLAS_NUM_THREADS=1, malloc tuned)"
best=$(printf '%s\n%s\n' "$plain" "$tuned" | sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' | sort -g | tail -1)
awk -v a="$spk" -v b="$best" 'BEGIN { printf "ratio spkddp / best pytorch: %.2fx\n", a / b }'
