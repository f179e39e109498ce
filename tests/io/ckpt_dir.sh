#!/usr/bin/env bash
# Checkpoint directories end to end: --keep across a requeue (the resumed run adopts its own
# past, nothing else); another run's and corrupt files are never counted or deleted; a fresh
# run into a used directory, a second run into a directory another is writing, and resuming an
# older checkpoint beside newer ones, are refused
# (or the newer ones set aside whole); an unusable --ckpt-dir is refused at the start; a full
# disk leaves the previous checkpoints, no temp file and one error line (exit 1); format 1
# checkpoints load and resume to the same end.
# usage: ckpt_dir.sh SPKDDP MPIEXEC WORKDIR FIXTURES_DIR
. "$(dirname "$0")/../e2e/lib.sh" "$1" "$2" "$3"
FIX=$4
run_quiet() { "$@" >/dev/null 2>&1; }
clean_since() { [ "$FAILS" -eq "$1" ]; }

$SPKDDP synth --kind speakers --dim 8 --speakers 4 --utts-per-speaker 4 --min-frames 20 --max-frames 40 --out d.h5 >/dev/null
T="train --data d.h5 --epochs 4 --global-batch 4 --ckpt-every 1"
# 16 utterances / 4 = 4 steps an epoch.
run_quiet run 2 $SPKDDP $T --keep 2 --ckpt-dir rq --max-steps 5 || fail "first leg"
run_quiet run 2 $SPKDDP $T --keep 2 --ckpt-dir rq --resume auto || fail "second leg"
[ "$(ls rq/ckpt-*.h5 | wc -l)" -eq 2 ] && [ -f rq/ckpt-000000000016.h5 ] || fail "--keep 2 across a requeue kept: $(ls rq)"
clean_since 0 && echo "ok  --keep holds across a requeue"

# Another run's checkpoint and a corrupt file in the directory are never deleted or counted:
# a run resumed there (its own step-15 checkpoint) keeps 1 of its own and nothing else.
f0=$FAILS
run_quiet run 2 $SPKDDP $T --keep 100 --ckpt-dir other --max-steps 3 || fail "another run"
mkdir -p mixed && cp other/ckpt-000000000003.h5 mixed/ && cp rq/ckpt-000000000015.h5 mixed/
printf 'corrupt' >mixed/ckpt-000000000005.h5
sums=$(md5sum mixed/ckpt-000000000003.h5 mixed/ckpt-000000000005.h5)
out=$(run 2 $SPKDDP $T --epochs 5 --keep 1 --ckpt-dir mixed --resume mixed/ckpt-000000000015.h5 2>&1) || fail "resume into a mixed directory: $out"
[ "$(md5sum mixed/ckpt-000000000003.h5 mixed/ckpt-000000000005.h5)" = "$sums" ] || fail "another run's or a corrupt checkpoint changed"
[ "$(cd mixed && ls ckpt-*.h5 | tr '\n' ' ')" = "ckpt-000000000003.h5 ckpt-000000000005.h5 ckpt-000000000020.h5 " ] \
    || fail "--keep 1 beside foreign files kept: $(ls mixed)"
clean_since "$f0" && echo "ok  another run's and a corrupt checkpoint are neither deleted nor counted; the adopted past rotates"

# A fresh run into a directory that holds checkpoints (or FINISHED) is refused before it
# starts: its checkpoints would mix with them, and --resume auto would continue the newest.
f0=$FAILS
sums=$(md5sum mixed/*)
expect_error 4 "mixed already holds 3 checkpoint\(s\) \(ckpt-000000000003.h5 ... ckpt-000000000020.h5\) and a FINISHED marker of another run" -- \
    run 2 $SPKDDP $T --ckpt-dir mixed
mkdir -p done && echo "finished at global step 7" >done/FINISHED
expect_error 4 "done already holds a FINISHED marker of another run" -- run 2 $SPKDDP $T --ckpt-dir done
[ "$(md5sum mixed/*)" = "$sums" ] || fail "a refused fresh run changed the directory"
clean_since "$f0" && echo "ok  a fresh run into a directory with checkpoints or FINISHED is refused"

# Resuming an older checkpoint into a directory with newer ones: refused before anything is
# written (they are the future the resume abandons); with --set-aside-newer they move, whole,
# into abandoned-after-<step>/ and the run continues, deleting only its own past.
f0=$FAILS
run_quiet run 2 $SPKDDP $T --keep 100 --ckpt-dir old --max-steps 8 || fail "making newer checkpoints"
sums=$(cd old && md5sum ckpt-*.h5)
expect_error 4 "old holds 4 checkpoint\(s\) newer than step 4, where this run resumes \(ckpt-000000000005.h5 ... ckpt-000000000008.h5\)" -- \
    run 2 $SPKDDP $T --keep 1 --ckpt-dir old --resume old/ckpt-000000000004.h5
[ "$(cd old && md5sum ckpt-*.h5)" = "$sums" ] || fail "a refused resume changed or deleted checkpoints"
out=$(run 2 $SPKDDP $T --keep 1 --ckpt-dir old --resume old/ckpt-000000000004.h5 --max-steps 6 --set-aside-newer 2>&1) \
    || fail "resume with --set-aside-newer: $out"
grep -q "set aside 4 checkpoint(s) newer than step 4 into old/abandoned-after-000000000004/" <<<"$out" || fail "no set-aside line: $out"
[ "$(cd old/abandoned-after-000000000004 && md5sum ckpt-*.h5)" = "$(grep -E '0[5-8].h5' <<<"$sums")" ] \
    || fail "the set-aside checkpoints changed: $(ls old/abandoned-after-000000000004)"
[ "$(cd old && ls ckpt-*.h5 | tr '\n' ' ')" = "ckpt-000000000006.h5 " ] || fail "--keep 1 after the set-aside kept: $(ls old)"
ls -A old | grep -q '\.tmp$' && fail "a temp file stayed behind"
out=$(run 2 $SPKDDP $T --keep 1 --ckpt-dir old --resume auto --max-steps 7 2>&1) || fail "--resume auto after a set-aside: $out"
grep -q "resumed from old/ckpt-000000000006.h5" <<<"$out" || fail "--resume auto did not continue the new future: $out"
clean_since "$f0" && echo "ok  resuming an older checkpoint: refused, or the newer ones set aside whole"

# --ckpt-dir is checked at the start, with the reason: a regular file; a read-only file system
# (a read-only bind mount in a private mount namespace; skipped without unshare).
f0=$FAILS
touch afile
expect_error 2 "train: --ckpt-dir afile: checkpoints cannot be written there \(Not a directory\)" -- run 2 $SPKDDP $T --ckpt-dir afile
if unshare -rm true 2>/dev/null; then
    mkdir -p ro
    unshare -rm bash -c "mount --bind ro ro && mount -o remount,bind,ro ro && $MPIEXEC -n 2 $SPKDDP $T --ckpt-dir ro/ck \
        >ro.out 2>ro.err; echo \$? >ro.rc"
    [ "$(cat ro.rc)" = 2 ] && grep -q "train: --ckpt-dir ro/ck: checkpoints cannot be written there (Read-only file system)" ro.err \
        || fail "read-only --ckpt-dir: exit $(cat ro.rc): $(cat ro.err)"
    grep -q "epoch 1" ro.out && fail "read-only --ckpt-dir: it trained first"
else
    echo "--  no unshare: the read-only check is skipped"
fi
clean_since "$f0" && echo "ok  an unusable --ckpt-dir is refused at the start with the reason"

# A full disk: a small tmpfs in a private mount namespace (needs unshare; skipped without).
if unshare -rm true 2>/dev/null; then
    f0=$FAILS
    mkdir -p full && cp rq/ckpt-000000000016.h5 prev.h5
    unshare -rm bash -c "mount -t tmpfs -o size=40k tmpfs full && cp prev.h5 full/ckpt-000000000016.h5 &&
        head -c 26000 /dev/zero >full/filler && $MPIEXEC -n 2 $SPKDDP $T --epochs 5 --ckpt-dir full --resume auto \
        >full.out 2>full.err; echo \$? >full.rc; ls -A full >full.ls; $SPKDDP diff full/ckpt-000000000016.h5 prev.h5 >full.diff 2>&1; echo \$? >>full.rc"
    [ "$(head -1 full.rc)" = 1 ] || fail "full disk: exit $(head -1 full.rc), want 1: $(cat full.err)"
    [ "$(grep -c '^spkddp: error:' full.err)" -eq 1 ] && grep -q 'No space left on device' full.err || fail "full disk: $(cat full.err)"
    grep -q '\.tmp' full.ls && fail "full disk: the temp file stayed"
    [ "$(tail -1 full.rc)" = 0 ] || fail "full disk: the previous checkpoint changed: $(cat full.diff)"
    grep -qiE 'sanitizer|segmentation|signal' full.err && fail "full disk: $(cat full.err)"
    clean_since "$f0" && echo "ok  a full disk: one error line, exit 1, previous checkpoint intact, no temp file"
else
    echo "--  no unshare: the full-disk check is skipped"
fi

# Format 1 checkpoints (3490411): they load and resume to where the uninterrupted run ended.
# They have no run id, so rotation never deletes them: --keep 1 keeps the format 1 file and
# the newest of the resumed run's own.
# Two runs into one directory: the second is refused while the first holds it, whoever started
# first; the first is undisturbed.
T2="train --data d.h5 --epochs 100000 --global-batch 4 --ckpt-every 1000"
( run 2 $SPKDDP $T2 --ckpt-dir busy >busy.out 2>&1 ) &
for i in $(seq 1 100); do [ -n "$(pgrep -f "spkddp $T2 --ckpt-dir busy")" ] && break; sleep 0.1; done
sleep 2
SPKDDP_CKPT_LOCK_WAIT=1 expect_error 4 "train: --ckpt-dir busy is being written by another spkddp run" -- \
    $SPKDDP $T2 --ckpt-dir busy --seed 2
pgrep -f "spkddp $T2 --ckpt-dir busy" >/dev/null && echo "ok  the first run goes on" || fail "the first run ended: $(cat busy.out)"
# A requeued run waits for a lock that goes (here: the first run stops with a checkpoint), then resumes.
( SPKDDP_CKPT_LOCK_WAIT=60 run 2 $SPKDDP $T2 --ckpt-dir busy --resume auto --max-steps 1 >requeued.out 2>&1 ) &
w=$!
for i in $(seq 1 100); do grep -q "is locked by another process" requeued.out 2>/dev/null && break; sleep 0.1; done
pkill -TERM -f "spkddp $T2 --ckpt-dir busy\$"
wait $w
rc=$?
grep -q "is locked by another process; waiting" requeued.out && grep -qE "resum" requeued.out && [ $rc -eq 0 ] \
    && echo "ok  a run started while the directory was locked waited, then resumed the stopped run" \
    || fail "waiting for the lock: exit $rc: $(tail -3 requeued.out)"
pkill -TERM -f "spkddp $T2 --ckpt-dir busy"
for i in $(seq 1 100); do pgrep -f "spkddp $T2 --ckpt-dir busy" >/dev/null || break; sleep 0.1; done

# That run was computed by a gcc build on another machine: bitwise equal there, here within
# the rounding of other kernels and compilers (a clang sanitizer build: linear 5e-8, ECAPA+Adam
# 6.5e-4 after 4 steps; a lost optimizer state or position is far outside).
E="--model ecapa --channels 8 --emb-dim 8 --attention-channels 8 --se-channels 4 --frames 20 --global-batch 8 --optimizer adam --lr 1e-3 --epochs 2 --seed 7"
L="--model linear --global-batch 8 --optimizer sgd --momentum 0.9 --lr 0.05 --epochs 2 --seed 7"
for m in ecapa_adam linear_sgd; do
    args=$E rtol=1e-2
    [ $m = linear_sgd ] && args=$L rtol=1e-5
    mkdir -p v1_$m && cp "$FIX/${m}_step2.h5" v1_$m/ckpt-000000000002.h5
    run_quiet run 2 $SPKDDP train --data "$FIX/speakers.h5" $args --ckpt-dir v1_$m --keep 1 --resume auto || fail "resume the format 1 $m checkpoint"
    [ "$(cd v1_$m && ls ckpt-*.h5 | tr '\n' ' ')" = "ckpt-000000000002.h5 ckpt-000000000006.h5 " ] \
        || fail "format 1 $m: --keep 1 kept $(ls v1_$m)"
    if $SPKDDP diff v1_$m/ckpt-000000000006.h5 "$FIX/${m}_step6.h5" --rtol $rtol >diff_$m; then
        echo "ok  format 1 $m checkpoint resumed to the uninterrupted end: $(grep params diff_$m)"
    else
        cat diff_$m
        fail "format 1 $m resume"
    fi
done
finish
