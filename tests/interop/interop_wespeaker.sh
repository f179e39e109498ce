#!/usr/bin/env bash
# WeSpeaker, both ways, against its own ResNet classes (pyannote.audio's copy from PyPI,
# tests/interop/wespeaker_check.py):
#  - spkddp export of a trained ResNet34 loads into WeSpeaker's ResNet34 with
#    load_state_dict(strict=True), num_batches_tracked included, and WeSpeaker's embeddings of the
#    same (mean-normalised) features equal spkddp embed's to a relative 1e-5: WeSpeaker's default
#    widths (m_channels 32, embedding 256) on 40 fbank bins, and a Bottleneck ResNet50 of m 8;
#  - a WeSpeaker model saved as its recipes save it (the projection beside the encoder),
#    converted by tools/wespeaker_to_safetensors.py, embeds in spkddp as in WeSpeaker, and a run
#    starts from it (--init-from, the projection kept as the classifier).
. "$(dirname "$0")/lib.sh" "$@"
need_python torch safetensors h5py einops pyannote
WS="$PY $HERE/wespeaker_check.py"
quiet() { "$@" >>log 2>&1; }

quiet $SPKDDP synth --kind speakers --out f40.h5 --dim 40 --speakers 6 --utts-per-speaker 3 --min-frames 30 --max-frames 75 ||
    fail "synth"
quiet run 2 $SPKDDP train --model resnet34 --data f40.h5 --frames 32 --global-batch 6 --lr 0.05 --max-steps 2 \
    --ckpt-dir r34 --progress 0 || fail "train ResNet34"
CKPT=r34/ckpt-000000000002.h5
quiet $SPKDDP export --ckpt $CKPT --out r34.safetensors || fail "export ResNet34"
quiet run 2 $SPKDDP embed --ckpt $CKPT --data f40.h5 --out r34_emb.h5 || fail "embed ResNet34"
$WS export r34.safetensors f40.h5 r34_emb.h5 2>/dev/null || fail "WeSpeaker differs from spkddp (ResNet34)"

quiet run 2 $SPKDDP train --model resnet50 --channels 8 --emb-dim 64 --data f40.h5 --frames 32 --global-batch 6 \
    --max-steps 2 --ckpt-dir r50 --progress 0 || fail "train ResNet50"
quiet $SPKDDP export --ckpt r50/ckpt-000000000002.h5 --out r50.safetensors || fail "export ResNet50"
quiet run 2 $SPKDDP embed --ckpt r50/ckpt-000000000002.h5 --data f40.h5 --out r50_emb.h5 || fail "embed ResNet50"
$WS export r50.safetensors f40.h5 r50_emb.h5 2>/dev/null || fail "WeSpeaker differs from spkddp (ResNet50)"

mkdir -p ws
$WS make-ws ws 40 32 6 2>/dev/null || fail "a WeSpeaker model"
$PY "$HERE/../../tools/wespeaker_to_safetensors.py" --checkpoint ws/model.pt --out ws.safetensors >>log ||
    fail "convert"
quiet run 2 $SPKDDP embed --ckpt ws.safetensors --data f40.h5 --out ws_emb.h5 || fail "embed the converted model"
$WS compare-ws ws f40.h5 ws_emb.h5 2>/dev/null || fail "spkddp differs from WeSpeaker on its converted model"
quiet run 2 $SPKDDP train --model resnet34 --channels 8 --emb-dim 32 --frames 32 --data f40.h5 --global-batch 6 \
    --epochs 1 --init-from ws.safetensors --ckpt-dir ft --progress 0 || fail "fine-tune from the converted model"
grep -q "initialised from ws.safetensors" log || fail "no initialisation line"
finish
