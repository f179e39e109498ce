#!/usr/bin/env bash
# Slurm preemption round trip: train.sbatch on 2 tasks gets SIGUSR1 mid-training (as from
# --signal=USR1@120 before the time limit: `scancel -s USR1` reaches the tasks of every step),
# checkpoints, exits 75, requeues itself, resumes from its checkpoint and finishes. The result
# must be bitwise the uninterrupted run's, the metrics must hold every epoch exactly once.
# Usage: test_slurm_requeue.sh SPKDDP MPIEXEC WORKDIR [MAKE_BAD_DATA]; exit 77: no Slurm here.
. "$(dirname "$0")/../e2e/lib.sh" "$@"
WORK=$PWD
. "$(dirname "${BASH_SOURCE[0]}")/slurm_fixture.sh"
slurm_test_begin
EPOCHS=20

slurm_reference ref $EPOCHS

t_submit=$(date +%s.%N)
job=$(slurm_submit job $EPOCHS) || { fail "sbatch failed"; finish; }
echo "submitted job $job"
slurm_wait_training "$job" job 4
state=$(slurm_job_state "$job")
[ "$state" = RUNNING ] || fail "job is $state, not RUNNING, after 4 epochs"
done_before=$(grep -c . "$WORK/job/metrics.jsonl")
t_sig=$(date +%s.%N)
scancel -s USR1 "$job" || fail "scancel -s USR1 $job"

# The job requeues itself: it comes back PENDING with a begin time about two minutes ahead.
state=$(slurm_wait_state "$job" 'PENDING|COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY' 60)
if [ "$state" != PENDING ]; then
    fail "job is ${state:-gone}, not PENDING again, after SIGUSR1; log ends:"
    tail -5 "$WORK/job.out"
    finish
fi
t_requeued=$(date +%s.%N)
begin=$(scontrol show job "$job" | grep -oE 'StartTime=[^ ]+|Reason=[^ ]+|Restarts=[0-9]+' | tr '\n' ' ')
echo "ok  requeued itself $(slurm_since "$t_sig") s after SIGUSR1 ($done_before epochs done): $begin"
# Slurm's requeue delay is what normally lets the old run drain. Starting at once instead, we
# must wait until its slurmstepds are gone (a new step 0 would share the old one's PMI socket)
# and let the clock pass the second in which its job credential was revoked (else slurmd
# refuses the launch: "Job credential revoked", and the job fails).
t=$(date +%s.%N)
slurm_wait_steps_gone "$job" 60 >/dev/null || fail "steps of the first run still there 60 s after the requeue"
sleep 1.1
echo "ok  first run's steps gone $(slurm_since "$t") s after the requeue; starting it now"
scontrol update JobId="$job" StartTime=now || fail "scontrol update StartTime=now"

state=$(slurm_wait_state "$job" 'COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY' 150) ||
    fail "job did not finish within 150 s of the requeue (state $state)"
echo "job $job ended $state $(slurm_since "$t_requeued") s after the requeue, $(slurm_since "$t_submit") s after submission"
[ "$state" = COMPLETED ] || fail "job ended $state"
restarts=$(scontrol show job "$job" | grep -oE 'Restarts=[0-9]+' | cut -d= -f2)
[ "${restarts:-0}" -eq 1 ] || fail "job restarted ${restarts:-?} times, want 1"

log=$WORK/job.out
grep -q 'received SIGUSR1: stopped at global step' "$log" || fail "no 'received SIGUSR1' in the job log"
grep -q 'spkddp exited 75' "$log" || fail "the script did not see exit 75"
grep -q "requeueing job $job" "$log" || fail "the script did not requeue"
grep -qE "^=== spkddp job $job start 1 " "$log" || fail "no second start in the (appended) log"
grep -qE "resumed from $WORK/job/ckpt-[0-9]+\.h5" "$log" || fail "the restart did not resume from a checkpoint"
grep -q "2 ranks x batch" "$log" || fail "spkddp under srun did not see 2 ranks"
[ "$(grep -c '2 ranks x batch' "$log")" -eq 2 ] || fail "expected 2 starts with 2 ranks each"
[ -f "$WORK/job/FINISHED" ] || fail "no FINISHED after the restart"
echo "ok  log: $(grep -oE 'resumed from [^:]*' "$log" | head -1), 2 ranks on each start"

slurm_same_final "$WORK/job" "$WORK/ref"
slurm_check_metrics "$WORK/job/metrics.jsonl" "$WORK/ref/metrics.jsonl"
echo "total $(slurm_elapsed) s"
finish
