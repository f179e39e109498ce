#!/usr/bin/env bash
# The VoxCeleb recipe's scripts (lists.sh, run.sh) end to end on a miniature corpus with
# VoxCeleb's folder layout: VoxCeleb2-dev as m4a, VoxCeleb1 as wav, MUSAN- and RIRS_NOISES-
# shaped banks, trial lists in the official format. The recipe's own YAML files, with the model
# shrunk by flags after the stages. Then what a practitioner does to it:
#   - a stage name that does not exist, or flags without the train stage: exit 2, nothing run;
#   - Ctrl-C (SIGINT to the process group) during training: the ranks checkpoint, the script
#     exits 75 and goes on to no other stage (the embeddings stay those of the first run);
#   - run again with more epochs: training resumes and finishes, embed and score see the new
#     checkpoint and run again (saying why), and the final scores come from the final
#     checkpoint (the OUT.from records chain back to it);
#   - run again unchanged: training says it had finished, every other stage is up to date.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh" "$@"
MAKE_AUG_DATA=$(dirname "$MAKE_BAD_DATA")/make_aug_data
recipe=$(cd "$HERE/../../jobscripts/recipes/voxceleb" && pwd)
ff() { ffmpeg -nostdin -loglevel error -y "$@"; }

# --- the corpus in VoxCeleb's layout -------------------------------------------------------
bash "$HERE/make_speech_corpus.sh" v2 6 4 1 >/dev/null && bash "$HERE/make_speech_corpus.sh" v1 4 3 5 >/dev/null \
    && bash "$HERE/make_speech_corpus.sh" babble 3 2 9 >/dev/null && "$MAKE_AUG_DATA" banks "$PWD/banks" 1 \
    || fail "corpus"
while read -r id path; do  # spk01-utt02 -> VOX2/dev/aac/id00001/vid02/00002.m4a
    s=${id%%-*} u=${id##*utt}
    mkdir -p "VOX2/dev/aac/id000${s#spk}/vid$u" && ff -i "$path" -c:a aac "VOX2/dev/aac/id000${s#spk}/vid$u/000$u.m4a"
done <v2/wav.scp
while read -r id path; do
    s=${id%%-*} u=${id##*utt}
    mkdir -p "VOX1/wav/id100${s#spk}/vid$u" && cp "$path" "VOX1/wav/id100${s#spk}/vid$u/000$u.wav"
done <v1/wav.scp
while read -r id cat; do
    mkdir -p "MUSAN/$cat/src" && cp "banks/wav/$id.wav" "MUSAN/$cat/src/$id.wav"
done <banks/noise.utt2cat
while read -r id path; do mkdir -p MUSAN/speech/librivox && cp "$path" "MUSAN/speech/librivox/$id.wav"; done <babble/wav.scp
while read -r id cat; do
    mkdir -p "RIRS/simulated_rirs/${cat}room/Room1" && cp "banks/wav/$id.wav" "RIRS/simulated_rirs/${cat}room/Room1/$id.wav"
done <banks/rir.utt2cat
# Every pair of VoxCeleb1 utterances, official format, as the O, E and H lists.
mkdir -p lists
find VOX1/wav -name '*.wav' | sed 's|^VOX1/wav/||' | LC_ALL=C sort >v1.ids
awk '{ u[NR] = $1 } END { for (i = 1; i <= NR; i++) for (j = i + 1; j <= NR; j++) {
    split(u[i], a, "/"); split(u[j], b, "/"); print (a[1] == b[1]) ? 1 : 0, u[i], u[j] } }' v1.ids >lists/veri_test2.txt
cp lists/veri_test2.txt lists/list_test_all2.txt && cp lists/veri_test2.txt lists/list_test_hard2.txt
VOX1=$PWD/VOX1 VOX2=$PWD/VOX2 MUSAN=$PWD/MUSAN RIRS=$PWD/RIRS bash "$recipe/lists.sh" >lists.log 2>&1 \
    || fail "lists.sh: $(cat lists.log)"

export SPKDDP MPIEXEC NP=2
small="--channels 16 --emb-dim 16 --attention-channels 8 --se-channels 8 --frames 60 --global-batch 8
       --warmup-steps 2 --progress 0"
R() { bash "$recipe/run.sh" "$@"; }

# --- misuse -------------------------------------------------------------------------------
R scoring >bad.log 2>&1
[ $? -eq 2 ] && grep -q "no stage 'scoring'" bad.log && [ ! -e vox2_dev.h5 ] && echo "ok  run.sh scoring: exit 2, $(cat bad.log)" \
    || fail "run.sh scoring: $(cat bad.log)"
R score --epochs 1 >bad.log 2>&1
[ $? -eq 2 ] && grep -q "go to the train stage, which is not run" bad.log && echo "ok  run.sh score --epochs 1: exit 2" \
    || fail "run.sh score --epochs 1: $(cat bad.log)"

# --- the whole recipe, 2 epochs ---------------------------------------------------------------
# shellcheck disable=SC2086
R $small --epochs 2 >run1.log 2>&1 || fail "run.sh (2 epochs): exit $?: $(tail -5 run1.log)"
grep -q "margin-warmup-end 5 is after the last epoch (2)" run1.log && grep -q "AS-norm is S-norm here" run1.log \
    && echo "ok  run.sh, 2 epochs: the shrunk schedule and the small cohort are named" || fail "warnings: $(grep -i warn run1.log)"
for f in vox1_emb.h5 cohort_emb.h5 scores_vox1_o.txt scores_vox1_e.txt scores_vox1_h.txt llr_vox1_o.txt det_vox1_o.png; do
    [ -s $f ] || fail "run.sh left no $f"
done
grep -q "ckpt/ckpt-000000000006.h5 " vox1_emb.h5.from || fail "the embeddings are not from step 6: $(cat vox1_emb.h5.from)"
[ "$(wc -l <vox1.h5.utt2dur)" -eq 12 ] && grep -q "^vox1.h5.utt2dur " llr_vox1_o.txt.from \
    && echo "ok  prepare wrote vox1.h5.utt2dur ($(head -1 vox1.h5.utt2dur)), the calibration used it" \
    || fail "utt2dur: $(head -2 vox1.h5.utt2dur); $(cat llr_vox1_o.txt.from)"
cp vox1_emb.h5.from first.from

# --- Ctrl-C during training, with more epochs (a change the resume must be allowed) ---------
more="--epochs 60 --resume-allow epochs"
# Job control on: the script runs in a process group of its own, as from a terminal, and does
# not start with SIGINT ignored (as a shell's background jobs do without it).
set -m
# shellcheck disable=SC2086
bash "$recipe/run.sh" $small $more >run2.log 2>&1 &
m=$!
set +m
for _ in $(seq 1 3000); do grep -q '^epoch 4/60 ' run2.log && break; sleep 0.01; done
kill -INT -- -"$m"
wait $m
rc=$?
step=$(grep -oE 'received SIGINT: stopped at global step [0-9]+' run2.log | grep -oE '[0-9]+$')
if [ $rc -eq 75 ] && [ -n "$step" ] && [ -e "ckpt/ckpt-$(printf %012d "$step").h5" ] && cmp -s first.from vox1_emb.h5.from \
    && ! grep -q "vox1_emb.h5" run2.log; then
    echo "ok  Ctrl-C in training: checkpoint at step $step, run.sh exit 75, no later stage ran"
else
    fail "Ctrl-C: exit $rc, step '$step': $(tail -5 run2.log)"
fi

# --- again, to the end ----------------------------------------------------------------------
# shellcheck disable=SC2086
R $small $more >run3.log 2>&1 || fail "run.sh after the stop: exit $?: $(tail -5 run3.log)"
final=ckpt/ckpt-$(printf %012d 180).h5
. "$HERE/../../jobscripts/lib.sh"
if grep -q "resumed from ckpt/ckpt-$(printf %012d "$step").h5" run3.log && grep -q "vox1_emb.h5: made from other inputs" run3.log \
    && grep -q "^$final " vox1_emb.h5.from && [ "$(cat scores_vox1_o.txt.from)" = "$(inputs_of "$recipe/score_vox1_o.yaml" vox1_emb.h5 lists/veri_test2.txt cohort_emb.h5)" ]; then
    echo "ok  run again with 60 epochs: resumed at step $step, embed and score ran again, the scores come from $final"
else
    fail "after the stop: $(grep -E 'resumed|made from|up to date' run3.log); emb from $(cat vox1_emb.h5.from)"
fi

# --- again, unchanged --------------------------------------------------------------------
# shellcheck disable=SC2086
R $small $more >run4.log 2>&1 || fail "run.sh unchanged: exit $?: $(tail -5 run4.log)"
if grep -q "already finished: 60 of 60 epochs, global step 180" run4.log && grep -q "vox1_emb.h5: up to date" run4.log \
    && grep -q "scores_vox1_h.txt: up to date" run4.log && grep -q "llr_vox1_o.txt: up to date" run4.log; then
    echo "ok  run again unchanged: training had finished, every later stage up to date"
else
    fail "unchanged rerun: $(grep -E 'already|up to date|made from' run4.log)"
fi

# --- a stop reaches the ranks of a binary rebuilt since they started (lib.sh's run_stage) -------
mkdir -p rebuilt && cp "$SPKDDP" rebuilt/spkddp
$SPKDDP synth --kind speakers --out rb.h5 --dim 8 --speakers 4 --utts-per-speaker 16 --min-frames 10 --max-frames 20 >/dev/null
cat >rb.sh <<EOS
. "$recipe/../../lib.sh"
par() { mpiexec -n 2 "\$SPKDDP" "\$@"; }
run_stage par train --data rb.h5 --ckpt-dir rb_ck --batch 4 --epochs 100000 --progress 0 || exit \$?
EOS
SPKDDP=$PWD/rebuilt/spkddp bash rb.sh >rb.log 2>&1 &
m=$!
for _ in $(seq 1 300); do [ -n "$(ls rb_ck/ckpt-*.h5 2>/dev/null)" ] && break; sleep 0.05; done
cp rebuilt/spkddp rebuilt/new && mv rebuilt/new rebuilt/spkddp  # its old file is now "(deleted)"
kill -USR1 $m
for _ in $(seq 1 300); do kill -0 $m 2>/dev/null || break; sleep 0.1; done
kill -0 $m 2>/dev/null && { pkill -f "rebuilt/spkddp"; fail "the stop did not reach the ranks of a rebuilt binary"; }
wait $m
rc=$?
[ $rc -eq 75 ] && grep -q "received SIGTERM: stopped at global step" rb.log \
    && echo "ok  SIGUSR1 to a recipe stage reached the ranks of a rebuilt binary: exit 75 with a checkpoint" \
    || fail "rebuilt binary: exit $rc: $(tail -3 rb.log)"
finish
