#!/usr/bin/env bash
# The recipes under jobscripts/recipes: the synthetic one end to end (corpus, training,
# embeddings, scoring, calibration, all from its YAML files), the same training through
# jobscripts/workstation.sh with CONFIG, and every VoxCeleb YAML file accepted by its command
# (which then stops at the first missing corpus file, exit 3 or 4, never at a key: exit 2).
. "$(dirname "$0")/lib.sh" "$@"
recipes=$(cd "$(dirname "$0")/../../jobscripts/recipes" && pwd)

SPKDDP=$SPKDDP MPIEXEC=$MPIEXEC NP=2 bash "$recipes/synthetic/run.sh" syn >log_syn 2>&1 || { cat log_syn; fail "synthetic recipe"; }
eer=$(sed -nE 's/ *cosine +EER +([0-9.]+)%.*/\1/p' log_syn)
awk -v e="$eer" 'BEGIN { exit !(e < 30) }' || fail "synthetic recipe: EER $eer% on unseen speakers is not far below chance"
grep -q '^model: ecapa$' syn/ckpt/config.yaml && grep -q '^epochs: 20$' syn/ckpt/config.yaml || fail "ckpt/config.yaml"
[ -s syn/det.png ] && [ -s syn/eval_llr.txt ] && [ -s syn/calibration.yaml ] || fail "recipe outputs missing"
echo "ok  synthetic recipe: cosine EER $eer%, config.yaml, DET plot, calibration"

# jobscripts/workstation.sh with a recipe: its keys, EXTRA over them.
(cd syn && CONFIG=$recipes/synthetic/train.yaml CKPT_DIR=ws EXTRA="--epochs 1" SPKDDP=$SPKDDP MPIEXEC=$MPIEXEC NP=2 \
    bash "$recipes/../workstation.sh" >../log_ws 2>&1) || { cat log_ws; fail "workstation.sh with CONFIG"; }
grep -q '^epochs: 1$' syn/ws/config.yaml && grep -q '^channels: 32$' syn/ws/config.yaml || fail "workstation.sh: $(cat syn/ws/config.yaml)"
echo "ok  workstation.sh CONFIG=train.yaml EXTRA=--epochs 1"

# Every VoxCeleb file (and the audio-visual recipe's) through its command: accepted, then the missing
# corpus stops it.
for f in "$recipes"/voxceleb/*.yaml "$recipes"/voxceleb2_av/*.yaml; do
    name=$(basename "$f" .yaml)
    case $name in
    prepare_*) args=(prepare --config "$f") ;;
    train*) args=(train --config "$f") ;;
    embed) args=(embed --config "$f" --ckpt missing.h5 --data missing.h5 --out missing_emb.h5) ;;
    score_*) args=(score --config "$f") ;;
    *) fail "no command for $name.yaml"; continue ;;
    esac
    out=$(cd "$WORK" && "$SPKDDP" "${args[@]}" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" -ne 3 ] && [ "$rc" -ne 4 ]; then fail "$name.yaml: exit $rc: $out"; else echo "ok  $name.yaml accepted ($(grep -o 'error: .*' <<<"$out" | cut -c1-60))"; fi
done
finish
