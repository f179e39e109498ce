#!/usr/bin/env bash
# The bundle's library search against the wheels a GPU machine's PyTorch brings (tests/bundle):
#   bundle_cuda_wheels.sh SRC WORK VENV
# In a venv with the cuBLAS, cuDNN and NCCL wheels PyTorch 2.11.0 pins (cuda_wheels.txt), with
# CUDA_HOME pointing nowhere, env.sh takes each library from the venv's nvidia/*/lib, ldd of
# spkddp's CUDA module agrees, the module loads (spkddp --version), and spkddp trains, in a
# stripped environment. Skipped (77) when the
# venv cannot be made (no PyPI). WORK holds the bundle bundle_test.sh built.
set -u
src=$1
work=$2
venv=$3
. "$src/tests/bundle/lib.sh"
py=$(bash "$src/tests/interop/pyenv.sh" "$venv" "$src/tests/bundle/cuda_wheels.txt") || exit $?
[ -f "$work/gpu/env.sh" ] || { echo "FAIL: no bundle in $work/gpu (bundle_test.sh makes it)"; exit 1; }
run=$work/wheels
rm -rf "$run" && mkdir -p "$run" && cd "$run" || exit 1
export HOME=$run TMPDIR=$run
site=$("$py" -c 'import site; print(site.getsitepackages()[0])')
stripped SPKDDP_BUNDLE_DIR="$run/unpacked" CUDA_HOME=/nonexistent SPKDDP_PYTHON="$py" -- \
    bash -c '. "$0" && ldd "$(dirname "$(command -v spkddp)")/../lib/libspkddp_cuda.so" >ldd.txt &&
             spkddp --version >version.txt && spkddp synth --out toy.h5 >/dev/null &&
             spkddp train --data toy.h5 --epochs 1 --ckpt-dir ck --progress 0' "$work/gpu/env.sh" >run.log 2>&1 ||
    fail "the bundle with the wheels' libraries: $(tail -3 run.log)"
cat run.log
for lib in libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
    grep -q "spkddp bundle: $lib from $site/nvidia/[a-z0-9]*/lib" run.log || fail "env.sh did not take $lib from the wheels"
    grep -qE "^\s$lib => $site/nvidia/[a-z0-9]+/lib/$lib " ldd.txt || fail "ldd does not load $lib from the wheels"
done
grep -q "^CUDA: CUDA runtime" version.txt || fail "spkddp's CUDA module does not load with the wheels: $(cat version.txt)"
grep -q "cross-rank weight difference" run.log || fail "training did not finish"
finish
