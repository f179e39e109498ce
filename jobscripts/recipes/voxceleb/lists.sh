#!/usr/bin/env bash
# Kaldi lists of VoxCeleb, MUSAN and RIRS_NOISES for the VoxCeleb recipe (run.sh), in data/:
#   vox2_dev/{wav.scp,utt2spk}   VoxCeleb2-dev, 5,994 speakers (training; m4a, decoded by FFmpeg)
#   vox1/{wav.scp,utt2spk}       VoxCeleb1, all 1,251 speakers (the O, E and H trial lists)
#   cohort/{wav.scp,utt2spk}     the first utterance of every VoxCeleb2-dev speaker (AS-norm)
#   musan.{scp,utt2cat}, rirs.{scp,utt2cat}   augmentation banks (docs/augmentation.md)
# Utterance ids are the files' paths below the corpus folder, as the official trial lists name
# them (id10270/x6uYqmx31kE/00001.wav), and a speaker is the first folder of the path.
#
#   VOX1=/data/voxceleb1 VOX2=/data/voxceleb2 MUSAN=/data/musan RIRS=/data/RIRS_NOISES \
#       jobscripts/recipes/voxceleb/lists.sh
#
# Expected layout: $VOX1/wav/<spk>/<video>/<n>.wav (dev and test merged, as the download
# unpacks), $VOX2/dev/aac/<spk>/<video>/<n>.m4a, MUSAN and RIRS_NOISES as distributed.
set -euo pipefail
: "${VOX1:?set VOX1 to the VoxCeleb1 folder}" "${VOX2:?set VOX2 to the VoxCeleb2 folder}"
: "${MUSAN:?set MUSAN to the MUSAN folder}" "${RIRS:?set RIRS to the RIRS_NOISES folder}"
mkdir -p data/vox2_dev data/vox1 data/cohort

# list ROOT EXT DIR: "ID PATH" and "ID SPEAKER" lines for every ROOT/**/*.EXT, ID relative to ROOT.
list() {
    find "$1" -name "*.$2" | LC_ALL=C sort | awk -v n=$((${#1} + 2)) -v dir="$3" '{
        id = substr($0, n); split(id, part, "/")
        print id, $0 > (dir "/wav.scp"); print id, part[1] > (dir "/utt2spk") }'
}
list "$VOX2/dev/aac" m4a data/vox2_dev
list "$VOX1/wav" wav data/vox1
awk '!seen[$2]++ { print $1 }' data/vox2_dev/utt2spk >data/cohort/ids
awk 'NR == FNR { keep[$1] = 1; next } keep[$1]' data/cohort/ids data/vox2_dev/wav.scp >data/cohort/wav.scp
awk 'NR == FNR { keep[$1] = 1; next } keep[$1]' data/cohort/ids data/vox2_dev/utt2spk >data/cohort/utt2spk

# Augmentation banks: the category is MUSAN's top folder, and the room size of a simulated RIR
# (room files repeat their names across sizes, so the id carries the size).
find "$MUSAN" -name '*.wav' | LC_ALL=C sort | awk -F/ '{ id = $NF; sub(/\.wav$/, "", id)
    print id, $0 > "data/musan.scp"; print id, $(NF - 2) > "data/musan.utt2cat" }'
find "$RIRS/simulated_rirs" -name '*.wav' | LC_ALL=C sort | awk -F/ '{ id = $(NF - 2) "-" $NF
    sub(/\.wav$/, "", id); print id, $0 > "data/rirs.scp"; print id, $(NF - 2) > "data/rirs.utt2cat" }'
wc -l data/vox2_dev/wav.scp data/vox1/wav.scp data/cohort/wav.scp data/musan.scp data/rirs.scp
