#!/usr/bin/env bash
# Training across two nodes of a namespace cluster (cluster.sh): where srun puts the ranks and
# what each makes of its node (local rank, local size, threads: tests/multinode/node_probe.c),
# then jobscripts/train.sbatch with `-N2 --ntasks-per-node=1` and `=2`. Each two-node run must
# end bitwise equal (checkpoint and metrics but timings) to the same world size on one node,
# and its gradients must have crossed the network: the bytes through the cluster's bridge
# must cover at least one copy of the parameters per step, where the one-node run sends next
# to nothing (its ranks share memory).
# Usage: test_multinode_train.sh SPKDDP MPIEXEC WORKDIR NODE_PROBE; exit 77: no cluster here.
. "$(dirname "$0")/../e2e/lib.sh" "$1" "$2" "$3"
NODE_PROBE=$4
. "$(dirname "${BASH_SOURCE[0]}")/cluster.sh"
cluster_test_begin 2 32
EPOCHS=4
cores=$(getconf _NPROCESSORS_ONLN)

# ---- 1. ranks per node -------------------------------------------------------------------------
# srun's block distribution: ranks 0..K-1 on node1, K..2K-1 on node2. Threads are not set, so
# each rank takes cores / (ranks on its node), as spkddp does on a real node.
for per in 1 2; do
    out=$(unset SPKDDP_THREADS OMP_NUM_THREADS; srun --mpi=pmi2 -N2 --ntasks-per-node=$per "$NODE_PROBE" 2>"$WORK/probe$per.err")
    want=""
    threads=$((cores / per > 0 ? cores / per : 1))
    for r in $(seq 0 $((2 * per - 1))); do
        want+="rank $r of $((2 * per)) on node$((r / per + 1)): local rank $((r % per)) of $per, $threads threads"$'\n'
    done
    if [ "$out"$'\n' = "$want" ]; then
        echo "ok  srun -N2 --ntasks-per-node=$per: $(tr '\n' ';' <<<"$out")"
        cluster_finalize_note "$WORK/probe$per.err"
    else
        fail "srun -N2 --ntasks-per-node=$per: ranks see
$out
want
$want$(cat "$WORK/probe$per.err")"
    fi
done

# ---- 2. train.sbatch on two nodes against one node ---------------------------------------------
# run_job NAME NODES TASKS_PER_NODE: the job to its end; sets BYTES (through the bridge) and
# NEED (cluster_gradient_bytes).
run_job() {
    local name=$1 nodes=$2 per=$3 t b0 job state log=$WORK/$1.out
    t=$(date +%s.%N)
    b0=$(cluster_switch_bytes)
    job=$(cluster_submit "$name" $EPOCHS "$nodes" "$per") || { fail "sbatch $name"; return 1; }
    state=$(slurm_wait_state "$job" 'COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY' 120)
    BYTES=$(($(cluster_switch_bytes) - b0))
    [ "$state" = COMPLETED ] || { fail "$name: job $job ended ${state:-nowhere}: $(tail -5 "$log")"; return 1; }
    grep -qE "^=== spkddp job $job start 0 on node1 .*: $((nodes * per)) tasks on $nodes nodes" "$log" ||
        fail "$name: the log does not start with $((nodes * per)) tasks on $nodes nodes: $(head -1 "$log")"
    grep -q "$((nodes * per)) ranks x batch" "$log" || fail "$name: spkddp did not see $((nodes * per)) ranks"
    NEED=$(cluster_gradient_bytes "$log" $EPOCHS)
    echo "ok  $name: $nodes node(s) x $per task(s) in $(slurm_since "$t") s (job $job $state);" \
        "$BYTES bytes through the bridge"
    cluster_finalize_note "$log"
}

for per in 1 2; do
    world=$((2 * per))
    run_job one$world 1 $world || continue
    one_bytes=$BYTES
    run_job two$world 2 $per || continue
    slurm_same_final "$WORK/two$world" "$WORK/one$world"
    slurm_check_metrics "$WORK/two$world/metrics.jsonl" "$WORK/one$world/metrics.jsonl"
    if [ "$BYTES" -ge "$NEED" ] && [ "$one_bytes" -lt $((NEED / 10)) ]; then
        echo "ok  world $world: $BYTES bytes crossed the bridge on two nodes (>= $NEED, one copy of the" \
            "gradients per step), $one_bytes on one node"
    else
        fail "world $world: $BYTES bytes through the bridge on two nodes (want >= $NEED), $one_bytes on one" \
            "node (want < $((NEED / 10)))"
    fi
done
echo "total $(slurm_elapsed) s"
finish
