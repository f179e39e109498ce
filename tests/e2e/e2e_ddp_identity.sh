#!/usr/bin/env bash
# The DDP identity: K ranks with per-rank batch B end with the same parameters as 1 rank with
# batch K*B on the same global order (relative 1e-6), and replicas are exactly equal
# (the trainer exits non-zero on any cross-rank difference).
. "$(dirname "$0")/lib.sh" "$@"

$SPKDDP synth --kind toy --out toy.h5 --separation 0.5 >/dev/null || fail "synth toy"
$SPKDDP synth --kind speakers --out sp.h5 --dim 16 --speakers 8 --utts-per-speaker 8 \
    --min-frames 20 --max-frames 60 >/dev/null || fail "synth speakers"

for data in toy sp; do
    common="--data $data.h5 --epochs 3 --momentum 0.9 --weight-decay 1e-4 --lr 0.05"
    run 1 $SPKDDP train $common --batch 32 --ckpt-dir ck_${data}_1 >log_${data}_1 || fail "$data 1 rank"
    run 2 $SPKDDP train $common --batch 16 --ckpt-dir ck_${data}_2 >log_${data}_2 || fail "$data 2 ranks"
    run 4 $SPKDDP train $common --global-batch 32 --ckpt-dir ck_${data}_4 >log_${data}_4 || fail "$data 4 ranks"
    last=$(ls ck_${data}_1 | grep ckpt- | tail -1)
    for k in 2 4; do
        grep -q "max |theta_r - theta_0| = 0 (replicas identical)" log_${data}_$k || fail "$data: replicas differ on $k ranks"
        if $SPKDDP diff ck_${data}_1/$last ck_${data}_$k/$last --rtol 1e-6 >diff_${data}_$k; then
            echo "ok  $data: $k ranks x batch $((32 / k)) == 1 rank x batch 32 ($(grep params diff_${data}_$k))"
        else
            cat diff_${data}_$k
            fail "$data: $k ranks differ from 1 rank"
        fi
    done
done
# A different global batch must give different parameters (the comparison can fail).
run 2 $SPKDDP train --data toy.h5 --epochs 3 --momentum 0.9 --weight-decay 1e-4 --lr 0.05 --batch 8 --ckpt-dir ck_other >/dev/null
if $SPKDDP diff ck_toy_1/$(ls ck_toy_1 | grep ckpt- | tail -1) ck_other/$(ls ck_other | grep ckpt- | tail -1) --rtol 1e-6 >/dev/null; then
    fail "a different global batch gave the same parameters: the comparison cannot fail"
fi
finish
