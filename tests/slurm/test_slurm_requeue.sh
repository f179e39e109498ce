#!/usr/bin/env bash
# Slurm preemption round trip: train.sbatch on 2 tasks gets SIGUSR1 mid-training (as from
# --signal=USR1@120 before the time limit: `scancel -s USR1` reaches the tasks of every step),
# checkpoints, exits 75, requeues itself, resumes from its checkpoint and finishes. The result
# must be bitwise the uninterrupted run's, the metrics must hold every epoch exactly once.
# Usage: test_slurm_requeue.sh SPKDDP MPIEXEC WORKDIR [MAKE_BAD_DATA]; exit 77: no Slurm here.
. "$(dirname "$0")/../e2e/lib.sh" "$@"
. "$(dirname "${BASH_SOURCE[0]}")/slurm_fixture.sh"
slurm_test_begin 20

t_submit=$(date +%s.%N)
job=$(slurm_submit job $EPOCHS) || { fail "sbatch failed"; finish; }
echo "submitted job $job"
slurm_wait_training "$job" job 4
state=$(slurm_job_state "$job")
[ "$state" = RUNNING ] || fail "job is $state, not RUNNING, after 4 epochs"
slurm_preempt "$job" job
slurm_restart "$job"
echo "    $(slurm_since "$t_submit") s after submission"
slurm_check_requeue_log "$job" job 2

slurm_same_final "$WORK/job" "$WORK/ref"
slurm_check_metrics "$WORK/job/metrics.jsonl" "$WORK/ref/metrics.jsonl"
echo "total $(slurm_elapsed) s"
finish
