#!/usr/bin/env bash
# Does bf16 training verify speakers as well as fp32? ECAPA trained on the synthetic speech
# corpus (tests/e2e/make_speech_corpus.sh, features by `spkddp prepare`) with --precision fp32
# and bf16 for each of several seeds (initialisation, sample order, crops), each model
# embedding speakers never seen in training in its own precision, scored by EER and minDCF.
# bf16 passes when its mean EER lies within the range fp32's seeds span.
#   tools/bf16_accuracy.sh [BUILD_DIR [WORK_DIR]]     (a benchmark-style study, not a test)
# Environment: SEEDS (default "1 2 3"), RANKS (2), EPOCHS (30), CHANNELS (64), SPEAKERS (40
# training speakers x UTTS 12 utterances; 16 unseen speakers x 8 for the trials). The corpus
# and its features are kept in WORK_DIR (default build/bf16_accuracy) and reused.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
work=${2:-$build/bf16_accuracy}
seeds=${SEEDS:-1 2 3}
ranks=${RANKS:-2}
epochs=${EPOCHS:-30}
channels=${CHANNELS:-64}
speakers=${SPEAKERS:-40}
utts=${UTTS:-12}
spkddp=$build/app/spkddp
mkdir -p "$work"
cd "$work"

if [ ! -f train.h5 ] || [ ! -f test.h5 ]; then
    bash "$here/../tests/e2e/make_speech_corpus.sh" train_audio "$speakers" "$utts" 1 >/dev/null
    bash "$here/../tests/e2e/make_speech_corpus.sh" test_audio 16 8 2 >/dev/null  # other voices
    mpiexec -n "$ranks" "$spkddp" prepare --wav-scp train_audio/wav.scp --utt2spk train_audio/utt2spk --out train.h5
    mpiexec -n "$ranks" "$spkddp" prepare --wav-scp test_audio/wav.scp --utt2spk test_audio/utt2spk --out test.h5
fi

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
results=results.txt
: >"$results"
for seed in $seeds; do
    for p in fp32 bf16; do
        run="$p-seed$seed"
        rm -rf "ck_$run"
        mpiexec -n "$ranks" "$spkddp" train --model ecapa --channels "$channels" --attention-channels 32 \
            --se-channels 32 --emb-dim 64 --frames 100 --data train.h5 --epochs "$epochs" --global-batch 32 \
            --optimizer adam --lr 0.003 --lr-schedule cosine --warmup-steps 20 --seed "$seed" --precision "$p" \
            --ckpt-dir "ck_$run" --metrics "m_$run.jsonl" --progress 0 >"log_$run"
        mpiexec -n "$ranks" "$spkddp" embed --ckpt "$(ls "ck_$run"/ckpt-*.h5 | tail -1)" --data test.h5 \
            --out "emb_$run.h5" --precision "$p" >/dev/null
        [ -s trials.txt ] || "$spkddp" trials --emb "emb_$run.h5" --out trials.txt >/dev/null
        "$spkddp" score --emb "emb_$run.h5" --trials trials.txt >"score_$run"
        eer=$(sed -nE 's/ *cosine +EER +([0-9.]+)%.*/\1/p' "score_$run")
        dcf=$(sed -nE 's/ *cosine +EER +[0-9.]+% +minDCF\(0\.01\) +([0-9.]+).*/\1/p' "score_$run")
        loss=$(tail -1 "m_$run.jsonl" | sed -nE 's/.*"loss": ([-0-9.e+]+).*/\1/p')
        echo "$p $seed $eer ${dcf:-?} $loss" | tee -a "$results"
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "precision  EER% per seed ($seeds)   mean   range (min-max)   final training loss per seed"
for p in fp32 bf16; do
    awk -v p="$p" '$1 == p { e = e sprintf(" %6.2f", $3); l = l sprintf(" %.3f", $5); s += $3; n++
                             if (n == 1 || $3 < lo) lo = $3; if (n == 1 || $3 > hi) hi = $3 }
        END { printf "%-9s %s   %6.2f   %.2f-%.2f        %s\n", p, e, s / n, lo, hi, l }' "$results"
done
awk '$1 == "fp32" { if (n == 0 || $3 < lo) lo = $3; if (n == 0 || $3 > hi) hi = $3; n++ }
     $1 == "bf16" { s += $3; m++ }
     END { mean = s / m
           printf "bf16 mean EER %.2f%% %s fp32'"'"'s seed range %.2f-%.2f%%\n", mean,
                  (mean >= lo && mean <= hi) ? "lies within" : "lies OUTSIDE", lo, hi }' "$results"
