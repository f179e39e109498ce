#!/usr/bin/env bash
# A driver older than the CUDA runtime: `--device cuda` stops with one line naming both
# versions (exit 2, before any output file); `--device auto` trains on the CPU and says why.
# old_driver.sh SPKDDP_EMU WORKDIR
set -u
spk=$1
work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
"$spk" synth --out toy.h5 >/dev/null || exit 1
export SPKDDP_CUDA_EMU_DRIVER=12.4
"$spk" train --data toy.h5 --device cuda --epochs 1 --ckpt-dir ck_cuda >cuda.log 2>&1
rc=$?
cat cuda.log
[ $rc -eq 2 ] || { echo "FAIL: --device cuda with an old driver exited $rc, not 2"; exit 1; }
[ "$(grep -c '^spkddp: error:' cuda.log)" -eq 1 ] || { echo "FAIL: not exactly one error line"; exit 1; }
grep -q "spkddp: error: .*--device cuda: the CUDA driver supports CUDA 12.4 but this spkddp was built with the CUDA 13.0 runtime" cuda.log ||
    { echo "FAIL: the error does not name both versions"; exit 1; }
[ ! -e ck_cuda ] || [ -z "$(ls -A ck_cuda)" ] || { echo "FAIL: --device cuda wrote checkpoints"; exit 1; }
"$spk" train --data toy.h5 --device auto --epochs 1 --ckpt-dir ck_auto >auto.log 2>&1 || { cat auto.log; exit 1; }
grep -q "device: the CUDA driver supports CUDA 12.4 .*; running on the CPU" auto.log ||
    { cat auto.log; echo "FAIL: --device auto does not say why it runs on the CPU"; exit 1; }
echo "an old driver is named, not mistaken for a missing GPU"
