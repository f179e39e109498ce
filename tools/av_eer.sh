#!/usr/bin/env bash
# Audio-visual fusion against audio alone (docs/audio-visual.md): talking-face videos of a
# synthetic speech corpus (tests/e2e/make_speech_corpus.sh voices, tests/e2e/make_face_video
# faces), unseen speakers and faces in the test set, whose audio is mixed with noise (SNR
# SNR_LO..SNR_HI dB, tests/e2e/make_aug_data corrupt) while the mouths follow the clean speech.
# Per seed: ECAPA on the audio alone, and ecapa-av with its face encoder and modality dropout on
# the same data; the cosine EER of the audio model, of the joint embeddings (both streams), of
# ecapa-av's audio alone and face alone (embed --modality), and of the score-level fusion of
# the audio model with the face embeddings (score --fuse).
#   SPKDDP=build/app/spkddp TESTBIN=build/tests tools/av_eer.sh [WORKDIR]
# Environment: SEEDS ("1 2 3"), NP (2), SPEAKERS (40), UTTS (8), TEST_SPEAKERS (20),
# TEST_UTTS (6), SNR_LO/SNR_HI (0, 10), EPOCHS (20), CHANNELS (128), FACE (8), SIZE (32),
# FPS (10), MPIEXEC, FLAGS (the rest of the training flags); AUDIO_MODEL and AV_MODEL (the two
# models with their size flags; default ECAPA and ecapa-av at CHANNELS, e.g. AUDIO_MODEL="resnet34
# --channels 16" AV_MODEL="resnet34-av --channels 16").
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
SPKDDP=$(abs "${SPKDDP:-build/app/spkddp}")
TESTBIN=$(abs "${TESTBIN:-build/tests}")
MPIEXEC=${MPIEXEC:-mpiexec}
NP=${NP:-2}
flags=${FLAGS:---frames 100 --batch 16 --optimizer adam --lr 0.002 --lr-schedule cosine --warmup-steps 20 --lr-min 0.0002}
enc="--channels ${CHANNELS:-128} --attention-channels 64 --se-channels 64 --emb-dim 128"
audio_model=${AUDIO_MODEL:-ecapa $enc}
av_model=${AV_MODEL:-ecapa-av $enc --visual-channels 64}
mkdir -p "${1:-av_eer}"
cd "${1:-av_eer}"
export OMP_WAIT_POLICY=passive
vis="--visual-size ${SIZE:-32} --visual-fps ${FPS:-10} --progress 0"
eer() { "$MPIEXEC" -n "$NP" "$SPKDDP" score --trials "trials$seed.txt" "$@" | grep -o '^ *[a-z]* *EER *[0-9.]*%' | awk '{print $NF}'; }
for seed in ${SEEDS:-1 2 3}; do
    s=seed$seed
    mkdir -p "$s"
    if [ ! -f "$s/test.h5" ]; then
        bash "$here/../tests/e2e/make_speech_corpus.sh" "$s/train_sp" "${SPEAKERS:-40}" "${UTTS:-8}" "$seed" >/dev/null
        bash "$here/../tests/e2e/make_speech_corpus.sh" "$s/test_sp" "${TEST_SPEAKERS:-20}" "${TEST_UTTS:-6}" $((seed + 1000)) >/dev/null
        "$TESTBIN/make_aug_data" corrupt "$s/test_sp/wav.scp" "$s/noisy" "$seed" "${SNR_LO:-0}" "${SNR_HI:-10}" 30 40 >/dev/null
        "$TESTBIN/make_face_video" "$s/train_sp/wav.scp" "$s/train_sp/utt2spk" "$s/train_av" "$seed" >/dev/null
        "$TESTBIN/make_face_video" "$s/test_sp/wav.scp" "$s/test_sp/utt2spk" "$s/test_av" "$seed" \
            --audio "$s/noisy/wav.scp" --first-speaker 1000 >/dev/null
        for set in train test; do
            "$MPIEXEC" -n "$NP" "$SPKDDP" prepare --wav-scp "$s/${set}_av/video.scp" --video-scp "$s/${set}_av/video.scp" \
                --utt2spk "$s/${set}_av/utt2spk" --out "$s/$set.h5" $vis >"$s/prepare_$set.log"
        done
    fi
    t0=$(date +%s)
    # shellcheck disable=SC2086
    "$MPIEXEC" -n "$NP" "$SPKDDP" train --data "$s/train.h5" --model $audio_model $flags --epochs "${EPOCHS:-20}" \
        --seed "$seed" --ckpt-dir "$s/audio" --keep 1 --progress 0 >"$s/audio.log" 2>&1
    t1=$(date +%s)
    # shellcheck disable=SC2086
    "$MPIEXEC" -n "$NP" "$SPKDDP" train --data "$s/train.h5" --model $av_model \
        --face-channels "${FACE:-8}" --modality-dropout 0.3 $flags --epochs "${EPOCHS:-20}" --seed "$seed" \
        --ckpt-dir "$s/av" --keep 1 --progress 0 >"$s/av.log" 2>&1
    t2=$(date +%s)
    "$MPIEXEC" -n "$NP" "$SPKDDP" embed --ckpt "$(ls "$s"/audio/ckpt-*.h5 | tail -1)" --data "$s/test.h5" --out "$s/e_audio_model.h5" >/dev/null
    for mo in both audio visual; do
        "$MPIEXEC" -n "$NP" "$SPKDDP" embed --ckpt "$(ls "$s"/av/ckpt-*.h5 | tail -1)" --data "$s/test.h5" --modality $mo \
            --out "$s/e_av_$mo.h5" >/dev/null
    done
    [ -f "trials$seed.txt" ] || "$SPKDDP" trials --emb "$s/e_audio_model.h5" --out "trials$seed.txt" >/dev/null
    a=$(eer --emb "$s/e_audio_model.h5" | head -1)
    j=$(eer --emb "$s/e_av_both.h5" | head -1)
    ja=$(eer --emb "$s/e_av_audio.h5" | head -1)
    jv=$(eer --emb "$s/e_av_visual.h5" | head -1)
    f=$(eer --emb "$s/e_audio_model.h5" --fuse "$s/e_av_visual.h5" | tail -1)
    echo "seed $seed: audio model (${audio_model%% *}) $a, ${av_model%% *} joint $j (its audio alone $ja, face alone $jv), score fusion audio model + face $f; training $((t1 - t0)) s audio, $((t2 - t1)) s audio-visual"
done
