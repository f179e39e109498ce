#!/usr/bin/env bash
# Augmentation helps where it should: on the synthetic speech corpus, ECAPA is trained once
# on clean audio and once with reverberation and noise from small generated banks, then both
# embed unseen speakers whose test utterances were reverberated by other rooms and mixed with
# other noise (make_aug_data corrupt); the augmented model's EER must be lower. Both EERs are
# printed. An optional 5th argument SEED varies the corpora, banks, corruption and training
# (tools/augment_eer.sh runs several).
HERE=$(cd "$(dirname "$0")" && pwd)
SEED=${5:-1}
. "$HERE/lib.sh" "$@"
MAKE_AUG_DATA=$(dirname "$MAKE_BAD_DATA")/make_aug_data
corpus="$HERE/make_speech_corpus.sh"

bash "$corpus" train_audio 24 8 "$SEED" >/dev/null || fail "training corpus"
bash "$corpus" test_clean 8 6 $((SEED + 100)) >/dev/null || fail "unseen-speaker corpus"
bash "$corpus" babble 4 2 $((SEED + 200)) >/dev/null || fail "babble speakers"
"$MAKE_AUG_DATA" banks "$PWD/banks" "$SEED" || fail "banks"
"$MAKE_AUG_DATA" corrupt test_clean/wav.scp "$PWD/test_noisy" $((SEED + 300)) 0 10 -3 6 || fail "noisy reverberant test set"
cat banks/noise.scp babble/wav.scp >noise.scp
{ cat banks/noise.utt2cat; awk '{ print $1, "speech" }' babble/utt2spk; } >noise.utt2cat
P="$SPKDDP prepare --progress 0"
run 2 $P --kind noise --wav-scp noise.scp --utt2spk noise.utt2cat --out noise.h5 >/dev/null || fail "noise bank"
run 2 $P --kind rir --wav-scp banks/rir.scp --utt2spk banks/rir.utt2cat --out rir.h5 >/dev/null || fail "rir bank"
run 2 $P --store audio --wav-scp train_audio/wav.scp --utt2spk train_audio/utt2spk --out train.h5 >/dev/null || fail "prepare train"
run 2 $P --wav-scp test_noisy/wav.scp --utt2spk test_clean/utt2spk --out test.h5 >/dev/null || fail "prepare test"

model="--model ecapa --channels 32 --attention-channels 16 --se-channels 16 --emb-dim 32 --frames 80 --data train.h5
       --epochs 40 --global-batch 32 --optimizer adam --lr 0.005 --seed $SEED --progress 0"
declare -A eer
for kind in clean augmented; do
    extra=""
    [ $kind = augmented ] && extra="--noise-bank noise.h5 --rir-bank rir.h5 --noise-prob 0.7 --reverb-prob 0.3
                                     --noise-snr noise=0:10,music=0:10,speech=5:15"
    run 2 $SPKDDP train $model $extra --ckpt-dir ck_$kind >log_$kind 2>&1 || { tail -3 log_$kind; fail "train $kind"; }
    run 2 $SPKDDP embed --ckpt "$(ls ck_$kind/ckpt-*.h5 | tail -1)" --data test.h5 --out emb_$kind.h5 >/dev/null || fail "embed $kind"
    [ -f trials.txt ] || $SPKDDP trials --emb emb_$kind.h5 --out trials.txt >/dev/null || fail "trials"
    $SPKDDP score --emb emb_$kind.h5 --trials trials.txt >score_$kind.log || fail "score $kind"
    eer[$kind]=$(sed -nE 's/ *cosine +EER +([0-9.]+)%.*/\1/p' score_$kind.log)
done
echo "seed $SEED: EER on unseen speakers, noisy reverberant test set: clean training ${eer[clean]}%, augmented ${eer[augmented]}%"
awk -v c="${eer[clean]}" -v a="${eer[augmented]}" 'BEGIN { exit !(a < c) }' \
    && echo "ok  augmentation lowers the EER" || fail "the augmented model's EER ${eer[augmented]}% is not below ${eer[clean]}%"
finish
