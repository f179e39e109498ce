# Single-node Slurm for the `slurm` tests, from Debian's packages (slurmctld, slurmd,
# slurm-client; Debian 12 ships Slurm 22.05), running entirely out of a private directory.
#
#   . tests/slurm/slurm_fixture.sh
#   slurm_start DIR      # config in DIR/etc, state/spool/logs under DIR; exports SLURM_CONF
#   ...sbatch/srun/squeue...
#   slurm_stop           # cancels what is left, stops both daemons, removes DIR/var
#
# slurm_start returns 0 when the node is idle, 77 with $SLURM_SKIP_REASON set when Slurm is
# not installed or cannot be started here (the tests then exit 77: skipped), 1 otherwise.
# Its configuration (slurm_write_conf), stop and test helpers also serve the multi-node
# cluster of tests/multinode/cluster.sh.
#
# What it sets up (and why):
#   AuthType=auth/none, CredType=cred/none   no munge daemon needed (22.05 still ships both
#                                            plugins; later Slurm releases dropped them)
#   ProctrackType=proctrack/linuxproc, TaskPlugin=task/none, JobAcctGatherType=none
#                                            no cgroups in a container
#   MpiDefault=pmi2                          srun's PMI2 server; MPICH's PMI client talks to it
#   SelectType=select/cons_tres, CR_Core     CPUs = nproc, memory not scheduled
#   SlurmUser=root, SlurmdUser=root, free TCP ports picked at start, ReturnToService=2
#   KillWait=10                              SIGTERM -> SIGKILL grace on cancel/time limit
# Daemons run in the foreground (-D) as background jobs of the calling shell, so stopping
# them kills exactly the processes started here (by pid), never anything matched by name.

SLURM_FIXTURE_DIR=""
SLURM_CTLD_PID=""
SLURM_SLURMD_PIDS=""  # slurmd of every node
SLURM_SKIP_REASON=""

# slurm_free_port START: first TCP port >= START that nobody listens on.
slurm_free_port() {
    local p=$1 used
    used=$(ss -Htln 2>/dev/null | awk '{print $4}' | sed 's/.*://')
    while grep -qx "$p" <<<"$used"; do p=$((p + 1)); done
    echo "$p"
}

# slurm_write_conf DIR CONTROLLER CTLD_PORT SLURMD_PORT NODES NODE_SPEC [TIMEOUTS]:
# DIR/etc/slurm.conf (and the state, spool, log and run directories) for the controller
# CONTROLLER, "name(address)", and the nodes NODES (a Slurm host list, all in partition debug)
# described by NODE_SPEC (NodeAddr=..., CPUs=... or the layout). TIMEOUTS: SlurmdTimeout,
# MessageTimeout and KillWait, as "60 10 10" (the default). Spool, pid and log files of slurmd
# carry the node name (%n), so several slurmds can share DIR.
slurm_write_conf() {
    local dir=$1 controller=$2 ctld_port=$3 slurmd_port=$4 nodes=$5 spec=$6 slurmd_timeout msg_timeout kill_wait
    read -r slurmd_timeout msg_timeout kill_wait <<<"${7:-60 10 10}"
    rm -rf "${dir:?}"
    mkdir -p "$dir/etc" "$dir/var/state" "$dir/var/spool" "$dir/var/tmp" "$dir/log" "$dir/run"
    cat >"$dir/etc/slurm.conf" <<EOF
ClusterName=spktest
SlurmctldHost=$controller
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
MpiDefault=pmi2
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
SlurmdParameters=config_overrides
StateSaveLocation=$dir/var/state
SlurmdSpoolDir=$dir/var/spool/%n
TmpFS=$dir/var/tmp
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$dir/etc/plugstack.conf
SlurmctldTimeout=30
SlurmdTimeout=$slurmd_timeout
InactiveLimit=0
KillWait=$kill_wait
MinJobAge=600
MessageTimeout=$msg_timeout
JobRequeue=1
MailProg=/bin/true
NodeName=$nodes $spec State=UNKNOWN
PartitionName=debug Nodes=$nodes Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    : >"$dir/etc/plugstack.conf"
}

# slurm_use_conf DIR: the Slurm commands of this shell talk to the cluster of DIR/etc.
slurm_use_conf() {
    export SLURM_CONF=$1/etc/slurm.conf
    # Jobs inherit the caller's environment; keep stray Slurm variables out of it.
    unset SLURM_JOB_ID SLURM_JOBID SLURM_NTASKS SLURM_NNODES SLURM_NODELIST SLURM_PROCID
}

# slurm_can_run: 0 when Slurm is installed and this is root, else 77 with SLURM_SKIP_REASON.
slurm_can_run() {
    local b
    for b in slurmctld slurmd sbatch srun squeue sinfo scontrol scancel; do
        if ! type -P "$b" >/dev/null; then  # the program, not a shell function of that name
            SLURM_SKIP_REASON="'$b' not found: Slurm is not installed (bash tools/install-slurm.sh installs it)"
            return 77
        fi
    done
    if [ "$(id -u)" -ne 0 ]; then
        SLURM_SKIP_REASON="slurmd must run as root to launch jobs (this is uid $(id -u))"
        return 77
    fi
}

# slurm_wait_idle NODES PID...: until sinfo reports every node of NODES (a host list) idle,
# for at most 30 s or until one of the daemons PID... is gone; prints the states last seen.
slurm_wait_idle() {
    local nodes=$1 i pid states=""
    shift
    for i in $(seq 1 60); do
        for pid in "$@"; do kill -0 "$pid" 2>/dev/null || { echo "$states"; return 1; }; done
        states=$(sinfo -h -N -n "$nodes" -o %T 2>/dev/null | sort -u | tr '\n' ' ' | sed 's/ $//')
        [ "$states" = idle ] && { echo "$states"; return 0; }
        sleep 0.5
    done
    echo "$states"
    return 1
}

slurm_start() {
    local dir=$1 host cpus layout ctld_port slurmd_port state
    SLURM_FIXTURE_DIR=$dir
    slurm_can_run || return 77
    host=$(hostname -s)
    cpus=$(nproc)
    # The hardware layout from slurmd -C when it agrees with nproc (no "differs from hardware"
    # note), else just CPUs=nproc (SlurmdParameters=config_overrides accepts either).
    layout=$(slurmd -C 2>/dev/null | head -1 | grep -oE '(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=[0-9]+' | tr '\n' ' ')
    grep -q "CPUs=$cpus " <<<"$layout " || layout="CPUs=$cpus"
    # Ports: 16817/16818 unless taken (several fixtures on one machine each get their own).
    ctld_port=$(slurm_free_port $((16817 + ($$ % 500) * 2)))
    slurmd_port=$(slurm_free_port $((ctld_port + 1)))
    slurm_write_conf "$dir" "$host(127.0.0.1)" "$ctld_port" "$slurmd_port" "$host" \
        "NodeAddr=127.0.0.1 $layout RealMemory=1000"
    slurm_use_conf "$dir"
    mkdir -p "$dir/var/spool/$host"

    slurmctld -D -c -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
    SLURM_CTLD_PID=$!
    slurmd -D -f "$SLURM_CONF" >"$dir/log/slurmd.out" 2>&1 &
    SLURM_SLURMD_PIDS=$!

    if ! state=$(slurm_wait_idle "$host" "$SLURM_CTLD_PID" "$SLURM_SLURMD_PIDS"); then
        SLURM_SKIP_REASON="single-node Slurm did not come up (node state '${state:-none}' after 30 s); logs:
$(tail -n 15 "$dir/log/slurmctld.out" "$dir/log/slurmctld.log" "$dir/log/slurmd.out" "$dir/log/slurmd-$host.log" 2>/dev/null)"
        slurm_stop
        return 77
    fi
    echo "slurm: $(sinfo -V) up: node $host ($cpus CPUs) idle; SLURM_CONF=$SLURM_CONF, ports $ctld_port/$slurmd_port"
    return 0
}

# slurm_wait_state JOBID STATE SECONDS: poll until the job's state (from scontrol) matches
# the regex STATE; prints the last state seen; returns 1 on timeout.
slurm_job_state() {
    scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1
}
slurm_wait_state() {
    local job=$1 want=$2 secs=$3 s="" i
    for i in $(seq 1 $((secs * 4))); do
        s=$(slurm_job_state "$job")
        if grep -qE "^($want)\$" <<<"$s"; then echo "$s"; return 0; fi
        sleep 0.25
    done
    echo "$s"
    return 1
}

# slurm_wait_steps_gone JOB SECONDS: until no slurmd spool holds a socket of the job's steps
# (slurmstepd of the batch script and of every srun step has exited).
slurm_wait_steps_gone() {
    local job=$1 i left
    for i in $(seq 1 $(($2 * 10))); do
        left=$(ls "$SLURM_FIXTURE_DIR"/var/spool/* 2>/dev/null | grep -E "(_|sock\.pmi2\.)$job\.")
        [ -z "$left" ] && return 0
        sleep 0.1
    done
    echo "$left"
    return 1
}

# slurm_cancel_all: cancels every job and gives the steps a moment to go, so that no task
# outlives slurmd.
slurm_cancel_all() {
    local i
    scancel --full --signal=KILL --partition=debug >/dev/null 2>&1
    scancel --partition=debug >/dev/null 2>&1
    for i in $(seq 1 40); do
        [ -z "$(squeue -h -t running,completing,configuring 2>/dev/null)" ] && break
        sleep 0.25
    done
}

slurm_stop() {
    local i pid
    [ -n "$SLURM_FIXTURE_DIR" ] || return 0
    if [ -n "$SLURM_CTLD_PID" ] && kill -0 "$SLURM_CTLD_PID" 2>/dev/null; then
        slurm_cancel_all
    fi
    for pid in $SLURM_SLURMD_PIDS $SLURM_CTLD_PID; do
        kill "$pid" 2>/dev/null
    done
    for pid in $SLURM_SLURMD_PIDS $SLURM_CTLD_PID; do
        for i in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    SLURM_SLURMD_PIDS=""
    SLURM_CTLD_PID=""
    # State and spool go; etc/ and log/ stay for post-mortems.
    rm -rf "${SLURM_FIXTURE_DIR:?}/var"
    SLURM_FIXTURE_DIR=""
}

# ---- helpers shared by the spkddp Slurm tests ---------------------------------------------------
# slurm_test_begin [EPOCHS]: after lib.sh (WORK is the test's folder); starts Slurm under
# $WORK/slurm (exit 77 with the reason when it cannot) and runs slurm_test_data; with EPOCHS,
# sets EPOCHS and trains the uninterrupted reference run of that many epochs into $WORK/ref.
WORK=$PWD
SLURM_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SLURM_SBATCH=$SLURM_REPO/jobscripts/train.sbatch
SLURM_WORKSTATION=$SLURM_REPO/jobscripts/workstation.sh
SLURM_T0=$(date +%s.%N)

slurm_elapsed() { awk -v a="$SLURM_T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
slurm_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

slurm_test_begin() {
    slurm_start "$WORK/slurm"
    local rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "SKIP: $SLURM_SKIP_REASON"
        exit 77
    fi
    trap slurm_stop EXIT
    slurm_test_data
    [ $# -eq 0 ] && return 0
    EPOCHS=$1
    slurm_reference ref "$EPOCHS"
}

# slurm_test_data [UTTS_PER_SPEAKER]: writes $WORK/sp.h5 (4 speakers, 64 utterances each unless
# told) and sets SLURM_TRAIN_ARGS, a run of ~0.1-0.5 s per epoch on 2 ranks.
slurm_test_data() {
    "$SPKDDP" synth --kind speakers --out "$WORK/sp.h5" --dim 8 --speakers 4 --utts-per-speaker "${1:-64}" \
        --min-frames 10 --max-frames 20 >/dev/null || { echo "FAIL: synth"; exit 1; }
    # One thread per rank everywhere, so srun and mpiexec runs are bitwise comparable.
    export SPKDDP_THREADS=1
    # Ranks nap instead of spinning while they wait for each other: kinder to shared cores.
    export SPKDDP_WAIT=sleep
    SLURM_TRAIN_ARGS="--batch 8 --model ecapa --channels 32 --emb-dim 8 --attention-channels 8 --se-channels 8 --frames 32 --progress 0"
}

# slurm_submit NAME EPOCHS [sbatch flags]: submits train.sbatch with 2 tasks on the one node,
# CKPT_DIR=$WORK/NAME, log $WORK/NAME.out; prints the job id.
slurm_submit() {
    local name=$1 epochs=$2
    shift 2
    SPKDDP=$SPKDDP DATA=$WORK/sp.h5 CKPT_DIR=$WORK/$name EXTRA="$SLURM_TRAIN_ARGS --epochs $epochs" \
        sbatch --parsable --job-name="$name" --nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 \
        --time=5 --output="$WORK/$name.out" --chdir="$WORK" "$@" "$SLURM_SBATCH"
}

# slurm_reference NAME EPOCHS [NP]: the uninterrupted run, on NP (2) ranks with
# workstation.sh/mpiexec on this machine.
slurm_reference() {
    local name=$1 epochs=$2 np=${3:-2} t
    t=$(date +%s.%N)
    SPKDDP=$SPKDDP MPIEXEC=$MPIEXEC NP=$np DATA=$WORK/sp.h5 CKPT_DIR=$WORK/$name \
        EXTRA="$SLURM_TRAIN_ARGS --epochs $epochs" bash "$SLURM_WORKSTATION" >"$WORK/$name.out" 2>&1 ||
        { fail "reference run (workstation.sh) exited $?: $(tail -3 "$WORK/$name.out")"; return 1; }
    [ -f "$WORK/$name/FINISHED" ] || fail "reference run left no FINISHED"
    echo "ok  reference: $epochs epochs uninterrupted on $np ranks with workstation.sh in $(slurm_since "$t") s"
}

# slurm_wait_training JOB NAME N: until job JOB (CKPT_DIR $WORK/NAME) has N epochs in its
# metrics; on a timeout (60 s) or when the job ends first: fail, show its log and finish.
slurm_wait_training() {
    local job=$1 m=$WORK/$2/metrics.jsonl n=$3 i s=""
    for i in $(seq 1 600); do
        [ -f "$m" ] && [ "$(grep -c . "$m")" -ge "$n" ] && return 0
        if [ $((i % 5)) -eq 0 ]; then
            s=$(slurm_job_state "$job")
            grep -qE '^(PENDING|CONFIGURING|RUNNING)$' <<<"$s" || break
        fi
        sleep 0.1
    done
    fail "job $job did not get through $n epochs (state ${s:-unknown}); log ends:"
    tail -8 "$WORK/$2.out" 2>/dev/null
    finish
}

# slurm_preempt JOB NAME: `scancel -s USR1` (what --signal=USR1@120 does before the time limit)
# to the job training into $WORK/NAME; the job must checkpoint and requeue itself (PENDING
# again) and its steps must end. Fails and finishes the test otherwise. Slurm's requeue delay
# is what normally lets the old run drain. Restarting at once instead (slurm_restart), the
# old run's slurmstepds must be gone first (a new step 0 would share the old one's PMI
# socket), and the clock must have passed the second in which its job credential was revoked
# (else slurmd refuses the launch: "Job credential revoked", and the job fails).
slurm_preempt() {
    local job=$1 done_before t state
    done_before=$(grep -c . "$WORK/$2/metrics.jsonl")
    t=$(date +%s.%N)
    scancel -s USR1 "$job" || fail "scancel -s USR1 $job"
    state=$(slurm_wait_state "$job" 'PENDING|COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY' 60)
    if [ "$state" != PENDING ]; then
        fail "job is ${state:-gone}, not PENDING again, after SIGUSR1; log ends:"
        tail -5 "$WORK/$2.out"
        finish
    fi
    echo "ok  requeued itself $(slurm_since "$t") s after SIGUSR1 ($done_before epochs done):" \
        "$(scontrol show job "$job" | grep -oE 'StartTime=[^ ]+|Reason=[^ ]+|Restarts=[0-9]+' | tr '\n' ' ')"
    t=$(date +%s.%N)
    slurm_wait_steps_gone "$job" 60 >/dev/null || fail "steps of the first run still there 60 s after the requeue"
    sleep 1.1
    echo "ok  first run's steps gone $(slurm_since "$t") s after the requeue"
}

# slurm_restart JOB: starts the requeued JOB now and waits for it to complete, once restarted.
slurm_restart() {
    local job=$1 t state restarts
    t=$(date +%s.%N)
    scontrol update JobId="$job" StartTime=now || fail "scontrol update StartTime=now"
    state=$(slurm_wait_state "$job" 'COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY' 150) ||
        fail "job did not finish within 150 s of the restart (state $state)"
    echo "job $job ended $state $(slurm_since "$t") s after the restart"
    [ "$state" = COMPLETED ] || fail "job ended $state"
    restarts=$(scontrol show job "$job" | grep -oE 'Restarts=[0-9]+' | cut -d= -f2)
    [ "${restarts:-0}" -eq 1 ] || fail "job restarted ${restarts:-?} times, want 1"
}

# slurm_check_requeue_log JOB NAME RANKS: $WORK/NAME.out tells of the signal, the checkpoint,
# the requeue and the resume, with RANKS ranks on each start.
slurm_check_requeue_log() {
    local job=$1 log=$WORK/$2.out ranks=$3
    grep -q 'received SIGUSR1: stopped at global step' "$log" || fail "no 'received SIGUSR1' in the job log"
    grep -q 'spkddp exited 75' "$log" || fail "the script did not see exit 75"
    grep -q "requeueing job $job" "$log" || fail "the script did not requeue"
    grep -qE "^=== spkddp job $job start 1 " "$log" || fail "no second start in the (appended) log"
    grep -qE "resumed from $WORK/$2/ckpt-[0-9]+\.h5" "$log" || fail "the restart did not resume from a checkpoint"
    [ "$(grep -c "$ranks ranks x batch" "$log")" -eq 2 ] || fail "expected 2 starts with $ranks ranks each"
    [ -f "$WORK/$2/FINISHED" ] || fail "no FINISHED after the restart"
    echo "ok  log: $(grep -oE 'resumed from [^:]*' "$log" | head -1), $ranks ranks on each start"
}

# newest checkpoint of a directory
slurm_newest_ckpt() { ls "$1"/ckpt-*.h5 2>/dev/null | sort | tail -1; }

# slurm_check_last_ckpt DIR: DIR's newest checkpoint exists and `spkddp inspect` reads it; sets
# LAST_CKPT to it.
slurm_check_last_ckpt() {
    LAST_CKPT=$(slurm_newest_ckpt "$1")
    if [ -n "$LAST_CKPT" ] && "$SPKDDP" inspect "$LAST_CKPT" >"$WORK/inspect.out" 2>&1; then
        echo "ok  last checkpoint $(basename "$LAST_CKPT") loads: $(grep -m1 -E 'step' "$WORK/inspect.out" | tr -s ' ')"
    else
        fail "no loadable checkpoint left (${LAST_CKPT:-none}): $(cat "$WORK/inspect.out" 2>/dev/null)"
    fi
}

# metrics without timing fields, for comparing runs
slurm_strip_metrics() { sed -E 's/"(samples_per_s|epoch_seconds|data_wait_s|peak_rss_mib|device_mem_mib)": [^,}]*//g' "$1"; }

# slurm_check_metrics FILE REF [once]: every epoch exactly once, as in REF, and equal to REF
# but for timings (unless `once`: runs on different world sizes differ in rounding).
slurm_check_metrics() {
    local dups n
    n=$(grep -c . "$1")
    dups=$(grep -oE '"epoch": *[0-9]+' "$1" | sort | uniq -d | tr '\n' ' ')
    [ -z "$dups" ] || fail "$1 repeats epochs: $dups"
    [ "$n" -eq "$(grep -c . "$2")" ] || fail "$1 has $n lines, the reference $(grep -c . "$2")"
    if [ "${3:-}" = once ]; then
        echo "ok  metrics: $n epochs, each once"
    elif diff <(slurm_strip_metrics "$1") <(slurm_strip_metrics "$2") >/dev/null; then
        echo "ok  metrics: $n epochs, each once, equal to the reference but for timings"
    else
        fail "metrics $1 differ from $2 (beyond timings)"
    fi
}

# slurm_same_final DIR REF [RTOL]: the newest checkpoints have the same step and are bitwise
# equal (or equal to relative RTOL, when given and not empty).
slurm_same_final() {
    local a b how="bitwise equal" rtol=()
    a=$(slurm_newest_ckpt "$1")
    b=$(slurm_newest_ckpt "$2")
    [ -n "$a" ] && [ -n "$b" ] || { fail "no final checkpoint in $1 or $2"; return; }
    [ "$(basename "$a")" = "$(basename "$b")" ] || fail "final checkpoints at different steps: $a vs $b"
    if [ -n "${3:-}" ]; then rtol=(--rtol "$3"); how="equal to rtol $3"; fi
    if "$SPKDDP" diff "$a" "$b" "${rtol[@]}" >"$WORK/diff.out" 2>&1; then
        echo "ok  $(basename "$a"): $how to the uninterrupted run (spkddp diff: $(grep params "$WORK/diff.out" | tr -s ' '))"
    else
        cat "$WORK/diff.out"
        fail "final parameters differ from the uninterrupted run"
    fi
}
