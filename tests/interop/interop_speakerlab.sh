#!/usr/bin/env bash
# 3D-Speaker, both ways, against its own CAM++ class (speakerlab from PyPI,
# tests/interop/speakerlab_check.py):
#  - spkddp export of a trained CAM++ loads into speakerlab's CAMPPlus with
#    load_state_dict(strict=True), num_batches_tracked included, and its embeddings of the same
#    (mean-normalised) features equal spkddp embed's to a relative 1e-5, on utterances long
#    enough for several 100-frame CAM segments;
#  - a CAMPPlus saved as 3D-Speaker saves it (the encoder's state_dict, the classifier's beside
#    it), converted by tools/speakerlab_to_safetensors.py, embeds in spkddp as in 3D-Speaker, and
#    a run starts from it (--init-from, the classifier kept).
. "$(dirname "$0")/lib.sh" "$@"
need_python torch safetensors h5py speakerlab
SL="$PY $HERE/speakerlab_check.py"
quiet() { "$@" >>log 2>&1; }

quiet $SPKDDP synth --kind speakers --out f40.h5 --dim 40 --speakers 4 --utts-per-speaker 2 --min-frames 150 \
    --max-frames 450 || fail "synth"
quiet run 2 $SPKDDP train --model campplus --channels 32 --growth-rate 16 --emb-dim 64 --data f40.h5 --frames 300 \
    --global-batch 4 --max-steps 2 --ckpt-dir c --progress 0 || fail "train CAM++"
CKPT=c/ckpt-000000000002.h5
quiet $SPKDDP export --ckpt $CKPT --out c.safetensors || fail "export CAM++"
quiet run 2 $SPKDDP embed --ckpt $CKPT --data f40.h5 --out c_emb.h5 || fail "embed CAM++"
$SL export c.safetensors f40.h5 c_emb.h5 2>/dev/null || fail "3D-Speaker differs from spkddp"

mkdir -p sl
$SL make sl 40 24 2>/dev/null || fail "a 3D-Speaker model"
$PY - <<'PY' || fail "a classifier"
import torch
torch.manual_seed(3)
torch.save({"weight": torch.nn.init.xavier_uniform_(torch.empty(4, 24))}, "sl/classifier.ckpt")
PY
$PY "$HERE/../../tools/speakerlab_to_safetensors.py" --checkpoint sl/model.pt --classifier sl/classifier.ckpt \
    --out sl.safetensors >>log || fail "convert"
quiet run 2 $SPKDDP embed --ckpt sl.safetensors --data f40.h5 --out sl_emb.h5 || fail "embed the converted model"
$SL compare sl f40.h5 sl_emb.h5 2>/dev/null || fail "spkddp differs from 3D-Speaker on its converted model"
quiet run 2 $SPKDDP train --model campplus --channels 32 --growth-rate 16 --emb-dim 24 --frames 64 --data f40.h5 \
    --global-batch 4 --epochs 1 --init-from sl.safetensors --ckpt-dir ft --progress 0 || fail "fine-tune from it"
grep -q "initialised from sl.safetensors" log || fail "no initialisation line"
finish
