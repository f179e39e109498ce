#!/usr/bin/env bash
# From audio to verdicts: a synthetic speech corpus (tests/e2e/make_speech_corpus.sh), features
# with `prepare` on 2 ranks, ECAPA training on 2 ranks, embeddings of speakers never seen in
# training, trials, EER. The EER must be well below chance (50%); the figure is printed.
. "$(dirname "$0")/lib.sh" "$@"
corpus="$(dirname "$0")/make_speech_corpus.sh"

bash "$corpus" train_audio 24 8 1 >/dev/null || fail "training corpus"
bash "$corpus" test_audio 8 6 2 >/dev/null || fail "unseen-speaker corpus"  # another seed: other voices
run 2 $SPKDDP prepare --wav-scp train_audio/wav.scp --utt2spk train_audio/utt2spk --out train.h5 || fail "prepare train"
run 2 $SPKDDP prepare --wav-scp test_audio/wav.scp --utt2spk test_audio/utt2spk --out test.h5 || fail "prepare test"
run 2 $SPKDDP train --model ecapa --channels 32 --attention-channels 16 --se-channels 16 --emb-dim 32 --frames 80 \
    --data train.h5 --epochs 20 --global-batch 32 --optimizer adam --lr 0.005 --ckpt-dir ck --progress 0 >log_train \
    || { cat log_train; fail "train"; }
grep "epoch 20/20" log_train
run 2 $SPKDDP embed --ckpt "$(ls ck/ckpt-*.h5 | tail -1)" --data test.h5 --out test_emb.h5 >/dev/null || fail "embed"
$SPKDDP trials --emb test_emb.h5 --out trials.txt >/dev/null || fail "trials"
$SPKDDP score --emb test_emb.h5 --trials trials.txt >score.log || { cat score.log; fail "score"; }
cat score.log
eer=$(sed -nE 's/ *cosine +EER +([0-9.]+)%.*/\1/p' score.log)
awk -v e="$eer" 'BEGIN { exit !(e < 40) }' || fail "EER $eer% on unseen speakers is not well below chance"
finish
