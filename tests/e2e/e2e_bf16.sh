#!/usr/bin/env bash
# --precision bf16 keeps what fp32 training promises: 2-rank ECAPA training learns (its loss
# falls as the same run's in fp32 does), replicas stay identical, a second run has the same bits, a
# run stopped mid-epoch and resumed has the uninterrupted run's bits, the device code path
# (cpu-staged) has the cpu's bits, and embeddings in bf16 score trials like fp32 ones. A CPU
# without native bf16 (simulated with oneDNN's ONEDNN_MAX_CPU_ISA) still trains and says so
# once. --tf32 with --precision bf16 is refused.
. "$(dirname "$0")/lib.sh" "$@"

$SPKDDP synth --kind speakers --out sp.h5 --val-out spv.h5 --dim 16 --speakers 8 --utts-per-speaker 10 \
    --val-utts-per-speaker 4 --min-frames 40 --max-frames 80 >/dev/null || fail "synth"
common="--data sp.h5 --val-data spv.h5 --model ecapa --channels 32 --attention-channels 16 --se-channels 16 --emb-dim 32
        --frames 40 --epochs 3 --global-batch 8 --optimizer adam --lr 0.005 --progress 0 --precision bf16"
final=ckpt-000000000030.h5

run 2 $SPKDDP train $common --ckpt-dir full --metrics full.jsonl >log_full 2>&1 || { cat log_full; fail "bf16 run"; }
grep -q "replicas identical" log_full && echo "ok  bf16 replicas identical" || fail "bf16 replicas differ"
field() { sed -nE "${1}s/.*\"$2\": ([-0-9.e+]+).*/\1/p" "$3"; }
# the same run in fp32: bf16 must learn as it does (3 epochs of this toy set end within about
# +-10% of each other from seed to seed, in either precision) and must not be fp32 itself
run 2 $SPKDDP train ${common/--precision bf16/--precision fp32} --ckpt-dir fp32 --metrics fp32.jsonl >/dev/null 2>&1 \
    || fail "fp32 run"
first=$(field 1 loss full.jsonl)
last=$(field '$' loss full.jsonl)
last32=$(field '$' loss fp32.jsonl)
awk -v a="$first" -v b="$last" -v c="$last32" 'BEGIN { exit !(b < 0.6 * a && b < 1.25 * c) }' \
    && echo "ok  bf16 learns as fp32 does: loss $first -> $last (fp32: $last32)" \
    || fail "bf16 does not learn as fp32 does: loss $first -> $last, fp32 $last32"
$SPKDDP diff fp32/$final full/$final --rtol 1e-4 >/dev/null && fail "the bf16 run has the fp32 run's parameters"
if grep -q "no native bf16" log_full; then
    echo "note: this CPU has no native bf16; the runs below check the widened path twice"
fi

same() {  # same A B WHAT: bitwise equal checkpoints
    if $SPKDDP diff "$1" "$2" >"diff_$3"; then echo "ok  $3 (bitwise)"; else cat "diff_$3"; fail "$3: $1 and $2 differ"; fi
}
run 2 $SPKDDP train $common --ckpt-dir again >/dev/null 2>&1 || fail "second bf16 run"
same full/$final again/$final "bf16 run twice"

# 80 utterances / global batch 8 = 10 steps per epoch: step 13 is mid-epoch 2.
run 2 $SPKDDP train $common --ckpt-dir part --metrics part.jsonl --max-steps 13 >/dev/null 2>&1 || fail "first leg"
run 2 $SPKDDP train $common --ckpt-dir part --metrics part.jsonl --resume auto >log_b 2>&1 || fail "second leg"
grep -q "resumed from part/ckpt-000000000013.h5" log_b || fail "did not resume from step 13"
same full/$final part/$final "bf16 stop at step 13 + resume == uninterrupted"
diff <(strip_timings full.jsonl) <(strip_timings part.jsonl) >/dev/null && echo "ok  bf16 metrics identical after resume but for timings" \
    || fail "bf16 metrics differ after resume"

SPKDDP_BUCKET_MB=0.02 run 2 $SPKDDP train $common --device cpu-staged --ckpt-dir staged >/dev/null 2>&1 \
    || fail "bf16 on cpu-staged"
same full/$final staged/$final "bf16 on cpu-staged (small buckets) == cpu"

# Embeddings: bf16 inference scores the held-out trials like fp32 inference.
run 2 $SPKDDP embed --ckpt full/$final --data spv.h5 --out e32.h5 >/dev/null || fail "fp32 embed"
run 2 $SPKDDP embed --ckpt full/$final --data spv.h5 --out e16.h5 --precision bf16 >/dev/null || fail "bf16 embed"
$SPKDDP trials --emb e32.h5 --out trials.txt >/dev/null || fail "trials"
$SPKDDP score --emb e32.h5 --trials trials.txt --out s32.txt >/dev/null || fail "score fp32"
$SPKDDP score --emb e16.h5 --trials trials.txt --out s16.txt >/dev/null || fail "score bf16"
worst=$(paste s32.txt s16.txt | awk '{ d = $3 - $7; if (d < 0) d = -d; if (d > m) m = d } END { printf "%.3g", m + 0 }')
awk -v w="$worst" 'BEGIN { exit !(w > 0 && w < 0.05) }' \
    && echo "ok  bf16 embeddings score $(grep -c . trials.txt) trials like fp32 ones (worst |ds| $worst)" \
    || fail "bf16 embeddings score differently from fp32 ones: worst |ds| $worst"

# Without native bf16 instructions: trains, the note comes once for the 2 ranks.
ONEDNN_MAX_CPU_ISA=AVX512_CORE run 2 $SPKDDP train $common --epochs 1 --ckpt-dir wide >log_wide 2>&1 \
    || { cat log_wide; fail "bf16 without native bf16"; }
notes=$(grep -c "no native bf16" log_wide)
[ "$notes" -eq 1 ] && echo "ok  without native bf16 it trains and says so once" \
    || fail "without native bf16: the note came $notes times"
grep -q "replicas identical" log_wide || fail "widened bf16 replicas differ"

expect_error 2 "contradicts --precision bf16" -- run 1 $SPKDDP train $common --tf32
expect_error 2 "--precision must be one of" -- run 1 $SPKDDP bench --precision fp16
finish
