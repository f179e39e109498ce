#!/usr/bin/env bash
# The GPU bundle: one folder that runs tools/gpu_check.sh (and spkddp itself) on a GPU machine
# where none of spkddp's dependencies are installed and nothing can be installed.
#   tools/gpu_bundle.sh OUT_DIR [--stand-in]
# Builds, in ${SPKDDP_BUNDLE_BUILD:-build-bundle}, spkddp and the GPU test programs for Hopper
# (sm_90 machine code plus compute_90 PTX, which newer GPUs compile at load), with
# -DSPKDDP_BUNDLE=ON (HDF5 and the CUDA runtime linked in) and without what the checks do not
# need (audio decoding, oneDNN); every other library they use travels in the bundle. The host
# must give only glibc, libstdc++/libgcc, the CUDA driver, and cuBLAS, cuDNN and NCCL, which
# the bundle's env.sh finds at run time (SPKDDP_CUDA_LIBS, else CUDA's lib64, else an installed
# PyTorch's nvidia/*/lib wheels; docs/cuda.md). The binaries need no -march beyond x86-64.
#
# OUT_DIR holds:
#   gpu_check.sh     bash OUT_DIR/gpu_check.sh [RESULTS_DIR]: unpacks, finds the libraries, runs
#                    the checks (tools/gpu_check.sh; results in RESULTS_DIR, default
#                    ./gpu_check_out, at most 8 files)
#   env.sh           `. OUT_DIR/env.sh`: unpacks, puts spkddp on the PATH and the CUDA
#                    libraries on LD_LIBRARY_PATH, for running anything by hand
#   payload.tar.xz   the binaries (app/, tests/), the libraries (lib/), the scripts (tools/)
#   MANIFEST         what was built from which commit, each carried library, sizes
# Unpacked once per payload into ${SPKDDP_BUNDLE_DIR:-${TMPDIR:-/tmp}/spkddp-bundle-<hash>}.
#
# --stand-in packs the CUDA stand-in's twins (tests/cuda_emu: the same code on a CPU
# implementation of CUDA, cuBLAS, cuDNN and NCCL) in place of the CUDA binaries, so the
# bundle's whole path runs on a machine without a GPU (tests/bundle). With it,
# SPKDDP_BUNDLE_FROM=BUILD_DIR takes the twins already built there (the tests' own build)
# instead of building them again. SPKDDP_BUNDLE_XZ sets xz's level: the default, 3, packs the
# 161 MiB in 14 s on 2 cores into 24 MiB; 7 takes 40 s for 18 MiB.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 OUT_DIR [--stand-in]" >&2; exit 2; }
out=$1
stand_in=0
[ "${2:-}" = --stand-in ] && stand_in=1
src=$(cd "$(dirname "$0")/.." && pwd)
bdir=${SPKDDP_BUNDLE_BUILD:-$src/build-bundle}
jobs=${SPKDDP_BUNDLE_JOBS:-$(nproc)}
from=${SPKDDP_BUNDLE_FROM:-}
[ -z "$from" ] || [ $stand_in -eq 1 ] || { echo "gpu_bundle.sh: SPKDDP_BUNDLE_FROM is for --stand-in only" >&2; exit 2; }

# ---- build --------------------------------------------------------------------------------------
[ -n "$from" ] || cmake -S "$src" -B "$bdir" -DCMAKE_BUILD_TYPE=Release -DSPKDDP_BUNDLE=ON -DSPKDDP_MEDIA=OFF -DSPKDDP_DNNL=OFF \
    -DSPKDDP_NATIVE=OFF -DSPKDDP_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DSPKDDP_CUDA_EMU=$([ $stand_in -eq 1 ] && echo ON || echo OFF) \
    >"$bdir.configure.log" 2>&1 || { cat "$bdir.configure.log"; exit 1; }
# The kernel tests are those tests/kernels/tests.cmake registers (SPK_KERNEL_TESTS).
mapfile -t kernel_ops < <(awk '/^set\(SPK_KERNEL_TESTS/ {on = 1; next} on && /\)/ {sub(/\).*/, ""); print; exit} on' \
    "$src/tests/kernels/tests.cmake" | tr ' ' '\n' | grep .)
tests=(test_gpu_device test_gpu_tf32 test_gpu_conv_plans test_gpu_shapes test_gpu_invariant2d)
for op in "${kernel_ops[@]}"; do tests+=("test_kernel_$op"); done
if [ $stand_in -eq 1 ]; then
    targets=(spkddp_emu "${tests[@]/%/_emu}" make_bad_data)
else
    targets=(spkddp "${tests[@]}" make_bad_data)
fi
if [ -n "$from" ]; then
    bdir=$from
    for t in "${targets[@]}"; do
        [ -x "$bdir/tests/$t" ] || { echo "gpu_bundle.sh: $bdir has no tests/$t" >&2; exit 1; }
    done
else
    cmake --build "$bdir" -j"$jobs" --target "${targets[@]}"
fi

# ---- lay out --------------------------------------------------------------------------------------
stage=$(mktemp -d "${TMPDIR:-/tmp}/spkddp-bundle-stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/app" "$stage/bin" "$stage/tests/golden" "$stage/tests/e2e" "$stage/tools" "$stage/lib"
if [ $stand_in -eq 1 ]; then
    cp "$bdir/tests/spkddp_emu" "$stage/app/spkddp"
    for t in "${tests[@]}"; do cp "$bdir/tests/${t}_emu" "$stage/tests/$t"; done
else
    cp "$bdir/app/spkddp" "$stage/app/spkddp"
    cp "$bdir/app/libspkddp_cuda.so" "$stage/lib/"  # its CUDA module, found through $ORIGIN/../lib
    for t in "${tests[@]}"; do cp "$bdir/tests/$t" "$stage/tests/$t"; done
fi
# The two-rank device test (gpu_check's e2e step), with MPICH's own launcher: a host's mpiexec
# may belong to another MPI, whose ranks would each start alone.
cp "$bdir/tests/make_bad_data" "$stage/tests/"
cp "$src/tests/e2e/e2e_device.sh" "$src/tests/e2e/lib.sh" "$stage/tests/e2e/"
for h in mpiexec.hydra hydra_pmi_proxy; do
    p=$(command -v "$h") || { echo "gpu_bundle.sh: no $h here (MPICH's launcher; apt-get install mpich)" >&2; exit 1; }
    cp -L "$p" "$stage/bin/$h"
done
ln -s mpiexec.hydra "$stage/bin/mpiexec"
cp "$src/tools/gpu_check.sh" "$src/tools/bench_pytorch.py" "$src/tools/wespeaker_resnet.py" "$stage/tools/"
cp "$src/tests/golden/make_ecapa_golden.py" "$src/tests/golden/make_resnet_golden.py" "$src/tests/golden/golden_common.py" "$stage/tests/golden/"  # bench_pytorch.py's models

# Carried libraries: every shared library the binaries need, and theirs, except what the host
# gives (glibc, libstdc++/libgcc, the CUDA driver and libraries: tools/bundle_host_libs.txt).
host_re=$(grep -v '^#' "$src/tools/bundle_host_libs.txt" | grep . | paste -sd'|')
declare -A seen=()
module=()  # spkddp's CUDA module, in lib/ (the stand-in's twins have none)
[ -f "$stage/lib/libspkddp_cuda.so" ] && module=("$stage/lib/libspkddp_cuda.so")
queue=("$stage"/app/spkddp "${module[@]}" "$stage"/tests/test_* "$stage"/tests/make_bad_data "$stage"/bin/mpiexec.hydra "$stage"/bin/hydra_pmi_proxy)
while [ ${#queue[@]} -gt 0 ]; do
    f=${queue[0]}
    queue=("${queue[@]:1}")
    while read -r name path; do
        [[ "$name" =~ ^($host_re)$ ]] && continue
        [ -n "${seen[$name]:-}" ] && continue
        [ -f "$path" ] || { echo "gpu_bundle.sh: $f needs $name, which is not found here" >&2; exit 1; }
        seen[$name]=1
        cp -L "$path" "$stage/lib/$name"
        queue+=("$stage/lib/$name")
    done < <(ldd "$f" | awk '/=>/ && $3 ~ /^\// {print $1, $3} /=> not found/ {print $1, "missing"}')
done
# Twins taken from another build search that build's library folders; the bundle's own search
# only $ORIGIN/../lib, as the bundle build links them.
# shellcheck disable=SC2016  # $ORIGIN is for the loader
[ -z "$from" ] || patchelf --set-rpath '$ORIGIN/../lib' "$stage"/app/spkddp "$stage"/tests/test_*
# shellcheck disable=SC2016  # the launcher is the system's, built without a search path of ours
patchelf --set-rpath '$ORIGIN/../lib' "$stage"/bin/mpiexec.hydra "$stage"/bin/hydra_pmi_proxy
strip --strip-unneeded "$stage"/app/spkddp "$stage"/tests/test_* "$stage"/tests/make_bad_data "${module[@]}" 2>/dev/null || true

{
    echo "spkddp GPU bundle$([ $stand_in -eq 1 ] && echo " (CUDA stand-in twins, for testing)")"
    echo "source: $(git -C "$src" describe --always --dirty 2>/dev/null || echo unknown), built $(date -u '+%Y-%m-%d %H:%M UTC') on $(. /etc/os-release && echo "$PRETTY_NAME")"
    echo "CUDA: $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p'), architectures 90 (sm_90 SASS + compute_90 PTX)"
    echo "the host gives: $(grep -v '^#' "$src/tools/bundle_host_libs.txt" | grep . | tr '\n' ' ')"
    # What env.sh must find on the host (none for the stand-in's twins).
    echo "cuda-libs: $(ldd "$stage"/app/spkddp "${module[@]}" "$stage"/tests/test_* 2>/dev/null | awk '{print $1}' |
        grep -E '^lib(cudart|cublas|cublasLt|cudnn|nccl)\.so\.[0-9]+$' | sort -u | tr '\n' ' ')"
    echo "carried libraries:"
    (cd "$stage/lib" && for l in *; do printf '  %-28s %9d bytes\n' "$l" "$(stat -c %s "$l")"; done)
    echo "binaries:"
    (cd "$stage" && for b in app/* tests/test_*; do printf '  %-28s %9d bytes\n' "$b" "$(stat -c %s "$b")"; done)
} >"$stage/MANIFEST"

# ---- pack -------------------------------------------------------------------------------------------
rm -rf "$out"
mkdir -p "$out"
tar -C "$stage" -cf - . | xz -T"$jobs" -"${SPKDDP_BUNDLE_XZ:-3}" >"$out/payload.tar.xz"
cp "$stage/MANIFEST" "$out/MANIFEST"
cp "$src/tools/bundle_env.sh" "$out/env.sh"
cat >"$out/gpu_check.sh" <<'EOF'
#!/usr/bin/env bash
# bash gpu_check.sh [RESULTS_DIR]: the bundle's checks (MANIFEST says what it holds).
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=/dev/null
. "$here/env.sh" || exit 1
exec bash "$SPKDDP_BUNDLE_ROOT/tools/gpu_check.sh" "$SPKDDP_BUNDLE_ROOT" "${1:-gpu_check_out}"
EOF
chmod +x "$out/gpu_check.sh"
echo "gpu_bundle.sh: $out: $(du -sb "$out" | awk '{printf "%.1f MiB", $1 / 1048576}') ($(du -sb "$stage" | awk '{printf "%.1f MiB", $1 / 1048576}') unpacked, ${#seen[@]} carried libraries)"
