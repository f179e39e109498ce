#!/usr/bin/env bash
# tools/gpu_check.sh itself, on the CUDA stand-in: gpu_check_emu.sh TESTS_DIR SPKDDP_EMU WORKDIR
# A build directory of links to the stand-in's binaries (TESTS_DIR/<name>_emu) stands in for a
# GPU build; the script runs at GPU_CHECK_SCALE=small and must finish with no step failed or
# timed out, each step it cannot run here (PyTorch on CUDA, compute-sanitizer) skipped with a
# reason, and the summary naming every step. Its e2e step is left out: the same script runs on
# the stand-in as cuda_emu_e2e_device.
set -u
tests=$1
spk_emu=$2
work=$3
rm -rf "$work" && mkdir -p "$work/build/app" "$work/build/tests" || exit 1
ln -s "$spk_emu" "$work/build/app/spkddp"
for t in "$tests"/test_kernel_*_emu "$tests"/test_gpu_*_emu; do
    ln -s "$t" "$work/build/tests/$(basename "${t%_emu}")"
done
ln -s "$tests/make_bad_data" "$work/build/tests/make_bad_data"
here=$(cd "$(dirname "$0")/../.." && pwd)
TORCH_PYTHON=/nonexistent/python3 GPU_CHECK_SCALE=small GPU_CHECK_SKIP=e2e bash "$here/tools/gpu_check.sh" "$work/build" "$work/out"
rc=$?
summary=$work/out/summary.txt
for s in device kernels shapes train bench-fp32 bench-tf32 tf32; do
    grep -qE "^$s +ok" "$summary" || { echo "FAIL: step $s did not pass"; rc=1; }
done
grep -qE "^torch +SKIP: no CUDA PyTorch" "$summary" || { echo "FAIL: the missing PyTorch is not reported"; rc=1; }
grep -qE "^e2e +SKIP: GPU_CHECK_SKIP" "$summary" || { echo "FAIL: GPU_CHECK_SKIP=e2e did not skip e2e"; rc=1; }
grep -qE "one step GPU vs CPU: rel [0-9.e+-]+" "$summary" || { echo "FAIL: no GPU-vs-CPU figure"; rc=1; }
grep -qE "bench-fp32 +ok.* samples/s, GPU memory in use [0-9]+ MiB" "$summary" || { echo "FAIL: no bench figure"; rc=1; }
grep -q "fwd .*bwd-data .*bwd-filter" "$work/out/bench-fp32.log" || { echo "FAIL: bench lists no cuDNN choices"; rc=1; }
[ $rc -eq 0 ] && echo "gpu_check.sh ran through on the stand-in"
exit $rc
