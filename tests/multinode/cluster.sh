# shellcheck shell=bash
# A small Slurm cluster on one machine for the `multinode` tests: a login node running
# slurmctld and nodes node1..nodeN running one slurmd each, every one of them a network, UTS,
# IPC and mount namespace of its own, joined by veth links to a bridge inside the login node's
# network namespace. Nothing is added to the host's network: the cluster's addresses
# (198.18.0.0/24, the block RFC 2544 reserves for network tests) exist only on those links.
#
#   . tests/multinode/cluster.sh   # (sources tests/slurm/slurm_fixture.sh, whose helpers it uses)
#   cluster_start DIR N        # config, state and logs under DIR; Slurm commands of this shell
#                              # (sbatch, srun, squeue, scontrol, ...) then run on the login node
#   cluster_on NODE cmd...     # runs cmd on NODE (login, node1, ...) in the current directory
#   cluster_kill_node NODE     # SIGKILLs every process of NODE: the node is lost
#   cluster_cut_link NODE      # NODE's link goes down: it is lost without closing a connection
#   cluster_pids NODE PATTERN  # pids of NODE's processes whose command line matches PATTERN
#   cluster_switch_bytes       # bytes the nodes have sent into the bridge so far
#   cluster_stop               # cancels jobs, stops the daemons, removes the namespaces
#
# cluster_start returns 0 when every node is idle, 77 with $SLURM_SKIP_REASON set when Slurm
# is missing or namespaces cannot be made here (the tests then exit 77: skipped), 1 otherwise.
#
# What makes a namespace a node:
#   network   its own interfaces: lo and eth0 (198.18.0.10+i); MPI between nodes goes over TCP
#   UTS       its own hostname, which is how slurmd finds its NodeName
#   IPC       UCX reaches a peer through shared memory only inside one IPC namespace, so
#             ranks on different nodes cannot take that shortcut
#   mount     /etc/hosts naming every node, a private /dev/shm, and a /sys showing the node's
#             own network devices (cgroups moved over from the host's /sys for slurmd)
# Each node is held by a `sleep infinity` started in its namespaces; daemons and commands
# enter them with nsenter. Teardown kills every process left in the cluster's network
# namespaces (ip netns pids) and deletes them; namespaces of earlier runs whose test process
# is gone (a test killed by a timeout) are removed at the next start.

. "$(dirname "${BASH_SOURCE[0]}")/../slurm/slurm_fixture.sh"

CLUSTER_NET=198.18.0
CLUSTER_NS=""    # namespace name prefix of this cluster: spkmn<pid>-
CLUSTER_DIR=""
CLUSTER_NODES="" # node1 node2 ...

# The Slurm commands of the tests reach the controller from the login node (the host has no
# route into the cluster). The jobs they start run on the nodes, as on a real cluster.
for c in sbatch srun squeue sinfo scontrol scancel; do
    eval "$c() { cluster_on login $c \"\$@\"; }"
done
unset c

cluster_on() {
    local node=$1
    shift
    nsenter -t "$(cat "$CLUSTER_DIR/run/$node.holder")" -n -u -i -m --wd="$PWD" -- "$@"
}

# cluster_reap_stale: namespaces of clusters whose test process no longer exists.
cluster_reap_stale() {
    local ns pid
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^spkmn[0-9]+-'); do
        pid=${ns#spkmn}
        pid=${pid%%-*}
        kill -0 "$pid" 2>/dev/null && continue
        cluster_remove_ns "$ns"
    done
}

# cluster_remove_ns NS: SIGKILL to its processes until none is left, then the namespace goes.
cluster_remove_ns() {
    local i pids
    for i in $(seq 1 50); do
        pids=$(ip netns pids "$1" 2>/dev/null)
        [ -z "$pids" ] && break
        # shellcheck disable=SC2086
        kill -9 $pids 2>/dev/null
        sleep 0.1
    done
    ip netns delete "$1" 2>/dev/null
}

# cluster_node_up NAME ADDRESS: the node's namespaces, its link to the bridge, its holder.
cluster_node_up() {
    local name=$1 addr=$2 ns=$CLUSTER_NS$1 i
    ip netns add "$ns" && ip -n "$ns" link set lo up || return 1
    if [ "$name" = login ]; then
        ip -n "$ns" link add br0 type bridge && ip -n "$ns" addr add "$addr/24" dev br0 &&
            ip -n "$ns" link set br0 up || return 1
    else
        ip -n "${CLUSTER_NS}login" link add "v$name" type veth peer name eth0 netns "$ns" &&
            ip -n "${CLUSTER_NS}login" link set "v$name" master br0 up &&
            ip -n "$ns" addr add "$addr/24" dev eth0 && ip -n "$ns" link set eth0 up || return 1
    fi
    mkdir -p "$CLUSTER_DIR/run/cgroup-$name"
    # shellcheck disable=SC2016  # expanded by the node's shell
    nsenter --net="/run/netns/$ns" -- unshare --uts --ipc --mount --propagation private -- bash -c '
        hostname "$1" && mount --bind "$2" /etc/hosts && mount -t tmpfs -o mode=1777 shm /dev/shm &&
        mount --rbind /sys/fs/cgroup "$3" && mount -t sysfs sysfs /sys && mount --move "$3" /sys/fs/cgroup &&
        echo $$ >"$4" && exec sleep infinity' node "$name" "$CLUSTER_DIR/etc/hosts" \
        "$CLUSTER_DIR/run/cgroup-$name" "$CLUSTER_DIR/run/$name.holder.new" \
        </dev/null >"$CLUSTER_DIR/log/$name.holder.out" 2>&1 &
    disown $!  # cluster_stop kills it; no "Killed" notice from this shell
    for i in $(seq 1 50); do
        [ -s "$CLUSTER_DIR/run/$name.holder.new" ] && break
        kill -0 $! 2>/dev/null || break
        sleep 0.1
    done
    mv "$CLUSTER_DIR/run/$name.holder.new" "$CLUSTER_DIR/run/$name.holder" 2>/dev/null
}

cluster_start() {
    local dir=$1 n=$2 i b node state why
    slurm_can_run || return 77
    for b in ip nsenter unshare; do
        command -v "$b" >/dev/null 2>&1 ||
            { SLURM_SKIP_REASON="'$b' not found (Debian: iproute2, util-linux)"; return 77; }
    done
    cluster_reap_stale
    CLUSTER_NS=spkmn$$-
    CLUSTER_DIR=$dir
    export SPKDDP_CLUSTER_DIR=$dir  # for node_rsh.sh
    CLUSTER_NODES=$(seq -f 'node%g' 1 "$n" | tr '\n' ' ' | sed 's/ $//')
    # Nodes as a cluster would declare them: 2 sockets x 16 cores (the template's 2 tasks x
    # 16 CPUs per node fit); the 2 real cores are shared by all of them. A node that stops
    # answering is DOWN after about SlurmdTimeout + 2 MessageTimeout (6 + 2 x 5 s here, 300 +
    # 2 x 10 s by Slurm's defaults); its job's other tasks get SIGKILL KillWait (5 s) later.
    slurm_write_conf "$dir" "login($CLUSTER_NET.1)" 6817 6818 "node[1-$n]" \
        "NodeAddr=$CLUSTER_NET.[11-$((10 + n))] Sockets=2 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=64000" \
        "6 5 5"
    # shellcheck disable=SC2034  # slurm_fixture.sh's: slurm_stop and slurm_wait_steps_gone use it
    SLURM_FIXTURE_DIR=$dir
    {
        printf '127.0.0.1 localhost\n%s.1 login\n' "$CLUSTER_NET"
        for i in $(seq 1 "$n"); do printf '%s.%d node%d\n' "$CLUSTER_NET" $((10 + i)) "$i"; done
    } >"$dir/etc/hosts"
    if ! cluster_node_up login "$CLUSTER_NET.1"; then
        why=$(cat "$dir/log/login.holder.out" 2>/dev/null)
        cluster_stop
        SLURM_SKIP_REASON="cannot make a namespace node here (ip netns, veth, bridge, unshare): ${why:-see above}"
        return 77
    fi
    for i in $(seq 1 "$n"); do
        cluster_node_up "node$i" "$CLUSTER_NET.$((10 + i))" ||
            { echo "cluster: node$i did not come up: $(cat "$dir/log/node$i.holder.out")"; cluster_stop; return 1; }
    done
    slurm_use_conf "$dir"
    cluster_on login slurmctld -D -c -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
    SLURM_CTLD_PID=$!
    for node in $CLUSTER_NODES; do
        mkdir -p "$dir/var/spool/$node"
        cluster_on "$node" slurmd -D -f "$SLURM_CONF" >"$dir/log/slurmd-$node.out" 2>&1 &
        SLURM_SLURMD_PIDS="$SLURM_SLURMD_PIDS $!"
    done
    # shellcheck disable=SC2086
    if ! state=$(slurm_wait_idle "node[1-$n]" "$SLURM_CTLD_PID" $SLURM_SLURMD_PIDS); then
        echo "cluster: nodes not idle after 30 s (${state:-no answer}); logs:"
        tail -n 8 "$dir"/log/*.out "$dir"/log/*.log 2>/dev/null
        cluster_stop
        return 1
    fi
    echo "cluster: $(sinfo -V) up: login $CLUSTER_NET.1 (slurmctld), $CLUSTER_NODES at" \
        "$CLUSTER_NET.11-$((10 + n)), $(sinfo -h -N -o '%c' | head -1) CPUs each, namespaces $CLUSTER_NS*"
}

# cluster_kill_node NODE: every process of NODE (slurmd, slurmstepd, tasks, its holder) gets
# SIGKILL, as when a node loses power; its network namespace stays, empty.
cluster_kill_node() {
    local ns=$CLUSTER_NS$1 pids i
    for i in $(seq 1 50); do
        pids=$(ip netns pids "$ns")
        [ -z "$pids" ] && return 0
        # shellcheck disable=SC2086
        kill -9 $pids 2>/dev/null
        sleep 0.05
    done
    return 1
}

# cluster_cut_link NODE: the bridge's end of NODE's link goes down. Its processes live on but
# nothing reaches them and no connection is closed: a switch port or cable failure, or a node
# that loses power, as its peers see it.
cluster_cut_link() {
    ip -n "${CLUSTER_NS}login" link set "v$1" down
}

cluster_pids() {
    local pid
    for pid in $(ip netns pids "$CLUSTER_NS$1"); do
        grep -qE -- "$2" <(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) && echo "$pid"
    done
}

# cluster_switch_bytes: bytes received by the bridge from all nodes (each node-to-node byte
# crosses it once); Slurm's own messages are a few kB per job.
cluster_switch_bytes() {
    local node sum=0 b
    for node in $CLUSTER_NODES; do
        b=$(ip -n "${CLUSTER_NS}login" -s -j link show "v$node" 2>/dev/null |
            grep -oE '"rx":\{"bytes":[0-9]+' | grep -oE '[0-9]+$')
        sum=$((sum + ${b:-0}))
    done
    echo "$sum"
}

cluster_stop() {
    local node
    [ -n "$CLUSTER_NS" ] || return 0
    [ -s "$CLUSTER_DIR/run/login.holder" ] && slurm_stop
    for node in $CLUSTER_NODES login; do
        cluster_remove_ns "$CLUSTER_NS$node"
    done
    rm -f "$CLUSTER_DIR"/run/*.holder
    CLUSTER_NS=""
}

# ---- for the tests ----------------------------------------------------------------------------
# cluster_test_begin N [UTTS_PER_SPEAKER]: after lib.sh; a cluster of N nodes under
# $WORK/cluster (exit 77 with the reason when it cannot be made), torn down however the test
# ends, and the dataset and settings of slurm_test_data.
cluster_test_begin() {
    cluster_start "$WORK/cluster" "$1"
    case $? in
        0) ;;
        77) echo "SKIP: $SLURM_SKIP_REASON"; exit 77 ;;
        *) echo "FAIL: the cluster did not start"; exit 1 ;;
    esac
    trap cluster_stop EXIT
    trap 'exit 143' TERM INT
    slurm_test_data "${2:-64}"
    # Ranks on different nodes often get stuck in MPI_Finalize (MPICH 4.0.2 over TCP; see
    # kernels/base/check.c): leave after 5 s rather than the default 30.
    export SPKDDP_FINALIZE_TIMEOUT=5
}

# cluster_finalize_note LOG: how many ranks of the job left MPI_Finalize by its timeout.
cluster_finalize_note() {
    local n
    n=$(grep -c 'MPI_Finalize has not returned' "$1")
    [ "$n" -eq 0 ] || echo "    ($n rank(s) of this job left a stuck MPI_Finalize after ${SPKDDP_FINALIZE_TIMEOUT} s)"
}

# cluster_gradient_bytes LOG EPOCHS: the least the allreduces of a run (its spkddp output in
# LOG) move into a node that holds some of its ranks: one float per parameter and step.
cluster_gradient_bytes() {
    local params steps
    params=$(grep -oE '\(([0-9]+) parameters\)' "$1" | grep -oE '[0-9]+')
    steps=$(grep -oE '[0-9]+ steps/epoch' "$1" | grep -oE '^[0-9]+')
    echo $((${params:-0} * ${steps:-0} * $2 * 4))
}

# cluster_submit NAME EPOCHS NODES TASKS_PER_NODE [sbatch flags]: slurm_submit on NODES nodes.
cluster_submit() {
    local name=$1 epochs=$2 nodes=$3 per=$4
    shift 4
    slurm_submit "$name" "$epochs" --nodes="$nodes" --ntasks=$((nodes * per)) --ntasks-per-node="$per" "$@"
}
