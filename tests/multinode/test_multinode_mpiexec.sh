#!/usr/bin/env bash
# The workstation-cluster case, without Slurm's launcher: jobscripts/workstation.sh started on
# node1 runs `mpiexec` with a host file naming node1 and node2. MPICH's hydra starts its proxy
# on node2 the way it would with ssh, through HYDRA_LAUNCHER_EXEC (here node_rsh.sh, which
# enters the node's namespaces where ssh would log in). The run must end bitwise equal to the
# same world size on one machine, its gradients crossing the network. Then node2 is lost in the
# middle of a run: mpiexec must end the job within 30 s, and the last checkpoint must load.
# Then node3's link goes down: nothing is closed, MPICH over TCP notices nothing, and the job
# must end by the ranks' own deadline (SPKDDP_MPI_TIMEOUT) instead of waiting forever.
# Usage: test_multinode_mpiexec.sh SPKDDP MPIEXEC WORKDIR [NODE_PROBE]; exit 77: no cluster here.
. "$(dirname "$0")/../e2e/lib.sh" "$1" "$2" "$3"
. "$(dirname "${BASH_SOURCE[0]}")/cluster.sh"
cluster_test_begin 3 32
EPOCHS=4
printf 'node1:1\nnode2:1\n' >"$WORK/hosts"
printf 'node1:1\nnode3:1\n' >"$WORK/hosts-cut"
NODE_RSH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/node_rsh.sh

# workstation NAME EPOCHS: workstation.sh on node1 with 2 ranks from the host file, log NAME.out.
workstation() {
    HYDRA_HOST_FILE=${HOSTS:-$WORK/hosts} HYDRA_LAUNCHER=ssh HYDRA_LAUNCHER_EXEC=$NODE_RSH \
        SPKDDP=$SPKDDP MPIEXEC=$MPIEXEC NP=2 DATA=$WORK/sp.h5 CKPT_DIR=$WORK/$1 EXTRA="$SLURM_TRAIN_ARGS --epochs $2" \
        cluster_on node1 bash "$SLURM_WORKSTATION" >"$WORK/$1.out" 2>&1
}

slurm_reference ref $EPOCHS 2
t=$(date +%s.%N)
b0=$(cluster_switch_bytes)
workstation two $EPOCHS || fail "workstation.sh across node1 and node2 exited $?: $(tail -3 "$WORK/two.out")"
bytes=$(($(cluster_switch_bytes) - b0))
grep -q "2 ranks x batch" "$WORK/two.out" || fail "spkddp did not see 2 ranks"
need=$(cluster_gradient_bytes "$WORK/two.out" $EPOCHS)
echo "ok  workstation.sh, mpiexec over node1 and node2: $(slurm_since "$t") s, $bytes bytes through the bridge" \
    "(>= $need, one copy of the gradients per step)"
cluster_finalize_note "$WORK/two.out"
[ "$bytes" -ge "$need" ] || fail "only $bytes bytes crossed the bridge (want >= $need)"
slurm_same_final "$WORK/two" "$WORK/ref"
slurm_check_metrics "$WORK/two/metrics.jsonl" "$WORK/ref/metrics.jsonl"

# lost_run NAME HOW NODE: a long run on node1 and NODE; once it has checkpointed twice NODE is
# lost (HOW: kill or cut); the run and node1's rank must end within 30 s, non-zero, the last
# checkpoint loading.
lost_run() {
    local name=$1 how=$2 node=$3 run_pid i t_kill ended rc hosts=$WORK/hosts
    [ "$node" = node2 ] || hosts=$WORK/hosts-cut
    HOSTS=$hosts SPKDDP_MPI_TIMEOUT=5 workstation "$name" 400 &
    run_pid=$!
    for i in $(seq 1 300); do
        [ -f "$WORK/$name/metrics.jsonl" ] && [ "$(grep -c . "$WORK/$name/metrics.jsonl")" -ge 2 ] && break
        sleep 0.1
    done
    t_kill=$(date +%s.%N)
    if [ "$how" = kill ]; then
        cluster_kill_node "$node" || fail "processes of $node survived SIGKILL"
    else
        cluster_cut_link "$node" || fail "$node's link did not go down"
    fi
    ended=""
    for i in $(seq 1 600); do
        if ! kill -0 $run_pid 2>/dev/null && [ -z "$(cluster_pids node1 "^$SPKDDP train .*--ckpt-dir $WORK/$name ")" ]; then
            ended=$(slurm_since "$t_kill")
            break
        fi
        sleep 0.1
    done
    [ -n "$ended" ] || { fail "workstation.sh still running 60 s after $node was lost ($how)"; kill $run_pid; return; }
    wait $run_pid
    rc=$?
    echo "workstation.sh exited $rc $ended s after $node was lost ($how); it said:" \
        "$(grep -m1 -E 'MPI collective has waited|ranks have not met|mpiexec@|hydra|Terminated|Killed' "$WORK/$name.out")"
    awk -v t="$ended" 'BEGIN { exit !(t < 30) }' || fail "the run took $ended s to end after $node was lost ($how; want < 30 s)"
    [ "$rc" -ne 0 ] || fail "workstation.sh exited 0 after losing a node ($how)"
    slurm_check_last_ckpt "$WORK/$name"
}

# ---- node2 lost under mpiexec ------------------------------------------------------------------
lost_run lost kill node2
lost_run cut cut node3
echo "the rank cut off on node3: $(cluster_pids node3 "^$SPKDDP train" | wc -w) process(es) left"
echo "total $(slurm_elapsed) s"
finish
