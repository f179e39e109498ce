#!/usr/bin/env bash
# Import a pretrained model and fine-tune it: a SpeechBrain ECAPA_TDNN pretrained by SpeechBrain
# itself (tests/interop/speechbrain_pretrain.py: AAM-softmax, Adam, random crops) on 60
# synthetic speakers and saved as its recipes save it is converted
# (tools/speechbrain_to_safetensors.py), embeds 10 unseen speakers in spkddp far below chance,
# and spkddp's large-margin fine-tuning recipe from it (docs/interop.md) keeps or improves that
# EER. The same three epochs from scratch must do far worse: the imported weights are used.
. "$(dirname "$0")/lib.sh" "$@"
need_python torch speechbrain safetensors h5py
quiet() { "$@" >>log 2>&1; }
cosine_eer() { sed -nE 's/ *cosine +EER +([0-9.]+)%.*/\1/p' "$1"; }
# score_of C EMB: test.h5 embedded by checkpoint or safetensors file C into EMB, scored on trials.txt
# (made from the first EMB); prints the cosine EER.
score_of() {
    quiet run 2 $SPKDDP embed --ckpt "$1" --data test.h5 --out "$2" || { fail "embed $1"; return; }
    [ -f trials.txt ] || quiet $SPKDDP trials --emb "$2" --out trials.txt || fail "trials"
    $SPKDDP score --emb "$2" --trials trials.txt >"$2.log" || fail "score $2"
    cosine_eer "$2.log"
}

quiet $SPKDDP synth --kind speakers --out train.h5 --dim 16 --speakers 60 --utts-per-speaker 10 \
    --min-frames 60 --max-frames 100 || fail "synth train"
quiet $SPKDDP synth --kind speakers --out test.h5 --dim 16 --speakers 10 --first-speaker 100 --utts-per-speaker 8 \
    --min-frames 60 --max-frames 120 || fail "synth unseen speakers"
mkdir -p sb
$PY "$HERE/speechbrain_pretrain.py" sb train.h5 12 >pretrain.log 2>&1 || { cat pretrain.log; fail "SpeechBrain pretraining"; }
tail -1 pretrain.log
$PY "$HERE/../../tools/speechbrain_to_safetensors.py" --embedding-model sb/embedding_model.ckpt \
    --classifier sb/classifier.ckpt --out sb.safetensors 2>/dev/null || fail "convert"
pre=$(score_of sb.safetensors pre_emb.h5)
recipe="--model ecapa --channels 32 --attention-channels 16 --se-channels 16 --emb-dim 32 --data train.h5
    --frames 96 --margin 0.4 --lr 0.0005 --epochs 3 --global-batch 32 --optimizer adam --progress 0"
quiet run 2 $SPKDDP train $recipe --init-from sb.safetensors --init-head keep --ckpt-dir ft || fail "fine-tune"
ft=$(score_of "$(ls ft/ckpt-*.h5 | tail -1)" ft_emb.h5)
quiet run 2 $SPKDDP train $recipe --ckpt-dir scratch || fail "the same run from scratch"
scratch=$(score_of "$(ls scratch/ckpt-*.h5 | tail -1)" scratch_emb.h5)
echo "cosine EER on unseen speakers: SpeechBrain-pretrained in spkddp $pre%, fine-tuned by spkddp $ft%, the same 3 epochs from scratch $scratch%"
awk -v e="${pre:-100}" 'BEGIN { exit !(e < 30) }' || fail "the imported model's EER $pre% is not far below chance"
awk -v a="${pre:-0}" -v b="${ft:-100}" 'BEGIN { exit !(b <= a) }' || fail "fine-tuning raised the EER from $pre% to $ft%"
awk -v a="${ft:-100}" -v b="${scratch:-0}" 'BEGIN { exit !(b > a + 10) }' ||
    fail "from scratch ($scratch%) is not far worse than from the imported model ($ft%)"
finish
