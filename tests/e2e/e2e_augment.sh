#!/usr/bin/env bash
# Augmentation from banks to checkpoints: prepare --kind noise|rir turns wav lists into banks;
# training with speed perturbation, reverberation, noise (babble too) and SpecAugment resumes
# bitwise, does not depend on the loader's threads, and gives the DDP identity across world
# sizes; speed factors multiply the classes, and a resume with other factors is refused;
# misused flags and banks give one line and exit 2; with --invariant (and --grad-accum 2, and bf16)
# 1 and 2 ranks train bitwise alike with every augmentation on.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh" "$@"
MAKE_AUG_DATA=$(dirname "$MAKE_BAD_DATA")/make_aug_data

"$MAKE_AUG_DATA" banks "$PWD/banks" 1 || fail "make_aug_data banks"
bash "$HERE/make_speech_corpus.sh" corpus 4 4 1 >/dev/null || fail "training corpus"
bash "$HERE/make_speech_corpus.sh" babble 3 2 9 >/dev/null || fail "babble speakers"  # other voices
cat banks/noise.scp babble/wav.scp >noise.scp
{ cat banks/noise.utt2cat; awk '{ print $1, "speech" }' babble/utt2spk; } >noise.utt2cat
P="$SPKDDP prepare --progress 0"
run 2 $P --kind noise --wav-scp noise.scp --utt2spk noise.utt2cat --out noise.h5 >log_noise || fail "prepare --kind noise"
run 2 $P --kind rir --wav-scp banks/rir.scp --utt2spk banks/rir.utt2cat --out rir.h5 >log_rir || fail "prepare --kind rir"
grep -q "18 entries.*3 categories" log_noise && echo "ok  $(cut -c1-100 log_noise)" || fail "noise bank: $(cat log_noise)"
h5dump -a /bank rir.h5 | grep -q '"rir"' && h5dump -d /speakers rir.h5 | grep -q '"large"' \
    && echo "ok  rir.h5 is a rir bank with categories large, small" || fail "rir.h5 lacks its bank attribute or categories"
full=$(h5dump -y -d /audio rir.h5 | sed -n '/DATA {/,$p' | grep -oE -- '-?[0-9]+' | grep -cxE -- '-?32767')
[ "$full" -ge 12 ] && echo "ok  impulse responses are stored at full scale ($full samples at +-32767 in 12 entries)" \
    || fail "$full samples at full scale, want at least one per impulse response"
run 2 $P --wav-scp corpus/wav.scp --utt2spk corpus/utt2spk --store audio --out audio.h5 >/dev/null || fail "prepare audio"
run 2 $P --wav-scp corpus/wav.scp --utt2spk corpus/utt2spk --out fbank.h5 >/dev/null || fail "prepare fbank"

aug="--noise-bank noise.h5 --rir-bank rir.h5 --babble speech=2:3 --speed-perturb 1.0,0.9,1.1 --spec-time-masks 2
     --spec-freq-masks 1 --aug-prob 0.8"
small="--model ecapa --channels 16 --attention-channels 8 --se-channels 8 --emb-dim 8 --frames 40 --global-batch 8
       --optimizer adam --lr 0.003 --epochs 2 --progress 0 --data audio.h5"
run 2 $SPKDDP train $small $aug --ckpt-dir ck >log_aug 2>&1 || fail "train with augmentation: $(tail -3 log_aug)"
grep "^augmentation:" log_aug | cut -c1-160
last=$(ls ck | grep ckpt | tail -1)
classes=$(h5dump -a /num_classes ck/$last | sed -nE 's/^ *\(0\): ([0-9]+)/\1/p')
[ "$classes" = 12 ] && echo "ok  4 speakers x 3 speed factors = 12 classes in the checkpoint" || fail "num_classes $classes, want 12"
run 2 $SPKDDP train $small --ckpt-dir ck_plain >/dev/null 2>&1 || fail "train without augmentation"
run 2 $SPKDDP train $small $aug --speed-perturb 1.0 --ckpt-dir ck_nospeed >/dev/null 2>&1 || fail "train without speed"
$SPKDDP diff ck_plain/$last ck_nospeed/$last >/dev/null 2>&1 && fail "augmentation changed nothing (the comparisons could not fail)"

# bitwise resume, and no dependence on the loader's threads
run 2 $SPKDDP train $small $aug --ckpt-dir ck_r --max-steps 3 >/dev/null 2>&1 || fail "train to step 3"
run 2 $SPKDDP train $small $aug --ckpt-dir ck_r --resume auto >log_r 2>&1 || fail "resume: $(tail -2 log_r)"
$SPKDDP diff ck/$last ck_r/$last >/dev/null && echo "ok  stopped at step 3 and resumed == uninterrupted (bitwise, $last)" \
    || fail "the resumed run differs: $($SPKDDP diff ck/$last ck_r/$last | tail -2)"
SPKDDP_LOADER_THREADS=3 run 2 $SPKDDP train $small $aug --ckpt-dir ck_t3 >/dev/null 2>&1 || fail "train with 3 threads"
$SPKDDP diff ck/$last ck_t3/$last >/dev/null && echo "ok  3 loader threads == 1 (bitwise)" || fail "3 loader threads differ from 1"

# the DDP identity with augmentation (linear model: whole utterances, no BatchNorm)
lin="--data audio.h5 --epochs 2 --lr 0.05 --progress 0 $aug"
run 1 $SPKDDP train $lin --batch 8 --ckpt-dir ck_l1 >/dev/null 2>&1 || fail "linear, 1 rank"
run 2 $SPKDDP train $lin --batch 4 --ckpt-dir ck_l2 >log_l2 2>&1 || fail "linear, 2 ranks: $(tail -2 log_l2)"
l=$(ls ck_l1 | grep ckpt | tail -1)
$SPKDDP diff ck_l1/$l ck_l2/$l --rtol 1e-6 >diff_l && echo "ok  2 ranks x batch 4 == 1 rank x batch 8 with augmentation ($(grep params diff_l))" \
    || fail "world sizes differ with augmentation: $(cat diff_l)"

# the checkpoint embeds; a resume with other speed factors is refused
run 2 $SPKDDP embed --ckpt ck/$last --data audio.h5 --out emb.h5 >/dev/null || fail "embed a speed-perturbed model"
expect_error 4 "trained for 12 classes, this run has 8 \(4 speakers x 2 speed factors" -- \
    $SPKDDP train $small $aug --speed-perturb 1.0,1.1 --ckpt-dir ck --resume auto --epochs 3
# SpecAugment works on a feature dataset; waveform kinds do not
$SPKDDP train $small --data fbank.h5 --spec-time-masks 2 --spec-freq-masks 2 --epochs 1 >/dev/null 2>&1 \
    && echo "ok  SpecAugment on an fbank dataset" || fail "SpecAugment on an fbank dataset"
expect_error 2 "^spkddp: error: train: --noise-bank works on waveforms, and fbank.h5 holds features" -- \
    $SPKDDP train $small --data fbank.h5 --noise-bank noise.h5
expect_error 2 "^spkddp: error: train: --noise-snr names category 'hum', which noise.h5 does not have \(it has: music, noise, speech\)" -- \
    $SPKDDP train $small --noise-bank noise.h5 --noise-snr noise=0:5,hum=1:2 --babble ""
expect_error 2 "^spkddp: error: train: --noise-bank rir.h5: not a noise bank" -- $SPKDDP train $small --noise-bank rir.h5
expect_error 2 "^spkddp: error: train: --speed-perturb factor '3' is not a number in \[0.5, 2\]" -- $SPKDDP train $small --speed-perturb 1,3
expect_error 2 "^spkddp: error: train: --babble names category 'music'" -- $SPKDDP train $small --noise-snr noise=0:5 --babble music=1:2
expect_error 2 "^spkddp: error: prepare: --kind noise keeps waveforms; leave out --store fbank" -- \
    $SPKDDP prepare --kind noise --store fbank --wav-scp noise.scp --utt2spk noise.utt2cat --out x.h5
# a bank entry of digital silence would make augmentation a bitwise no-op reported as on
ffmpeg -nostdin -loglevel error -y -f lavfi -i anullsrc=r=16000:cl=mono -t 1 -c:a pcm_s16le silent.wav
{ head -2 banks/rir.scp; echo "silent $PWD/silent.wav"; } >silent.scp
{ head -2 banks/rir.utt2cat; echo "silent small"; } >silent.utt2cat
expect_error 3 "silent.scp:3: utterance 'silent': .*silent.wav: is silent \(every sample below one 16-bit step\): a rir bank entry must have energy" -- \
    $SPKDDP prepare --kind rir --wav-scp silent.scp --utt2spk silent.utt2cat --out silent.h5
# The world-size-invariant mode with every augmentation on, with and without micro-batches, and
# with bf16 operands: 1 and 2 ranks end bitwise alike (the draws are keyed by sample, never by rank).
for mode in "1" "2" "2 --precision bf16"; do
    set -- $mode
    accum=$1 tag=${mode// /_}
    shift
    for k in 1 2; do
        run $k $SPKDDP train $small $aug --invariant --grad-accum $accum "$@" --ckpt-dir inv_${tag}_$k >log_inv_${tag}_$k 2>&1 ||
            fail "invariant with augmentation, --grad-accum $mode, $k ranks: $(tail -3 log_inv_${tag}_$k)"
    done
    last=$(ls inv_${tag}_1 | grep ckpt | tail -1)
    $SPKDDP diff inv_${tag}_1/$last inv_${tag}_2/$last >/dev/null &&
        echo "ok  --invariant with augmentation (--grad-accum $mode): 2 ranks == 1 rank (bitwise)" ||
        fail "--invariant with augmentation (--grad-accum $mode): 2 ranks differ from 1"
done
finish
