# Shared by the bundle's tests: failures counted, and a clean environment as on a machine where
# none of spkddp's dependencies are installed: only PATH and HOME, no LD_LIBRARY_PATH.
FAILS=0
fail() {
    echo "FAIL: $*"
    FAILS=$((FAILS + 1))
}
# stripped VAR=VALUE... -- command...: the command under env -i with the given variables.
stripped() {
    local vars=()
    while [ "$1" != -- ]; do
        vars+=("$1")
        shift
    done
    shift
    env -i PATH=/usr/bin:/bin HOME="$HOME" TMPDIR="${TMPDIR:-/tmp}" "${vars[@]}" "$@"
}
finish() {
    [ "$FAILS" -eq 0 ] || { echo "$FAILS failure(s)"; exit 1; }
    echo "all checks passed"
    exit 0
}
