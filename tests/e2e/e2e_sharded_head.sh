#!/usr/bin/env bash
# The classifier sharded across ranks (--head sharded, docs/sharded-head.md), end to end:
#  - a sharded run on 2 ranks trains (the loss falls) and its checkpoint holds the whole head in
#    the replicated layout: inspect shows classifier.weight (classes, E), export writes it whole;
#  - stopped and resumed on 2 ranks it ends bitwise as the uninterrupted run;
#  - its checkpoint resumes on 3 ranks sharded and on 1 rank replicated; a replicated run's
#    checkpoint resumes sharded; --init-from a checkpoint into a sharded run keeps the head;
#  - the first steps equal the replicated head's up to rounding (every later step from the same
#    weights is tests/dist/test_sharded_head.c's);
#  - Partial FC (--head-sample) updates the batch's classes and the sampled fraction of the
#    others, the same classes on any number of ranks;
#  - with --invariant the sums over the classes are exact: 1, 2, 3 and 4 ranks train bitwise
#    alike (gradient clipping, micro-batches, validation, a stop on 2 ranks resumed on 3, a head of
#    2,100 classes in blocks of 2), and the first steps are the replicated invariant head's up to
#    rounding; Partial FC's sampling too (1, 2 and 4 ranks);
#  - refusals: the linear model, more ranks than classes.
. "$(dirname "$0")/lib.sh" "$@"

small="--model ecapa --channels 32 --attention-channels 16 --se-channels 16 --emb-dim 24 --frames 40"
$SPKDDP synth --kind speakers --out train.h5 --dim 24 --speakers 13 --utts-per-speaker 6 --min-frames 40 \
    --max-frames 90 >/dev/null || fail "synth"
common="$small --data train.h5 --epochs 3 --global-batch 12 --optimizer adam --lr 0.005 --progress 0 --log-every 1"
run 2 $SPKDDP train $common --head sharded --ckpt-dir sharded --step-log s_sharded.jsonl >log_s || fail "sharded run"
grep -q "classifier sharded: 6-7 of 13 classes per rank" log_s && echo "ok  2 ranks hold 6 and 7 of the 13 classes" ||
    fail "no sharding line: $(head -3 log_s)"
last=sharded/ckpt-000000000021.h5
first_loss=$(head -1 s_sharded.jsonl | sed 's/.*"loss": \([0-9.e+-]*\).*/\1/')
last_loss=$(tail -1 s_sharded.jsonl | sed 's/.*"loss": \([0-9.e+-]*\).*/\1/')
awk -v a="$first_loss" -v b="$last_loss" 'BEGIN { exit !(b < 0.8 * a) }' &&
    echo "ok  the sharded run learns: loss $first_loss -> $last_loss" || fail "loss $first_loss -> $last_loss"
$SPKDDP export --ckpt $last --out whole.safetensors >/dev/null || fail "export of a sharded run's checkpoint"

# The first steps against the replicated head (the same batches and BatchNorm statistics).
run 2 $SPKDDP train $common --head replicated --ckpt-dir replicated --step-log s_rep.jsonl >log_r || fail "replicated"
python3 - s_rep.jsonl s_sharded.jsonl <<'PY' || fail "the first steps differ from the replicated head's"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])][:2]
b = [json.loads(l) for l in open(sys.argv[2])][:2]
worst = max(abs(x[k] - y[k]) / abs(x[k]) for x, y in zip(a, b) for k in ("loss", "grad_norm"))
print("ok  steps 1-2: loss and gradient norm within %.1e of the replicated head's" % worst)
sys.exit(worst > 1e-6)
PY

$SPKDDP inspect $last >insp || fail "inspect"
$SPKDDP inspect replicated/ckpt-000000000021.h5 >insp_r || fail "inspect the replicated run's"
grep -q "ecapa, 36252 parameters in 139 tensors" insp && diff <(sed -n 2p insp) <(sed -n 2p insp_r) >/dev/null &&
    echo "ok  the checkpoint holds the whole model, as the replicated run's: $(sed -n 2p insp)" ||
    fail "inspect: $(sed -n 2p insp) vs $(sed -n 2p insp_r)"

# Stopped and resumed: bitwise the uninterrupted run.
run 2 $SPKDDP train $common --head sharded --ckpt-dir leg --max-steps 3 >/dev/null || fail "first leg"
mkdir -p k3 k1 && cp leg/ckpt-000000000003.h5 k3/ && cp leg/ckpt-000000000003.h5 k1/
run 2 $SPKDDP train $common --head sharded --ckpt-dir leg --resume auto >log_leg || fail "second leg"
$SPKDDP diff $last leg/ckpt-000000000021.h5 >diff_leg && echo "ok  stopped at step 3 and resumed: bitwise the uninterrupted run" ||
    { cat diff_leg; fail "the resumed sharded run differs"; }

# Across world sizes and heads.
run 3 $SPKDDP train $common --head sharded --ckpt-dir k3 --resume auto >log_k3 2>&1 || fail "resume on 3 ranks sharded: $(tail -2 log_k3)"
grep -q "written by 2 ranks, now 3" log_k3 && grep -q "4-5 of 13 classes per rank" log_k3 &&
    echo "ok  a 2-rank sharded checkpoint resumes sharded on 3 ranks" || fail "3 ranks: $(grep -E 'resumed|classes' log_k3)"
run 1 $SPKDDP train $common --head replicated --ckpt-dir k1 --resume auto --max-steps 6 \
    >log_k1 2>&1 || fail "resume on 1 rank replicated: $(tail -2 log_k1)"
grep -q "written by 2 ranks, now 1" log_k1 && echo "ok  ... and replicated on 1 rank" || fail "1 rank: $(tail -2 log_k1)"
mkdir -p r2s && cp replicated/ckpt-000000000007.h5 r2s/
run 2 $SPKDDP train $common --head sharded --ckpt-dir r2s --resume auto --max-steps 9 >log_r2s 2>&1 ||
    fail "a replicated checkpoint resumed sharded: $(tail -2 log_r2s)"
echo "ok  a replicated run's checkpoint resumes sharded"

# --init-from keeps the head, sliced.
run 2 $SPKDDP train $common --head sharded --init-from whole.safetensors --epochs 1 --lr 0.0005 --ckpt-dir init \
    >log_init 2>&1 || fail "--init-from into a sharded run: $(tail -2 log_init)"
grep -q "classifier kept" log_init && echo "ok  --init-from a whole head into a sharded run" || fail "init: $(tail -2 log_init)"
$SPKDDP export --ckpt init/ckpt-000000000007.h5 --out init.safetensors >/dev/null || fail "export init"
cmp -s whole.safetensors init.safetensors && fail "fine-tuning changed nothing"
run 2 $SPKDDP train $common --head sharded --init-from whole.safetensors --init-head drop --epochs 1 --ckpt-dir drop \
    >log_drop 2>&1 || fail "--init-head drop: $(tail -2 log_drop)"

# Partial FC (--head-sample): one SGD step from the same weights changes the batch's classes'
# rows and a quarter of the others, the same rows on 1, 2 and 4 ranks (the draw is keyed on the
# class, not the rank); all 200 without sampling. A small --scale keeps every class's gradient
# above rounding.
PY=$(command -v /usr/bin/python3 || command -v python3)
$SPKDDP synth --kind speakers --out c200.h5 --dim 24 --speakers 200 --utts-per-speaker 2 --min-frames 40 \
    --max-frames 60 --val-out c200v.h5 --val-utts-per-speaker 1 >/dev/null || fail "synth 200"
pfc="$small --data c200.h5 --global-batch 8 --optimizer sgd --max-steps 1 --progress 0 --head sharded --scale 2"
run 1 $SPKDDP train $pfc --lr 1e-30 --ckpt-dir p0 >/dev/null || fail "initial weights"
run 2 $SPKDDP train $pfc --lr 0.5 --ckpt-dir pall >/dev/null || fail "no sampling"
for k in 1 2 4; do
    run $k $SPKDDP train $pfc --lr 0.5 --head-sample 0.25 --ckpt-dir p$k >/dev/null || fail "--head-sample on $k ranks"
done
"$PY" - <<'PY' || fail "Partial FC's rows"
import h5py, numpy as np, sys
def head(d):
    with h5py.File(d + "/ckpt-000000000001.h5") as f:
        return np.array(f["params"][:200 * 24]).reshape(200, 24)
z = head("p0")
rows = lambda d: frozenset(np.nonzero(np.any(head(d) != z, axis=1))[0].tolist())
every, sets = rows("pall"), [rows("p%d" % k) for k in (1, 2, 4)]
ok = len(every) == 200 and sets[0] == sets[1] == sets[2] and 8 + 20 <= len(sets[0]) <= 8 + 80
print("ok  one step: %d rows change without sampling, %d with --head-sample 0.25, the same on 1, 2 and 4 ranks"
      % (len(every), len(sets[0])) if ok else "rows: %d, %s" % (len(every), [len(s) for s in sets]))
sys.exit(not ok)
PY
pfc4="${pfc/--max-steps 1/--epochs 1} --lr 0.1 --head-sample 0.25 --val-data c200v.h5"  # (validation scores every class)
run 2 $SPKDDP train $pfc4 --ckpt-dir pfull >/dev/null || fail "sampled run"
run 2 $SPKDDP train $pfc4 --ckpt-dir pleg --max-steps 20 >/dev/null || fail "sampled first leg"
run 2 $SPKDDP train $pfc4 --ckpt-dir pleg --resume auto >/dev/null || fail "sampled second leg"
$SPKDDP diff pfull/ckpt-000000000050.h5 pleg/ckpt-000000000050.h5 >/dev/null &&
    echo "ok  with --head-sample, stopped at step 20 and resumed: bitwise the uninterrupted run" ||
    fail "the resumed sampled run differs"
expect_error 2 "needs --head sharded" -- run 1 $SPKDDP train $pfc --head replicated --head-sample 0.5 --lr 0.1 \
    --ckpt-dir bad

# The invariant mode (docs/invariant.md): the same bits on any number of ranks.
inv="$common --head sharded --invariant --clip-grad-norm 1 --max-steps 6 --val-data c200v.h5"
inv=${inv/--data train.h5/--data c200.h5}
for k in 1 2 3 4; do
    run $k $SPKDDP train $inv --ckpt-dir inv$k --step-log inv$k.jsonl >log_inv$k 2>&1 || fail "invariant on $k ranks: $(tail -2 log_inv$k)"
done
for k in 2 3 4; do
    $SPKDDP diff inv1/ckpt-000000000006.h5 inv$k/ckpt-000000000006.h5 >diff_inv$k ||
        { cat diff_inv$k; fail "--invariant --head sharded: 1 and $k ranks differ"; }
done
grep -q "clip_scale\": 0\." inv1.jsonl || fail "clipping never acted"
echo "ok  --invariant: 1, 2, 3 and 4 ranks bitwise alike (clipping acting, validation on uneven shares)"
run 2 $SPKDDP train $inv --ckpt-dir inv_leg --max-steps 3 >/dev/null 2>&1 || fail "invariant first leg"
run 3 $SPKDDP train $inv --ckpt-dir inv_leg --resume auto >/dev/null 2>&1 || fail "invariant resumed on 3 ranks"
acc="${inv/--global-batch 12/--global-batch 16} --grad-accum 2"
run 1 $SPKDDP train $acc --ckpt-dir inv_acc1 >/dev/null 2>&1 || fail "invariant micro-batches, 1 rank"
run 4 $SPKDDP train $acc --ckpt-dir inv_acc4 >/dev/null 2>&1 || fail "invariant micro-batches, 4 ranks"
$SPKDDP diff inv1/ckpt-000000000006.h5 inv_leg/ckpt-000000000006.h5 >/dev/null &&
    $SPKDDP diff inv_acc1/ckpt-000000000006.h5 inv_acc4/ckpt-000000000006.h5 >/dev/null &&
    echo "ok  --invariant: stopped on 2 ranks and resumed on 3; --grad-accum 2 on 1 and 4 ranks" ||
    fail "invariant resume or micro-batches differ"
run 2 $SPKDDP train $inv --head replicated --ckpt-dir inv_rep --step-log inv_rep.jsonl >/dev/null 2>&1 ||
    fail "replicated invariant"
"$PY" - inv_rep.jsonl inv1.jsonl <<'PY' || fail "the invariant sharded head's first steps"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])][:2]
b = [json.loads(l) for l in open(sys.argv[2])][:2]
worst = max(abs(x[k] - y[k]) / abs(x[k]) for x, y in zip(a, b) for k in ("loss", "grad_norm"))
print("ok  --invariant, steps 1-2: loss and gradient norm within %.1e of the replicated head's" % worst)
sys.exit(worst > 1e-5)
PY
$SPKDDP synth --kind speakers --out c2100.h5 --dim 24 --speakers 2100 --utts-per-speaker 2 --min-frames 40 \
    --max-frames 50 >/dev/null || fail "synth 2100"
big="$small --data c2100.h5 --global-batch 24 --optimizer sgd --lr 0.5 --progress 0 --head sharded --invariant --max-steps 2"
run 1 $SPKDDP train $big --ckpt-dir big1 >/dev/null 2>&1 || fail "2,100 classes on 1 rank"
run 4 $SPKDDP train $big --ckpt-dir big4 >log_big4 2>&1 || fail "2,100 classes on 4 ranks"
grep -q "524-526 of 2100 classes per rank" log_big4 || fail "slices of whole blocks: $(grep -o 'sharded: [^)]*' log_big4)"
$SPKDDP diff big1/ckpt-000000000002.h5 big4/ckpt-000000000002.h5 >/dev/null &&
    echo "ok  --invariant, 2,100 classes in blocks of 2 (slices of 524-526): 1 and 4 ranks bitwise alike" ||
    fail "2,100 classes: 1 and 4 ranks differ"
# Validation: 200 utterances in global batches of 6 end with a batch of 2, and on 3 ranks a rank
# with none. With the weights frozen, the loss is the same on 1 and 3 ranks, and the replicated
# head's within rounding.
frozen="$small --data c200.h5 --val-data c200v.h5 --epochs 1 --global-batch 6 --optimizer sgd --lr 1e-30 --progress 0"
for v in sharded:1 sharded:3 replicated:1; do
    run ${v#*:} $SPKDDP train $frozen --head ${v%:*} --invariant --ckpt-dir val_${v/:/} --metrics val_${v/:/}.jsonl \
        >/dev/null 2>&1 || fail "validation run $v"
done
vl() { sed -n 's/.*"val_loss": \([0-9.e+-]*\).*/\1/p' "$1" | tail -1; }
[ -n "$(vl val_sharded1.jsonl)" ] && [ "$(vl val_sharded1.jsonl)" = "$(vl val_sharded3.jsonl)" ] &&
    awk -v a="$(vl val_sharded1.jsonl)" -v b="$(vl val_replicated1.jsonl)" 'BEGIN { d = a - b; exit !(d * d <= 1e-12 * b * b) }' &&
    echo "ok  --invariant validation (a short last batch, a rank with none): $(vl val_sharded1.jsonl) on 1 and 3 ranks, the replicated head's $(vl val_replicated1.jsonl)" ||
    fail "validation loss: $(vl val_sharded1.jsonl) / $(vl val_sharded3.jsonl) / replicated $(vl val_replicated1.jsonl)"
sampled_inv="${inv/--max-steps 6/--max-steps 4} --head-sample 0.1 --optimizer sgd --momentum 0.9 --lr 0.2"
for k in 1 2 4; do
    run $k $SPKDDP train $sampled_inv --ckpt-dir pinv$k >/dev/null 2>&1 || fail "invariant --head-sample on $k ranks"
done
$SPKDDP diff pinv1/ckpt-000000000004.h5 pinv2/ckpt-000000000004.h5 >/dev/null &&
    $SPKDDP diff pinv1/ckpt-000000000004.h5 pinv4/ckpt-000000000004.h5 >/dev/null &&
    echo "ok  --invariant --head-sample 0.1: 1, 2 and 4 ranks bitwise alike" ||
    fail "invariant Partial FC: 1, 2 and 4 ranks differ"

# Refusals.
expect_error 2 "linear model has none" -- run 2 $SPKDDP train --data train.h5 --head sharded

$SPKDDP synth --kind speakers --out two.h5 --dim 24 --speakers 2 --utts-per-speaker 6 --min-frames 40 --max-frames 90 \
    >/dev/null || fail "synth two"
expect_error 2 "over 3 ranks needs at least as many classes \(two.h5 has 2\)" -- \
    run 3 $SPKDDP train $small --data two.h5 --global-batch 6 --head sharded
finish
