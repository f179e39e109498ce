#!/usr/bin/env bash
# Global against local negatives (docs/contrastive.md): the same contrastive training on NP ranks
# with the same per-rank batch, once with the global batch as the contrastive batch and once with
# each rank's batch alone, on the synthetic recipe's corpus (jobscripts/recipes/synthetic), for
# several seeds; the cosine EER of the embeddings on its unseen speakers, with the training time.
#   SPKDDP=build/app/spkddp tools/contrastive_eer.sh [WORKDIR]
# Environment: LOSS (supcon), NP (4), BATCH (per rank, 8), SEEDS ("1 2 3"), EPOCHS (20), MODEL
# ("ecapa --channels 512"), MODES ("global local"), MPIEXEC, FLAGS (the rest of the training flags).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SPKDDP=${SPKDDP:-spkddp}
case $SPKDDP in */*) SPKDDP=$(cd "$(dirname "$SPKDDP")" && pwd)/$(basename "$SPKDDP") ;; esac
MPIEXEC=${MPIEXEC:-mpiexec}
NP=${NP:-4}
loss=${LOSS:-supcon}
flags=${FLAGS:---frames 48 --optimizer adam --lr 0.002 --lr-schedule cosine --warmup-steps 20 --lr-min 0.0002 --sampler balanced --utts-per-speaker 2}
recipe=$here/../jobscripts/recipes/synthetic
mkdir -p "${1:-contrastive_eer}"
cd "${1:-contrastive_eer}"
export OMP_WAIT_POLICY=passive
[ -f train.h5 ] || "$SPKDDP" synth --config "$recipe/synth_train.yaml" >/dev/null
[ -f test.h5 ] || "$SPKDDP" synth --config "$recipe/synth_test.yaml" >/dev/null
for seed in ${SEEDS:-1 2 3}; do
    for neg in ${MODES:-global local}; do
        d=${loss}_${neg}_np${NP}_$seed
        rm -rf "$d"
        t0=$(date +%s.%N)
        # shellcheck disable=SC2086
        "$MPIEXEC" -n "$NP" "$SPKDDP" train --data train.h5 --model ${MODEL:-ecapa --channels 512} --loss "$loss" \
            --negatives "$neg" --batch "${BATCH:-8}" $flags --epochs "${EPOCHS:-20}" --seed "$seed" --ckpt-dir "$d" \
            --keep 1 --progress 0 >"$d.log" 2>&1
        t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
        "$MPIEXEC" -n 2 "$SPKDDP" embed --ckpt "$(ls "$d"/ckpt-*.h5 | tail -1)" --data test.h5 --out "$d.emb.h5" >/dev/null
        [ -f trials.txt ] || "$SPKDDP" trials --emb "$d.emb.h5" --out trials.txt >/dev/null
        eer=$("$MPIEXEC" -n 2 "$SPKDDP" score --emb "$d.emb.h5" --trials trials.txt | grep -o 'EER *[0-9.]*%' | head -1)
        echo "$loss $neg negatives, $NP ranks x batch ${BATCH:-8}, seed $seed: training ${t} s, last epoch $(grep '^epoch' "$d.log" | tail -1 | grep -o 'loss [0-9.]* *acc [0-9.]*' || true), cosine $eer"
    done
done
