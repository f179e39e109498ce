#!/usr/bin/env bash
# Kaldi lists of VoxCeleb2's videos for the audio-visual recipe (run.sh), in data/:
#   av_dev/{wav.scp,video.scp,utt2spk}    VoxCeleb2-dev, 5,994 speakers (training)
#   av_test/{wav.scp,video.scp,utt2spk}   VoxCeleb2-test, 118 speakers (the trials of run.sh)
# The audio comes from the m4a files (aac/), the faces from the mp4 face tracks (mp4/); an
# utterance's id is its path below those folders without the extension (id00012/21Uxsk56VDQ/00001),
# so both lists name it alike, and a speaker is the first folder. Utterances without both files
# are left out and counted.
#
#   VOX2=/data/voxceleb2 jobscripts/recipes/voxceleb2_av/lists.sh
#
# Expected layout: $VOX2/dev/aac/<spk>/<video>/<n>.m4a and $VOX2/dev/mp4/<spk>/<video>/<n>.mp4,
# and test/aac, test/mp4 likewise, as the download unpacks.
set -euo pipefail
: "${VOX2:?set VOX2 to the VoxCeleb2 folder}"

# list SET DIR: the utterances of $VOX2/SET with both an m4a and an mp4.
list() {
    mkdir -p "$2"
    find "$VOX2/$1/aac" -name '*.m4a' | LC_ALL=C sort >"$2/m4a.txt"
    find "$VOX2/$1/mp4" -name '*.mp4' | LC_ALL=C sort >"$2/mp4.txt"
    awk -v a=$((${#VOX2} + ${#1} + 7)) -v v=$((${#VOX2} + ${#1} + 7)) -v dir="$2" '
        FNR == 1 { file++ }
        file == 1 { id = substr($0, a); sub(/\.m4a$/, "", id); audio[id] = $0; next }
        { id = substr($0, v); sub(/\.mp4$/, "", id)
          if (!(id in audio)) { lone++; next }
          split(id, part, "/")
          print id, audio[id] > (dir "/wav.scp"); print id, $0 > (dir "/video.scp"); print id, part[1] > (dir "/utt2spk")
          delete audio[id] }
        END { for (id in audio) lone++; if (lone) print lone " files of " dir " have no partner (left out)" > "/dev/stderr" }
    ' "$2/m4a.txt" "$2/mp4.txt"
    rm "$2/m4a.txt" "$2/mp4.txt"
}
list dev data/av_dev
list test data/av_test
wc -l data/av_dev/video.scp data/av_test/video.scp
