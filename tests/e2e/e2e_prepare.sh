#!/usr/bin/env bash
# spkddp prepare: a synthetic speech corpus (tests/e2e/make_speech_corpus.sh) becomes a feature
# dataset that inspect and train accept; the rows do not depend on the number of ranks; bad
# lists and bad audio stop every rank with exit code 3 and one line naming file and line.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh" "$@"

t0=$(date +%s.%N)
bash "$HERE/make_speech_corpus.sh" corpus 10 6 1 || fail "make_speech_corpus.sh"
echo "ok  corpus: $(wc -l <corpus/wav.scp) utterances of $(cut -d' ' -f2 corpus/utt2spk | sort -u | wc -l) speakers" \
    "in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
P="$SPKDDP prepare --utt2spk corpus/utt2spk"
labels() { h5dump -y -d /labels "$1" | tr -d ' \n' | sed 's/.*DATA{\([^}]*\)}.*/\1/'; }

# --- 2 ranks: counts, dimension, speakers, labels ----------------------------------------
run 2 $P --wav-scp corpus/wav.scp --out feats2.h5 >log2 || fail "prepare on 2 ranks: $(cat log2)"
cat log2
$SPKDDP inspect feats2.h5 >inspect2 || fail "inspect feats2.h5"
grep -q "utterances    60$" inspect2 || fail "inspect: not 60 utterances: $(cat inspect2)"
grep -q "feature_dim   80$" inspect2 || fail "inspect: feature_dim is not 80: $(cat inspect2)"
grep -q "speakers      10 (10 with utterances)" inspect2 || fail "inspect: not 10 speakers: $(cat inspect2)"
grep -q "variable length" inspect2 || fail "inspect: not the variable-length layout"
want=$(awk '{ if (!($2 in id)) id[$2] = n++; printf "%s%d", (NR > 1 ? "," : ""), id[$2] }' corpus/utt2spk)
[ "$(labels feats2.h5)" = "$want" ] || fail "labels $(labels feats2.h5), want $want"
[ ! -e feats2.h5.tmp ] || fail "feats2.h5.tmp left behind"
echo "ok  2 ranks: 60 utterances, feature_dim 80, 10 speakers, labels in sorted-speaker order"

# --- the same rows on any number of ranks -------------------------------------------------
run 1 $P --wav-scp corpus/wav.scp --out feats1.h5 >/dev/null || fail "prepare on 1 rank"
h5diff feats1.h5 feats2.h5 >diff12 && echo "ok  1 rank == 2 ranks (h5diff: every dataset and attribute identical)" \
    || fail "1 and 2 ranks differ: $(head -5 diff12)"
subset() { head -"$1" corpus/wav.scp >"$2.scp"; head -"$1" corpus/utt2spk >"$2.utt2spk"; }
subset 7 seven   # uneven blocks on 3 ranks: 2, 2, 3
run 1 $SPKDDP prepare --wav-scp seven.scp --utt2spk seven.utt2spk --out seven1.h5 >/dev/null || fail "prepare 7 utterances on 1 rank"
run 3 $SPKDDP prepare --wav-scp seven.scp --utt2spk seven.utt2spk --out seven3.h5 >/dev/null || fail "prepare 7 utterances on 3 ranks"
h5diff seven1.h5 seven3.h5 >/dev/null && echo "ok  7 utterances: 3 ranks (blocks 2/2/3) == 1 rank" || fail "3 ranks differ from 1"
subset 2 two     # a rank with no utterance still takes part
run 3 $SPKDDP prepare --wav-scp two.scp --utt2spk two.utt2spk --out two3.h5 >/dev/null || fail "prepare 2 utterances on 3 ranks"
$SPKDDP inspect two3.h5 | grep -q "utterances    2$" && echo "ok  3 ranks, 2 utterances (one rank idle)" || fail "two3.h5"

# --- training reads it --------------------------------------------------------------------
run 2 $SPKDDP train --data feats2.h5 --model linear --epochs 1 --batch 4 --optimizer adam --lr 1e-3 >train.log 2>&1 \
    && echo "ok  train reads the dataset: $(grep -m1 '^epoch' train.log | cut -c1-60)" || fail "train on feats2.h5: $(tail -3 train.log)"

# --- options: resampling, bins, spk2id ----------------------------------------------------
subset 6 six
run 2 $SPKDDP prepare --wav-scp six.scp --utt2spk six.utt2spk --out six8k.h5 --sample-rate 8000 --num-mel-bins 40 >log8k \
    || fail "prepare at 8 kHz"
grep -q "6 resampled to 8000 Hz" log8k || fail "8 kHz: $(cat log8k)"
$SPKDDP inspect six8k.h5 | grep -q "feature_dim   40$" && echo "ok  --sample-rate 8000 --num-mel-bins 40: 6 utterances resampled, 40 bins" \
    || fail "six8k.h5 feature_dim"
for i in 10 09 08 07 06 05 04 03 02 01; do echo "spk$i $((10 - 10#$i))"; done >rev.spk2id
echo "spk99 10" >>rev.spk2id
run 2 $P --wav-scp corpus/wav.scp --spk2id rev.spk2id --out feats_s2i.h5 >/dev/null || fail "prepare with --spk2id"
want=$(awk '{ printf "%s%d", (NR > 1 ? "," : ""), 10 - substr($2, 4) }' corpus/utt2spk)
[ "$(labels feats_s2i.h5)" = "$want" ] || fail "--spk2id labels $(labels feats_s2i.h5), want $want"
$SPKDDP inspect feats_s2i.h5 | grep -q "speakers      11 (10 with utterances)" && echo "ok  --spk2id: labels from the map, 11 speakers" \
    || fail "--spk2id: speaker count"

# --- bad lists: file and line named, exit 3 on every rank -----------------------------------
W=corpus/wav.scp
{ cat $W; sed -n 3p $W; } >dup.scp
expect_error 3 "dup.scp:61: duplicate utterance id 'spk01-utt03' \(first on line 3\)" -- run 2 $P --wav-scp dup.scp --out bad.h5
sed 5d corpus/utt2spk >nospk.utt2spk
expect_error 3 "corpus/wav.scp:5: utterance 'spk01-utt05' has no speaker in nospk.utt2spk" -- \
    run 2 $SPKDDP prepare --wav-scp $W --utt2spk nospk.utt2spk --out bad.h5
grep -v "^spk07 " rev.spk2id | awk '{ print $1, NR - 1 }' >partial.spk2id
expect_error 3 "corpus/utt2spk:37: speaker 'spk07' of utterance 'spk07-utt01' is not in partial.spk2id" -- \
    run 2 $P --wav-scp $W --spk2id partial.spk2id --out bad.h5
{ cat corpus/utt2spk; echo "ghost-utt01 spk01"; } >ghost.utt2spk
expect_error 3 "ghost.utt2spk:61: utterance 'ghost-utt01' is not in corpus/wav.scp" -- \
    run 2 $SPKDDP prepare --wav-scp $W --utt2spk ghost.utt2spk --out bad.h5
sed '4s/.*//' $W >blank.scp
expect_error 3 "blank.scp:4: empty line in the wav.scp" -- run 2 $P --wav-scp blank.scp --out bad.h5
expect_error 3 "nothere.scp: cannot read the wav.scp" -- run 2 $P --wav-scp nothere.scp --out bad.h5

# --- bad audio: the utterance, its path and its wav.scp line -------------------------------
: >empty.wav
# le32 N: N as 4 little-endian bytes (printf escapes).
le32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)); }
# whole_wav BYTES OUT: the first BYTES of samples of a corpus WAV, its header saying so.
whole_wav() {
    head -c $((44 + $1)) corpus/wav/spk01-utt01.wav >"$2"
    printf "$(le32 $((36 + $1)))" | dd of="$2" bs=1 seek=4 conv=notrunc status=none
    printf "$(le32 "$1")" | dd of="$2" bs=1 seek=40 conv=notrunc status=none
}
whole_wav 0 header_only.wav                                # a WAV header and no samples
whole_wav 500 short.wav                                    # 250 samples: less than one frame
head -c 544 corpus/wav/spk01-utt01.wav >cut.wav          # a header declaring 59760 bytes, 500 there
echo "not audio at all, just text" >text.wav
bad_line() { awk -v n="$1" -v p="$2" 'NR == n { $2 = p } { print }' $W; }
# bad_audio LINE FILE UTTERANCE REASON: the list with FILE at LINE fails there, naming all four.
bad_audio() {
    local name=${2##*/}
    name=${name%.wav}
    bad_line "$1" "$2" >"$name.scp"
    expect_error 3 "$name.scp:$1: utterance '$3': $2: $4" -- run 2 $P --wav-scp "$name.scp" --out bad.h5
}
bad_audio 45 "$PWD/nowhere.wav" spk08-utt03 "cannot open the audio file \(No such file or directory\)"  # rank 1 of 2
bad_audio 50 empty.wav spk09-utt02 "the audio file is empty \(0 bytes\)"
bad_audio 2 header_only.wav spk01-utt02 "the audio file holds no samples"
bad_audio 31 short.wav spk06-utt01 "too short: 250 samples"
# float samples of 1e30 would square into Inf features
ffmpeg -nostdin -loglevel error -y -f lavfi -i "aevalsrc=1e30*sin(440*2*PI*t):s=16000:d=0.5" -c:a pcm_f32le huge.wav
bad_audio 7 huge.wav spk02-utt01 "sample 1 is NaN, Inf or over 60 dB above full scale"
bad_audio 12 cut.wav spk02-utt06 "the file is cut short: its header declares 59760 bytes of samples, it holds 500 \(1%\)"
bad_audio 7 text.wav spk02-utt01 "cannot decode the audio file"
# Failures on both ranks: the earliest line in wav.scp is reported.
awk 'NR == 12 || NR == 40 { $2 = "nowhere.wav" } { print }' $W >two_bad.scp
expect_error 3 "two_bad.scp:12: utterance 'spk02-utt06'" -- run 2 $P --wav-scp two_bad.scp --out bad.h5
[ ! -e bad.h5 ] && [ ! -e bad.h5.tmp ] && echo "ok  no output left by failed runs" || fail "a failed run left bad.h5 or bad.h5.tmp"

expect_error 2 "prepare: --wav-scp is required" -- run 2 $SPKDDP prepare --utt2spk corpus/utt2spk --out bad.h5
expect_error 2 "prepare: --num-mel-bins must be in" -- run 2 $P --wav-scp $W --out bad.h5 --num-mel-bins 1

# A full disk (a 64 KiB tmpfs in a private mount namespace; skipped without unshare): one
# error line with the reason, exit 1, nothing left in the folder (was: SIGSEGV at 1 rank in
# HDF5's shutdown inside MPI_Abort, one line per rank at 2, the temp file left behind).
if unshare -rm true 2>/dev/null; then
    for np in 1 2; do
        mkdir -p full$np
        unshare -rm bash -c "mount -t tmpfs -o size=64k tmpfs full$np && $MPIEXEC -n $np $P --wav-scp $W --out full$np/f.h5 \
            >full$np.out 2>full$np.err; echo \$? >full$np.rc; ls -A full$np >full$np.ls"
        [ "$(cat full$np.rc)" = 1 ] || fail "full disk, $np rank(s): exit $(cat full$np.rc), want 1: $(cat full$np.err)"
        [ "$(grep -c '^spkddp: error:' full$np.err)" = 1 ] && grep -q "full$np/f.h5: cannot write the dataset (No space left on device)" full$np.err \
            || fail "full disk, $np rank(s): $(cat full$np.err)"
        [ -s full$np.ls ] && fail "full disk, $np rank(s): left $(cat full$np.ls)"
        grep -qiE 'sanitizer|segmentation|signal' full$np.err && fail "full disk, $np rank(s): $(cat full$np.err)"
    done
    echo "ok  a full disk: one error line naming the reason, exit 1, nothing left behind (1 and 2 ranks)"
else
    echo "--  no unshare: the full-disk check is skipped"
fi
finish
