#!/usr/bin/env bash
# The Python of the interop tests: a venv over Debian's /usr/bin/python3 (its site packages
# visible) with requirements.txt from PyPI (or another list), made once per build directory and
# remade when the list changes. Usage: pyenv.sh VENV_DIR [REQUIREMENTS]; prints the venv's python.
# When it cannot be made (no python3-venv, no PyPI), it says why and exits 77, which ctest
# reports as skipped; with SPKDDP_REQUIRE_PYTHON_TESTS=1 (CI sets it) that is a failure.
set -u
venv=$1
req=${2:-$(cd "$(dirname "$0")" && pwd)/requirements.txt}
skip() {
    echo "SKIPPED: $*" >&2
    [ "${SPKDDP_REQUIRE_PYTHON_TESTS:-0}" = 1 ] && { echo "(SPKDDP_REQUIRE_PYTHON_TESTS=1: a failure)" >&2; exit 1; }
    exit 77
}
sys_py=/usr/bin/python3
[ -x "$sys_py" ] || skip "no $sys_py (Debian's python3)"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9  # the interop tests may run in parallel; one makes the venv, the others wait
want=$(sha256sum "$req" | cut -c1-16)
if [ "$(cat "$venv/.requirements" 2>/dev/null)" != "$want" ]; then
    rm -rf "$venv"
    "$sys_py" -m venv --system-site-packages "$venv" >"$venv.log" 2>&1 ||
        skip "python3 -m venv failed (Debian: python3-venv): $(tail -1 "$venv.log")"
    "$venv/bin/pip" install --no-deps --disable-pip-version-check --no-input -q -r "$req" >>"$venv.log" 2>&1 ||
        skip "cannot install $req from PyPI: $(grep -m1 -E 'ERROR|rror' "$venv.log")"
    echo "$want" >"$venv/.requirements"
fi
echo "$venv/bin/python"
