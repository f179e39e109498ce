#!/usr/bin/env bash
# The CUDA build's module (kernels/cuda_module.h): e2e_cuda_module.sh SPKDDP MPIEXEC WORKDIR
#   - spkddp needs none of the CUDA runtime, cuBLAS, cuDNN and NCCL; its module needs them all;
#   - the module exports its table alone, and the program exports every function of its own
#     that the module calls;
#   - `spkddp --version` opens the module and names the libraries' versions (no GPU needed);
#   - on a machine without an NVIDIA GPU a command loads none of the CUDA libraries, unless
#     SPKDDP_CUDA_PROBE=1, when the query goes through the module (no driver here: said so);
#   - spkddp copied without its module (a login node without the CUDA libraries): --version
#     says why the module cannot be loaded, and commands run on the CPU; beside an empty file
#     or another build's module (a table of another size), likewise.
. "$(dirname "$0")/lib.sh" "$1" "$2" "$3"
module=$(dirname "$SPKDDP")/libspkddp_cuda.so
[ -f "$module" ] || { fail "no $module beside $SPKDDP"; finish; }
cuda_re='^lib(cudart|cublas|cublasLt|cudnn|nccl)\.so'

needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
! needed "$SPKDDP" | grep -qE "$cuda_re" || fail "spkddp itself needs $(needed "$SPKDDP" | grep -E "$cuda_re" | tr '\n' ' ')"
for lib in cudart cublas cudnn nccl; do
    needed "$module" | grep -q "^lib$lib\.so" || fail "the module does not need lib$lib"
done
echo "ok  the CUDA libraries are the module's: $(needed "$module" | grep -E "$cuda_re" | tr '\n' ' ')"

exported=$(nm -D --defined-only "$module" | awk '{print $3}')
[ "$exported" = spk_cuda_module_table ] || fail "the module exports more than its table: $(echo "$exported" | head -5 | tr '\n' ' ')"
for f in $(nm -D --undefined-only "$module" | awk '$2 ~ /^spk_/ {print $2}'); do
    nm -D --defined-only "$SPKDDP" | grep -q " $f$" || fail "the module calls $f, which spkddp does not export"
done
echo "ok  the module exports its table; spkddp exports what it calls"

$SPKDDP --version >version.txt 2>&1 || fail "--version: $(cat version.txt)"
grep -qE "^CUDA: CUDA runtime [0-9.]+ .*cuBLAS [0-9.]+, cuDNN [0-9.]+, NCCL [0-9.]+" version.txt ||
    fail "--version does not name the CUDA libraries: $(cat version.txt)"
echo "ok  $(grep CUDA: version.txt)"

bench="bench --channels 8 --batch 2 --frames 20 --steps 1 --warmup 0"
if [ -e /dev/nvidiactl ] || [ -e /dev/dxg ] || grep -qs 0x10de /sys/bus/pci/devices/*/vendor; then
    echo "--  this machine shows an NVIDIA GPU: the libraries are loaded, as they should be"
else
    LD_DEBUG=files $SPKDDP $bench >bench.log 2>ld.log || fail "bench: $(tail -2 bench.log)"
    ! grep -qE "file=lib(cudart|cublas|cudnn|nccl)" ld.log || fail "a CPU run loaded $(grep -oE "file=lib(cudart|cublas|cudnn|nccl)[^ ]*" ld.log | sort -u | tr '\n' ' ')"
    echo "ok  no GPU here: a run loads none of the CUDA libraries"
    # Told to probe anyway, a query goes through the module to the CUDA runtime, which finds no driver.
    SPKDDP_CUDA_PROBE=1 LD_DEBUG=files $SPKDDP $bench --device cuda >probe.log 2>ld_probe.log
    grep -q "file=libcublas" ld_probe.log || fail "SPKDDP_CUDA_PROBE=1 did not load the CUDA libraries"
    grep -q "spkddp: error: bench: --device cuda: no usable CUDA device: no CUDA driver is installed" ld_probe.log ||
        fail "SPKDDP_CUDA_PROBE=1 --device cuda: $(grep error ld_probe.log)"
    echo "ok  SPKDDP_CUDA_PROBE=1: the module's device query answers: $(grep -o 'no usable.*' ld_probe.log)"
fi

mkdir alone && cp "$SPKDDP" alone/spkddp || fail "copy"
alone/spkddp --version >alone.txt 2>&1 || fail "--version without the module: $(cat alone.txt)"
grep -q "^CUDA: the CUDA backend (libspkddp_cuda.so) could not be loaded: .*No such file" alone.txt ||
    fail "--version without the module: $(cat alone.txt)"
alone/spkddp synth --kind speakers --out sp.h5 --dim 8 --speakers 4 --utts-per-speaker 2 --min-frames 20 \
    --max-frames 24 >synth.log 2>&1 || fail "synth without the module: $(tail -2 synth.log)"
alone/spkddp $bench --device cpu >alone_bench.log 2>&1 || fail "bench without the module: $(tail -2 alone_bench.log)"
echo "ok  without the module: $(sed -n 's/^CUDA: //p' alone.txt | cut -c1-60)...; synth and bench run"

# A module that is not one (an empty file), and one from another build (a table of another
# size): each refused with its reason, and CPU commands still run.
mkdir broken other && cp "$SPKDDP" broken/spkddp && cp "$SPKDDP" other/spkddp || fail "copy"
: >broken/libspkddp_cuda.so
printf 'const struct { unsigned long size; } spk_cuda_module_table = {1};\n' >other.c
cc -shared -fPIC -o other/libspkddp_cuda.so other.c || fail "cannot build a module of another build"
broken/spkddp --version 2>&1 | grep -q "^CUDA: the CUDA backend (libspkddp_cuda.so) could not be loaded: .*libspkddp_cuda.so" ||
    fail "an empty module: $(broken/spkddp --version 2>&1 | grep CUDA:)"
other/spkddp --version 2>&1 | grep -q "^CUDA: the CUDA backend (libspkddp_cuda.so) is from another build of spkddp" ||
    fail "another build's module: $(other/spkddp --version 2>&1 | grep CUDA:)"
other/spkddp $bench --device cpu >other_bench.log 2>&1 || fail "bench beside another build's module: $(tail -2 other_bench.log)"
echo "ok  an empty module and another build's are refused with their reasons; the CPU still runs"
finish
