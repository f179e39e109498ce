#!/usr/bin/env bash
# SpeechBrain, both ways, against its own ECAPA_TDNN (PyPI speechbrain, tests/interop/speechbrain_check.py):
#  - spkddp export of a trained ECAPA loads into ECAPA_TDNN and Classifier with
#    load_state_dict(strict=True), num_batches_tracked included, and SpeechBrain's embeddings of
#    the same (mean-normalised) features equal spkddp embed's to a relative 1e-5: a small model,
#    and SpeechBrain's default widths (C=512, 80 fbank bins);
#  - a SpeechBrain model saved as its recipes save it, converted by
#    tools/speechbrain_to_safetensors.py, embeds in spkddp as in SpeechBrain, and a run starts
#    from it (--init-from, classifier kept for the same speakers, dropped for others).
. "$(dirname "$0")/lib.sh" "$@"
need_python torch speechbrain safetensors h5py
SB="$PY $HERE/speechbrain_check.py"
quiet() { "$@" >>log 2>&1; }

train_small_ecapa
quiet $SPKDDP export --ckpt "$CKPT" --out small.safetensors || fail "export"
quiet run 2 $SPKDDP embed --ckpt "$CKPT" --data train.h5 --out small_emb.h5 || fail "embed"
$SB export small.safetensors train.h5 small_emb.h5 2>/dev/null || fail "SpeechBrain differs from spkddp (small model)"

quiet $SPKDDP synth --kind speakers --out f80.h5 --dim 80 --speakers 4 --utts-per-speaker 2 --min-frames 30 --max-frames 70 || fail "synth f80"
quiet run 1 $SPKDDP train --model ecapa --data f80.h5 --frames 30 --batch 4 --optimizer adam --lr 0.001 --max-steps 1 \
    --ckpt-dir ck80 --progress 0 || fail "train C=512"
quiet $SPKDDP export --ckpt ck80/ckpt-000000000001.h5 --out c512.safetensors || fail "export C=512"
quiet run 2 $SPKDDP embed --ckpt ck80/ckpt-000000000001.h5 --data f80.h5 --out c512_emb.h5 || fail "embed C=512"
$SB export c512.safetensors f80.h5 c512_emb.h5 2>/dev/null || fail "SpeechBrain differs from spkddp (C=512, F=80)"

mkdir -p sb
$SB make-sb sb 24 12 2>/dev/null || fail "a SpeechBrain model"
$PY "$HERE/../../tools/speechbrain_to_safetensors.py" --embedding-model sb/embedding_model.ckpt \
    --classifier sb/classifier.ckpt --out sb.safetensors || fail "convert"
quiet run 2 $SPKDDP embed --ckpt sb.safetensors --data train.h5 --out sb_emb.h5 || fail "embed the converted model"
$SB compare-sb sb train.h5 sb_emb.h5 2>/dev/null || fail "spkddp differs from SpeechBrain on its converted model"
small="--model ecapa --channels 32 --attention-channels 16 --se-channels 16 --emb-dim 24 --frames 40 --epochs 1"
quiet run 2 $SPKDDP train $small --data train.h5 --global-batch 8 --init-from sb.safetensors --ckpt-dir ft --progress 0 \
    || fail "fine-tune from the converted model"
grep -q "initialised from sb.safetensors" log || fail "no initialisation line"
quiet $SPKDDP synth --kind speakers --out other.h5 --dim 24 --speakers 5 --first-speaker 300 --utts-per-speaker 6 \
    --min-frames 40 --max-frames 90 || fail "synth other speakers"
expect_error 4 "classifier is \[5, 24\] \(5 classes\); for a new speaker set use --init-head drop" -- \
    $SPKDDP train $small --data other.h5 --batch 4 --init-from sb.safetensors
quiet run 2 $SPKDDP train $small --data other.h5 --global-batch 8 --init-from sb.safetensors --init-head drop \
    --ckpt-dir ft_drop --progress 0 || fail "fine-tune on other speakers"
$PY "$HERE/../../tools/speechbrain_to_safetensors.py" --embedding-model sb/classifier.ckpt --out x.safetensors 2>err.txt
grep -q "no tensor 'blocks.0.conv.conv.weight'" err.txt || fail "converter on a classifier file: $(cat err.txt)"
finish
