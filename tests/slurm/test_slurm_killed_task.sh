#!/usr/bin/env bash
# One rank of a train.sbatch job is SIGKILLed (as by the OOM killer): srun --kill-on-bad-exit=1
# must end the other rank and the job within 30 s, the job log must say which task died, the
# job must end FAILED and must not requeue itself; a checkpoint written before stays loadable.
# Usage: test_slurm_killed_task.sh SPKDDP MPIEXEC WORKDIR [MAKE_BAD_DATA]; exit 77: no Slurm here.
. "$(dirname "$0")/../e2e/lib.sh" "$@"
. "$(dirname "${BASH_SOURCE[0]}")/slurm_fixture.sh"
slurm_test_begin

# Long enough that it is still training when killed.
job=$(slurm_submit job 400) || { fail "sbatch failed"; finish; }
echo "submitted job $job"
slurm_wait_training "$job" job 3

# The ranks are the processes whose command line starts with the spkddp binary (srun's own
# command line starts with "srun"); rank 1 is the one with SLURM_PROCID=1.
pids=$(pgrep -f "^$SPKDDP train .*--ckpt-dir $WORK/job ")
echo "rank pids: $(echo $pids)"
[ "$(wc -w <<<"$pids")" -eq 2 ] || fail "expected 2 spkddp ranks, found: $(echo $pids)"
victim=""
for p in $pids; do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'SLURM_PROCID=1' && victim=$p
done
[ -n "$victim" ] || { fail "no rank with SLURM_PROCID=1 among: $(echo $pids)"; finish; }
t_kill=$(date +%s.%N)
kill -9 "$victim"
echo "killed rank 1 (pid $victim) with SIGKILL"

state=$(slurm_wait_state "$job" 'COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PENDING' 60)
took=$(slurm_since "$t_kill")
echo "job $job ended $state $took s after the kill"
awk -v t="$took" 'BEGIN { exit !(t <= 30) }' || fail "job took $took s to end after a task was killed (want <= 30 s)"
[ "$state" = FAILED ] || fail "job ended $state, want FAILED"
sleep 2
state=$(slurm_job_state "$job")
[ "$state" = FAILED ] || fail "job is $state 2 s later (a killed task must not requeue it)"
left=$(pgrep -f "^$SPKDDP train .*--ckpt-dir $WORK/job ")
[ -z "$left" ] || fail "ranks still alive: $(echo $left)"

log=$WORK/job.out
echo "log: $(grep -E 'srun:|slurmstepd|spkddp job:' "$log" | grep -vE 'got SIGCONT' | tail -6 | tr '\n' '|')"
grep -qE 'srun: error: .*task 1: Killed' "$log" || fail "no 'task 1: Killed' from srun in the job log"
grep -qE 'Terminating StepId|CANCELLED|Force Terminated' "$log" || fail "no sign that srun ended the other task"
grep -q 'not requeueing' "$log" || fail "the script did not report the failure"
grep -q 'requeueing job' "$log" && fail "the script requeued after a killed task"
[ -f "$WORK/job/FINISHED" ] && fail "FINISHED after a killed task"
slurm_check_last_ckpt "$WORK/job"
echo "total $(slurm_elapsed) s"
finish
