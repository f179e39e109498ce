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
# shellcheck source=tests/cuda_emu/gpu_check_summary.sh
. "$here/tests/cuda_emu/gpu_check_summary.sh"
TORCH_PYTHON=/nonexistent/python3 GPU_CHECK_SCALE=small GPU_CHECK_SKIP=e2e bash "$here/tools/gpu_check.sh" "$work/build" "$work/out"
rc=$?
check_summary "$work/out" || rc=1
[ $rc -eq 0 ] && echo "gpu_check.sh ran through on the stand-in"
exit $rc
