#!/usr/bin/env bash
# The VoxCeleb recipe: ECAPA-TDNN (train.yaml), WeSpeaker's ResNet34 (TRAIN=train_resnet34
# AVERAGE=10) or 3D-Speaker's CAM++ (TRAIN=train_campplus AVERAGE=10) trained on VoxCeleb2-dev
# with MUSAN/RIRS_NOISES augmentation, evaluated on the cleaned VoxCeleb1 O, E and H lists with
# AS-norm and calibrated on E. Every step reads the YAML file of the same name beside this
# script; flags after it override keys.
#
#   1. lists:    VOX1=... VOX2=... MUSAN=... RIRS=... jobscripts/recipes/voxceleb/lists.sh
#   2. trials:   put VoxCeleb's veri_test2.txt, list_test_all2.txt, list_test_hard2.txt in lists/
#   3. this:     NP=8 SPKDDP=/path/to/spkddp jobscripts/recipes/voxceleb/run.sh [STAGE]
#
# Stages (default: all, in order): prepare, train, embed, score, calibrate. Each is skipped
# when its output exists, so the script can be run again after a stop; training itself resumes
# from its newest checkpoint (resume: auto). On a Slurm cluster run the train stage as a batch
# job instead: CONFIG=jobscripts/recipes/voxceleb/train.yaml sbatch jobscripts/train.sbatch
# (with that job's CKPT_DIR given to this script as CKPT).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SPKDDP=${SPKDDP:-spkddp}
MPIEXEC=${MPIEXEC:-mpiexec}
NP=${NP:-8}
CKPT=${CKPT:-ckpt}
TRAIN=${TRAIN:-train}      # the training configuration: train (ECAPA-TDNN), train_resnet34 or train_campplus
AVERAGE=${AVERAGE:-0}      # embed with the mean of the last N checkpoints (0: the last one)
stage=${1:-all}
par() { "$MPIEXEC" -n "$NP" "$SPKDDP" "$@"; }
want() { [ "$stage" = all ] || [ "$stage" = "$1" ]; }

if want prepare; then
    for set in vox2_dev vox1 cohort musan rirs; do
        out=$(sed -nE 's/^out: *//p' "$here/prepare_$set.yaml")
        [ -f "$out" ] || par prepare --config "$here/prepare_$set.yaml"
    done
fi
if want train; then
    par train --config "$here/$TRAIN.yaml" --ckpt-dir "$CKPT" --metrics "$CKPT/metrics.jsonl"
fi
if want embed; then
    ckpt=$(ls "$CKPT"/ckpt-*.h5 | tail -1)
    if [ "$AVERAGE" -gt 0 ]; then
        # shellcheck disable=SC2046
        "$SPKDDP" average --out "$CKPT/avg$AVERAGE.h5" $(ls "$CKPT"/ckpt-*.h5 | tail -"$AVERAGE")
        ckpt=$CKPT/avg$AVERAGE.h5
    fi
    [ -f vox1_emb.h5 ] || par embed --config "$here/embed.yaml" --ckpt "$ckpt" --data vox1.h5 --out vox1_emb.h5
    [ -f cohort_emb.h5 ] || par embed --config "$here/embed.yaml" --ckpt "$ckpt" --data cohort.h5 --out cohort_emb.h5
fi
if want score; then
    for list in o e h; do
        par score --config "$here/score_vox1_$list.yaml" | tee "score_vox1_$list.log"
    done
fi
if want calibrate; then
    # Fitted on VoxCeleb1-E's AS-norm scores (field 4), with the log durations as quality
    # measures when data/vox1/utt2dur exists (Kaldi's utils/data/get_utt2dur.sh makes it).
    dur=()
    [ -f data/vox1/utt2dur ] && dur=(--utt2dur data/vox1/utt2dur)
    "$SPKDDP" calibrate --scores scores_vox1_e.txt --field 4 --fit calibration.yaml "${dur[@]}"
    "$SPKDDP" calibrate --scores scores_vox1_o.txt --apply calibration.yaml --out llr_vox1_o.txt "${dur[@]}"
fi
