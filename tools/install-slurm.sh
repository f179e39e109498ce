#!/usr/bin/env bash
# Installs a single-node Slurm (Debian 12: Slurm 22.05) for the `slurm`-labelled tests:
# slurmctld, slurmd and slurm-client (sbatch, srun, squeue, ...). Munge comes in as a Debian
# dependency; the test fixture uses auth/none and never starts a munge daemon, and it never
# uses the packages' system services either (it starts its own daemons from a private
# directory). Idempotent. Exits non-zero when apt fails.
set -euo pipefail
exec bash "$(dirname "$0")/apt-install-missing.sh" slurmctld slurmd slurm-client
