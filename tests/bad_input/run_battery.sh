#!/usr/bin/env bash
# The bad-input battery: every case of cases.txt under mpiexec -n NP. A case passes when
#   - spkddp exits with the case's code (so: not 0, not a signal), within the time limit;
#   - stderr holds exactly one 'spkddp: error:' line, and it matches the case's pattern;
#   - no sanitizer reported anything;
#   - the case's output folder is as it was (no checkpoint, no partial output).
# usage: run_battery.sh SPKDDP MPIEXEC WORKDIR MAKE_BAD_INPUTS NP CASES GOLDEN_DIR FIXTURES_DIR
set -u
SPKDDP=$1 MPIEXEC=$2 WORK=$3 MAKER=$4 NP=$5 CASES=$6 GOLDEN=$7 FIXTURES=$8
JOBS=${SPKDDP_BATTERY_JOBS:-6}   # cases at a time: mostly process start-up, little CPU
LIMIT=${SPKDDP_BATTERY_TIMEOUT:-120}
rm -rf "$WORK" && mkdir -p "$WORK/in" "$WORK/out" "$WORK/res" && cd "$WORK" || exit 1
D=$WORK/in

# The valid inputs everything is derived from.
"$MAKER" base "$D" || exit 1
quiet() { "$@" >/dev/null 2>setup.err || { cat setup.err; echo "setup failed: $*"; exit 1; }; }
quiet "$MPIEXEC" -n 1 "$SPKDDP" train --data "$D/base.h5" --epochs 1 --global-batch 4 --ckpt-dir ck0
cp ck0/ckpt-000000000002.h5 "$D/good_ckpt.h5"
quiet "$MPIEXEC" -n 1 "$SPKDDP" embed --ckpt "$D/good_ckpt.h5" --data "$D/base.h5" --out "$D/good_emb.h5"
printf 'u0 u2 target\nu0 u1 nontarget\nu1 u3 target\nu2 u3 nontarget\n' >"$D/good_trials.txt"
cp "$FIXTURES/linear_sgd_step2.h5" "$D/v1_ckpt.h5"
quiet "$MAKER" mutate "$D"
sed -i "s|WAV|$GOLDEN/chirp_noise_16k.wav|g; s|TEXT|$D/ds_text.h5|g" "$D"/ls_*.scp
printf 'a %s\n' "$GOLDEN/chirp_noise_16k.wav" >"$D/ls_wav_ok.scp"
# Inputs that would block or hold a third of what they declare.
mkfifo "$D/fifo" "$D/cf_fifo.yaml"
printf 'a %s\n' "$D/fifo" >"$D/ls_wav_fifo.scp"
head -c $(( $(stat -c %s "$GOLDEN/chirp_noise_16k.wav") / 3 )) "$GOLDEN/chirp_noise_16k.wav" >"$D/cut.wav"
printf 'a %s\n' "$D/cut.wav" >"$D/ls_wav_cut.scp"
mkdir -p "$D/ds_directory"
# Cases that start from a checkpoint folder: its contents must be untouched afterwards.
mkdir -p "$D/ck_auto_only_corrupt.dir" "$D/ck_names_longer_auto.dir" "$D/ck_taken_name.dir" "$D/ck_older_into_newer.dir"
cp "$D/ck_param_flip.h5" "$D/ck_auto_only_corrupt.dir/ckpt-000000000009.h5"
cp "$D/ck_names_longer.h5" "$D/ck_names_longer_auto.dir/ckpt-000000000009.h5"
cp "$D/v1_ckpt.h5" "$D/ck_taken_name.dir/ckpt-000000000002.h5"
cp "$D/good_ckpt.h5" "$D/ck_older_into_newer.dir/ckpt-000000000002.h5"
cp "$D/good_ckpt.h5" "$D/ck_older_into_newer.dir/ckpt-000000000009.h5"
# Cases whose output would be one of their inputs: the folder holds the input, which must stay as it was.
mkdir -p "$D"/fl_{metrics_foreign,metrics_is_data,out_is_emb,out_is_ckpt,out_is_average_input,out_is_data}.dir
mkdir -p "$D"/fl_{det_table_is_trials,fit_is_scores}.dir
echo "notes of a run" >"$D/fl_metrics_foreign.dir/notes.txt"
cp "$D/base.h5" "$D/fl_metrics_is_data.dir/data.h5"
cp "$D/base.h5" "$D/fl_out_is_data.dir/data.h5"
cp "$D/good_emb.h5" "$D/fl_out_is_emb.dir/emb.h5"
ln -s emb.h5 "$D/fl_out_is_emb.dir/link.h5"
cp "$D/good_ckpt.h5" "$D/fl_out_is_ckpt.dir/c.h5"
cp "$D/good_ckpt.h5" "$D/fl_out_is_average_input.dir/c.h5"
cp "$D/good_trials.txt" "$D/fl_det_table_is_trials.dir/t.txt"
cp "$D/sl_good.txt" "$D/fl_fit_is_scores.dir/s.txt"

trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; printf '%s' "${s%"${s##*[![:space:]]}"}"; }

# run_case ID CODE PATTERN ARGS: writes res/ID (ok or the reason) and out/ID.err.
run_case() {
    local id=$1 code=$2 pattern=$3 args=$4 O=$WORK/out/$1
    if [ -d "$D/$id.dir" ]; then cp -r "$D/$id.dir" "$O"; else mkdir -p "$O"; fi
    local before after rc
    before=$(cd "$O" && ls -lA --time-style=+%s.%N | sort)
    args=${args//\$D/$D}
    args=${args//\$O/$O}
    args=${args//\$G/$GOLDEN}
    # shellcheck disable=SC2086 # ARGS are words
    timeout -k 5 "$LIMIT" "$MPIEXEC" -n "$NP" "$SPKDDP" $args >"$WORK/out/$id.out" 2>"$WORK/out/$id.err" </dev/null
    rc=$?
    after=$(cd "$O" && ls -lA --time-style=+%s.%N | sort)
    local errs lines why=""
    errs=$(grep -c '^spkddp: error:' "$WORK/out/$id.err")
    lines=$(grep '^spkddp: error:' "$WORK/out/$id.err")
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then why="no exit within ${LIMIT} s"
    elif [ "$rc" -ne "$code" ]; then why="exit $rc, want $code"
    elif [ "$errs" -ne 1 ]; then why="$errs 'spkddp: error:' lines"
    elif ! grep -qE -- "$pattern" <<<"$lines"; then why="the error line does not match /$pattern/"
    elif grep -qE 'Sanitizer|runtime error:' "$WORK/out/$id.err"; then why="a sanitizer report"
    elif [ "$before" != "$after" ]; then why="files appeared or changed in the output folder: $(ls -A "$O" | tr '\n' ' ')"
    fi
    if [ -z "$why" ]; then echo ok >"$WORK/res/$id"
    else printf '%s\n  %s\n%s\n' "$why" "spkddp $args" "$(head -c 3000 "$WORK/out/$id.err" | sed 's/^/  | /')" >"$WORK/res/$id"; fi
}

ids=()
while IFS= read -r line; do
    [[ -z "$(trim "$line")" || "$line" == \#* ]] && continue
    # Fields are separated by ' | ' (patterns may hold '|' between other characters).
    id=${line%% | *} rest=${line#* | }
    code=${rest%% | *} rest=${rest#* | }
    pattern=${rest%% | *} args=${rest#* | }
    id=$(trim "$id") code=$(trim "$code") pattern=$(trim "$pattern") args=$(trim "$args")
    # SPKDDP_BATTERY_SKIP: cases a build cannot run (those that decode audio, without SPKDDP_MEDIA).
    if [[ " ${SPKDDP_BATTERY_SKIP:-} " == *" $id "* ]]; then
        echo "skipped $id: this build cannot run it (SPKDDP_BATTERY_SKIP)"
        continue
    fi
    ids+=("$id")
    run_case "$id" "$code" "$pattern" "$args" &
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
done <"$CASES"
wait

fails=0
declare -A kinds
for id in "${ids[@]}"; do
    kind=${id%%_*}
    kinds[$kind]=$(( ${kinds[$kind]:-0} + 1 ))
    if [ "$(cat "res/$id" 2>/dev/null)" != ok ]; then
        fails=$((fails + 1))
        echo "FAIL $id: $(cat "res/$id" 2>/dev/null || echo 'no result')"
    fi
done
summary=""
for k in ds ck em tr ls fl sl cf; do summary+="${summary:+, }$k ${kinds[$k]:-0}"; done
echo "bad-input battery at $NP rank(s): ${#ids[@]} cases ($summary), $fails failed"
[ "$fails" -eq 0 ]
