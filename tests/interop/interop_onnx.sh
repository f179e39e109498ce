#!/usr/bin/env bash
# ONNX export (tests/interop/onnx_check.py): the graph passes onnx.checker's full check and
# ONNX Runtime gives spkddp embed's embeddings to a relative 1e-4 from the raw frames, for
# utterances of 5 to 400 frames (ECAPA), 9 to 60 (ResNet34) and 3 to 450 (CAM++), one at a time and in batches of
# equal lengths (dynamic batch and frame axes).
. "$(dirname "$0")/lib.sh" "$@"
need_python onnx onnxruntime h5py numpy
train_small_ecapa
$SPKDDP synth --kind speakers --out lengths.h5 --dim 24 --speakers 6 --first-speaker 40 --utts-per-speaker 6 \
    --min-frames 5 --max-frames 12 >/dev/null || fail "synth short"
$SPKDDP synth --kind speakers --out long.h5 --dim 24 --speakers 3 --first-speaker 60 --utts-per-speaker 3 \
    --min-frames 400 --max-frames 400 >/dev/null || fail "synth long"
$SPKDDP export --ckpt "$CKPT" --format onnx --out ecapa.onnx || fail "export"
for d in train lengths long; do
    run 2 $SPKDDP embed --ckpt "$CKPT" --data $d.h5 --out ${d}_emb.h5 >/dev/null || fail "embed $d"
    $PY "$HERE/onnx_check.py" ecapa.onnx $d.h5 ${d}_emb.h5 || fail "ONNX Runtime differs from spkddp on $d.h5"
done
# WeSpeaker's ResNet34 (small width), utterances from its shortest (9 frames: two frames after
# three stride-2 stages) up
$SPKDDP synth --kind speakers --out r_train.h5 --dim 16 --speakers 4 --utts-per-speaker 4 --min-frames 9 \
    --max-frames 60 >/dev/null || fail "synth resnet"
run 2 $SPKDDP train --model resnet34 --channels 8 --emb-dim 16 --frames 24 --data r_train.h5 --epochs 1 \
    --global-batch 8 --ckpt-dir r34 --progress 0 >/dev/null || fail "train resnet34"
RCKPT=$(ls r34/ckpt-*.h5 | tail -1)
$SPKDDP export --ckpt "$RCKPT" --format onnx --out resnet34.onnx || fail "export resnet34"
run 2 $SPKDDP embed --ckpt "$RCKPT" --data r_train.h5 --out r_emb.h5 >/dev/null || fail "embed resnet34"
$PY "$HERE/onnx_check.py" resnet34.onnx r_train.h5 r_emb.h5 || fail "ONNX Runtime differs from spkddp (resnet34)"
# 3D-Speaker's CAM++ (small width), from its shortest utterances (3 frames) to several CAM segments
$SPKDDP synth --kind speakers --out c_train.h5 --dim 16 --speakers 4 --utts-per-speaker 4 --min-frames 3 \
    --max-frames 450 >/dev/null || fail "synth campplus"
run 2 $SPKDDP train --model campplus --channels 16 --growth-rate 8 --emb-dim 16 --frames 24 --data c_train.h5 \
    --epochs 1 --global-batch 8 --ckpt-dir cpp --progress 0 >/dev/null || fail "train campplus"
CCKPT=$(ls cpp/ckpt-*.h5 | tail -1)
$SPKDDP export --ckpt "$CCKPT" --format onnx --out campplus.onnx || fail "export campplus"
run 2 $SPKDDP embed --ckpt "$CCKPT" --data c_train.h5 --out c_emb.h5 >/dev/null || fail "embed campplus"
$PY "$HERE/onnx_check.py" campplus.onnx c_train.h5 c_emb.h5 || fail "ONNX Runtime differs from spkddp (campplus)"
$SPKDDP train --data lengths.h5 --epochs 1 --batch 4 --ckpt-dir lin --progress 0 >/dev/null || fail "train linear"
expect_error 2 "the ONNX export covers --model ecapa, resnet18, resnet34, resnet50, resnet101, resnet152, resnet221, resnet293, campplus; this checkpoint holds model linear" -- \
    $SPKDDP export --ckpt "$(ls lin/ckpt-*.h5 | tail -1)" --format onnx --out lin.onnx
[ ! -e lin.onnx ] || fail "a refused export left a file"
finish
