#!/usr/bin/env bash
# A node lost mid-epoch: jobscripts/train.sbatch on 2 nodes, one rank each, then every process
# of node2 (slurmd, slurmstepd, its rank) gets SIGKILL. The job must end within 30 s with a
# line in its log naming the node failure, Slurm must requeue it (the job allows requeueing),
# its last checkpoint must load, and the job, submitted again on the remaining node (1 rank
# instead of 2), must resume from that checkpoint and finish equal to an uninterrupted 2-rank
# run, bit for bit, metrics included: with --invariant the world-size change changes nothing
# (docs/invariant.md; without it, it would agree to rounding only, README "Distributed
# semantics"). The linear model, small and quick; e2e_invariant covers ECAPA's BatchNorm.
# Usage: test_multinode_node_lost.sh SPKDDP MPIEXEC WORKDIR [NODE_PROBE]; exit 77: no cluster here.
. "$(dirname "$0")/../e2e/lib.sh" "$1" "$2" "$3"
. "$(dirname "${BASH_SOURCE[0]}")/cluster.sh"
cluster_test_begin 2 64
EPOCHS=30
SLURM_TRAIN_ARGS="--global-batch 16 --invariant --progress 0"

slurm_reference ref $EPOCHS 2

job=$(cluster_submit job $EPOCHS 2 1) || { fail "sbatch failed"; finish; }
slurm_wait_training "$job" job 3
echo "job $job training on $(scontrol show job "$job" | grep -oE ' NodeList=[^ ]+' | cut -d= -f2)"

# ---- node2 goes ------------------------------------------------------------------------------
t_kill=$(date +%s.%N)
cluster_kill_node node2 || fail "processes of node2 survived SIGKILL"
echo "killed every process of node2 after $(grep -c . "$WORK/job/metrics.jsonl") epochs"
# The job has ended when no rank is left and Slurm no longer counts it as running.
ended=""
for i in $(seq 1 600); do
    state=$(slurm_job_state "$job")
    if [ "$state" != RUNNING ] && [ -z "$(pgrep -f "^$SPKDDP train .*--ckpt-dir $WORK/job ")" ]; then
        ended=$(slurm_since "$t_kill")
        break
    fi
    sleep 0.1
done
[ -n "$ended" ] || { fail "job still running 60 s after node2 was lost (state $state)"; finish; }
echo "job $job ended ($state) $ended s after node2 was lost"
awk -v t="$ended" 'BEGIN { exit !(t < 30) }' || fail "the job took $ended s to end after the node was lost (want < 30 s)"
log=$WORK/job.out
what=$(grep -E 'Node failure on node2|DUE TO NODE FAILURE' "$log" | head -1)
if [ -n "$what" ]; then echo "ok  the log says: $what"; else fail "no line in the job log names the node failure"; fi
state=$(slurm_wait_state "$job" PENDING 30) || fail "job not requeued after the node failure (state $state)"
echo "ok  Slurm requeued it: $(grep -h "due to failure of node" "$WORK/cluster/log/slurmctld.log" | tail -1 | cut -c27-)"

slurm_check_last_ckpt "$WORK/job"

# ---- on the remaining node --------------------------------------------------------------------
# The requeued job asks for two nodes again and waits for a replacement. To go on with one,
# it is resubmitted on the same checkpoint directory (scontrol update NumNodes=1 is no way:
# Slurm 22.05 starts the shrunk job with its old task count, SLURM_NTASKS=2, on one node).
scancel "$job" || fail "scancel of the requeued job"
t=$(date +%s.%N)
job2=$(cluster_submit job $EPOCHS 1 1 --output="$WORK/job2.out") || { fail "second sbatch failed"; finish; }
state=$(slurm_wait_state "$job2" 'COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY' 120) ||
    fail "job $job2 did not finish within 120 s (state $state)"
[ "$state" = COMPLETED ] || fail "job $job2 ended $state: $(tail -5 "$WORK/job2.out")"
log2=$WORK/job2.out
grep -qE "^=== spkddp job $job2 start 0 on node1 .*: 1 tasks on 1 nodes" "$log2" ||
    fail "job $job2 is not 1 task on node1: $(head -1 "$log2")"
grep -qE "resumed from $LAST_CKPT" "$log2" || fail "job $job2 did not resume from $LAST_CKPT"
grep -q "written by 2 ranks, now 1" "$log2" || fail "the world-size change was not reported"
[ -f "$WORK/job/FINISHED" ] || fail "no FINISHED after job $job2"
echo "ok  job $job2 on node1 alone $state in $(slurm_since "$t") s: $(grep -oE 'resumed from [^:]*: .*' "$log2")"
cluster_finalize_note "$log2"
slurm_same_final "$WORK/job" "$WORK/ref"
slurm_check_metrics "$WORK/job/metrics.jsonl" "$WORK/ref/metrics.jsonl" once
# The epochs' figures too, but for timings and the world size the lines record.
same_run() { slurm_strip_metrics "$1" | sed -E 's/"world_size": [0-9]+//'; }
if diff <(same_run "$WORK/job/metrics.jsonl") <(same_run "$WORK/ref/metrics.jsonl"); then
    echo "ok  metrics: equal to the uninterrupted 2-rank run's but for timings and world_size"
else
    fail "metrics differ from the uninterrupted 2-rank run's beyond timings and world_size"
fi
echo "total $(slurm_elapsed) s"
finish
