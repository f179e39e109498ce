#!/usr/bin/env bash
# run_both_orders.sh WORKDIR PROGRAM [ARGS...]: runs PROGRAM on the CUDA stand-in in the
# forward and in the reverse scheduling order. Both runs must succeed and hand the host the
# same bytes (SPKDDP_CUDA_EMU_DIGEST), or the program depends on an order CUDA does not give.
set -u
work=$1
shift
rm -rf "$work" && mkdir -p "$work" || exit 1
for order in forward reverse; do
    if ! SPKDDP_CUDA_EMU_ORDER=$order SPKDDP_CUDA_EMU_DIGEST="$work/$order.digest" "$@" >"$work/$order.log" 2>&1; then
        cat "$work/$order.log"
        echo "FAIL: $* in the $order order"
        exit 1
    fi
done
tail -3 "$work/forward.log"
if ! cmp -s "$work/forward.digest" "$work/reverse.digest"; then
    diff "$work/forward.log" "$work/reverse.log" | head -20
    echo "FAIL: the forward and reverse orders hand the host different results ($(cat "$work/forward.digest") vs $(cat "$work/reverse.digest"))"
    exit 1
fi
echo "ok  forward and reverse orders agree bitwise: $(cat "$work/forward.digest") (hash, bytes to the host)"
