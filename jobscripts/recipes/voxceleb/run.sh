#!/usr/bin/env bash
# The VoxCeleb recipe: ECAPA-TDNN (train.yaml), WeSpeaker's ResNet34 (TRAIN=train_resnet34
# AVERAGE=10) or 3D-Speaker's CAM++ (TRAIN=train_campplus AVERAGE=10) trained on VoxCeleb2-dev
# with MUSAN/RIRS_NOISES augmentation, evaluated on the cleaned VoxCeleb1 O, E and H lists with
# AS-norm and calibrated on E. Every step reads the YAML file of the same name beside this
# script. Run it from a work folder of its own (data/, the datasets, ckpt/ and the scores are
# written there; docs/recipes.md):
#
#   1. lists:    VOX1=... VOX2=... MUSAN=... RIRS=... jobscripts/recipes/voxceleb/lists.sh
#   2. trials:   put VoxCeleb's veri_test2.txt, list_test_all2.txt, list_test_hard2.txt in lists/
#   3. this:     NP=8 SPKDDP=/path/to/spkddp jobscripts/recipes/voxceleb/run.sh [STAGE ...] [--flag value ...]
#
# Stages (default: all, in order): prepare, train, embed, score, calibrate. Flags after the
# stages override the training configuration's keys (run.sh train --epochs 10). Each output
# records what it was made from (OUT.from): a stage whose inputs are unchanged is skipped, one
# whose inputs changed (a new checkpoint, another config) runs again and says so; training
# itself resumes from its newest checkpoint and says when it had already finished. The first
# stage that fails ends the script with its exit code. SIGINT (Ctrl-C), SIGTERM or SIGUSR1 to
# the script stops the stage in progress in order (training checkpoints) and ends the script
# with that stage's code (75 for training): run it again to go on. On a Slurm cluster run the
# train stage as a batch job instead: CONFIG=jobscripts/recipes/voxceleb/train.yaml sbatch
# jobscripts/train.sbatch (with that job's CKPT_DIR given to this script as CKPT).
#
# Environment: SPKDDP (spkddp), MPIEXEC (mpiexec), NP (8 ranks), TRAIN (train: the configuration),
# CKPT (the configuration's ckpt-dir, else ckpt), AVERAGE (0: embed with the last checkpoint; N:
# the mean of the last N, or of all when there are fewer).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SPKDDP=${SPKDDP:-spkddp}
MPIEXEC=${MPIEXEC:-mpiexec}
NP=${NP:-8}
TRAIN=${TRAIN:-train}
AVERAGE=${AVERAGE:-0}
. "$here/../../lib.sh"
CKPT=${CKPT:-$(key ckpt-dir "$here/$TRAIN.yaml")}
CKPT=${CKPT:-ckpt}
stages_parse "prepare train embed score calibrate" "$@"
par() { "$MPIEXEC" -n "$NP" "$SPKDDP" "$@"; }

stage_wanted prepare && prepare_stage vox2_dev vox1 cohort musan rirs
stage_wanted train && train_stage
if stage_wanted embed; then
    mapfile -t ckpts < <(ls "$CKPT"/ckpt-*.h5 2>/dev/null)
    [ ${#ckpts[@]} -gt 0 ] || { echo "$0: embed: no checkpoint in $CKPT/ (run the train stage)" >&2; exit 3; }
    ckpt=${ckpts[-1]}
    if [ "$AVERAGE" -gt 0 ]; then
        if [ ${#ckpts[@]} -lt "$AVERAGE" ]; then
            echo "$0: embed: AVERAGE=$AVERAGE, but $CKPT/ holds ${#ckpts[@]} checkpoint(s): averaging those" >&2
            AVERAGE=${#ckpts[@]}
        fi
        last=("${ckpts[@]: -$AVERAGE}")
        ckpt=$CKPT/avg$AVERAGE.h5
        if ! up_to_date "$ckpt" "${last[@]}"; then
            run_stage "$SPKDDP" average --out "$ckpt" "${last[@]}" || stage_failed embed $?
            made_from "$ckpt" "${last[@]}"
        fi
    fi
    for set in vox1 cohort; do
        ins=("$ckpt" "$here/embed.yaml" "$set.h5")
        up_to_date "${set}_emb.h5" "${ins[@]}" && continue
        run_stage par embed --config "$here/embed.yaml" --ckpt "$ckpt" --data "$set.h5" --out "${set}_emb.h5" \
            || stage_failed embed $?
        made_from "${set}_emb.h5" "${ins[@]}"
    done
fi
if stage_wanted score; then
    for list in o e h; do
        y=$here/score_vox1_$list.yaml out=$(key out "$y")
        # shellcheck disable=SC2207
        ins=("$y" $(key emb "$y") $(key trials "$y") $(key cohort "$y"))
        up_to_date "$out" "${ins[@]}" && { cat "score_vox1_$list.log"; continue; }
        run_stage par score --config "$y" >"score_vox1_$list.log" 2>&1
        rc=$?
        cat "score_vox1_$list.log"
        [ $rc -eq 0 ] || stage_failed score $rc
        made_from "$out" "${ins[@]}"
    done
fi
if stage_wanted calibrate; then
    # Fitted on VoxCeleb1-E's AS-norm scores (field 4), with the log durations as quality
    # measures (vox1.h5.utt2dur, which prepare writes beside the dataset).
    dur=() ins=(scores_vox1_e.txt scores_vox1_o.txt)
    [ -f vox1.h5.utt2dur ] && dur=(--utt2dur vox1.h5.utt2dur) && ins+=(vox1.h5.utt2dur)
    if ! up_to_date llr_vox1_o.txt "${ins[@]}"; then
        run_stage "$SPKDDP" calibrate --scores scores_vox1_e.txt --field 4 --fit calibration.yaml "${dur[@]}" \
            || stage_failed calibrate $?
        run_stage "$SPKDDP" calibrate --scores scores_vox1_o.txt --apply calibration.yaml --out llr_vox1_o.txt \
            "${dur[@]}" || stage_failed calibrate $?
        made_from llr_vox1_o.txt "${ins[@]}"
    fi
fi
