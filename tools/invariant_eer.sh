#!/usr/bin/env bash
# EER of 1 rank x batch 32 against 2 ranks x batch 16 (global batch 32 both), with and without
# --invariant, on a synthetic speech corpus: ECAPA C=64 trained 15 epochs with Adam 0.002 on 24
# voices, scored on 8 voices never seen in training (tests/e2e/make_speech_corpus.sh), for each
# seed given. Prints one line per run and whether the invariant runs' checkpoints are identical.
#
#   tools/invariant_eer.sh BUILD_DIR [WORK_DIR] [SEEDS="1 2"]
set -euo pipefail
build=$(cd "${1:?usage: tools/invariant_eer.sh BUILD_DIR [WORK_DIR] [SEEDS]}" && pwd)
work=${2:-invariant_eer}
seeds=${3:-1 2}
spkddp=$build/app/spkddp
corpus=$(cd "$(dirname "$0")/../tests/e2e" && pwd)/make_speech_corpus.sh
mkdir -p "$work" && cd "$work"
export OMP_WAIT_POLICY=passive

[ -f train.h5 ] || {
    bash "$corpus" train_audio 24 8 1 >/dev/null
    bash "$corpus" test_audio 8 6 2 >/dev/null  # another corpus seed: other voices
    mpiexec -n 2 "$spkddp" prepare --wav-scp train_audio/wav.scp --utt2spk train_audio/utt2spk --out train.h5 >/dev/null
    mpiexec -n 2 "$spkddp" prepare --wav-scp test_audio/wav.scp --utt2spk test_audio/utt2spk --out test.h5 >/dev/null
}
common="--model ecapa --channels 64 --attention-channels 16 --se-channels 16 --emb-dim 32 --frames 80
    --data train.h5 --epochs 15 --global-batch 32 --optimizer adam --lr 0.002 --progress 0"

for seed in $seeds; do
    for mode in default invariant; do
        flag=""
        [ $mode = invariant ] && flag=--invariant
        for np in 1 2; do
            run=${mode}_np${np}_seed$seed
            rm -rf "$run"
            start=$(date +%s)
            mpiexec -n $np "$spkddp" train $common --seed "$seed" $flag --ckpt-dir "$run" >"$run.log" 2>&1
            secs=$(($(date +%s) - start))
            ckpt=$(ls "$run"/ckpt-*.h5 | tail -1)
            mpiexec -n 2 "$spkddp" embed --ckpt "$ckpt" --data test.h5 --out "$run.emb.h5" >/dev/null
            [ -f trials.txt ] || "$spkddp" trials --emb "$run.emb.h5" --out trials.txt >/dev/null
            eer=$("$spkddp" score --emb "$run.emb.h5" --trials trials.txt | sed -nE 's/ *cosine +EER +([0-9.]+%).*/\1/p')
            loss=$(grep "epoch 15/15" "$run.log" | sed -E 's/.*loss ([0-9.]+).*/\1/')
            printf "seed %s  %-9s  %d rank(s) x batch %2d  final loss %s  EER %s  (%d s)\n" "$seed" $mode $np \
                $((32 / np)) "$loss" "$eer" $secs
        done
    done
    if "$spkddp" diff "$(ls invariant_np1_seed$seed/ckpt-*.h5 | tail -1)" "$(ls invariant_np2_seed$seed/ckpt-*.h5 | tail -1)" \
        >/dev/null; then
        echo "seed $seed  invariant: 1 x 32 and 2 x 16 end with identical checkpoints"
    else
        echo "seed $seed  invariant: 1 x 32 and 2 x 16 checkpoints DIFFER"
    fi
done
