#!/usr/bin/env bash
# How a run stops (kernels/base/stop_signals.h):
#   - SIGUSR1 during start-up is kept until the ranks first meet: exit 75, no crash (the
#     handlers were installed only after the data was opened and the resume done);
#   - SIGUSR1 with a stopped peer: exit 1 after the grace period, one line (SIGUSR1 did not
#     arm the grace timer: the job hung);
#   - a silent peer (stopped, no signal), wherever the others wait (an allreduce, a
#     checkpoint's barrier, a collective read): exit 1 with one line, SPKDDP_MPI_TIMEOUT (3 s)
#     or the watchdog's twice that (app/train/step_watchdog.h);
#   - SIGUSR1 in a healthy run: a checkpoint at an agreed step, exit 75, and it resumes.
# usage: stop.sh SPKDDP MPIEXEC WORKDIR
. "$(dirname "$0")/../e2e/lib.sh" "$1" "$2" "$3"

$SPKDDP synth --kind speakers --dim 8 --speakers 4 --utts-per-speaker 50 --min-frames 20 --max-frames 40 --out d.h5 >/dev/null
T="train --data d.h5 --epochs 100000 --global-batch 4"
# The pid of rank R of the run with --ckpt-dir $PWD/DIR (MPICH puts PMI_RANK in each rank's
# environment). The absolute directory tells this script's runs from other tests' running beside.
rank_pid() {
    local p
    for p in $(pgrep -f "$SPKDDP train .*--ckpt-dir $PWD/$2( |$)"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PMI_RANK=$1" && { echo "$p"; return; }
    done
}
wait_pid() { local p=""; for _ in $(seq 1 3000); do p=$(rank_pid "$1" "$2"); [ -n "$p" ] && break; sleep 0.01; done; echo "$p"; }
# Whether process P has taken charge of SIGUSR1: blocked, for its signal thread (bit 10 of SigBlk).
catches_usr1() { (( 0x$(awk '/^SigBlk/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0) & 0x200 )); }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# 1. A signal during start-up.
"$MPIEXEC" -n 2 $SPKDDP $T --ckpt-dir "$PWD/early" >early.out 2>early.err &
m=$!
p=$(wait_pid 0 early)
for _ in $(seq 1 2000); do catches_usr1 "$p" && break; sleep 0.002; done
grep -q "spkddp train:" early.out && fail "the handler came only after the start-up (the header was already printed)"
kill -USR1 "$p"
wait $m
rc=$?
[ $rc -eq 75 ] && grep -q "received SIGUSR1: stopped at global step" early.out || fail "SIGUSR1 at start-up: exit $rc: $(cat early.err)"
[ "$(grep -c '^spkddp: error:' early.err)" -eq 0 ] || fail "SIGUSR1 at start-up: $(cat early.err)"
[ $rc -eq 75 ] && echo "ok  SIGUSR1 during start-up: exit 75 ($(grep -o 'stopped at global step.*' early.out))"

# stopped_peer NAME SIGNAL PATTERN ENV: a 2-rank run (environment ENV) whose rank 1 is
# stopped after 2 s, then rank 0 gets SIGNAL ("-": none). It must exit 1 within 15 s with
# one error line matching PATTERN; sets took (seconds from the stop to the end).
stopped_peer() {
    local name=$1 sig=$2 pattern=$3 env=$4 m r1 t0 rc
    timeout -k 5 60 "$MPIEXEC" -n 2 env $env $SPKDDP $T --ckpt-dir "$PWD/$name" >"$name.out" 2>"$name.err" &
    m=$!
    sleep 2
    r1=$(wait_pid 1 "$name")
    kill -STOP "$r1"
    [ "$sig" = - ] || kill -"$sig" "$(wait_pid 0 "$name")"
    t0=$(date +%s.%N)
    wait $m
    rc=$? took=$(since "$t0")
    kill -KILL "$r1" 2>/dev/null
    [ $rc -eq 1 ] && [ "$(grep -c '^spkddp: error:' "$name.err")" -eq 1 ] && grep -qE "$pattern" "$name.err" \
        && awk -v t="$took" 'BEGIN { exit !(t < 15) }' || { fail "$name: exit $rc after $took s: $(cat "$name.err")"; return 1; }
}

# 2. SIGUSR1 with a stopped peer: the grace timer ends the job.
stopped_peer grace USR1 "after SIGUSR1 the ranks did not meet within 3 s" SPKDDP_STOP_GRACE=3 \
    && echo "ok  SIGUSR1 with a stopped peer: exit 1 after $took s (grace 3 s)"

# 3. A silent peer without any signal.
stopped_peer silent - "an MPI collective has waited 3 s|the ranks have not met for [0-9]+ s" SPKDDP_MPI_TIMEOUT=3 \
    && echo "ok  a silent peer: exit 1 after $took s (SPKDDP_MPI_TIMEOUT=3): $(grep -oE 'waited 3 s|not met for [0-9]* s' silent.err)"

# 4. SIGUSR1 in a healthy run: checkpoint, exit 75, resume.
"$MPIEXEC" -n 2 $SPKDDP $T --ckpt-dir "$PWD/healthy" >healthy.out 2>healthy.err &
m=$!
sleep 2
kill -USR1 "$(wait_pid 1 healthy)"
wait $m
rc=$?
step=$(grep -o 'received SIGUSR1: stopped at global step [0-9]*' healthy.out | grep -o '[0-9]*$')
[ $rc -eq 75 ] && [ -n "$step" ] && [ -f "healthy/ckpt-$(printf %012d "$step").h5" ] || fail "healthy SIGUSR1: exit $rc: $(cat healthy.err)"
run 2 $SPKDDP ${T/100000/2} --ckpt-dir healthy --resume auto --resume-allow epochs >resumed.out 2>&1 || fail "resume after SIGUSR1: $(cat resumed.out)"
grep -q "resumed from healthy/ckpt-$(printf %012d "$step").h5" resumed.out || fail "did not resume the signal's checkpoint"
echo "ok  SIGUSR1: checkpoint at the agreed step $step, exit 75, resumed"
finish
