#!/usr/bin/env bash
# prepare --store audio keeps 16 kHz int16 waveforms; training on them computes the fbank of
# each crop on the loader's threads. The crops' frames equal the prepared fbank's, so ECAPA
# trained from either dataset ends bitwise equal, and so do runs with 0, 1 or 3 loader
# threads; embeddings and resume read audio datasets too.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh" "$@"

bash "$HERE/make_speech_corpus.sh" corpus 4 4 1 >/dev/null || fail "make_speech_corpus.sh"
P="$SPKDDP prepare --wav-scp corpus/wav.scp --utt2spk corpus/utt2spk --progress 0"
run 2 $P --out fbank.h5 >/dev/null || fail "prepare --store fbank"
run 2 $P --out audio.h5 --store audio >audio.log || fail "prepare --store audio"
grep -q "int16 samples" audio.log && echo "ok  $(cut -c1-150 audio.log)" || fail "prepare --store audio: $(cat audio.log)"
[ "$(h5dump -a /spkddp_format audio.h5 | grep -c '"audio"')" = 1 ] || fail "spkddp_format is not \"audio\""
h5dump -H -d /audio audio.h5 | grep -q H5T_STD_I16LE || fail "/audio is not int16"
$SPKDDP inspect audio.h5 >inspect_a && $SPKDDP inspect fbank.h5 >inspect_f
[ "$(grep "^  frames" inspect_a)" = "$(grep "^  frames" inspect_f)" ] && echo "ok  the audio dataset has the fbank dataset's frame counts" \
    || fail "frame counts differ: $(grep "^  frames" inspect_a) vs $(grep "^  frames" inspect_f)"
grep -q "spkddp audio dataset" inspect_a && grep -q "at 16000 Hz" inspect_a && grep -q "spkddp feature dataset" inspect_f \
    || fail "inspect does not tell the audio dataset from the feature dataset: $(head -3 inspect_a)"

# ECAPA crops (--frames 40) and whole utterances (embed): fbank dataset vs audio dataset
small="--model ecapa --channels 16 --attention-channels 8 --se-channels 8 --emb-dim 8 --frames 40 --global-batch 8
       --optimizer adam --lr 0.003 --epochs 2 --progress 0"
for d in fbank audio; do
    run 2 $SPKDDP train $small --data $d.h5 --ckpt-dir ck_$d --metrics m_$d.jsonl >log_$d 2>&1 || fail "train on $d.h5: $(tail -3 log_$d)"
done
ck=$(ls ck_fbank/ckpt-*.h5 | tail -1 | xargs basename)
$SPKDDP diff ck_fbank/$ck ck_audio/$ck >/dev/null && echo "ok  ECAPA trained from the audio dataset == from the fbank dataset (bitwise, $ck)" \
    || fail "training from audio differs from fbank: $($SPKDDP diff ck_fbank/$ck ck_audio/$ck | tail -2)"
grep -q '"data_wait_s"' m_audio.jsonl && echo "ok  metrics carry data_wait_s: $(grep -o '"data_wait_s": [^,]*' m_audio.jsonl | tail -1)" \
    || fail "no data_wait_s in the metrics"
for d in fbank audio; do run 2 $SPKDDP embed --ckpt ck_fbank/$ck --data $d.h5 --out emb_$d.h5 >/dev/null || fail "embed $d"; done
h5diff emb_fbank.h5 emb_audio.h5 >/dev/null && echo "ok  embeddings of whole utterances: audio dataset == fbank dataset" \
    || fail "embeddings differ"

# the loader's threads change nothing
for n in 0 3; do
    SPKDDP_LOADER_THREADS=$n run 2 $SPKDDP train $small --data audio.h5 --ckpt-dir ck_t$n >/dev/null 2>&1 || fail "train with $n loader threads"
    $SPKDDP diff ck_audio/$ck ck_t$n/$ck >/dev/null && echo "ok  $n loader threads == 1 (bitwise)" || fail "$n loader threads differ from 1"
done
expect_error 2 "^spkddp: error: SPKDDP_LOADER_THREADS=x is not a thread count" -- env SPKDDP_LOADER_THREADS=x $SPKDDP train $small --data audio.h5
finish
