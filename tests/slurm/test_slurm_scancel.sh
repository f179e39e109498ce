#!/usr/bin/env bash
# `scancel` mid-run (SIGTERM to the batch shell, srun and the tasks; SIGKILL after KillWait):
# the ranks checkpoint, the job stays cancelled (the script must not requeue it), and the last
# checkpoint is loadable: `spkddp inspect` reads it and a new job with the same CKPT_DIR
# resumes from it with --resume auto and finishes bitwise equal to an uninterrupted run.
# Usage: test_slurm_scancel.sh SPKDDP MPIEXEC WORKDIR [MAKE_BAD_DATA]; exit 77: no Slurm here.
. "$(dirname "$0")/../e2e/lib.sh" "$@"
. "$(dirname "${BASH_SOURCE[0]}")/slurm_fixture.sh"
slurm_test_begin 20

job=$(slurm_submit job $EPOCHS) || { fail "sbatch failed"; finish; }
echo "submitted job $job"
slurm_wait_training "$job" job 4
t_cancel=$(date +%s.%N)
scancel "$job" || fail "scancel $job"
# scontrol says COMPLETING until the batch script and every step have ended.
state=$(slurm_wait_state "$job" 'CANCELLED' 40) || fail "job not CANCELLED 40 s after scancel (state $state)"
ended=$(slurm_since "$t_cancel")
# Gone for good: no requeue follows.
sleep 2
state=$(slurm_job_state "$job")
[ "$state" = CANCELLED ] || fail "job is $state after scancel (want CANCELLED: no requeue)"
restarts=$(scontrol show job "$job" | grep -oE 'Restarts=[0-9]+' | cut -d= -f2)
[ "${restarts:-0}" -eq 0 ] || fail "a cancelled job was restarted (${restarts} times)"
[ -n "$(pgrep -f "^$SPKDDP train .*--ckpt-dir $WORK/job ")" ] && fail "spkddp ranks still alive after the cancel"
log=$WORK/job.out
echo "ok  job $state $ended s after scancel; log says: $(grep -E 'received SIGTERM|got SIGTERM|CANCELLED' "$log" | tr '\n' '|')"
grep -q 'received SIGTERM: stopped at global step' "$log" || fail "the ranks did not checkpoint on SIGTERM"
grep -q 'will not requeue' "$log" || fail "the script did not note the cancel"
grep -q 'requeueing job' "$log" && fail "the script tried to requeue a cancelled job"
[ -f "$WORK/job/FINISHED" ] && fail "FINISHED after a cancel"

last=$(slurm_newest_ckpt "$WORK/job")
[ -n "$last" ] || fail "no checkpoint left after scancel"
if "$SPKDDP" inspect "$last" >"$WORK/inspect.out" 2>&1; then
    echo "ok  spkddp inspect $(basename "$last"): $(grep -iE 'step|epoch' "$WORK/inspect.out" | head -2 | tr -s ' ' | tr '\n' ' ')"
else
    cat "$WORK/inspect.out"
    fail "spkddp inspect $last failed"
fi
ls -a "$WORK/job" | grep -q '\.tmp$' && echo "note: a partial checkpoint (.tmp) was left; --resume auto ignores it"

# A new job, same checkpoint directory: resumes from the last checkpoint and finishes.
t_resume=$(date +%s.%N)
job2=$(slurm_submit job $EPOCHS --output="$WORK/job2.out") || { fail "second sbatch failed"; finish; }
state=$(slurm_wait_state "$job2" 'COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY' 120) ||
    fail "resumed job $job2 did not finish within 120 s (state $state)"
[ "$state" = COMPLETED ] || fail "resumed job ended $state: $(tail -5 "$WORK/job2.out")"
echo "ok  new job $job2 $state in $(slurm_since "$t_resume") s: $(grep -oE 'resumed from [^:]*' "$WORK/job2.out")"
grep -q "resumed from $last" "$WORK/job2.out" || fail "second job did not resume from $last"
[ -f "$WORK/job/FINISHED" ] || fail "no FINISHED after the resumed job"
slurm_same_final "$WORK/job" "$WORK/ref"
slurm_check_metrics "$WORK/job/metrics.jsonl" "$WORK/ref/metrics.jsonl"
echo "total $(slurm_elapsed) s"
finish
