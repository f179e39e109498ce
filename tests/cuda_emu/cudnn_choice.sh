#!/usr/bin/env bash
# How a cuDNN algorithm is chosen (kernels/cuda/conv_plans.cu), on the stand-in:
# cudnn_choice.sh TEST_KERNEL_CONV1D_EMU WORKDIR
#  - a candidate that cuDNN offers but refuses to run gives way to the next, and the op still
#    matches the CPU;
#  - when nothing runs a pass, not even the classic algorithm, the job ends with a sentence;
#  - SPKDDP_CUDNN_SEARCH=time times the candidates that run and says so in the listing.
set -u
t=$1
work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
rc=0
fail() { echo "FAIL: $*"; rc=1; }

SPKDDP_CUDNN_VERBOSE=1 SPKDDP_CUDA_EMU_CUDNN_REFUSE=fwd:1 "$t" cuda >refused.log 2>&1 || fail "conv1d with a refused forward algorithm (log below)"
grep -q "fwd IMPLICIT_GEMM (reported FMA, runs FMA, .* MiB; 2 tried, 1 refused)" refused.log ||
    fail "the refused IMPLICIT_PRECOMP_GEMM did not give way to IMPLICIT_GEMM"
grep -q "fwd IMPLICIT_PRECOMP_GEMM" refused.log && fail "a refused algorithm was chosen"

SPKDDP_CUDA_EMU_CUDNN_REFUSE=bwd-data:1 "$t" cuda >none.log 2>&1
n=$?
[ $n -eq 1 ] || fail "nothing runs the backward-data pass, yet the test exited $n, not 1"
grep -q "spkddp: error: .*cuDNN runs no algorithm for the backward-data pass of a convolution of B=.*the classic ALGO_1 refused it" none.log ||
    fail "no sentence says that nothing runs the backward-data pass"

SPKDDP_CUDNN_VERBOSE=1 SPKDDP_CUDNN_SEARCH=time "$t" cuda >timed.log 2>&1 || fail "conv1d with timed choices (log below)"
grep -qE "fwd [A-Z_]+ \(reported FMA, runs FMA, .* MiB; fastest of [0-9]+ run, [0-9.]+ ms\)" timed.log ||
    fail "the timed search does not say it timed the candidates"

SPKDDP_CUDNN_SEARCH=fastest "$t" cuda >bad.log 2>&1
grep -q "SPKDDP_CUDNN_SEARCH='fastest' must be heuristic (the default) or time" bad.log || fail "a bad SPKDDP_CUDNN_SEARCH is not named"

for f in refused none timed; do
    echo "---- $f.log (end)"
    tail -5 "$f.log"
done
[ $rc -eq 0 ] && echo "cuDNN candidates are run before they are taken"
exit $rc
