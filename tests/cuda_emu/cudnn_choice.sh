#!/usr/bin/env bash
# How a cuDNN algorithm is chosen (kernels/cuda/conv_plans.cu), on the stand-in:
# cudnn_choice.sh TEST_KERNEL_CONV1D_EMU WORKDIR [TEST_KERNEL_CONV2D_EMU TEST_KERNEL_CONV2D_BF16_EMU]
#  - a candidate that cuDNN offers but refuses to run gives way to the next, and the op still
#    matches the CPU (the 2-D convolutions too: the bf16 one from its tensor-core candidate to
#    the FMA ones);
#  - when nothing runs a pass, not even the classic algorithm, the job ends with a sentence;
#  - SPKDDP_CUDNN_SEARCH=time times the candidates that run and says so in the listing.
set -u
t=$1
work=$2
t2d=${3:-}
t2d_bf16=${4:-}
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
rc=0
fail() { echo "FAIL: $*"; rc=1; }
logs=""

# refused_forward LOG TEST PLAN: TEST passes with the forward's IMPLICIT_PRECOMP_GEMM (1)
# refused, and its plan listing has a line matching PLAN (what took its place), never it.
refused_forward() {
    logs="$logs $1"
    SPKDDP_CUDNN_VERBOSE=1 SPKDDP_CUDA_EMU_CUDNN_REFUSE=fwd:1 "$2" cuda >"$1.log" 2>&1 ||
        fail "$1: the test with a refused forward algorithm failed (log below)"
    grep -q "$3" "$1.log" || fail "$1: the refused IMPLICIT_PRECOMP_GEMM did not give way as expected: no line matches '$3'"
    grep -q "fwd IMPLICIT_PRECOMP_GEMM" "$1.log" && fail "$1: a refused algorithm was chosen"
}

# nothing_runs LOG TEST PASS NAME: with PASS's (bwd-data, bwd-filter) algorithm 1 refused (its
# only deterministic candidate and the classic fallback), TEST ends (exit 1) with a sentence
# naming the pass (NAME: backward-data, backward-filter).
nothing_runs() {
    logs="$logs $1"
    SPKDDP_CUDA_EMU_CUDNN_REFUSE=$3:1 "$2" cuda >"$1.log" 2>&1
    local n=$?
    [ $n -eq 1 ] || fail "$1: nothing runs the $4 pass, yet the test exited $n, not 1"
    grep -q "spkddp: error: .*cuDNN runs no algorithm for the $4 pass of a convolution of B=.*the classic ALGO_1 refused it" "$1.log" ||
        fail "$1: no sentence says that nothing runs the $4 pass"
}

refused_forward refused "$t" "fwd IMPLICIT_GEMM (reported FMA, runs FMA, .* MiB; 2 tried, 1 refused)"
nothing_runs none "$t" bwd-data backward-data

logs="$logs timed"
SPKDDP_CUDNN_VERBOSE=1 SPKDDP_CUDNN_SEARCH=time "$t" cuda >timed.log 2>&1 || fail "conv1d with timed choices (log below)"
grep -qE "fwd [A-Z_]+ \(reported FMA, runs FMA, .* MiB; fastest of [0-9]+ run, [0-9.]+ ms\)" timed.log ||
    fail "the timed search does not say it timed the candidates"

SPKDDP_CUDNN_SEARCH=fastest "$t" cuda >bad.log 2>&1
grep -q "SPKDDP_CUDNN_SEARCH='fastest' must be one of heuristic|time" bad.log || fail "a bad SPKDDP_CUDNN_SEARCH is not named"

if [ -n "$t2d" ]; then  # NHWC rules the FFT out: IMPLICIT_GEMM is next
    refused_forward refused2d "$t2d" "^conv2d .* NHWC fp32: fwd IMPLICIT_GEMM (reported FMA, runs FMA, .* MiB; 2 tried, 1 refused)"
    nothing_runs none2d "$t2d" bwd-filter backward-filter
fi
if [ -n "$t2d_bf16" ]; then  # the tensor-core form refused, then the FMA one: IMPLICIT_GEMM in FMA math
    refused_forward refused_bf16 "$t2d_bf16" "^conv2d .* NHWC bf16: fwd IMPLICIT_GEMM (reported FMA, runs FMA, .* MiB; 3 tried, 2 refused)"
fi

for f in $logs; do
    echo "---- $f.log (end)"
    tail -5 "$f.log"
done
[ $rc -eq 0 ] && echo "cuDNN candidates are run before they are taken"
exit $rc
