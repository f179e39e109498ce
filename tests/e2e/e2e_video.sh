#!/usr/bin/env bash
# Audio-visual data from video: talking-face mp4s (tests/e2e/make_face_video.c over a synthetic
# speech corpus) through `spkddp prepare --video-scp` into a dataset with a /visual stream of JPEG
# frames, and ecapa-av with its face encoder trained on it. Checks: the dataset is the same
# whatever the number of ranks and the write buffer; the frames are the video's (decoded back and
# compared with ffmpeg's decoding); training is the same on 1 and 2 ranks (--invariant, and with
# BatchNorm by groups ecapa-av in bf16 and campplus-av) and after a stop and a resume; embed reads
# the pictures; bad videos give one line naming the file.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh" "$@"
FACES=$(dirname "$MAKE_BAD_DATA")/make_face_video
command -v ffmpeg >/dev/null || { echo "ffmpeg (the command) is missing: bash tools/install-deps.sh"; exit 1; }

bash "$HERE/make_speech_corpus.sh" sp 4 3 1 >/dev/null || fail "make_speech_corpus.sh"
MAKE_FACE_VIDEO_JOBS=2 "$FACES" sp/wav.scp sp/utt2spk av 1 --size 48 >faces.log 2>&1 || { cat faces.log; fail "make_face_video"; finish; }
vis="--video-scp av/video.scp --visual-size 32 --visual-fps 10 --progress 0"
prep() { local k=$1 out=$2; shift 2; run $k $SPKDDP prepare --wav-scp av/video.scp --utt2spk av/utt2spk --out $out $vis "$@"; }

# --- the dataset: the audio from the mp4s themselves, the frames beside it -------------------------
prep 1 a1.h5 >prep1.log 2>&1 || { cat prep1.log; fail "prepare on 1 rank"; finish; }
prep 2 a2.h5 --buffer-mb 1 >/dev/null 2>&1 || fail "prepare on 2 ranks"
h5diff a1.h5 a2.h5 >/dev/null && echo "ok  2 ranks (1 MiB buffers) write the same dataset as 1 rank" || fail "2 ranks differ from 1"
grep -o "[0-9]* JPEG frames.*hour)" prep1.log | sed 's/^/ok  /'
[ "$(h5dump -a /visual/encoding a1.h5 | grep -c '"jpeg"')" = 1 ] || fail "/visual/encoding is not \"jpeg\""

# frame 0 of the first utterance against ffmpeg's own decoding of the video (gray, centre square,
# 32 x 32): the mean absolute difference of the pixels is a JPEG's rounding, a few levels.
first=$(head -1 av/video.scp | cut -d' ' -f2)
ffmpeg -nostdin -loglevel error -i "$first" -vf "scale=32:32:flags=area,format=gray" -frames:v 1 -f rawvideo ref.gray
len=$(h5dump -d /visual/jpeg -s 0 -c 4 -y -w0 a1.h5 | sed -n '/DATA {/,/}/p' | tr -dc '0-9,' | awk -F, '{print $1+256*$2+65536*$3}')
h5dump -d /visual/jpeg -s 4 -c "$len" -b LE -o f0.jpg a1.h5 >/dev/null
ffmpeg -nostdin -loglevel error -i f0.jpg -f rawvideo -pix_fmt gray ours.gray
mad=$(paste <(od -An -v -tu1 -w1 ref.gray) <(od -An -v -tu1 -w1 ours.gray) \
    | awk '{d += ($1 > $2 ? $1 - $2 : $2 - $1); n++} END {printf "%.2f", n == 1024 ? d / n : 999}')
awk -v m="$mad" 'BEGIN {exit !(m < 6)}' && echo "ok  frame 0 = ffmpeg's decoding of the video (mean |difference| $mad of 255)" \
    || fail "frame 0 differs from ffmpeg's decoding by $mad levels on average"

# --- training: ecapa-av with the face encoder ---------------------------------------------------------
av="--model ecapa-av --data a1.h5 --channels 32 --attention-channels 16 --se-channels 16 --emb-dim 16 --visual-channels 16
    --face-channels 4 --modality-dropout 0.5 --frames 100 --global-batch 8 --optimizer adam --lr 0.002 --progress 0"
for k in 1 2; do
    run $k $SPKDDP train $av --picture-augment --invariant --epochs 2 --ckpt-dir inv$k >log_inv$k 2>&1 \
        || { cat log_inv$k; fail "train on $k ranks"; }
done
SPKDDP_LOADER_THREADS=3 run 1 $SPKDDP train $av --picture-augment --invariant --epochs 2 --ckpt-dir thr3 >/dev/null 2>&1 \
    || fail "train with 3 loader threads"
run 1 $SPKDDP train $av --invariant --epochs 2 --ckpt-dir plain >/dev/null 2>&1 || fail "train without picture augmentation"
ck=$(cd inv1 && ls ckpt-*.h5 | tail -1)
$SPKDDP diff inv1/$ck inv2/$ck >/dev/null && echo "ok  --invariant --picture-augment: 2 ranks == 1 rank (bitwise, $ck)" \
    || fail "2 ranks differ from 1 ($ck)"
$SPKDDP diff inv1/$ck thr3/$ck >/dev/null && echo "ok  3 loader threads decode and augment the pictures as 1 (bitwise)" \
    || fail "3 loader threads differ from 1"
$SPKDDP diff inv1/$ck plain/$ck >/dev/null 2>&1 && fail "--picture-augment changed nothing (the comparison could not fail)"
# the device code path: staged copies on the CPU (bitwise), and the CUDA stand-in one SGD step away
# from the same start (a summation order of its own: within 1e-4)
sgd=${av/--optimizer adam --lr 0.002/--optimizer sgd --lr 0.01}
run 1 $SPKDDP train $sgd --epochs 1 --ckpt-dir host >/dev/null 2>&1 || fail "train on the CPU"
run 1 $SPKDDP train $sgd --epochs 1 --ckpt-dir staged --device cpu-staged >/dev/null 2>&1 || fail "train cpu-staged"
$SPKDDP diff host/ckpt-000000000002.h5 staged/ckpt-000000000002.h5 >/dev/null \
    && echo "ok  --device cpu-staged == the CPU path (bitwise)" || fail "cpu-staged differs from the CPU path"
EMU=$(dirname "$MAKE_BAD_DATA")/spkddp_emu
if [ -x "$EMU" ]; then
    run 1 $SPKDDP train $sgd --epochs 1 --max-steps 1 --ckpt-dir host1 >/dev/null 2>&1 || fail "one step on the CPU"
    run 1 $EMU train $sgd --epochs 1 --max-steps 1 --ckpt-dir emu1 --device cuda >/dev/null 2>&1 || fail "one step on the CUDA stand-in"
    $SPKDDP diff host1/ckpt-000000000001.h5 emu1/ckpt-000000000001.h5 --rtol 1e-4 >diff_emu \
        && echo "ok  the CUDA code path (stand-in) == the CPU path one step on (rtol 1e-4)" || { cat diff_emu; fail "the CUDA stand-in differs"; }
fi
run 2 $SPKDDP train $av --epochs 3 --ckpt-dir full >/dev/null 2>&1 || fail "train 3 epochs"
run 2 $SPKDDP train $av --epochs 1 --ckpt-dir part >/dev/null 2>&1 || fail "train 1 epoch"
run 2 $SPKDDP train $av --epochs 3 --ckpt-dir part --resume auto >/dev/null 2>&1 || fail "resume"
last=$(cd full && ls ckpt-*.h5 | tail -1)
$SPKDDP diff full/$last part/$last >/dev/null && echo "ok  stopped after epoch 1 and resumed == uninterrupted (bitwise, $last)" \
    || fail "the resumed run differs ($last)"
for mo in both audio visual; do
    run 1 $SPKDDP embed --ckpt full/$last --data a1.h5 --out emb_$mo.h5 --modality $mo >embed.log 2>&1 || { cat embed.log; fail "embed --modality $mo"; }
done
[ -s emb_both.h5 ] && ! cmp -s emb_both.h5 emb_audio.h5 && ! cmp -s emb_audio.h5 emb_visual.h5 \
    && echo "ok  embed reads the pictures: both streams, audio alone, visual alone (three different sets)" || fail "embed --modality"
$SPKDDP trials --emb emb_both.h5 --out trials.txt >/dev/null
$SPKDDP score --emb emb_audio.h5 --fuse emb_visual.h5 --trials trials.txt --out fused.txt >score.log 2>&1 || { cat score.log; fail "score --fuse"; }
awk '{ if ($5 - ($3 + $4) / 2 > 1e-5 || ($3 + $4) / 2 - $5 > 1e-5) bad++ } END { exit bad > 0 || NR == 0 }' fused.txt \
    && grep -q "^  fused  *EER" score.log && echo "ok  score --fuse: each trial's fused score is the mean of the two systems' ($(wc -l <fused.txt) trials)" \
    || fail "score --fuse: $(head -2 fused.txt)"
expect_error 2 "modality-dropout applies to --model ecapa-av" -- \
    run 1 $SPKDDP train --data a1.h5 --model ecapa --channels 32 --batch 4 --modality-dropout 0.5 --epochs 1

# WeSpeaker's ResNet34 and 3D-Speaker's CAM++ beside the face encoder: the same on 1 and 2 ranks,
# a resume, embed of the face alone
for enc in "resnet34-av --channels 8" "campplus-av --channels 16 --growth-rate 8 --bn-size 2"; do
    name=${enc%% *}
    r34="--model $enc --data a1.h5 --emb-dim 16 --face-channels 4 --modality-dropout 0.5 --frames 100 --global-batch 8
         --optimizer adam --lr 0.002 --progress 0"
    for k in 1 2; do
        run $k $SPKDDP train $r34 --picture-augment --invariant --epochs 2 --ckpt-dir ${name}_$k >/dev/null 2>&1 \
            || fail "$name on $k ranks"
    done
    $SPKDDP diff ${name}_1/$ck ${name}_2/$ck >/dev/null && echo "ok  $name --invariant: 2 ranks == 1 rank (bitwise)" \
        || fail "$name: 2 ranks differ"
    run 2 $SPKDDP train $r34 --epochs 3 --ckpt-dir ${name}_full >/dev/null 2>&1 \
        && run 2 $SPKDDP train $r34 --epochs 1 --ckpt-dir ${name}_part >/dev/null 2>&1 \
        && run 2 $SPKDDP train $r34 --epochs 3 --ckpt-dir ${name}_part --resume auto >/dev/null 2>&1 || fail "$name runs"
    $SPKDDP diff ${name}_full/$last ${name}_part/$last >/dev/null && echo "ok  $name: resumed == uninterrupted (bitwise)" \
        || fail "$name: the resumed run differs"
    run 1 $SPKDDP embed --ckpt ${name}_full/$last --data a1.h5 --out ${name}_v.h5 --modality visual >/dev/null 2>&1 \
        && echo "ok  $name embeds the face alone" || fail "$name embed --modality visual"
done
# BatchNorm by groups: the face encoder's 2-D units keep their activations in bf16 as the plain
# mode does, and CAM++'s dense blocks a set of statistics a group; the same on 1 and 2 ranks.
for enc in "ecapa-av --channels 32 --attention-channels 16 --se-channels 16 --visual-channels 16 --precision bf16" \
    "campplus-av --channels 16 --growth-rate 8 --bn-size 2"; do
    name=${enc%% *}
    byg="--model $enc --data a1.h5 --emb-dim 16 --face-channels 4 --modality-dropout 0.5 --frames 100 --global-batch 8
         --optimizer adam --lr 0.002 --progress 0 --epochs 1 --invariant --invariant-bn group --invariant-group 4"
    for k in 1 2; do
        run $k $SPKDDP train $byg --ckpt-dir ${name}_g$k >/dev/null 2>&1 || fail "$name by groups on $k ranks"
    done
    g=$(cd ${name}_g1 && ls ckpt-*.h5 | tail -1)
    $SPKDDP diff ${name}_g1/$g ${name}_g2/$g >/dev/null \
        && echo "ok  $name, BatchNorm by groups of 4: 2 ranks == 1 rank (bitwise)" || fail "$name by groups: 2 ranks differ"
done
expect_error 2 "takes a /visual stream of pictures .* through its face encoder" -- \
    run 1 $SPKDDP train ${r34/--face-channels 4/} --epochs 1
expect_error 2 "holds pictures: --model ecapa-av takes them through a face encoder" -- \
    run 1 $SPKDDP train ${av/--face-channels 4/} --epochs 1

# --- the VoxCeleb2 audio-visual recipe (lists.sh, run.sh) on these videos in VoxCeleb2's layout --------
recipe=$(cd "$HERE/../../jobscripts/recipes/voxceleb2_av" && pwd)
n=0
while read -r id path; do  # spk01-utt02 -> VOX2/dev/{aac,mp4}/id00001/vid02/00002.{m4a,mp4}; speakers 1-2 dev, 3-4 test
    s=${id%%-*} u=${id##*utt} set=dev
    [ "${s#spk}" -ge 3 ] && set=test
    d=id000${s#spk}/vid$u
    mkdir -p "VOX2/$set/aac/$d" "VOX2/$set/mp4/$d"
    cp "$path" "VOX2/$set/mp4/$d/000$u.mp4"
    ffmpeg -nostdin -loglevel error -i "$path" -vn -c:a copy "VOX2/$set/aac/$d/000$u.m4a" && n=$((n + 1))
done <av/video.scp
rm "VOX2/dev/aac/id00001/vid01/00001.m4a"  # a video without its audio: left out, and said
mkdir -p rec && (cd rec && VOX2=$PWD/../VOX2 "$recipe/lists.sh" >lists.log 2>&1) || fail "lists.sh: $(cat rec/lists.log)"
grep -q "1 files of data/av_dev have no partner" rec/lists.log && [ "$(wc -l <rec/data/av_dev/video.scp)" = 5 ] \
    && [ "$(wc -l <rec/data/av_test/wav.scp)" = 6 ] && echo "ok  lists.sh: 5 dev and 6 test utterances, the lone video said" \
    || fail "lists.sh: $(cat rec/lists.log)"
(cd rec && NP=2 SPKDDP=$SPKDDP MPIEXEC=$MPIEXEC TRIALS=2 "$recipe/run.sh" --channels 32 --attention-channels 16 \
    --se-channels 16 --emb-dim 16 --visual-channels 16 --face-channels 4 --global-batch 4 --epochs 1 --frames 100 \
    --warmup-steps 1 --progress 0 >run.log 2>&1) || { tail -20 rec/run.log; fail "run.sh"; }
[ "$(grep -c '^  fused  *EER' rec/run.log)" = 1 ] && [ "$(grep -c '^  cosine *EER' rec/run.log)" = 4 ] \
    && echo "ok  run.sh: prepare, train, embed (both, audio, visual), score and the score fusion" || fail "run.sh: $(tail -5 rec/run.log)"

# --- --visual-scp: users' own per-frame features (.npy, float32 and float64; a Kaldi archive) ---------
PY=python3  # Debian's, with python3-numpy and python3-h5py (tools/install-deps.sh --python), over another on PATH
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
if $PY -c "import numpy, h5py" 2>/dev/null; then
    $PY - sp/wav.scp <<'PY' || fail "making feature matrices"
import sys, struct, numpy as np
rng = np.random.default_rng(3)
ids = [l.split()[0] for l in open(sys.argv[1])]
with open("feats.ark", "wb") as ark, open("feats.scp", "w") as scp, open("truth.txt", "w") as truth:
    for k, u in enumerate(ids):
        x = rng.standard_normal((40, 6))  # 4 s at 10 frames/s: more than any utterance needs
        if k % 3 == 0:
            np.save(f"{u}.npy", x.astype(np.float32)); scp.write(f"{u} {u}.npy\n")
        elif k % 3 == 1:
            np.save(f"{u}.npy", x); scp.write(f"{u} {u}.npy\n")
        else:
            ark.write(u.encode() + b" "); scp.write(f"{u} feats.ark:{ark.tell()}\n")
            ark.write(b"\0BFM " + struct.pack("<bibi", 4, 40, 4, 6) + x.astype("<f4").tobytes())
        truth.write(u + " " + " ".join("%.9g" % v for v in x.astype(np.float32)[0]) + "\n")
PY
    fv="--visual-scp feats.scp --visual-fps 10 --progress 0"
    run 1 $SPKDDP prepare --wav-scp sp/wav.scp --utt2spk sp/utt2spk --out f1.h5 $fv >fprep.log 2>&1 || fail "prepare --visual-scp: $(cat fprep.log)"
    run 2 $SPKDDP prepare --wav-scp sp/wav.scp --utt2spk sp/utt2spk --out f2.h5 $fv --buffer-mb 1 >/dev/null 2>&1 || fail "2 ranks"
    h5diff f1.h5 f2.h5 >/dev/null && echo "ok  --visual-scp: 2 ranks write the same dataset as 1 rank" || fail "--visual-scp: 2 ranks differ"
    $PY - <<'PY' && echo "ok  --visual-scp: every utterance's first frame is its matrix's (npy f4, npy f8, Kaldi ark)" || fail "--visual-scp values"
import h5py, numpy as np
f = h5py.File("f1.h5", "r"); ids = [i.decode() if isinstance(i, bytes) else i for i in f["utt_ids"][:]]
off = f["visual/offsets"][:]; x = f["visual/features"][:]
truth = {l.split()[0]: np.array(l.split()[1:], dtype=np.float32) for l in open("truth.txt")}
assert all(np.array_equal(x[off[i]], truth[u]) for i, u in enumerate(ids)), "a first frame differs"
assert f["visual"].attrs["feature_dim"] == 6 and f["visual"].attrs["frame_rate"] == 10
PY
    run 1 $SPKDDP train --data f1.h5 --model ecapa-av --channels 32 --emb-dim 16 --visual-channels 16 --batch 4 --epochs 1 \
        --progress 0 >/dev/null 2>&1 && echo "ok  ecapa-av trains on the features" || fail "ecapa-av on --visual-scp features"
    first=$(head -1 feats.scp | cut -d' ' -f1)
    second=$(sed -n 2p feats.scp | cut -d' ' -f1)
    $PY -c "import numpy as np; np.save('$second.npy', np.zeros((40, 5), np.float32))"
    expect_error 3 "$second.npy: 5 values a frame where the list's first matrix has 6" -- \
        run 1 $SPKDDP prepare --wav-scp sp/wav.scp --utt2spk sp/utt2spk --out bad.h5 $fv
    $PY -c "import numpy as np; np.save('$second.npy', np.zeros((40, 6), np.float32)); np.save('$first.npy', np.zeros((3, 6), np.float32))"
    expect_error 3 "$first.npy: 0.30 s of features where its audio needs" -- \
        run 1 $SPKDDP prepare --wav-scp sp/wav.scp --utt2spk sp/utt2spk --out bad.h5 $fv
else
    echo "skipped: --visual-scp checks (python3 with numpy and h5py is missing)"
fi

# --- bad videos: one line naming the file --------------------------------------------------------------
head -3 av/video.scp >bad.scp
echo "not a video" >notvideo.mp4
sed "2s|[^ ]*\$|$PWD/notvideo.mp4|" av/video.scp >badvid.scp
expect_error 3 "notvideo.mp4.*(not a container|no video stream)" -- \
    run 2 $SPKDDP prepare --wav-scp av/video.scp --utt2spk av/utt2spk --out bad.h5 $vis --video-scp badvid.scp
[ ! -e bad.h5 ] && [ -z "$(ls | grep -E 'bad.h5.(tmp|visual)')" ] && echo "ok  nothing left behind" || fail "files left behind: $(ls)"
run 2 $SPKDDP prepare --wav-scp av/video.scp --utt2spk av/utt2spk --out skip.h5 $vis --video-scp badvid.scp --skip-bad \
    >/dev/null 2>&1 && grep -q notvideo skip.h5.bad && echo "ok  --skip-bad leaves the bad video out (skip.h5.bad)" || fail "--skip-bad"
expect_error 3 "bad.scp: no video for utterance" -- \
    run 1 $SPKDDP prepare --wav-scp av/video.scp --utt2spk av/utt2spk --out bad.h5 $vis --video-scp bad.scp
expect_error 2 "visual-fps 3 does not divide" -- \
    run 1 $SPKDDP prepare --wav-scp av/video.scp --utt2spk av/utt2spk --out bad.h5 $vis --visual-fps 3
finish
