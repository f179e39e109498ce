#!/usr/bin/env bash
# The GPU bundle, as a GPU machine without our dependencies would run it (tests/bundle/tests.cmake):
#   bundle_test.sh SRC WORK
# 1. tools/gpu_bundle.sh builds it; it is at most 48 MiB.
# 2. Every binary and carried library needs only the host libraries tools/bundle_host_libs.txt
#    allows, or ones the bundle carries; the binaries' only search path is $ORIGIN/../lib.
# 3. In a stripped environment (env -i: no LD_LIBRARY_PATH), through env.sh: every library but
#    the host's resolves inside the bundle; spkddp's CUDA module loads; spkddp synthesises and
#    trains a world of one with no launcher, on the CPU, saying that no CUDA driver is
#    installed; the GPU tests report skipped (77); a kernel test's CPU checks pass.
# 4. The stand-in bundle (--stand-in: the stand-in's twins the tests' build BUILD already has,
#    packed quickly) runs its gpu_check.sh in a stripped environment: every step passes or says
#    why it cannot run here, at most 8 files come back (tests/cuda_emu/gpu_check_summary.sh).
#   bundle_test.sh SRC WORK BUILD
set -u
src=$1
work=$2
build=$3
. "$src/tests/bundle/lib.sh"
. "$src/tests/cuda_emu/gpu_check_summary.sh"
mkdir -p "$work" && cd "$work" || exit 1
rm -rf gpu gpu-stand-in unpacked unpacked-stand-in results run
# One compile at a time: ctest counts this test as one processor, and a second compiler beside
# the test ctest runs next to it would leave that test's ranks half a core each.
export SPKDDP_BUNDLE_BUILD=$work/build SPKDDP_BUNDLE_JOBS=${SPKDDP_BUNDLE_JOBS:-1}
export HOME=$work TMPDIR=$work

# 1. build, size
bash "$src/tools/gpu_bundle.sh" "$work/gpu" || { echo "FAIL: gpu_bundle.sh"; exit 1; }
size=$(du -sb gpu | awk '{print $1}')
echo "bundle: $size bytes ($(awk -v b="$size" 'BEGIN { printf "%.1f", b / 1048576 }') MiB)"
[ "$size" -le $((48 << 20)) ] || fail "the bundle is $size bytes, over 48 MiB"
for f in gpu_check.sh env.sh payload.tar.xz MANIFEST; do [ -f "gpu/$f" ] || fail "the bundle has no $f"; done

# 2. what the binaries need
mkdir unpacked && tar -xJf gpu/payload.tar.xz -C unpacked || { echo "FAIL: cannot unpack"; exit 1; }
host_re=$(grep -v '^#' "$src/tools/bundle_host_libs.txt" | grep . | paste -sd'|')
launcher=(unpacked/bin/mpiexec.hydra unpacked/bin/hydra_pmi_proxy unpacked/tests/make_bad_data)
for f in unpacked/app/* unpacked/tests/test_* "${launcher[@]}" unpacked/lib/*; do
    for n in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        [[ "$n" =~ ^($host_re)$ ]] || [ -e "unpacked/lib/$n" ] || fail "$f needs $n, neither the host's nor carried"
    done
done
for f in unpacked/app/* unpacked/tests/test_* "${launcher[@]}"; do
    paths=$(readelf -d "$f" | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]/\2/p' | paste -sd' ')
    [ "$paths" = '$ORIGIN/../lib' ] || fail "$f searches '$paths', not only \$ORIGIN/../lib"
done
n_tests=$(ls unpacked/tests/test_* | wc -l)
[ "$n_tests" -ge 20 ] || fail "only $n_tests test programs in the bundle"
echo "needs checked: $(ls unpacked/app unpacked/tests | grep -c .) binaries, $(ls unpacked/lib | wc -l) carried libraries"

# 3. the CPU, in a stripped environment
mkdir run && cd run || exit 1
env_sh=$work/gpu/env.sh
in_bundle() {  # in_bundle command...: after . env.sh, stripped
    stripped SPKDDP_BUNDLE_DIR="$work/unpacked-env" -- bash -c '. "$0" 2>env.log && "$@"' "$env_sh" "$@"
}
in_bundle bash -c 'ldd "$(command -v spkddp)"' >ldd.txt 2>&1 || fail "ldd through env.sh (log: $(cat env.log))"
while read -r name _ path _; do
    [[ "$name" =~ ^($host_re)$ ]] && continue
    [[ "$path" == "$work/unpacked-env/"* ]] || fail "$name resolves to '$path', outside the bundle"
done < <(grep '=>' ldd.txt)
grep -q "not found" ldd.txt && fail "libraries not found: $(grep 'not found' ldd.txt | tr '\n' ' ')"
# spkddp's CUDA module (the bundle's lib/) loads, with the libraries env.sh found.
in_bundle spkddp --version >version.txt 2>&1 || fail "spkddp --version in the bundle: $(cat version.txt)"
grep -q "^CUDA: CUDA runtime" version.txt || fail "the bundle's CUDA module does not load: $(cat version.txt)"
in_bundle spkddp synth --kind speakers --out sp.h5 --dim 16 --speakers 6 --utts-per-speaker 4 --min-frames 24 \
    --max-frames 40 >synth.log 2>&1 || fail "synth in the bundle: $(tail -2 synth.log)"
in_bundle spkddp train --data sp.h5 --model ecapa --channels 16 --attention-channels 8 --se-channels 8 --emb-dim 16 \
    --frames 24 --global-batch 8 --epochs 1 --max-steps 2 --ckpt-dir ck --progress 0 >train.log 2>&1 ||
    fail "training a world of one without a launcher: $(tail -3 train.log)"
# No NVIDIA GPU on this machine's bus: the CPU is taken without a device line (with one, the
# missing driver would be named).
grep -q "^device:" train.log && fail "a device line on a machine without a GPU: $(grep device: train.log)"
[ -f ck/ckpt-000000000002.h5 ] || fail "no checkpoint after 2 steps"
# Two ranks through the bundle's own launcher (MPICH's hydra, first on the PATH after env.sh).
in_bundle mpiexec -n 2 spkddp bench --device cpu --channels 8 --batch 2 --frames 20 --steps 1 --warmup 0 >mpi.log 2>&1 ||
    fail "two ranks through the bundle's mpiexec: $(tail -2 mpi.log)"
grep -q "x 2 ranks" mpi.log || fail "the bundle's mpiexec did not start a world of two: $(grep bench: mpi.log)"
in_bundle "$work/unpacked-env/tests/test_gpu_device" >device.log 2>&1
rc=$?
[ $rc -eq 77 ] || fail "test_gpu_device without a driver exited $rc, not 77 (skipped)"
in_bundle "$work/unpacked-env/tests/test_kernel_conv1d" cpu cpu-staged >kernel.log 2>&1 ||
    fail "the bundle's conv1d test on the CPU: $(tail -2 kernel.log)"
in_bundle "$work/unpacked-env/tests/test_kernel_conv1d" cuda >kernel_cuda.log 2>&1
rc=$?
[ $rc -eq 77 ] || fail "the bundle's conv1d test on cuda without a GPU exited $rc, not 77"
cd "$work" || exit 1

# 4. the stand-in bundle's gpu_check.sh
SPKDDP_BUNDLE_FROM=$build SPKDDP_BUNDLE_XZ=1 bash "$src/tools/gpu_bundle.sh" "$work/gpu-stand-in" --stand-in ||
    { echo "FAIL: gpu_bundle.sh --stand-in"; exit 1; }
stripped SPKDDP_BUNDLE_DIR="$work/unpacked-stand-in" TORCH_PYTHON=/nonexistent/python3 GPU_CHECK_SCALE=small \
    GPU_CHECK_SKIP=e2e -- bash gpu-stand-in/gpu_check.sh "$work/results" >gpu_check.log 2>&1
rc=$?
tail -30 gpu_check.log
[ $rc -eq 0 ] || fail "the stand-in bundle's gpu_check.sh exited $rc"
check_summary "$work/results" || fail "the stand-in bundle's summary (above)"
grep -qE "^libraries +.*libmpich\.so\.12=$work/unpacked-stand-in/" results/summary.txt ||
    fail "MPICH does not come from the bundle"
finish
