#!/usr/bin/env bash
# Encoders side by side on the synthetic recipe's corpus (jobscripts/recipes/synthetic): each
# trained the same way for the same epochs on NP ranks, for several seeds, then the cosine EER
# of its embeddings on the unseen speakers, with the training time.
#   SPKDDP=build/app/spkddp tools/compare_encoders.sh [WORKDIR]
# Environment: MODELS (default "ecapa:512 resnet34:32", model:channels), SEEDS (default "1 2 3"),
# EPOCHS (20; EPOCHS_<model> for one model, e.g. EPOCHS_resnet34=12 for the same training time),
# NP (2), MPIEXEC (mpiexec), FLAGS (the training flags all get; default: 48-frame crops, global
# batch 32, Adam 0.002 with cosine decay; FLAGS_<model> replaces them for one model, e.g. its own
# learning rate), SYNTH (flags for both corpora, e.g. "--spectral --dim 40"). CORPUS=speech takes the
# synthetic voices of tests/e2e/make_speech_corpus.sh instead (source-filter speech: pitch,
# formants, vocal-tract length; SPEAKERS x UTTS training utterances of 1-2 s, default 40 x 12,
# and 16 unseen voices x 8), as 80-band fbank by `spkddp prepare`: a spectrum with the local
# structure 2-D convolutions use, where `spkddp synth`'s features have none.
# PYTORCH=PYTHON also trains each model with the same flags in PyTorch (tools/train_pytorch.py:
# the toolkits' own classes, the same recipe; Adam with cosine decay only) and scores it on the
# same trials: whether a model's accuracy here is the model's or spkddp's.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SPKDDP=${SPKDDP:-spkddp}
case $SPKDDP in */*) SPKDDP=$(cd "$(dirname "$SPKDDP")" && pwd)/$(basename "$SPKDDP") ;; esac
MPIEXEC=${MPIEXEC:-mpiexec}
NP=${NP:-2}
flags=${FLAGS:---frames 48 --global-batch 32 --optimizer adam --lr 0.002 --lr-schedule cosine --warmup-steps 20 --lr-min 0.0002}
recipe=$here/../jobscripts/recipes/synthetic
mkdir -p "${1:-compare}"
cd "${1:-compare}"
if [ "${CORPUS:-synth}" = speech ]; then
    for set in train test; do
        [ -f $set.h5 ] && continue
        if [ $set = train ]; then a=("${SPEAKERS:-40}" "${UTTS:-12}" 1); else a=(16 8 2); fi  # seed 2: other voices
        bash "$here/../tests/e2e/make_speech_corpus.sh" ${set}_audio "${a[@]}" >/dev/null
        "$MPIEXEC" -n "$NP" "$SPKDDP" prepare --wav-scp ${set}_audio/wav.scp --utt2spk ${set}_audio/utt2spk \
            --out $set.h5 >/dev/null
    done
else
    # shellcheck disable=SC2086
    [ -f train.h5 ] || "$SPKDDP" synth --config "$recipe/synth_train.yaml" ${SYNTH:-} >/dev/null
    # shellcheck disable=SC2086
    [ -f test.h5 ] || "$SPKDDP" synth --config "$recipe/synth_test.yaml" ${SYNTH:-} >/dev/null
fi
for seed in ${SEEDS:-1 2 3}; do
    for mc in ${MODELS:-ecapa:512 resnet34:32}; do
        m=${mc%%:*} c=${mc#*:} d=${mc/:/_}_$seed
        epochs_var="EPOCHS_${m//-/_}"
        epochs=${!epochs_var:-${EPOCHS:-20}}
        flags_var="FLAGS_${m//-/_}"
        mflags=${!flags_var:-$flags}
        rm -rf "$d"
        t0=$(date +%s.%N)
        # shellcheck disable=SC2086
        "$MPIEXEC" -n "$NP" "$SPKDDP" train --data train.h5 --model "$m" --channels "$c" $mflags --epochs "$epochs" \
            --seed "$seed" --ckpt-dir "$d" --keep 1 --progress 0 >"$d.log" 2>&1
        t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
        "$MPIEXEC" -n "$NP" "$SPKDDP" embed --ckpt "$(ls "$d"/ckpt-*.h5 | tail -1)" --data test.h5 --out "$d.emb.h5" >/dev/null
        [ -f trials.txt ] || "$SPKDDP" trials --emb "$d.emb.h5" --out trials.txt >/dev/null
        eer=$("$MPIEXEC" -n "$NP" "$SPKDDP" score --emb "$d.emb.h5" --trials trials.txt | grep -o 'EER *[0-9.]*%' | head -1)
        echo "$m C=$c seed $seed: $epochs epochs, training ${t} s, last epoch $(grep '^epoch' "$d.log" | tail -1 | grep -o 'loss [0-9.]* *acc [0-9.]*' || true), cosine $eer"
        [ -n "${PYTORCH:-}" ] || continue
        # shellcheck disable=SC2086
        "$PYTORCH" "$here/train_pytorch.py" --model "$m" --channels "$c" $mflags --epochs "$epochs" --seed "$seed" \
            --threads "$NP" --train train.h5 --test test.h5 --trials trials.txt >"$d.torch.log" 2>&1
        echo "  PyTorch: $(tail -1 "$d.torch.log"), last epoch $(grep '^epoch' "$d.torch.log" | tail -1 | grep -o 'loss [0-9.]* acc [0-9.]*' || true)"
    done
done
