#!/usr/bin/env bash
# run_fuzz.sh TARGET SEEDS WORKDIR SECONDS: fuzzes from the seeds for SECONDS (new inputs go
# to WORKDIR/corpus, never into the seeds), then prints how many inputs ran. Exit 0 only when
# libFuzzer found nothing; a crash leaves WORKDIR/crash-* to reproduce with `TARGET FILE`.
# The seed is fixed (SPKDDP_FUZZ_SEED, default 1) so a failure under CI replays the same inputs;
# set another seed, or a longer time, to explore.
set -u
TARGET=$1 SEEDS=$2 WORK=$3 SECONDS_=$4
rm -rf "$WORK" && mkdir -p "$WORK/corpus" || exit 1
dict=()  # a libFuzzer dictionary beside the seeds (corpus/TARGET.dict), where the format has tokens
[ -f "$SEEDS.dict" ] && dict=(-dict="$SEEDS.dict")
"$TARGET" "${dict[@]}" -max_total_time="$SECONDS_" -seed="${SPKDDP_FUZZ_SEED:-1}" -timeout=20 -rss_limit_mb=3072 -max_len=4096 -print_final_stats=1 \
    -artifact_prefix="$WORK/" "$WORK/corpus" "$SEEDS" >"$WORK/log" 2>&1
rc=$?
grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb|ERROR|SUMMARY|reader accepted' "$WORK/log"
tail -n 3 "$WORK/log"
echo "$(basename "$TARGET"): $(sed -nE 's/^stat::number_of_executed_units: *//p' "$WORK/log") inputs in ${SECONDS_} s, corpus $(ls "$WORK/corpus" | wc -l) + $(ls "$SEEDS" | wc -l) seeds, exit $rc"
[ "$rc" -eq 0 ] || { tail -n 40 "$WORK/log"; exit 1; }
