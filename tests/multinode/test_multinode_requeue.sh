#!/usr/bin/env bash
# Preemption across nodes: jobscripts/train.sbatch on 2 of 3 nodes (one rank each) gets
# SIGUSR1 mid-training, the ranks agree on a step over the network, checkpoint, exit 75, and
# the job requeues itself. The node that ran the batch script is then drained, so the restart
# lands on another pair of nodes, where it resumes from the checkpoint (on the shared file
# system) and finishes bitwise equal to an uninterrupted run of the same world size on one
# node, metrics holding every epoch exactly once.
# Usage: test_multinode_requeue.sh SPKDDP MPIEXEC WORKDIR [NODE_PROBE]; exit 77: no cluster here.
. "$(dirname "$0")/../e2e/lib.sh" "$1" "$2" "$3"
. "$(dirname "${BASH_SOURCE[0]}")/cluster.sh"
cluster_test_begin 3 32
EPOCHS=12

slurm_reference ref $EPOCHS 2

t_submit=$(date +%s.%N)
job=$(cluster_submit job $EPOCHS 2 1) || { fail "sbatch failed"; finish; }
slurm_wait_training "$job" job 3
first=$(scontrol show job "$job" | grep -oE ' NodeList=[^ ]+' | cut -d= -f2)
echo "job $job training on $first"
[ "$first" = "node[1-2]" ] || fail "first run on '$first', want node[1-2]"
slurm_preempt "$job" job

# The first run's batch node leaves the pool (as a node taken for maintenance would).
scontrol update NodeName=node1 State=DRAIN Reason="multinode test: restart elsewhere" ||
    fail "could not drain node1"
slurm_restart "$job"
echo "    $(slurm_since "$t_submit") s after submission"
second=$(scontrol show job "$job" | grep -oE ' NodeList=[^ ]+' | cut -d= -f2)
[ "$second" = "node[2-3]" ] || fail "restart ran on '$second', want node[2-3]"
grep -qE "^=== spkddp job $job start 1 on node2 .*: 2 tasks on 2 nodes" "$WORK/job.out" ||
    fail "the restart's log line does not say node2 with 2 tasks on 2 nodes"
echo "ok  restarted on $second (first run on $first)"
slurm_check_requeue_log "$job" job 2
cluster_finalize_note "$WORK/job.out"

slurm_same_final "$WORK/job" "$WORK/ref"
slurm_check_metrics "$WORK/job/metrics.jsonl" "$WORK/ref/metrics.jsonl"
echo "total $(slurm_elapsed) s"
finish
