#!/usr/bin/env bash
# Installs spkddp's build and run dependencies on Debian 12 (README: why each is there).
#   --sanitize  also the clang toolchain of the sanitizer and fuzzing build (docs/hardening.md)
#   --python    also Debian's Python packages of the interop tests (docs/interop.md): the venv
#               they make over python3 adds a few pinned PyPI packages on top
set -euo pipefail
extra=()
for opt in "$@"; do
    case "$opt" in
        --sanitize) extra+=(clang libclang-rt-14-dev libomp-dev) ;;
        --python) extra+=(python3-venv python3-torch python3-torchaudio python3-numpy python3-scipy python3-h5py
                          python3-onnx python3-tqdm python3-packaging python3-ruamel.yaml) ;;
        *) echo "install-deps.sh: unknown option $opt (--sanitize, --python)" >&2; exit 2 ;;
    esac
done
exec bash "$(dirname "$0")/apt-install-missing.sh" \
    build-essential cmake pkg-config xz-utils patchelf mpich libmpich-dev libhdf5-mpich-dev hdf5-tools \
    libopenblas-dev libopenblas-openmp-dev libdnnl-dev libsndfile1-dev libfftw3-dev libsoxr-dev libxxhash-dev libyaml-dev \
    libavformat-dev libavcodec-dev libswresample-dev libswscale-dev libavutil-dev libturbojpeg0-dev ffmpeg gnuplot-nox \
    libjansson-dev libprotobuf-c-dev protobuf-c-compiler libonnx-dev \
    "${extra[@]}"
