#!/usr/bin/env bash
# The workstation-cluster case, without Slurm's launcher: jobscripts/workstation.sh started on
# node1 runs `mpiexec` with a host file naming node1 and node2. MPICH's hydra starts its proxy
# on node2 the way it would with ssh, through HYDRA_LAUNCHER_EXEC (here node_rsh.sh, which
# enters the node's namespaces where ssh would log in). The run must end bitwise equal to the
# same world size on one machine, its gradients crossing the network. Then node2 is lost in the
# middle of a run: mpiexec must end the job within 30 s, and the last checkpoint must load.
# Usage: test_multinode_mpiexec.sh SPKDDP MPIEXEC WORKDIR [NODE_PROBE]; exit 77: no cluster here.
. "$(dirname "$0")/../e2e/lib.sh" "$1" "$2" "$3"
. "$(dirname "${BASH_SOURCE[0]}")/cluster.sh"
cluster_test_begin 2 32
EPOCHS=4
printf 'node1:1\nnode2:1\n' >"$WORK/hosts"
NODE_RSH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/node_rsh.sh

# workstation NAME EPOCHS: workstation.sh on node1 with 2 ranks from the host file, log NAME.out.
workstation() {
    HYDRA_HOST_FILE=$WORK/hosts HYDRA_LAUNCHER=ssh HYDRA_LAUNCHER_EXEC=$NODE_RSH \
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

# ---- node2 lost under mpiexec ------------------------------------------------------------------
workstation lost 400 &
run_pid=$!
for i in $(seq 1 300); do
    [ -f "$WORK/lost/metrics.jsonl" ] && [ "$(grep -c . "$WORK/lost/metrics.jsonl")" -ge 2 ] && break
    sleep 0.1
done
t_kill=$(date +%s.%N)
cluster_kill_node node2 || fail "processes of node2 survived SIGKILL"
ended=""
for i in $(seq 1 600); do
    if ! kill -0 $run_pid 2>/dev/null && [ -z "$(pgrep -f "^$SPKDDP train .*--ckpt-dir $WORK/lost ")" ]; then
        ended=$(slurm_since "$t_kill")
        break
    fi
    sleep 0.1
done
wait $run_pid
rc=$?
[ -n "$ended" ] || { fail "workstation.sh still running 60 s after node2 was lost"; finish; }
echo "workstation.sh exited $rc $ended s after node2 was lost; mpiexec said:" \
    "$(grep -m1 -E 'mpiexec@|hydra|Terminated|Killed' "$WORK/lost.out")"
awk -v t="$ended" 'BEGIN { exit !(t < 30) }' || fail "the run took $ended s to end after the node was lost (want < 30 s)"
[ "$rc" -ne 0 ] || fail "workstation.sh exited 0 after losing a node"
slurm_check_last_ckpt "$WORK/lost"
echo "total $(slurm_elapsed) s"
finish
