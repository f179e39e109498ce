#!/usr/bin/env bash
# spkddp's training step against the current PyTorch's on the same cores, fp32 and bf16.
#   tools/bench.sh [BUILD_DIR] [extra flags for both sides, e.g. --channels 1024 --device cuda]
# Environment:
#   THREADS=N        threads on each side (default: all cores; fewer: both pinned to cores 0..N-1)
#   ROUNDS=N         interleaved rounds (default 3): each round runs every configuration once
#   STEPS=N          timed steps per run (default 5, after 2 untimed)
#   PRECISIONS=...   default "fp32 bf16"
#   TORCH_VENV=DIR   a venv with PyTorch from PyPI (default ~/.cache/spkddp/venv-torch),
#                    created when missing: python3 -m venv, then pip install torch numpy
#   TORCH_PIP=ARGS   what that pip install installs (default "torch numpy"; e.g. "torch numpy
#                    --index-url https://download.pytorch.org/whl/cpu" for the CPU-only wheel);
#                    then pyannote.audio and einops without dependencies, whose copy of WeSpeaker's
#                    resnet.py the ResNet runs use (tools/wespeaker_resnet.py), and speakerlab
#                    without dependencies for --model campplus (3D-Speaker's CAMPPlus)
# PyTorch runs as installed and with glibc malloc tuned to keep freed activations
# (MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736, what its allocator otherwise hands
# back to the kernel and page-faults in again every step), and for the 2-D models (--model
# resnet34 ...) also in its channels_last memory format; its best counts. bf16 is spkddp's
# --precision bf16 against torch.autocast(dtype=torch.bfloat16). Each side's GFLOP/s (the
# model's FLOPs per sample, forward + backward = 3x forward) is given as a fraction of the
# machine's fp32 and bf16 peaks (tools/bench_peak.c; on AMX CPUs the tiles' bf16 peak), and the
# machine's load before and after the runs (figures taken while other jobs share the cores are
# not fair ones: rerun then).
# Beside each wall-clock rate it gives the CPU-time rate, samples per CPU second of the process
# times the thread count: what the run would reach with its cores to itself. It moves far less
# than wall time when other jobs share the cores; it is exact for THREADS=1 and an upper bound
# otherwise (threads that spin while waiting count, so set OMP_WAIT_POLICY=passive). Passive
# costs the wall-clock rates, though: every parallel region then wakes a sleeping thread (on 2
# threads, CAM++'s bf16 step 15% slower for spkddp and 30% for PyTorch). On a machine of one's
# own, leave OMP_WAIT_POLICY unset for the wall-clock figures.
set -euo pipefail
build=${1:-build}
shift || true
here=$(cd "$(dirname "$0")" && pwd)
threads=${THREADS:-$(nproc)}
rounds=${ROUNDS:-3}
steps=${STEPS:-5}
precisions=${PRECISIONS:-fp32 bf16}
venv=${TORCH_VENV:-$HOME/.cache/spkddp/venv-torch}
for tool in app/spkddp tests/bench_peak; do
    [ -x "$build/$tool" ] || { echo "bench.sh: $build/$tool is missing: build first (cmake --build $build)" >&2; exit 2; }
done

if [ ! -x "$venv/bin/python" ]; then
    echo "bench.sh: creating $venv with PyTorch from PyPI (pip install ${TORCH_PIP:-torch numpy})"
    python3 -m venv "$venv" || { echo "bench.sh: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 2; }
    # shellcheck disable=SC2086
    "$venv/bin/pip" install --quiet ${TORCH_PIP:-torch numpy}
fi
if [[ " $* " =~ " --model resnet" ]] && ! "$venv/bin/python" -c "import pyannote, einops" 2>/dev/null; then
    "$venv/bin/pip" install --quiet --no-deps pyannote.audio einops ||
        echo "bench.sh: no pyannote.audio: PyTorch runs tests/golden/make_resnet_golden.py's ResNet"
fi
if [[ " $* " =~ " --model campplus" ]] && ! "$venv/bin/python" -c "import speakerlab" 2>/dev/null; then
    "$venv/bin/pip" install --quiet --no-deps speakerlab ||
        { echo "bench.sh: no speakerlab (3D-Speaker's CAMPPlus) in $venv" >&2; exit 2; }
fi
py="$venv/bin/python"
"$py" -c "import torch" || { echo "bench.sh: $venv has no working torch" >&2; exit 2; }

pin=()
if [ "$threads" -lt "$(nproc)" ] && command -v taskset >/dev/null; then pin=(taskset -c "0-$((threads - 1))"); fi
common=(--steps "$steps" --warmup 2 "$@")
two_d=0
[[ " $* " =~ " --model resnet" || " $* " =~ " --model campplus" ]] && two_d=1
rate() { sed -nE 's/.* ([0-9.]+) samples\/s.*/\1/p' <<<"$1"; }
# samples per CPU second x threads, from the "<wall> s/step" and "CPU <cpu> s/step" of a run
cpu_rate() {
    awk -v r="$(rate "$1")" -v t="$threads" \
        -v w="$(sed -nE 's/.* ([0-9.]+) s\/step.*CPU.*/\1/p' <<<"$1")" \
        -v c="$(sed -nE 's/.*CPU ([0-9.]+) s\/step.*/\1/p' <<<"$1")" 'BEGIN { printf "%.2f", r * w / c * t }'
}

echo "machine: $(lscpu | sed -nE 's/^Model name: *//p'), $(nproc) cores; $threads threads per side"
echo "spkddp: $("$build/app/spkddp" --version | sed -nE 's/^CPU: //p')"
echo "pytorch: $("$py" -c 'import torch; print(torch.__version__, "from", torch.__file__.rsplit("/", 2)[0])')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
peaks=$("$build/tests/bench_peak" "$threads")
echo "$peaks"
peak_fp32=$(sed -nE 's/^peak fp32 ([0-9.]+).*/\1/p' <<<"$peaks")
peak_bf16=$(sed -nE 's/^peak bf16 ([0-9.]+).*/\1/p' <<<"$peaks")

declare -A runs cpu_runs  # "<precision> <side>" -> the samples/s (wall, CPU time) of every round
flop=""
for ((r = 1; r <= rounds; r++)); do
    for p in $precisions; do
        out=$(SPKDDP_THREADS=$threads "${pin[@]}" "$build/app/spkddp" bench --device cpu --precision "$p" "${common[@]}")
        echo "round $r: $out"
        runs["$p spkddp"]+=" $(rate "$out")"
        cpu_runs["$p spkddp"]+=" $(cpu_rate "$out")"
        flop=$(sed -nE 's/.*forward ([0-9.]+) GFLOP\/sample.*/\1/p' <<<"$out")
        out=$("${pin[@]}" "$py" "$here/bench_pytorch.py" --threads "$threads" --precision "$p" "${common[@]}")
        echo "round $r: $out (as installed)"
        runs["$p stock"]+=" $(rate "$out")"
        cpu_runs["$p stock"]+=" $(cpu_rate "$out")"
        out=$(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736 "${pin[@]}" \
            "$py" "$here/bench_pytorch.py" --threads "$threads" --precision "$p" "${common[@]}")
        echo "round $r: $out (malloc tuned)"
        runs["$p tuned"]+=" $(rate "$out")"
        cpu_runs["$p tuned"]+=" $(cpu_rate "$out")"
        if [ $two_d -eq 1 ]; then  # the 2-D models also in PyTorch's channels_last format
            out=$(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736 "${pin[@]}" \
                "$py" "$here/bench_pytorch.py" --threads "$threads" --precision "$p" --channels-last "${common[@]}")
            echo "round $r: $out (malloc tuned)"
            runs["$p tuned"]+=" $(rate "$out")"
            cpu_runs["$p tuned"]+=" $(cpu_rate "$out")"
        fi
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# best, range and GFLOP/s of a list of samples/s
summary() {
    awk -v list="$1" -v flop="${flop:-0}" -v p32="${peak_fp32:-0}" -v p16="${peak_bf16:-0}" 'BEGIN {
        n = split(list, v, " "); lo = hi = v[1]
        for (i = 2; i <= n; i++) { if (v[i] < lo) lo = v[i]; if (v[i] > hi) hi = v[i] }
        g = 3 * flop * hi
        printf "%7.2f samples/s (range %.2f-%.2f), %6.1f GFLOP/s", hi, lo, hi, g
        if (p32 > 0) printf ", %4.1f%% of fp32 peak", 100 * g / p32
        if (p16 > 0) printf ", %4.1f%% of bf16 peak", 100 * g / p16
    }'
}
best() { tr ' ' '\n' <<<"$1" | sort -g | tail -1; }
echo
echo "best of $rounds interleaved rounds, wall-clock and CPU-time rates (forward+backward = 3 x ${flop:-?} GFLOP/sample):"
for p in $precisions; do
    for clock in wall cpu; do
        [ $clock = wall ] && declare -n list=runs || declare -n list=cpu_runs
        printf '%s %-4s spkddp:          %s\n' "$p" $clock "$(summary "${list["$p spkddp"]}")"
        printf '%s %-4s pytorch stock:   %s\n' "$p" $clock "$(summary "${list["$p stock"]}")"
        printf '%s %-4s pytorch malloc:  %s\n' "$p" $clock "$(summary "${list["$p tuned"]}")"
        awk -v a="$(best "${list["$p spkddp"]}")" -v b="$(best "${list["$p stock"]} ${list["$p tuned"]}")" \
            -v p="$p" -v c=$clock 'BEGIN { printf "%s %-4s ratio spkddp / best pytorch: %.2fx\n", p, c, a / b }'
        unset -n list
    done
done
