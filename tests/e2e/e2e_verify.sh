#!/usr/bin/env bash
# Speaker verification end to end on synthetic features: train ECAPA on 2 ranks, embed
# speakers never seen in training, make trials, score with cosine and AS-norm. The EER must
# be far below chance (50%). Then VoxCeleb's trial format, S-norm, the DET plot, and a
# calibration fitted on half the trials that must lower Cllr on the other half. Last, the
# large-margin fine-tuning recipe (docs/interop.md) from the trained run -- longer crops, a
# larger margin, a tenth of the learning rate -- must keep or improve the cosine EER on the
# same trials.
. "$(dirname "$0")/lib.sh" "$@"

$SPKDDP synth --kind speakers --out train.h5 --dim 16 --speakers 60 --utts-per-speaker 10 \
    --min-frames 60 --max-frames 100 >/dev/null || fail "synth train"
$SPKDDP synth --kind speakers --out test.h5 --dim 16 --speakers 10 --first-speaker 100 --utts-per-speaker 8 \
    --min-frames 60 --max-frames 120 >/dev/null || fail "synth unseen speakers"
# The held-out trials for per-epoch validation come from a first embedding of the unseen set
# (labels only matter for the trial list).
$SPKDDP synth --kind speakers --out val.h5 --dim 16 --speakers 8 --first-speaker 200 --utts-per-speaker 5 \
    --min-frames 60 --max-frames 100 >/dev/null || fail "synth validation speakers"
run 1 $SPKDDP train --data val.h5 --epochs 1 --batch 8 --ckpt-dir ck_lin --progress 0 >/dev/null || fail "linear model"
run 1 $SPKDDP embed --ckpt ck_lin/ckpt-000000000005.h5 --data val.h5 --out val_lin.h5 >/dev/null || fail "embed val"
$SPKDDP trials --emb val_lin.h5 --out val_trials.txt >/dev/null || fail "val trials"
run 2 $SPKDDP train --model ecapa --channels 32 --attention-channels 16 --se-channels 16 --emb-dim 32 --frames 48 \
    --data train.h5 --val-data val.h5 --val-trials val_trials.txt --epochs 12 --global-batch 32 --optimizer adam \
    --lr 0.005 --ckpt-dir ck --metrics metrics.jsonl --progress 0 >log_train || { cat log_train; fail "train"; }
grep -q '"val_eer": ' metrics.jsonl || fail "metrics lack val_eer"
last_eer=$(sed -nE '$s/.*"val_eer": ([0-9.e-]+).*/\1/p' metrics.jsonl)
echo "validation EER after 12 epochs: $last_eer"
awk -v e="$last_eer" 'BEGIN { exit !(e < 0.35) }' || fail "validation EER $last_eer did not fall"
if command -v gnuplot >/dev/null; then
    bash "$(dirname "$0")/../../tools/plot_metrics.sh" metrics.jsonl metrics.png >/dev/null && [ -s metrics.png ] || fail "plot"
fi
ck=$(ls ck/ckpt-*.h5 | tail -1)
run 2 $SPKDDP embed --ckpt "$ck" --data test.h5 --out test_emb.h5 >/dev/null || fail "embed test"
run 2 $SPKDDP embed --ckpt "$ck" --data train.h5 --out cohort.h5 >/dev/null || fail "embed cohort"
$SPKDDP inspect "$ck" >/dev/null || fail "inspect checkpoint"
$SPKDDP trials --emb test_emb.h5 --out trials.txt >/dev/null || fail "trials"
# Counts past what the list can hold give every pair, at once (they drew until the tries ran out).
n=$($SPKDDP inspect test_emb.h5 | sed -nE 's/^  embeddings +([0-9]+) .*/\1/p')
timeout 60 $SPKDDP trials --emb test_emb.h5 --out all_pairs.txt --targets 1000000 --nontargets 1000000 >/dev/null \
    && [ "$(sort -u all_pairs.txt | wc -l)" -eq $((n * (n - 1) / 2)) ] \
    && echo "ok  trials --targets/--nontargets 1000000: all $((n * (n - 1) / 2)) pairs of $n utterances" \
    || fail "trials with counts past the pairs: $(wc -l <all_pairs.txt 2>&1) lines for $n utterances"
run 2 $SPKDDP score --emb test_emb.h5 --trials trials.txt --cohort cohort.h5 --top 100 --out scores.txt >score.log \
    || { cat score.log; fail "score"; }
cat score.log
eer=$(sed -nE 's/ *cosine +EER +([0-9.]+)%.*/\1/p' score.log)
awk -v e="$eer" 'BEGIN { exit !(e < 30) }' || fail "EER $eer% on unseen speakers is not far below chance"
[ "$(grep -c . scores.txt)" -eq "$(grep -c . trials.txt)" ] || fail "one score per trial"
# VoxCeleb's official list format ('1|0 utt1 utt2') scores the same trials the same way.
awk '{ print ($3 == "target" ? 1 : 0), $1, $2 }' trials.txt >vox_trials.txt
$SPKDDP score --emb test_emb.h5 --trials vox_trials.txt >score_vox.log || fail "score a VoxCeleb-format list"
[ "$(grep -E 'cosine +EER' score.log)" = "$(grep -E 'cosine +EER' score_vox.log)" ] || fail "VoxCeleb format scores differently"
# S-norm, minDCF at chosen priors, the DET table and plot.
run 2 $SPKDDP score --emb test_emb.h5 --trials trials.txt --cohort cohort.h5 --norm s-norm --p-target 0.05,0.001 \
    --det det.png --out snorm.txt >score_s.log || { cat score_s.log; fail "score with s-norm and --det"; }
grep -qE 's-norm +EER +[0-9.]+% +minDCF\(0.05\) [0-9.]+ +minDCF\(0.001\)' score_s.log || fail "s-norm line: $(cat score_s.log)"
grep -qE '^ +1.0% +[0-9.]+% +[0-9.]+%' score_s.log || fail "no DET table row at 1% false alarms"
[ "$(head -c 4 det.png | od -An -c | tr -d ' ')" = "211PNG" ] || fail "det.png is not a PNG"
[ "$(grep -c '^# s-norm' det.txt)" -eq 1 ] && [ "$(grep -c '^# cosine' det.txt)" -eq 1 ] || fail "det.txt lacks a curve"
echo "ok  VoxCeleb-format trials, s-norm, DET plot and table"
# Calibration: fitted on half the trials, applied to the other half; quality measures from durations.
awk 'NR % 2' scores.txt >dev_scores.txt
awk '!(NR % 2)' scores.txt >eval_scores.txt
awk '{ print $1; print $2 }' scores.txt | sort -u | awk '{ print $1, 1 + (NR % 7) * 0.5 }' >utt2dur
$SPKDDP calibrate --scores dev_scores.txt --fit calib.yaml --utt2dur utt2dur >cal_fit.log || { cat cal_fit.log; fail "calibrate --fit"; }
run 2 $SPKDDP calibrate --scores eval_scores.txt --apply calib.yaml --utt2dur utt2dur --out llr.txt >cal_apply.log \
    || { cat cal_apply.log; fail "calibrate --apply"; }
cat cal_apply.log
cllr=$(sed -nE 's/ *calibrated +Cllr ([0-9.]+).*/\1/p' cal_apply.log)
awk -v c="$cllr" 'BEGIN { exit !(c < 0.8) }' || fail "calibrated Cllr $cllr on held-out trials is not well below 1"
[ "$(grep -c . llr.txt)" -eq "$(grep -c . eval_scores.txt)" ] || fail "one llr per trial"
expect_error 2 "calib.yaml was fitted with durations; give --utt2dur" -- $SPKDDP calibrate --scores eval_scores.txt --apply calib.yaml
run 2 $SPKDDP train --model ecapa --channels 32 --attention-channels 16 --se-channels 16 --emb-dim 32 --data train.h5 \
    --init-from "$ck" --frames 96 --margin 0.4 --lr 0.0005 --epochs 3 --global-batch 32 --optimizer adam \
    --ckpt-dir ft --progress 0 >log_ft || { cat log_ft; fail "fine-tune"; }
run 2 $SPKDDP embed --ckpt "$(ls ft/ckpt-*.h5 | tail -1)" --data test.h5 --out ft_emb.h5 >/dev/null || fail "embed fine-tuned"
$SPKDDP score --emb ft_emb.h5 --trials trials.txt >score_ft.log || fail "score fine-tuned"
ft_eer=$(sed -nE 's/ *cosine +EER +([0-9.]+)%.*/\1/p' score_ft.log)
echo "large-margin fine-tuning: cosine EER $eer% -> $ft_eer%"
awk -v a="$eer" -v b="$ft_eer" 'BEGIN { exit !(b <= a) }' || fail "fine-tuning raised the EER from $eer% to $ft_eer%"
# Bad trial lines name the file and line.
printf 'spk0100-utt00000 nobody target\n' >bad_trials.txt
expect_error 3 "bad_trials.txt:1: utterance 'nobody' is not in the embeddings" -- $SPKDDP score --emb test_emb.h5 --trials bad_trials.txt
printf 'spk0100-utt00000 spk0101-utt00000 maybe\n' >bad_label.txt
expect_error 3 "bad_label.txt:1: label 'maybe' must be" -- $SPKDDP score --emb test_emb.h5 --trials bad_label.txt
finish
