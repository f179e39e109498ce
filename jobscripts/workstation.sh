#!/bin/bash
# spkddp training on one machine with `mpiexec -n K`: the same job as train.sbatch, without
# Slurm. Every start resumes from the newest valid checkpoint in CKPT_DIR (--resume auto), so
# running the script again after a stop, crash or reboot continues where it left off.
#
#   DATA=train.h5 EXTRA="--epochs 40 --global-batch 128" NP=4 jobscripts/workstation.sh
#   NP=2 RERUN=1 jobscripts/workstation.sh --lr 1e-3        # args go to spkddp
#   CONFIG=jobscripts/recipes/synthetic/train.yaml NP=2 jobscripts/workstation.sh   # a recipe
#
# Checkpoint on demand: `kill -USR1 <pid of this script>`; it signals the ranks, which agree
# on a step, write a checkpoint and exit 75. With RERUN=1 the script then starts again from that
# checkpoint (a "save now" that keeps training); otherwise it stops there. SIGTERM or Ctrl-C
# to this script is passed on as SIGTERM (the ranks checkpoint, exit 75) and never reruns.
#
# Environment (all optional):
#   SPKDDP     spkddp binary                      (default: spkddp on PATH)
#   MPIEXEC    MPI launcher                       (default: mpiexec)
#   NP         ranks                              (default: 2)
#   CONFIG     a recipe (spkddp train --config); DATA and EXTRA then default to nothing
#   DATA       training dataset                   (default: train.h5)
#   CKPT_DIR   checkpoint directory               (default: ./ckpt)
#   METRICS    per-epoch metrics file             (default: $CKPT_DIR/metrics.jsonl)
#   EXTRA      further `spkddp train` flags, word-split (default: --epochs 40 --progress 60)
#   RERUN      1: start again after exit 75 (SIGUSR1), 0: stop (default: 0)
#   MAX_RERUNS stop rerunning after this many restarts (default: 20)
# Threads per rank: spkddp divides the cores by the ranks (SPKDDP_THREADS overrides). A
# workstation runs other work too, so threads waiting at a barrier sleep instead of spinning
# (OMP_WAIT_POLICY, default here passive): beside one busy process, ECAPA C=512 on 2 threads
# went from 10.3-10.8 to 12.6-12.7 samples/s; on a quiet machine the two were alike.
# GPUs: set NP to the number of GPUs; --device auto (the default) gives rank r GPU r and
# averages gradients with NCCL. More ranks than GPUs also runs, averaging through the host.
#
# Exit status: spkddp's (0 finished, 1 system failure, 2 usage, 3 bad data, 4 checkpoint,
# 5 numeric, 75 checkpointed on a signal: run the script again to continue); 0 at once when
# CKPT_DIR/FINISHED exists. Files: CKPT_DIR/ckpt-<step>.h5, CKPT_DIR/FINISHED, $METRICS.
set -u

SPKDDP=${SPKDDP:-spkddp}
MPIEXEC=${MPIEXEC:-mpiexec}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
NP=${NP:-2}
CONFIG=${CONFIG:-}
# With a recipe its own data and settings rule; DATA and EXTRA then only override them.
if [ -n "$CONFIG" ]; then
    DATA=${DATA:-} EXTRA=${EXTRA:-}
else
    DATA=${DATA:-train.h5} EXTRA=${EXTRA:---epochs 40 --progress 60}
fi
RECIPE=()
[ -n "$CONFIG" ] && RECIPE+=(--config "$CONFIG")
[ -n "$DATA" ] && RECIPE+=(--data "$DATA")
CKPT_DIR=${CKPT_DIR:-ckpt}
METRICS=${METRICS:-$CKPT_DIR/metrics.jsonl}
RERUN=${RERUN:-0}
MAX_RERUNS=${MAX_RERUNS:-20}

# The ranks are signalled themselves, not mpiexec (jobscripts/lib.sh: signal_ranks).
. "$(dirname "$0")/lib.sh"
forward() {
    [ -n "$pid" ] || return 0
    signalled=1
    signal_ranks "$1" "$pid"
}
if ! command -v "$SPKDDP" >/dev/null 2>&1; then
    echo "workstation: SPKDDP=$SPKDDP: no such program (set SPKDDP to the spkddp binary)" >&2
    exit 2
fi
stopping=0
trapped=0
signalled=0
pid=""
on_term() { trapped=1; stopping=1; forward TERM; }
on_usr1() { trapped=1; forward USR1; }
trap on_term TERM INT
trap on_usr1 USR1

runs=0
while :; do
    if [ -f "$CKPT_DIR/FINISHED" ]; then
        echo "workstation: $CKPT_DIR/FINISHED exists ($(cat "$CKPT_DIR/FINISHED")): nothing to do"
        exit 0
    fi
    mkdir -p "$CKPT_DIR" || exit 1
    echo "=== spkddp start $runs at $(date -Is): $NP ranks, ckpt dir $CKPT_DIR"
    # shellcheck disable=SC2086  # EXTRA is a list of flags
    "$MPIEXEC" -n "$NP" "$SPKDDP" train "${RECIPE[@]}" --ckpt-dir "$CKPT_DIR" --metrics "$METRICS" \
        --resume auto $EXTRA "$@" &
    pid=$!
    while :; do
        trapped=0
        wait "$pid"
        rc=$?
        [ "$trapped" -eq 1 ] || break
    done
    pid=""
    echo "workstation: spkddp exited $rc at $(date -Is)"
    if [ "$rc" -eq 0 ] && [ "$signalled" -eq 1 ] && [ ! -f "$CKPT_DIR/FINISHED" ]; then
        echo "workstation: exit 0 without FINISHED after a signal: the launcher lost exit code 75"
        rc=75
    fi
    signalled=0
    [ "$rc" -eq 75 ] || exit "$rc"
    [ -f "$CKPT_DIR/FINISHED" ] && exit 0
    if [ "$RERUN" != 1 ] || [ "$stopping" -eq 1 ]; then
        echo "workstation: checkpointed; run again to continue"
        exit 75
    fi
    runs=$((runs + 1))
    if [ "$runs" -gt "$MAX_RERUNS" ]; then
        echo "workstation: restarted $MAX_RERUNS times (MAX_RERUNS): stopping"
        exit 75
    fi
done
