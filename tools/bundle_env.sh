# The GPU bundle's environment (tools/gpu_bundle.sh writes this file as OUT_DIR/env.sh).
# Source it from bash: `. env.sh`. It unpacks payload.tar.xz once per payload (into SPKDDP_BUNDLE_DIR, else
# ${TMPDIR:-/tmp}/spkddp-bundle-<hash of the payload>), puts the bundle's spkddp on the PATH and
# the CUDA libraries the binaries need (MANIFEST's cuda-libs line) on LD_LIBRARY_PATH, and sets
# SPKDDP_BUNDLE_ROOT. Each library is taken from the first of these folders that holds it:
#   1. SPKDDP_CUDA_LIBS, a colon-separated list of folders (when set, nothing else is searched);
#   2. CUDA's own: ${CUDA_HOME:-/usr/local/cuda}/lib64 and .../lib;
#   3. an installed PyTorch's: <site-packages>/nvidia/*/lib of ${SPKDDP_PYTHON:-python3} (the
#      nvidia-cublas, nvidia-cudnn-cu13 and nvidia-nccl-cu13 wheels PyTorch pins).
# It says on stderr where each library came from; one that is found nowhere is an error naming
# the folders searched (returns 1). The CUDA driver (libcuda.so.1) is the system's.
spkddp_bundle_env() {
    local here payload hash dest tmp lib d found dirs=() picked=() py
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd) || return 1
    payload=$here/payload.tar.xz
    [ -f "$payload" ] || { echo "spkddp bundle: $payload is missing" >&2; return 1; }
    hash=$(sha256sum "$payload" | cut -c1-12)
    dest=${SPKDDP_BUNDLE_DIR:-${TMPDIR:-/tmp}/spkddp-bundle-$hash}
    # The marker holds the payload's hash: a SPKDDP_BUNDLE_DIR that holds another payload's files
    # (an older bundle unpacked there) is unpacked again.
    if [ "$(cat "$dest/.unpacked" 2>/dev/null)" != "$hash" ]; then
        tmp=$dest.tmp.$$
        rm -rf "$tmp" && mkdir -p "$tmp" || return 1
        if command -v xz >/dev/null; then
            timeout 300 tar -xJf "$payload" -C "$tmp" || { echo "spkddp bundle: cannot unpack $payload" >&2; return 1; }
        else  # no xz program: Python's lzma
            timeout 300 python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$payload" "$tmp" ||
                { echo "spkddp bundle: cannot unpack $payload (no xz, and python3 failed)" >&2; return 1; }
        fi
        echo "$hash" >"$tmp/.unpacked"
        rm -rf "$dest" && mv "$tmp" "$dest" || return 1
    fi
    if [ -n "${SPKDDP_CUDA_LIBS:-}" ]; then
        IFS=: read -r -a dirs <<<"$SPKDDP_CUDA_LIBS"
    else
        for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" "${CUDA_HOME:-/usr/local/cuda}/lib"; do
            [ -d "$d" ] && dirs+=("$d")
        done
        py=${SPKDDP_PYTHON:-python3}
        if command -v "$py" >/dev/null; then
            while IFS= read -r d; do dirs+=("$d"); done < <(timeout 30 "$py" -c 'import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib"))):
        print(d)' 2>/dev/null)
        fi
    fi
    for lib in $(sed -n 's/^cuda-libs: //p' "$dest/MANIFEST"); do
        found=""
        for d in "${dirs[@]}"; do
            if [ -e "$d/$lib" ]; then
                found=$d
                break
            fi
        done
        if [ -z "$found" ]; then
            echo "spkddp bundle: $lib is in none of: ${dirs[*]:-(no folder: set SPKDDP_CUDA_LIBS, CUDA_HOME or SPKDDP_PYTHON)}" >&2
            return 1
        fi
        echo "spkddp bundle: $lib from $found" >&2
        [[ " ${picked[*]} " == *" $found "* ]] || picked+=("$found")
    done
    local joined
    joined=$(IFS=:; echo "${picked[*]}")
    export LD_LIBRARY_PATH="${joined}${LD_LIBRARY_PATH:+${joined:+:}$LD_LIBRARY_PATH}"
    export SPKDDP_BUNDLE_ROOT=$dest
    export PATH="$dest/app:$dest/bin:$PATH"
    echo "spkddp bundle: $dest (spkddp on the PATH)" >&2
}
spkddp_bundle_env
