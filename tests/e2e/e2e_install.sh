#!/usr/bin/env bash
# `cmake --install`: e2e_install.sh BUILD_DIR WORKDIR
#   - installs into a fresh prefix: bin/spkddp and, in a CUDA build, lib/spkddp/libspkddp_cuda.so;
#   - the installed spkddp runs from there (synth, a training step on the CPU); --version names
#     the libraries under each floor and, in a CUDA build, the CUDA libraries its module loaded.
set -u
build=$1
work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
cmake --install "$build" --prefix "$work/prefix" >install.log 2>&1 || { cat install.log; echo "FAIL: cmake --install"; exit 1; }
spk=$work/prefix/bin/spkddp
[ -x "$spk" ] || { echo "FAIL: no $spk"; exit 1; }
"$spk" --version >version.txt 2>&1 || fail "--version: $(cat version.txt)"
for line in "^spkddp [0-9]" "^CUDA: " "^CPU: .*OpenBLAS [0-9]" "^MPI: " "^I/O: HDF5 [0-9.]+ \(parallel\)"; do
    grep -qE "$line" version.txt || fail "--version has no line /$line/: $(cat version.txt)"
done
if grep -q "SPKDDP_CUDA:BOOL=ON" "$build/CMakeCache.txt"; then
    ls "$work"/prefix/lib*/spkddp/libspkddp_cuda.so >/dev/null 2>&1 || fail "the CUDA module was not installed"
    grep -q "^CUDA: CUDA runtime" version.txt || fail "the installed spkddp does not load its module: $(cat version.txt)"
fi
"$spk" synth --kind speakers --out sp.h5 --dim 16 --speakers 4 --utts-per-speaker 4 --min-frames 24 --max-frames 32 \
    >synth.log 2>&1 || fail "synth: $(tail -2 synth.log)"
"$spk" train --data sp.h5 --model ecapa --channels 8 --attention-channels 4 --se-channels 4 --emb-dim 8 --frames 24 \
    --global-batch 4 --epochs 1 --max-steps 1 --ckpt-dir ck --progress 0 >train.log 2>&1 || fail "train: $(tail -2 train.log)"
[ -f ck/ckpt-000000000001.h5 ] || fail "no checkpoint"
echo "installed: $(cd prefix && find . -type f | sort | tr '\n' ' ')"
cat version.txt
[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all checks passed"
