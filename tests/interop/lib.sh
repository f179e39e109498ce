# Shared set-up of the interop tests: `. lib.sh SPKDDP MPIEXEC WORKDIR VENV`, then
# `need_python MODULE...` before the Python checks (skips, exit 77, with the reason when a
# module is missing; a failure under SPKDDP_REQUIRE_PYTHON_TESTS=1).
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VENV=$4
. "$HERE/../e2e/lib.sh" "$1" "$2" "$3"
need_python() {
    PY=$(bash "$HERE/pyenv.sh" "$VENV") || exit $?
    local m
    for m in "$@"; do
        if ! "$PY" -c "import $m" >/dev/null 2>&1; then
            echo "SKIPPED: Python module '$m' is missing (tools/install-deps.sh installs Debian's python3 packages)" >&2
            [ "${SPKDDP_REQUIRE_PYTHON_TESTS:-0}" = 1 ] && exit 1
            exit 77
        fi
    done
}
# A small ECAPA (F=24, C=32) trained for two epochs on 2 ranks: ck/ckpt-000000000018.h5.
train_small_ecapa() {
    $SPKDDP synth --kind speakers --out train.h5 --dim 24 --speakers 12 --utts-per-speaker 6 --min-frames 40 \
        --max-frames 90 >/dev/null || fail "synth"
    run 2 $SPKDDP train --model ecapa --channels 32 --attention-channels 16 --se-channels 16 --emb-dim 24 --frames 40 \
        --data train.h5 --epochs 2 --global-batch 8 --optimizer adam --lr 0.005 --ckpt-dir ck --progress 0 \
        >log_train || { cat log_train; fail "train"; }
    CKPT=ck/ckpt-000000000018.h5
    [ -f "$CKPT" ] || fail "no $CKPT"
}
