# Shared helpers for the end-to-end tests: `. lib.sh SPKDDP MPIEXEC WORKDIR`
set -u
SPKDDP=$1
MPIEXEC=$2
WORK=$3
MAKE_BAD_DATA=${4:-}
FAILS=0
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK" || exit 1

fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
run() { "$MPIEXEC" -n "$@"; }  # run N spkddp args...

# expect_error CODE PATTERN -- command...: exits with CODE and stderr matches PATTERN.
expect_error() {
    local code=$1 pattern=$2
    shift 3
    local out rc
    out=$("$@" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" -ne "$code" ]; then fail "exit $rc (want $code) from: $* :: $out"; return; fi
    if ! grep -qE -- "$pattern" <<<"$out"; then fail "message '$out' does not match /$pattern/ for: $*"; return; fi
    echo "ok  [$code] $(grep -E -- "$pattern" <<<"$out" | head -1)"
}

# same A B WHAT: checkpoints A and B bitwise equal (spkddp diff); a script may define its own.
same() {
    if $SPKDDP diff "$1" "$2" >diff.out; then echo "ok  $3"; else cat diff.out; fail "$3"; fi
}

# within A B RTOL WHAT: checkpoints A and B equal within RTOL (spkddp diff --rtol).
within() {
    if $SPKDDP diff "$1" "$2" --rtol "$3" >diff.out; then
        echo "ok  $4 (within $3)"
    else
        cat diff.out
        fail "$4: beyond rtol $3"
    fi
}

# strip_timings FILE [KEY|...]: a metrics JSONL file without what timing and memory make differ
# between runs (samples_per_s, epoch_seconds, data_wait_s, peak_rss_mib, device_mem_mib) and the
# extra keys given, for comparing two runs' metrics.
strip_timings() {
    local keys="samples_per_s|epoch_seconds|data_wait_s|peak_rss_mib|device_mem_mib${2:+|$2}"
    sed -E "s/\"($keys)\": [^,}]*//g" "$1"
}

finish() {
    if [ "$FAILS" -ne 0 ]; then echo "$FAILS failure(s)"; exit 1; fi
    echo "all checks passed"
    exit 0
}
