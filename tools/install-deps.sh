#!/usr/bin/env bash
# Installs spkddp's build and run dependencies on Debian 12 (as root, or through sudo).
# Skips apt entirely when everything is already there.
set -euo pipefail
pkgs=(build-essential cmake pkg-config mpich libmpich-dev libhdf5-mpich-dev hdf5-tools libopenblas-dev libopenblas-openmp-dev
      libdnnl-dev libsndfile1-dev libfftw3-dev libsoxr-dev gnuplot-nox)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
echo "installing: ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
