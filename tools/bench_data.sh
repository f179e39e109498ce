#!/usr/bin/env bash
# The data path at scale (not a test): prepare throughput and peak memory at 1x and 2x
# corpus, then ECAPA C=512 training from an audio dataset vs the fbank dataset of the same
# audio (samples/s, data wait as a fraction of the step).
#   bash tools/bench_data.sh [BUILD=build] [WORK=/tmp/spkddp_bench_data]
. "$(dirname "$0")/bench_setup.sh" "${1:-build}" "${2:-/tmp/spkddp_bench_data}"
bash "$HERE/../tests/e2e/make_speech_corpus.sh" corpus 16 8 1 >/dev/null  # 128 utterances of 1-2 s
# Bigger corpora list the same files again under new ids (decoding and fbank cost the same).
repeat() {  # repeat N NAME
    for k in $(seq "$1"); do sed "s/^\([^ ]*\)/r$k-\1/" corpus/wav.scp; done >"$2.scp"
    for k in $(seq "$1"); do sed "s/^\([^ ]*\)/r$k-\1/" corpus/utt2spk; done >"$2.utt2spk"
}
repeat 10 x1
repeat 20 x2
mkdir -p m4a && while read -r id path; do ffmpeg -nostdin -loglevel error -y -i "$path" -c:a aac -b:a 64k "m4a/$id.m4a"; done <corpus/wav.scp
awk '{ print $1, "m4a/" $1 ".m4a" }' corpus/wav.scp >m4a1.scp
for k in $(seq 10); do sed "s/^\([^ ]*\)/r$k-\1/" m4a1.scp; done >m4a.scp

echo "== prepare (--buffer-mb 16)"
p() { local n=$1; shift; echo "\$ mpiexec -n $n spkddp prepare $*"; mpiexec -n "$n" "$S" prepare --progress 0 "$@" | tail -1; }
p 1 --wav-scp x1.scp --utt2spk x1.utt2spk --out x1.h5 --buffer-mb 16
p 1 --wav-scp x2.scp --utt2spk x2.utt2spk --out x2.h5 --buffer-mb 16
p 2 --wav-scp x2.scp --utt2spk x2.utt2spk --out x2.h5 --buffer-mb 16
p 1 --wav-scp m4a.scp --utt2spk x1.utt2spk --out m4a.h5 --buffer-mb 16
p 1 --wav-scp x2.scp --utt2spk x2.utt2spk --out x2a.h5 --buffer-mb 16 --store audio
echo "for comparison, the whole of 2x in one buffer (as prepare did before it streamed):"
p 1 --wav-scp x2.scp --utt2spk x2.utt2spk --out x2.h5 --buffer-mb 1024

echo "== ECAPA C=512, 2 ranks x batch 16, --frames 200, 2 epochs of 12 steps"
head -384 x1.scp >t.scp && head -384 x1.utt2spk >t.utt2spk
p 2 --wav-scp t.scp --utt2spk t.utt2spk --out fbank.h5
p 2 --wav-scp t.scp --utt2spk t.utt2spk --out audio.h5 --store audio
for d in fbank audio; do
    uptime
    OMP_WAIT_POLICY=passive mpiexec -n 2 "$S" train --model ecapa --data $d.h5 --global-batch 32 --frames 200 --epochs 2 \
        --optimizer adam --lr 1e-3 --metrics m_$d.jsonl --progress 0 >log_$d
    tail -1 m_$d.jsonl | awk -v d=$d -f "$HERE/last_epoch.awk"
done
