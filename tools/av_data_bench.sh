#!/usr/bin/env bash
# The visual stream's data costs (docs/audio-visual.md): `prepare --video-scp` on talking-face
# videos shaped like VoxCeleb2's face tracks (224 x 224, 25 frames/s, H.264; tests/e2e/
# make_face_video over tests/e2e/make_speech_corpus.sh), on one rank at the defaults (112 x 112
# RGB at 5 frames/s, JPEG quality 90): hours of video per second and bytes per hour; then
# ecapa-av with the face encoder trained on it on 2 ranks, the data wait against the step time.
#   SPKDDP=build/app/spkddp TESTBIN=build/tests tools/av_data_bench.sh [WORKDIR]
# Environment: SPEAKERS (20), UTTS (8), MPIEXEC, MODEL (the training flags of the model).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
SPKDDP=$(abs "${SPKDDP:-build/app/spkddp}")
TESTBIN=$(abs "${TESTBIN:-build/tests}")
MPIEXEC=${MPIEXEC:-mpiexec}
model=${MODEL:---model ecapa-av --channels 512 --visual-channels 256 --face-channels 32 --frames 200 --batch 16}
mkdir -p "${1:-av_data_bench}"
cd "${1:-av_data_bench}"
export OMP_WAIT_POLICY=passive
if [ ! -f av/video.scp ]; then
    bash "$here/../tests/e2e/make_speech_corpus.sh" sp "${SPEAKERS:-20}" "${UTTS:-8}" 1 >/dev/null
    "$TESTBIN/make_face_video" sp/wav.scp sp/utt2spk av 1 --size 224 --fps 25 >/dev/null
fi
video_s=$(for f in $(cut -d' ' -f2 av/video.scp); do
    ffprobe -v error -select_streams v:0 -show_entries stream=duration -of csv=p=0 "$f"; done | awk '{s += $1} END {print s}')
t0=$(date +%s.%N)
"$MPIEXEC" -n 1 "$SPKDDP" prepare --wav-scp av/video.scp --video-scp av/video.scp --utt2spk av/utt2spk --store audio \
    --out av.h5 --progress 0 >prepare.log
t1=$(date +%s.%N)
awk -v v="$video_s" -v a="$t0" -v b="$t1" 'BEGIN { printf "prepare, 1 rank: %.1f s of video in %.2f s: %.3f h of video per second per core\n", v, b - a, v / 3600 / (b - a) }'
grep -o '[0-9]* JPEG frames.*hour)' prepare.log
rm -rf ck
# shellcheck disable=SC2086
"$MPIEXEC" -n 2 "$SPKDDP" train --data av.h5 $model --epochs 2 --optimizer adam --lr 0.001 --ckpt-dir ck \
    --metrics ck/metrics.jsonl --progress 0 >train.log 2>&1
tail -1 ck/metrics.jsonl | tr ',' '\n' | grep -E '"(epoch|epoch_seconds|data_wait_s|samples_per_s)"' | tr '\n' ' '
echo
