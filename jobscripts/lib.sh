# shellcheck shell=bash
# Helpers the job scripts and the recipes source (bash): the ranks under a launcher, and recipe
# stages that run in order, know what their outputs were made from, and stop in order.
# Needs SPKDDP (the spkddp binary, or its name on PATH).

# runs_binary PID EXE: whether PID runs the binary EXE (a resolved path); also one rebuilt or
# replaced since it started, whose /proc/PID/exe reads "EXE (deleted)".
runs_binary() {
    local x
    x=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
    [ "${x% (deleted)}" = "$2" ]
}

# rank_pids PID: PID and its descendants (mpiexec -> hydra_pmi_proxy -> spkddp, or srun) that
# run the spkddp binary.
rank_pids() {
    local exe todo p kids out=""
    exe=$(readlink -f "$(command -v "$SPKDDP")")
    runs_binary "$1" "$exe" && out=$1
    todo=$1
    while [ -n "$todo" ]; do
        kids=""
        for p in $todo; do kids="$kids $(pgrep -P "$p")"; done
        for p in $kids; do
            runs_binary "$p" "$exe" && out="$out $p"
        done
        todo=$(echo $kids)
    done
    echo $out
}

# signal_ranks SIG PID: SIG to the ranks under PID, not to the launcher itself: Debian's hydra
# (MPICH 4.0.2) forwards a signal it gets, but then now and then exits 0 although every rank
# exited 75 (docs/slurm.md). PID itself when no rank is running yet.
signal_ranks() {
    local ranks
    ranks=$(rank_pids "$2")
    # shellcheck disable=SC2086
    if [ -n "$ranks" ]; then kill -"$1" $ranks 2>/dev/null; else kill -"$1" "$2" 2>/dev/null; fi
}

# ---- recipe stages -----------------------------------------------------------------------

# stages_parse "ALL STAGES" ARGS...: the stage names first (none: all, in order), then flags
# for the train stage (--key value ...). Sets STAGES and TRAIN_FLAGS; a name that is not a
# stage, or flags without the train stage, end the script with exit 2.
stages_parse() {
    local all=$1 s
    shift
    STAGES=() TRAIN_FLAGS=()
    while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do
        [[ " $all " == *" $1 "* ]] || { echo "$0: no stage '$1' (the stages: $all)" >&2; exit 2; }
        STAGES+=("$1")
        shift
    done
    TRAIN_FLAGS=("$@")
    [ ${#STAGES[@]} -gt 0 ] || read -r -a STAGES <<<"$all"
    if [ ${#TRAIN_FLAGS[@]} -gt 0 ] && ! stage_wanted train; then
        echo "$0: flags (${TRAIN_FLAGS[*]}) go to the train stage, which is not run" >&2
        exit 2
    fi
    for s in "${TRAIN_FLAGS[@]}"; do
        [ "$s" = "--config" ] && { echo "$0: --config is the recipe's own; give keys as flags" >&2; exit 2; }
    done
    return 0
}
stage_wanted() { [[ " ${STAGES[*]} " == *" $1 "* ]]; }

# What an output was made from: one line per input, its path, size and modification time.
inputs_of() {
    local f
    for f in "$@"; do
        if [ -e "$f" ]; then printf '%s %s\n' "$f" "$(stat -L -c '%s %Y' "$f")"; else printf '%s missing\n' "$f"; fi
    done
}
# up_to_date [--adopt] OUT INPUTS...: OUT exists and was made from exactly these inputs
# (OUT.from). Otherwise says why OUT is made again. --adopt: an OUT without OUT.from (made
# before outputs recorded their inputs) is kept and its inputs recorded now; for datasets,
# whose making takes hours.
up_to_date() {
    local out adopt=0
    [ "$1" = --adopt ] && adopt=1 && shift
    out=$1
    shift
    [ -e "$out" ] || return 1
    if [ $adopt -eq 1 ] && [ ! -f "$out.from" ]; then
        echo "$out: kept as it is (it has no record of its inputs; delete it to make it again)"
        made_from "$out" "$@"
        return 0
    fi
    if [ -f "$out.from" ] && [ "$(inputs_of "$@")" = "$(cat "$out.from")" ]; then
        echo "$out: up to date"
        return 0
    fi
    echo "$out: made from other inputs than now ($(inputs_of "$@" | diff "$out.from" - 2>/dev/null \
        | sed -nE 's/^> ([^ ]+) .*/\1/p' | tr '\n' ' ')); making it again"
    return 1
}
made_from() {
    local out=$1
    shift
    inputs_of "$@" >"$out.from"
}

# run_stage CMD...: runs CMD in the background and watches it, so that a signal to this
# script is acted on at once (bash holds traps while a foreground child runs). On SIGINT,
# SIGTERM or SIGUSR1 the ranks under CMD get SIGTERM as soon as they are running (training
# checkpoints and exits 75; after a Ctrl-C they already have it) and the script stops after
# CMD with its code: it never goes on to the next stage. Where no rank shows 2 s after the signal
# (SPKDDP a wrapper or a container launcher, whose processes run another binary), CMD itself
# gets the SIGTERM, for its launcher to pass on. Returns CMD's status.
STAGE_SIGNAL=""
trap 'STAGE_SIGNAL=INT' INT
trap 'STAGE_SIGNAL=TERM' TERM
trap 'STAGE_SIGNAL=USR1' USR1
run_stage() {
    local rc child sent=0 ranks polls=0
    "$@" &
    child=$!
    while kill -0 "$child" 2>/dev/null; do
        if [ -n "$STAGE_SIGNAL" ] && [ $sent -eq 0 ]; then
            ranks=$(rank_pids "$child")
            polls=$((polls + 1))
            # shellcheck disable=SC2086
            if [ -n "$ranks" ]; then
                kill -TERM $ranks 2>/dev/null && sent=1
            elif [ $polls -ge 20 ]; then
                kill -TERM "$child" 2>/dev/null
                sent=1
            fi
        fi
        sleep 0.1
    done
    wait "$child"
    rc=$?
    if [ -n "$STAGE_SIGNAL" ]; then
        # hydra's lost exit code after a forwarded signal: a stop is a stop
        [ "$rc" -eq 0 ] && rc=75
        echo "$0: stopped by SIG$STAGE_SIGNAL (exit $rc); run it again to go on" >&2
        exit "$rc"
    fi
    return "$rc"
}
# stage_failed NAME RC: the stage's failure ends the script with its exit code.
stage_failed() {
    echo "$0: stage $1 failed (exit $2)" >&2
    exit "$2"
}

# The stages every recipe shares. They run `par` (the recipe's spkddp under its MPI launcher) and
# read the recipe's files in $here.
key() { sed -nE "s/^$1: *//p" "$2"; }  # a top-level key of a YAML file
# prepare_stage SET...: $here/prepare_SET.yaml into its `out`, made again when its lists changed.
prepare_stage() {
    local set y out ins
    for set in "$@"; do
        y=$here/prepare_$set.yaml out=$(key out "$y")
        # shellcheck disable=SC2207  # a key the file lacks drops out
        ins=("$y" $(key wav-scp "$y") $(key video-scp "$y") $(key utt2spk "$y") $(key segments "$y"))
        up_to_date --adopt "$out" "${ins[@]}" && continue
        run_stage par prepare --config "$y" || stage_failed prepare $?
        made_from "$out" "${ins[@]}"
    done
}
# train_stage: $here/$TRAIN.yaml into $CKPT, with the flags given after the stages.
train_stage() {
    run_stage par train --config "$here/$TRAIN.yaml" --ckpt-dir "$CKPT" --metrics "$CKPT/metrics.jsonl" \
        "${TRAIN_FLAGS[@]}" || stage_failed train $?
}
