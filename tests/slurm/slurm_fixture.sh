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
SLURM_SLURMD_PID=""
SLURM_SKIP_REASON=""

# slurm_free_port START: first TCP port >= START that nobody listens on.
slurm_free_port() {
    local p=$1 used
    used=$(ss -Htln 2>/dev/null | awk '{print $4}' | sed 's/.*://')
    while grep -qx "$p" <<<"$used"; do p=$((p + 1)); done
    echo "$p"
}

slurm_start() {
    local dir=$1 host cpus layout ctld_port slurmd_port i state
    SLURM_FIXTURE_DIR=$dir
    for b in slurmctld slurmd sbatch srun squeue sinfo scontrol scancel; do
        if ! command -v "$b" >/dev/null 2>&1; then
            SLURM_SKIP_REASON="'$b' not found: Slurm is not installed (bash tools/install-slurm.sh installs it)"
            return 77
        fi
    done
    if [ "$(id -u)" -ne 0 ]; then
        SLURM_SKIP_REASON="slurmd must run as root to launch jobs (this is uid $(id -u))"
        return 77
    fi
    host=$(hostname -s)
    cpus=$(nproc)
    # The hardware layout from slurmd -C when it agrees with nproc (no "differs from hardware"
    # note), else just CPUs=nproc (SlurmdParameters=config_overrides accepts either).
    layout=$(slurmd -C 2>/dev/null | head -1 | grep -oE '(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=[0-9]+' | tr '\n' ' ')
    grep -q "CPUs=$cpus " <<<"$layout " || layout="CPUs=$cpus"
    # Ports: 16817/16818 unless taken (several fixtures on one machine each get their own).
    ctld_port=$(slurm_free_port $((16817 + ($$ % 500) * 2)))
    slurmd_port=$(slurm_free_port $((ctld_port + 1)))
    rm -rf "${dir:?}"
    mkdir -p "$dir/etc" "$dir/var/state" "$dir/var/spool" "$dir/var/tmp" "$dir/log" "$dir/run"
    cat >"$dir/etc/slurm.conf" <<EOF
ClusterName=spktest
SlurmctldHost=$host(127.0.0.1)
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
SlurmdSpoolDir=$dir/var/spool
TmpFS=$dir/var/tmp
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$dir/etc/plugstack.conf
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=10
MinJobAge=600
MessageTimeout=10
JobRequeue=1
MailProg=/bin/true
NodeName=$host NodeAddr=127.0.0.1 $layout RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    : >"$dir/etc/plugstack.conf"
    export SLURM_CONF=$dir/etc/slurm.conf
    # Jobs inherit the caller's environment; keep stray Slurm variables out of it.
    unset SLURM_JOB_ID SLURM_JOBID SLURM_NTASKS SLURM_NNODES SLURM_NODELIST SLURM_PROCID

    slurmctld -D -c -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
    SLURM_CTLD_PID=$!
    slurmd -D -f "$SLURM_CONF" >"$dir/log/slurmd.out" 2>&1 &
    SLURM_SLURMD_PID=$!

    state=""
    for i in $(seq 1 60); do
        if ! kill -0 "$SLURM_CTLD_PID" 2>/dev/null || ! kill -0 "$SLURM_SLURMD_PID" 2>/dev/null; then
            break
        fi
        state=$(sinfo -h -n "$host" -o %T 2>/dev/null)
        [ "$state" = idle ] && break
        sleep 0.5
    done
    if [ "$state" != idle ]; then
        SLURM_SKIP_REASON="single-node Slurm did not come up (node state '${state:-none}' after 30 s); logs:
$(tail -n 15 "$dir/log/slurmctld.out" "$dir/log/slurmctld.log" "$dir/log/slurmd.out" "$dir/log/slurmd.log" 2>/dev/null)"
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

# slurm_wait_steps_gone JOB SECONDS: until slurmd's spool holds no socket of the job's steps
# (slurmstepd of the batch script and of every srun step has exited).
slurm_wait_steps_gone() {
    local job=$1 i left
    for i in $(seq 1 $(($2 * 10))); do
        left=$(ls "$SLURM_FIXTURE_DIR/var/spool" 2>/dev/null | grep -E "(_|sock\.pmi2\.)$job\.")
        [ -z "$left" ] && return 0
        sleep 0.1
    done
    echo "$left"
    return 1
}

slurm_stop() {
    local i pid
    [ -n "$SLURM_FIXTURE_DIR" ] || return 0
    if [ -n "$SLURM_CTLD_PID" ] && kill -0 "$SLURM_CTLD_PID" 2>/dev/null; then
        # Cancel what is left and give the steps a moment to go, so no task outlives slurmd.
        scancel --full --signal=KILL --partition=debug >/dev/null 2>&1
        scancel --partition=debug >/dev/null 2>&1
        for i in $(seq 1 40); do
            [ -z "$(squeue -h -t running,completing,configuring 2>/dev/null)" ] && break
            sleep 0.25
        done
    fi
    for pid in "$SLURM_SLURMD_PID" "$SLURM_CTLD_PID"; do
        [ -n "$pid" ] || continue
        kill "$pid" 2>/dev/null
    done
    for pid in "$SLURM_SLURMD_PID" "$SLURM_CTLD_PID"; do
        [ -n "$pid" ] || continue
        for i in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    SLURM_SLURMD_PID=""
    SLURM_CTLD_PID=""
    # State and spool go; etc/ and log/ stay for post-mortems.
    rm -rf "${SLURM_FIXTURE_DIR:?}/var"
    SLURM_FIXTURE_DIR=""
}

# ---- helpers shared by the spkddp Slurm tests ---------------------------------------------------
# slurm_test_begin: after lib.sh; starts Slurm under $WORK/slurm (exit 77 with the reason when
# it cannot), writes a small dataset and sets SLURM_TRAIN_ARGS, a run of ~0.1-0.5 s per epoch.
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
    "$SPKDDP" synth --kind speakers --out "$WORK/sp.h5" --dim 8 --speakers 4 --utts-per-speaker 64 \
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

# slurm_reference NAME EPOCHS: the uninterrupted run, on 2 ranks with workstation.sh/mpiexec.
slurm_reference() {
    local name=$1 epochs=$2 t
    t=$(date +%s.%N)
    SPKDDP=$SPKDDP MPIEXEC=$MPIEXEC NP=2 DATA=$WORK/sp.h5 CKPT_DIR=$WORK/$name \
        EXTRA="$SLURM_TRAIN_ARGS --epochs $epochs" bash "$SLURM_WORKSTATION" >"$WORK/$name.out" 2>&1 ||
        { fail "reference run (workstation.sh) exited $?: $(tail -3 "$WORK/$name.out")"; return 1; }
    [ -f "$WORK/$name/FINISHED" ] || fail "reference run left no FINISHED"
    echo "ok  reference: $epochs epochs uninterrupted on 2 ranks with workstation.sh in $(slurm_since "$t") s"
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

# newest checkpoint of a directory
slurm_newest_ckpt() { ls "$1"/ckpt-*.h5 2>/dev/null | sort | tail -1; }

# metrics without timing fields, for comparing runs
slurm_strip_metrics() { sed -E 's/"(samples_per_s|epoch_seconds|data_wait_s)": [^,}]*//g' "$1"; }

# slurm_check_metrics FILE REF: every epoch exactly once, equal to REF but for timings.
slurm_check_metrics() {
    local dups n
    n=$(grep -c . "$1")
    dups=$(grep -oE '"epoch": *[0-9]+' "$1" | sort | uniq -d | tr '\n' ' ')
    [ -z "$dups" ] || fail "$1 repeats epochs: $dups"
    [ "$n" -eq "$(grep -c . "$2")" ] || fail "$1 has $n lines, the reference $(grep -c . "$2")"
    if diff <(slurm_strip_metrics "$1") <(slurm_strip_metrics "$2") >/dev/null; then
        echo "ok  metrics: $n epochs, each once, equal to the reference but for timings"
    else
        fail "metrics $1 differ from $2 (beyond timings)"
    fi
}

# slurm_same_final DIR REF: the newest checkpoints have the same step and are bitwise equal.
slurm_same_final() {
    local a b
    a=$(slurm_newest_ckpt "$1")
    b=$(slurm_newest_ckpt "$2")
    [ -n "$a" ] && [ -n "$b" ] || { fail "no final checkpoint in $1 or $2"; return; }
    [ "$(basename "$a")" = "$(basename "$b")" ] || fail "final checkpoints at different steps: $a vs $b"
    if "$SPKDDP" diff "$a" "$b" >"$WORK/diff.out" 2>&1; then
        echo "ok  $(basename "$a"): bitwise equal to the uninterrupted run (spkddp diff)"
    else
        cat "$WORK/diff.out"
        fail "final parameters differ from the uninterrupted run"
    fi
}
