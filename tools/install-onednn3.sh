#!/usr/bin/env bash
# Installs oneDNN 3 for spkddp's CPU kernels into PREFIX (default ~/.cache/spkddp/onednn-3.2),
# from Intel's own GNU OpenMP build on PyPI (onednn-cpu-gomp and onednn-devel-cpu-gomp: the
# library, and its headers), and prints the CMake option that builds against it:
#   bash tools/install-onednn3.sh && cmake -S . -B build -DCMAKE_PREFIX_PATH=$HOME/.cache/spkddp/onednn-3.2
# Debian 12 ships oneDNN 2.6 (libdnnl-dev), which the default build uses. oneDNN 3's AMX
# convolutions train ResNet34 in bf16 10% faster on a Sapphire Rapids Xeon (docs/kernels.md).
# Intel's later oneDNN 3 wheels (onednn) are the SYCL and TBB build, which would run its threads
# beside spkddp's OpenMP ones: this one shares them (libgomp, as spkddp).
set -euo pipefail
version=2023.2.0  # oneDNN 3.2
prefix=${1:-$HOME/.cache/spkddp/onednn-3.2}
if [ -f "$prefix/include/oneapi/dnnl/dnnl.h" ] && [ -e "$prefix/lib/libdnnl.so" ]; then
    echo "-DCMAKE_PREFIX_PATH=$prefix"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pip=(python3 -m pip)
if ! python3 -m pip --version >/dev/null 2>&1; then  # Debian's python3 has pip in a venv only
    python3 -m venv "$tmp/venv"
    pip=("$tmp/venv/bin/python" -m pip)
fi
"${pip[@]}" download --quiet --no-deps --dest "$tmp" "onednn-cpu-gomp==$version" "onednn-devel-cpu-gomp==$version" ||
    { echo "install-onednn3.sh: PyPI's onednn-cpu-gomp $version could not be downloaded" >&2; exit 1; }
for w in "$tmp"/*.whl; do python3 -m zipfile -e "$w" "$tmp/x"; done
mkdir -p "$prefix/lib"
cp -r "$tmp"/x/onednn_devel_cpu_gomp-*.data/data/include "$prefix/"
# The wheel holds the library three times (zip has no links): keep one and link the names.
lib=$(cd "$tmp"/x/onednn_cpu_gomp-*.data/data/lib && ls libdnnl.so.3.*)
cp "$tmp"/x/onednn_cpu_gomp-*.data/data/lib/"$lib" "$prefix/lib/"
ln -sf "$lib" "$prefix/lib/libdnnl.so.3"
ln -sf libdnnl.so.3 "$prefix/lib/libdnnl.so"
echo "-DCMAKE_PREFIX_PATH=$prefix"
