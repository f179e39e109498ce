#!/usr/bin/env bash
# DINO without labels (--loss dino, docs/contrastive.md), end to end, ECAPA C=64 with a small
# projection head, 2 global crops of 40 frames and 2 local crops of 24:
#  - the loss falls over a few epochs on one rank;
#  - on 2 ranks, stopped mid-epoch and resumed, the run ends bitwise as the uninterrupted one
#    (the teacher, its centre and the EMA schedule are in the checkpoint);
#  - the staged device path is bitwise the CPU path;
#  - embed and export take the teacher: the export holds neither the teacher's copy nor the
#    centre, and embedding it gives the checkpoint's embeddings;
#  - ResNet34 and CAM++ train with it too;
#  - AAM-softmax fine-tuning --init-from the checkpoint starts from its teacher (as from its
#    export), and DINO --init-from a supervised encoder runs;
#  - with --invariant, 1, 2 and 4 ranks train bitwise alike;
#  - refusals: too few views, more global views than views, local crops longer than the global
#    ones, --grad-accum, --val-data, the linear and audio-visual models.
. "$(dirname "$0")/lib.sh" "$@"
export OMP_WAIT_POLICY=passive

$SPKDDP synth --kind speakers --out sp.h5 --dim 16 --speakers 12 --utts-per-speaker 8 --min-frames 40 \
    --max-frames 80 >/dev/null || fail "synth"
dino="--model ecapa --data sp.h5 --channels 64 --attention-channels 16 --se-channels 16 --emb-dim 32 --frames 40
    --global-batch 8 --optimizer adam --lr 0.002 --progress 0 --loss dino --views 4 --local-frames 24
    --dino-hidden 64 --dino-bottleneck 16 --dino-out 128 --teacher-temp 0.07 --teacher-temp-start 0.04
    --teacher-temp-epochs 2 --freeze-last-layer 1"

# It learns: the loss of the last epoch below the first's.
run 1 $SPKDDP train $dino --epochs 4 --ckpt-dir one --log-every 1 --step-log one.jsonl >log_one 2>&1 ||
    { cat log_one; fail "dino on one rank"; }
python3 - one.jsonl <<'PY' || fail "dino does not learn"
import json, sys
s = [json.loads(l)["loss"] for l in open(sys.argv[1])]
q = len(s) // 4
a, b = sum(s[:q]) / q, sum(s[-q:]) / q
print("ok  dino learns without labels: loss %.3f -> %.3f over %d steps" % (a, b, len(s)))
sys.exit(not (b < a and all(x == x for x in s)))
PY

# The invariant mode: 1, 2 and 4 ranks bitwise alike.
for k in 1 2 4; do
    run $k $SPKDDP train $dino --invariant --freeze-last-layer 0 --epochs 1 --max-steps 4 --ckpt-dir inv_$k >log_inv_$k 2>&1 ||
        { cat log_inv_$k; fail "dino --invariant on $k ranks"; }
done
for k in 2 4; do
    same inv_1/ckpt-000000000004.h5 inv_$k/ckpt-000000000004.h5 \
        "dino --invariant: $k ranks x $((8 / k)) utterances == 1 rank x 8 (bitwise)"
done

# Stopped mid-epoch on 2 ranks and resumed: bitwise the uninterrupted run.
run 2 $SPKDDP train $dino --epochs 2 --ckpt-dir two >log_two 2>&1 || { cat log_two; fail "dino on 2 ranks"; }
run 2 $SPKDDP train $dino --epochs 2 --ckpt-dir leg --max-steps 5 >/dev/null 2>&1 || fail "first leg"
run 2 $SPKDDP train $dino --epochs 2 --ckpt-dir leg --resume auto >log_leg 2>&1 || { cat log_leg; fail "second leg"; }
final=$(ls two/ckpt-*.h5 | tail -1)
same "$final" "leg/$(basename "$final")" "dino: stopped at step 5 and resumed == uninterrupted, 2 ranks (bitwise)"
run 2 $SPKDDP train $dino --epochs 2 --ckpt-dir staged --device cpu-staged >/dev/null 2>&1 || fail "cpu-staged"
same "$final" "staged/$(basename "$final")" "dino: the staged device path == the CPU path, 2 ranks (bitwise)"

# The teacher is what embed and export take.
$SPKDDP export --ckpt "$final" --out t.safetensors >export.log || fail "export"
/usr/bin/python3 - t.safetensors <<'PY' || fail "export holds training state"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
keys = [k for k in json.loads(raw[8:8 + n]) if k != "__metadata__"]
bad = [k for k in keys if k.startswith("ema.") or k.startswith("dino.")]
assert not bad, bad
assert any(k.startswith("dino_head.") for k in keys)
print("ok  the export holds the teacher (%d tensors), no training copies" % len(keys))
PY
$SPKDDP embed --ckpt "$final" --data sp.h5 --out e_ckpt.h5 >/dev/null || fail "embed the checkpoint"
$SPKDDP embed --ckpt t.safetensors --data sp.h5 --out e_export.h5 >/dev/null || fail "embed the export"
/usr/bin/python3 - e_ckpt.h5 e_export.h5 <<'PY' || fail "the export's embeddings differ from the checkpoint's"
import h5py, numpy as np, sys
a, b = (h5py.File(f, "r")["embeddings"][()] for f in sys.argv[1:3])
assert a.shape == b.shape and np.array_equal(a, b), np.abs(a - b).max()
print("ok  embed: the checkpoint's teacher and its export give the same embeddings (%d)" % len(a))
PY

# The other encoder families (CAM++'s long tensor names have teacher copies too).
for model in "resnet34 --channels 8" "campplus --channels 16 --growth-rate 8"; do
    run 1 $SPKDDP train --data sp.h5 --model $model --emb-dim 16 --frames 40 --global-batch 8 --loss dino --views 4 \
        --local-frames 24 --dino-hidden 32 --dino-bottleneck 8 --dino-out 64 --epochs 1 --max-steps 2 \
        --ckpt-dir "fam_${model%% *}" --progress 0 >log_fam 2>&1 || { cat log_fam; fail "dino with --model $model"; }
    echo "ok  dino trains --model ${model%% *}"
done

# Fine-tuning from the teacher (the projection head left out), and DINO from a supervised encoder.
enc="--model ecapa --data sp.h5 --channels 64 --attention-channels 16 --se-channels 16 --emb-dim 32 --frames 40
    --global-batch 8 --progress 0 --epochs 1 --max-steps 2"
run 1 $SPKDDP train $enc --init-from "$final" --init-head drop --ckpt-dir ft >log_ft 2>&1 ||
    { cat log_ft; fail "AAM-softmax fine-tuning from a DINO checkpoint"; }
run 1 $SPKDDP train $enc --init-from t.safetensors --init-head drop --ckpt-dir ft2 >log_ft2 2>&1 ||
    { cat log_ft2; fail "AAM-softmax fine-tuning from a DINO export"; }
$SPKDDP diff ft/ckpt-000000000002.h5 ft2/ckpt-000000000002.h5 >/dev/null ||
    fail "fine-tuning from the checkpoint and from its export differ"
echo "ok  fine-tuning from a DINO checkpoint starts from its teacher (== from its export)"
run 1 $SPKDDP train $dino --epochs 1 --max-steps 2 --init-from ft/ckpt-000000000002.h5 --init-head drop \
    --ckpt-dir from_sup >log_fs 2>&1 || { cat log_fs; fail "DINO from a supervised encoder"; }
echo "ok  DINO from a supervised encoder"

expect_error 2 "needs --views 2 or more" -- run 1 $SPKDDP train $dino --views 1 --epochs 1
expect_error 2 "global-views at most --views" -- run 1 $SPKDDP train $dino --views 2 --global-views 3 --epochs 1
expect_error 2 "longer than the global crops" -- run 1 $SPKDDP train $dino --local-frames 60 --epochs 1
expect_error 2 "grad-accum is not supported" -- run 1 $SPKDDP train $dino --grad-accum 2 --epochs 1
expect_error 2 "drop --val-data" -- run 1 $SPKDDP train $dino --val-data sp.h5 --epochs 1
expect_error 2 "the linear model has none" -- run 1 $SPKDDP train --data sp.h5 --loss dino --views 2 --epochs 1
finish
