#!/usr/bin/env bash
# The cost of augmentation (not a test): augmented samples/s per core for each kind
# (build/tests/bench_augment), then ECAPA C=512 on 2 ranks x batch 16, 200-frame crops, from
# an audio dataset without and with every kind of augmentation (samples/s, data wait as a
# fraction of the step).
#   bash tools/bench_augment.sh [BUILD=build] [WORK=/tmp/spkddp_bench_augment]
. "$(dirname "$0")/bench_setup.sh" "${1:-build}" "${2:-/tmp/spkddp_bench_augment}"
bash "$HERE/../tests/e2e/make_speech_corpus.sh" corpus 16 8 1 >/dev/null
bash "$HERE/../tests/e2e/make_speech_corpus.sh" babble 8 2 9 >/dev/null
# Crops of 2 s need longer utterances than the corpus's 1-2 s: each is joined with the next
# two of its speaker (3-6 s).
mkdir -p long
mapfile -t ids < <(cut -d' ' -f1 corpus/wav.scp)
for ((i = 0; i < ${#ids[@]}; i++)); do
    spk=${ids[i]%%-*}
    a=corpus/wav/${ids[i]}.wav b=corpus/wav/${ids[(i + 1) % ${#ids[@]}]}.wav c=corpus/wav/${ids[(i + 2) % ${#ids[@]}]}.wav
    [[ $(basename "$b") == $spk-* ]] || b=$a
    [[ $(basename "$c") == $spk-* ]] || c=$a
    ffmpeg -nostdin -loglevel error -y -i "$a" -i "$b" -i "$c" -filter_complex concat=n=3:v=0:a=1 "long/${ids[i]}.wav"
    echo "${ids[i]} $PWD/long/${ids[i]}.wav"
done >long.scp
"$BUILD/tests/make_aug_data" banks "$PWD/banks" 1
cat banks/noise.scp babble/wav.scp >noise.scp
{ cat banks/noise.utt2cat; awk '{ print $1, "speech" }' babble/utt2spk; } >noise.utt2cat
P="mpiexec -n 2 $S prepare --progress 0"
$P --kind noise --wav-scp noise.scp --utt2spk noise.utt2cat --out noise.h5 >/dev/null
$P --kind rir --wav-scp banks/rir.scp --utt2spk banks/rir.utt2cat --out rir.h5 >/dev/null
for k in 1 2 3; do sed "s/^\([^ ]*\)/r$k-\1/" long.scp; done >train.scp
for k in 1 2 3; do sed "s/^\([^ ]*\)/r$k-\1/" corpus/utt2spk; done >train.utt2spk
$P --store audio --wav-scp train.scp --utt2spk train.utt2spk --out audio.h5 | tail -1

echo "== one core: $BUILD/tests/bench_augment audio.h5 noise.h5 rir.h5 512"
"$BUILD/tests/bench_augment" audio.h5 noise.h5 rir.h5 512

echo "== ECAPA C=512, 2 ranks x batch 16, --frames 200, 2 epochs of 12 steps, 1 loader thread"
aug="--noise-bank noise.h5 --rir-bank rir.h5 --speed-perturb 1.0,0.9,1.1 --spec-time-masks 2 --spec-freq-masks 2"
for run in plain augmented; do
    uptime
    extra=""
    [ $run = augmented ] && extra=$aug
    OMP_WAIT_POLICY=passive mpiexec -n 2 "$S" train --model ecapa --data audio.h5 --global-batch 32 --frames 200 --epochs 2 \
        --optimizer adam --lr 1e-3 --metrics m_$run.jsonl --progress 0 $extra >log_$run
    tail -1 m_$run.jsonl | awk -v d=$run -f "$HERE/last_epoch.awk"
done
