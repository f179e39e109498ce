#!/usr/bin/env bash
# Installs a single-node Slurm (Debian 12: Slurm 22.05) for the `slurm`-labelled tests:
# slurmctld, slurmd and slurm-client (sbatch, srun, squeue, ...). Munge comes in as a Debian
# dependency; the test fixture uses auth/none and never starts a munge daemon, and it never
# uses the packages' system services either (it starts its own daemons from a private
# directory). Idempotent: does nothing when every package is already installed. Run as root
# (or with sudo available). Exits 0 on success, non-zero when apt fails.
set -euo pipefail
pkgs=(slurmctld slurmd slurm-client)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
echo "installing: ${missing[*]}"
$SUDO apt-get update -qq
# No services are started in containers without an init system (invoke-rc.d just warns).
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
