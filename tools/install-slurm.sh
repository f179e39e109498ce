#!/usr/bin/env bash
# Installs what the `slurm` and `multinode` tests need (Debian 12: Slurm 22.05): slurmctld,
# slurmd and slurm-client (sbatch, srun, squeue, ...), and iproute2 (ip netns, veth, bridge:
# the multinode tests' cluster of network namespaces; nsenter and unshare are util-linux,
# always installed). Munge comes in as a Debian dependency; the test fixtures use auth/none and
# never start a munge daemon, and they never use the packages' system services either (they
# start their own daemons from a private directory). Idempotent. Exits non-zero when apt fails.
set -euo pipefail
exec bash "$(dirname "$0")/apt-install-missing.sh" slurmctld slurmd slurm-client iproute2
