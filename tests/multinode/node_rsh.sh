#!/bin/bash
# node_rsh.sh [-x] NODE COMMAND...: what ssh does for MPICH's hydra (mpiexec -launcher ssh
# -launcher-exec node_rsh.sh, or HYDRA_LAUNCHER=ssh HYDRA_LAUNCHER_EXEC=node_rsh.sh), for the
# nodes of a namespace cluster (cluster.sh, whose directory is SPKDDP_CLUSTER_DIR): runs
# COMMAND, one shell command line as ssh would receive it, in NODE's namespaces.
[ "${1:-}" = -x ] && shift  # no X11 forwarding to disable
node=$1
shift
holder=$(cat "${SPKDDP_CLUSTER_DIR:?}/run/$node.holder" 2>/dev/null) ||
    { echo "node_rsh: no node '$node' in $SPKDDP_CLUSTER_DIR" >&2; exit 255; }
exec nsenter -t "$holder" -n -u -i -m --wd="$PWD" -- sh -c "exec $*"
