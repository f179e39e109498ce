#!/usr/bin/env bash
# EER on unseen speakers of a noisy, reverberant test set, ECAPA trained clean vs with
# augmentation, over several seeds (not a test): runs tests/e2e/e2e_augment_verify.sh once per
# seed (each seed changes the corpora, the banks, the test corruption and the training seed)
# and prints its line for each, then the means.
#   bash tools/augment_eer.sh [BUILD=build] [SEEDS="1 2 3 4 5"] [WORK=/tmp/spkddp_augment_eer]
set -uo pipefail
BUILD=$(cd "${1:-build}" && pwd)
SEEDS=${2:-1 2 3 4 5}
WORK=${3:-/tmp/spkddp_augment_eer}
HERE=$(cd "$(dirname "$0")" && pwd)
MPIEXEC=${MPIEXEC:-mpiexec}
for s in $SEEDS; do
    bash "$HERE/../tests/e2e/e2e_augment_verify.sh" "$BUILD/app/spkddp" "$MPIEXEC" "$WORK/seed$s" "$BUILD/tests/make_bad_data" "$s" \
        | grep "^seed "
done | tee "$WORK.txt"
awk '{ gsub(/[%,]/, ""); c += $(NF - 2); a += $NF; n++ }
     END { if (n) printf "mean over %d seeds: clean training %.2f%%, augmented %.2f%%\n", n, c / n, a / n }' "$WORK.txt"
