#!/usr/bin/env bash
# ecapa-av with its face encoder against PyTorch (tests/interop/av_check.py): talking-face videos
# (tests/e2e/make_face_video) prepared as gray 24 x 24 JPEG frames, a model trained two epochs
# with modality dropout on 2 ranks and exported; SpeechBrain's ECAPA blocks and a PyTorch face
# encoder load the export strictly and embed each utterance's face frames as
# `spkddp embed --modality visual` does.
. "$(dirname "$0")/lib.sh" "$@"
need_python torch safetensors h5py speechbrain
FACES=$(cd "$(dirname "$SPKDDP")/.." && pwd)/tests/make_face_video
[ -x "$FACES" ] || { echo "SKIPPED: $FACES is not built (SPKDDP_MEDIA=OFF)"; exit 77; }
quiet() { "$@" >>log 2>&1; }
quiet bash "$HERE/../e2e/make_speech_corpus.sh" sp 3 3 1 || fail "speech corpus"
MAKE_FACE_VIDEO_JOBS=2 quiet "$FACES" sp/wav.scp sp/utt2spk av 1 --size 32 || fail "videos"
quiet run 2 $SPKDDP prepare --wav-scp av/video.scp --video-scp av/video.scp --utt2spk av/utt2spk --out av.h5 \
    --visual-size 24 --visual-color gray --visual-fps 10 --progress 0 || fail "prepare"
quiet run 2 $SPKDDP train --model ecapa-av --data av.h5 --channels 16 --attention-channels 8 --se-channels 8 --emb-dim 12 \
    --visual-channels 12 --face-channels 4 --modality-dropout 0.3 --frames 60 --global-batch 4 --epochs 2 \
    --optimizer adam --lr 0.01 --ckpt-dir ck --progress 0 || fail "train"
CKPT=$(ls ck/ckpt-*.h5 | tail -1)
quiet $SPKDDP export --ckpt "$CKPT" --out av.safetensors || fail "export"
quiet run 2 $SPKDDP embed --ckpt "$CKPT" --data av.h5 --out emb.h5 --modality visual || fail "embed"
"$PY" "$HERE/av_check.py" check av.safetensors av.h5 emb.h5 4 || fail "the visual path differs from PyTorch"
finish
