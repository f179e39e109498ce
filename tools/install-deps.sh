#!/usr/bin/env bash
# Installs spkddp's build and run dependencies on Debian 12 (README: why each is there).
set -euo pipefail
exec bash "$(dirname "$0")/apt-install-missing.sh" \
    build-essential cmake pkg-config mpich libmpich-dev libhdf5-mpich-dev hdf5-tools \
    libopenblas-dev libopenblas-openmp-dev libdnnl-dev libsndfile1-dev libfftw3-dev libsoxr-dev \
    libavformat-dev libavcodec-dev libswresample-dev libavutil-dev ffmpeg gnuplot-nox
