#!/usr/bin/env bash
# spkddp prepare on the inputs practitioners have: FLAC, m4a/AAC (made here with the ffmpeg
# command), `cmd |` entries, Kaldi segments; every unreadable entry listed (file:line,
# reason) or, with --skip-bad, left out and listed beside the output; peak memory flat when
# the corpus doubles.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh" "$@"
command -v ffmpeg >/dev/null || { echo "ffmpeg (the command) is missing: bash tools/install-deps.sh"; exit 1; }

bash "$HERE/make_speech_corpus.sh" corpus 3 2 1 >/dev/null || fail "make_speech_corpus.sh"
W=corpus/wav/spk01-utt01.wav
ff() { ffmpeg -nostdin -loglevel error -y "$@"; }
# rows FILE START COUNT: the values of rows [START, START + COUNT) of /features, as text.
rows() { h5dump -m %.9g -d /features -s "$2,0" -c "$3,80" -y -w0 "$1" | sed -n '/DATA {/,$p'; }
frames() { h5dump -y -d /offsets "$1" | tr -d ' \n' | sed 's/.*DATA{\([^}]*\)}.*/\1/'; }
one() { printf '%s %s\n' "$1" "$2" >"$3.scp"; echo "$1 spk" >"$3.utt2spk"; run 1 $SPKDDP prepare --wav-scp "$3.scp" --utt2spk "$3.utt2spk" --out "$3.h5" --progress 0 >"$3.log" 2>&1 || fail "prepare $3: $(cat "$3.log")"; }

one u "$W" wav
T=$(frames wav.h5 | cut -d, -f2)

# --- FLAC (libsndfile) and a WAV stream from a command: the same rows as the WAV ---------------
ff -i "$W" a.flac
one u a.flac flac
[ "$(rows flac.h5 0 "$T")" = "$(rows wav.h5 0 "$T")" ] && echo "ok  FLAC: the $T frames of the WAV" || fail "FLAC rows differ from the WAV's"
one u "cat $W |" pipe
[ "$(rows pipe.h5 0 "$T")" = "$(rows wav.h5 0 "$T")" ] && echo "ok  'cat x.wav |': the same rows" || fail "'cat |' rows differ"
one u "ffmpeg -nostdin -loglevel error -i a.flac -f wav - |" ffpipe
[ "$(rows ffpipe.h5 0 "$T")" = "$(rows wav.h5 0 "$T")" ] && echo "ok  'ffmpeg ... -f wav - |' (streamed WAV header): the same rows" \
    || fail "ffmpeg pipe rows differ"

# --- m4a/AAC through FFmpeg's libraries: as long as the ffmpeg command decodes it -------------------
ff -i "$W" -c:a aac -b:a 96k a.m4a
one u a.m4a m4a
want=$(ffmpeg -nostdin -loglevel error -i a.m4a -f s16le - | wc -c)
want=$(( (want / 2 - 400) / 160 + 1 ))
got=$(frames m4a.h5 | cut -d, -f2)
[ "$got" = "$want" ] && echo "ok  m4a/AAC: $got frames, as many as ffmpeg's decoding gives (WAV: $T)" || fail "m4a: $got frames, want $want"

# --- segments: utterances cut from recordings (one decode per recording) ------------------------------
printf 'rec1 %s\nrec2 cat corpus/wav/spk01-utt02.wav |\n' "$W" >rec.scp
printf 's1 rec1 0.2 0.9\ns2 rec1 0.5 -1\ns3 rec2 0 1.0\n' >segments
printf 's1 a\ns2 a\ns3 b\n' >seg.utt2spk
run 2 $SPKDDP prepare --wav-scp rec.scp --segments segments --utt2spk seg.utt2spk --out seg.h5 --progress 0 >seg.log 2>&1 \
    || fail "prepare with segments: $(cat seg.log)"
# s1 = samples [3200, 14400): 68 frames, frame t is the recording's frame 20 + t (3200 = 20 hops)
[ "$(frames seg.h5)" = "0,68,$(( 68 + (T - 50) )),$(( 68 + T - 50 + 98 ))" ] || fail "segment frames $(frames seg.h5)"
[ "$(rows seg.h5 0 68)" = "$(rows wav.h5 20 68)" ] && echo "ok  segments: 'rec1 0.2 0.9' is frames 20..87 of the recording; end -1 and piped recordings" \
    || fail "segment rows differ from the recording's"

# --- unreadable entries: all listed, or left out with --skip-bad --------------------------------------
printf 's4 rec1 1.5 9.0\ns5 rec3 0 1\n' >>segments
printf 'rec3 false |\n' >>rec.scp
printf 's4 b\ns5 b\n' >>seg.utt2spk
P="$SPKDDP prepare --wav-scp rec.scp --segments segments --utt2spk seg.utt2spk --progress 0"
run 2 $P --out bad.h5 >/dev/null 2>bad.err; rc=$?
[ $rc = 3 ] && grep -q "^segments:4: utterance 's4': .*ends after the recording" bad.err \
    && grep -q "^segments:5: utterance 's5': 'false |': the command exited with status 1" bad.err \
    && grep -q "spkddp: error: 2 of 5 entries of segments cannot be read" bad.err && [ ! -e bad.h5 ] && [ ! -e bad.h5.tmp ] \
    && echo "ok  [3] both unreadable entries listed (file:line, reason), no output" || fail "bad entries: rc $rc: $(cat bad.err)"
run 2 $P --out skip.h5 --skip-bad >skip.log 2>&1 || fail "--skip-bad: $(cat skip.log)"
[ "$(wc -l <skip.h5.bad)" = 2 ] && grep -q "^segments:5:" skip.h5.bad && $SPKDDP inspect skip.h5 | grep -q "utterances    3$" \
    && echo "ok  --skip-bad: 3 utterances written, the 2 others listed in skip.h5.bad" || fail "--skip-bad: $(cat skip.log skip.h5.bad)"
# A later run into the same --out with nothing to skip leaves no list of another dataset's entries.
head -3 segments >good.segments && head -3 seg.utt2spk >good.utt2spk
run 2 $SPKDDP prepare --wav-scp rec.scp --segments good.segments --utt2spk good.utt2spk --progress 0 --out skip.h5 \
    --skip-bad >skip2.log 2>&1 && [ ! -e skip.h5.bad ] && $SPKDDP inspect skip.h5 | grep -q "utterances    3$" \
    && echo "ok  a clean rerun into skip.h5 removes the older skip.h5.bad" || fail "clean rerun: $(cat skip2.log; ls skip.h5*)"

# --- memory: peak RSS flat when the corpus doubles (the rows never all sit in memory) -----------------
long=long.wav
ff -f lavfi -i "sine=frequency=300:sample_rate=16000:duration=60" -c:a pcm_s16le "$long"
for n in 10 20; do  # 10 or 20 minutes of audio: 19 or 38 MB of features
    for i in $(seq "$n"); do echo "u$i $long"; done >mem$n.scp
    for i in $(seq "$n"); do echo "u$i s"; done >mem$n.utt2spk
    run 1 $SPKDDP prepare --wav-scp mem$n.scp --utt2spk mem$n.utt2spk --out mem$n.h5 --buffer-mb 4 --progress 0 >mem$n.log 2>&1 \
        || fail "prepare mem$n: $(cat mem$n.log)"
done
r1=$(sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p' mem10.log)
r2=$(sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p' mem20.log)
[ -n "$r1" ] && [ -n "$r2" ] && awk -v a="$r1" -v b="$r2" 'BEGIN { exit !(b - a < 6) }' && echo "ok  peak RSS $r1 MiB (10 min of audio) -> $r2 MiB (20 min; 19 MB more features)" \
    || fail "peak RSS grows with the corpus: $r1 -> $r2 MiB"
finish
