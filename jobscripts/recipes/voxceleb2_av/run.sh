#!/usr/bin/env bash
# The VoxCeleb2 audio-visual recipe: ecapa-av with its face encoder (train.yaml) on VoxCeleb2-dev's
# speech and face tracks, evaluated on VoxCeleb2-test's unseen speakers with the audio and the
# face together, each alone (embed --modality), and the score-level fusion of the two alone
# (docs/audio-visual.md). Run it from a work folder of its own:
#
#   1. lists:  VOX2=... jobscripts/recipes/voxceleb2_av/lists.sh
#   2. this:   NP=8 SPKDDP=/path/to/spkddp jobscripts/recipes/voxceleb2_av/run.sh [STAGE ...] [--flag value ...]
#
# Stages (default: all, in order): prepare, train, embed, score. Flags after the stages override
# the training configuration's keys. Outputs record what they were made from and are skipped when
# that is unchanged; training resumes from its newest checkpoint; a signal stops the stage in
# progress in order (as jobscripts/recipes/voxceleb/run.sh).
#
# Environment: SPKDDP (spkddp), MPIEXEC (mpiexec), NP (8 ranks), CKPT (the configuration's
# ckpt-dir, else ckpt), TRAIN (train),
# TRIALS (trials per test utterance for each kind: 20 same-speaker and 20 other-speaker).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SPKDDP=${SPKDDP:-spkddp}
MPIEXEC=${MPIEXEC:-mpiexec}
NP=${NP:-8}
TRAIN=${TRAIN:-train}
TRIALS=${TRIALS:-20}
. "$here/../../lib.sh"
CKPT=${CKPT:-$(key ckpt-dir "$here/$TRAIN.yaml")}
CKPT=${CKPT:-ckpt}
stages_parse "prepare train embed score" "$@"
par() { "$MPIEXEC" -n "$NP" "$SPKDDP" "$@"; }

stage_wanted prepare && prepare_stage av_dev av_test
stage_wanted train && train_stage
if stage_wanted embed; then
    mapfile -t ckpts < <(ls "$CKPT"/ckpt-*.h5 2>/dev/null)
    [ ${#ckpts[@]} -gt 0 ] || { echo "$0: embed: no checkpoint in $CKPT/ (run the train stage)" >&2; exit 3; }
    for mo in both audio visual; do
        ins=("${ckpts[-1]}" "$here/embed.yaml" av_test.h5)
        up_to_date "test_$mo.h5" "${ins[@]}" && continue
        run_stage par embed --config "$here/embed.yaml" --ckpt "${ckpts[-1]}" --data av_test.h5 --modality $mo \
            --out "test_$mo.h5" || stage_failed embed $?
        made_from "test_$mo.h5" "${ins[@]}"
    done
fi
if stage_wanted score; then
    if ! up_to_date trials.txt av_test.h5; then
        run_stage "$SPKDDP" trials --emb test_both.h5 --out trials.txt --targets "$TRIALS" --nontargets "$TRIALS" \
            || stage_failed score $?
        made_from trials.txt av_test.h5
    fi
    for mo in both audio visual; do
        echo "== $mo"
        run_stage par score --emb "test_$mo.h5" --trials trials.txt --out "scores_$mo.txt" || stage_failed score $?
    done
    echo "== audio alone + face alone (score-level fusion)"
    run_stage par score --emb test_audio.h5 --fuse test_visual.h5 --trials trials.txt --out scores_fused.txt \
        || stage_failed score $?
fi
