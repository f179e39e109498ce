#!/usr/bin/env bash
# The synthetic recipe end to end: corpus -> training -> embeddings -> trials -> scores ->
# calibration, each step configured by the YAML file beside this script (flags on a command
# line override them). Runs in a minute on two CPU ranks:
#
#   SPKDDP=build/app/spkddp jobscripts/recipes/synthetic/run.sh [WORKDIR]
#
# Environment: SPKDDP (default: spkddp on PATH), MPIEXEC (default: mpiexec), NP (ranks,
# default 2), TRAIN (the training configuration: train, a small ECAPA-TDNN, train_resnet34, train_campplus,
# train_supcon, train_simclr or train_dino). Everything is written to WORKDIR (default: ./synthetic); a second run resumes
# the training from its newest checkpoint and redoes the rest.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SPKDDP=${SPKDDP:-spkddp}
case $SPKDDP in */*) SPKDDP=$(cd "$(dirname "$SPKDDP")" && pwd)/$(basename "$SPKDDP") ;; esac
MPIEXEC=${MPIEXEC:-mpiexec}
NP=${NP:-2}
TRAIN=${TRAIN:-train}
mkdir -p "${1:-synthetic}"
cd "${1:-synthetic}"

"$SPKDDP" synth --config "$here/synth_train.yaml"
"$SPKDDP" synth --config "$here/synth_test.yaml"
"$MPIEXEC" -n "$NP" "$SPKDDP" train --config "$here/$TRAIN.yaml"
ckpt=$(ls ckpt/ckpt-*.h5 | tail -1)
"$MPIEXEC" -n "$NP" "$SPKDDP" embed --ckpt "$ckpt" --data test.h5 --out test_emb.h5
"$MPIEXEC" -n "$NP" "$SPKDDP" embed --ckpt "$ckpt" --data train.h5 --out cohort_emb.h5
"$SPKDDP" trials --emb test_emb.h5 --out trials.txt
"$MPIEXEC" -n "$NP" "$SPKDDP" score --config "$here/score.yaml"
# Calibration: fitted on the even trials, checked on the odd ones (a real recipe fits on a
# development list of other speakers, as the VoxCeleb recipe does).
awk 'NR % 2 == 0' scores.txt >dev_scores.txt
awk 'NR % 2 == 1' scores.txt >eval_scores.txt
"$SPKDDP" calibrate --scores dev_scores.txt --fit calibration.yaml
"$SPKDDP" calibrate --scores eval_scores.txt --apply calibration.yaml --out eval_llr.txt
