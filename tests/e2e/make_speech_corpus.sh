#!/usr/bin/env bash
# Synthetic multi-speaker speech corpus for tests: 16 kHz 16-bit mono WAV files plus Kaldi
# wav.scp and utt2spk. Needs only bash and awk (written for Debian's mawk; any awk that
# prints bytes 0..255 with printf "%c" under LC_ALL=C works).
#
#   usage: make_speech_corpus.sh OUTDIR [SPEAKERS=10] [UTTS_PER_SPEAKER=6] [SEED=1] [FIRST_UTT=1]
#
# Writes OUTDIR/wav/spkNN-uttMM.wav, OUTDIR/wav.scp (absolute paths) and OUTDIR/utt2spk,
# sorted, with utterance ids prefixed by the speaker id as Kaldi expects. Speakers depend
# only on SEED, utterances on (SEED, speaker, utterance number): FIRST_UTT=7 gives held-out
# utterances (utt07, utt08, ...) of the same speakers.
#
# The voice model (source-filter, everything drawn from a Park-Miller generator keyed on
# SEED, so a corpus is reproducible byte for byte):
#   speaker   mean f0 (85..250 Hz), jitter (0.5..2%), glottal tilt (source low-pass),
#             breathiness (aspiration noise), vocal-tract length (formant scale 0.85..1.15),
#             a personal offset of each of the 3 formants (+-8%) and bandwidth scale
#   phones    a shared inventory of 8 vowels (F1, F2, F3 targets) plus a fricative and
#             pauses; each utterance is a random string of 60..180 ms segments, formants
#             glide to each target (2 ms updates), f0 follows a slow intonation contour
#   source    glottal pulse train (jittered periods) through two one-pole low-passes, plus
#             aspiration noise, through 3 cascaded 2-pole formant resonators
#   session   random loudness (-18..-3 dB peak), channel tilt (first-order FIR, from
#             bright to dull) and background noise (-60..-35 dB), so loudness and
#             spectral slope do not give the speaker away
set -euo pipefail
out=${1:?usage: make_speech_corpus.sh OUTDIR [SPEAKERS] [UTTS_PER_SPEAKER] [SEED] [FIRST_UTT]}
speakers=${2:-10}
utts=${3:-6}
seed=${4:-1}
first=${5:-1}
jobs=${MAKE_SPEECH_JOBS:-2}  # awk processes (speakers are split between them)
mkdir -p "$out/wav"
dir=$(cd "$out" && pwd)

gen() {
LC_ALL=C awk -v dir="$dir" -v S="$speakers" -v U="$utts" -v seed="$seed" -v first="$first" -v part="$1" -v parts="$jobs" '
function rnd() { rng = (rng * 16807) % 2147483647; return rng / 2147483647 }
function uni(a, b) { return a + (b - a) * rnd() }
function noise1() { rng = (rng * 16807) % 2147483647; return rng / 620000000 - 1.7320508 }  # uniform, variance 1
function reseed(a, b, c,    i) {
    rng = (seed * 7919 + a * 104729 + b * 1299709 + c * 15485863) % 2147483646 + 1
    for (i = 0; i < 8; i++) rnd()
}
function le16(v) { printf "%c%c", v % 256, int(v / 256) % 256 > path }
function le32(v) { le16(v % 65536); le16(int(v / 65536)) }
# Resonator k: 2 poles at frequency f with bandwidth bw, unity gain at 0 Hz (as in the Klatt
# cascade synthesiser), so the peak rises about f / bw above the low-frequency level.
function tune(k, f, bw,    r) {
    if (f > 7600) f = 7600
    r = exp(-PI * bw / FS)
    b1[k] = 2 * r * cos(2 * PI * f / FS); b2[k] = r * r; g[k] = 1 - b1[k] + b2[k]
}
BEGIN {
    FS = 16000; PI = 3.14159265358979
    split("280 400 730 500 320 660 490 600", P1, " ")
    split("2250 2000 1100 850 800 1700 1350 1200", P2, " ")
    split("2900 2600 2450 2500 2300 2400 1700 2500", P3, " ")
    for (s = 1; s <= S; s++) {
        if ((s - 1) % parts != part) continue
        reseed(s, 0, 1)
        f0s = (rnd() < 0.5) ? uni(85, 140) : uni(160, 250)
        jit = uni(0.005, 0.02); tilt = uni(0.5, 0.75); breath = uni(0.02, 0.12)
        vtl = uni(0.85, 1.15); bws = uni(0.8, 1.3)
        d1 = uni(-0.08, 0.08); d2 = uni(-0.08, 0.08); d3 = uni(-0.08, 0.08)
        for (u = first; u < first + U; u++) {
            reseed(s, u, 2)
            n = int(uni(1.0, 2.0) * FS)
            gain = exp(log(10) / 20 * uni(-18, -3))
            ctilt = uni(-0.6, 0.6)                       # channel: y = x + c x[-1]
            noise = exp(log(10) / 20 * uni(-60, -35))
            into = uni(0, 2 * PI); irate = uni(0.8, 2.0)  # intonation contour
            # state
            for (k = 1; k <= 3; k++) { y1[k] = 0; y2[k] = 0 }
            F1 = P1[1] * vtl; F2 = P2[1] * vtl; F3 = P3[1] * vtl; T1 = F1; T2 = F2; T3 = F3; fshift = 0
            lp1 = 0; lp2 = 0; rprev = 0; ph = 0; per = FS / f0s; amp = 0; xprev = 0
            seg_end = 0; peak = 1e-9
            for (t = 0; t < n; t++) {
                if (t >= seg_end) {                       # next phone
                    seg_end = t + int(uni(0.06, 0.18) * FS)
                    r = rnd()
                    if (r < 0.72) { kind = 1; ph_i = 1 + int(rnd() * 8); tamp = uni(0.6, 1.0); fshift = uni(-0.08, 0.08) }
                    else if (r < 0.87) { kind = 2; tamp = uni(0.15, 0.35) }
                    else { kind = 0; tamp = 0 }
                    if (kind == 1) {
                        T1 = P1[ph_i] * vtl * (1 + d1); T2 = P2[ph_i] * vtl * (1 + d2); T3 = P3[ph_i] * vtl * (1 + d3)
                    }
                }
                if (t % 32 == 0) {                        # formant glide, 2 ms steps
                    F1 += 0.15 * (T1 - F1); F2 += 0.15 * (T2 - F2); F3 += 0.15 * (T3 - F3)
                    if (kind == 2) { tune(1, 4300 * vtl, 900); tune(2, 5600 * vtl, 1200); tune(3, 3000 * vtl, 700) }
                    else { tune(1, F1, 80 * bws); tune(2, F2, 100 * bws); tune(3, F3, 140 * bws) }
                    f0 = f0s * (1 + 0.12 * sin(into + irate * 2 * PI * t / FS)) * (1 + fshift)
                }
                amp += 0.004 * (tamp - amp)
                # source
                src = 0
                if (kind == 1) {
                    ph += 1
                    if (ph >= per) { ph -= per; per = FS / (f0 * (1 + jit * noise1())); src = 1 }
                    lp1 = tilt * lp1 + (1 - tilt) * src; lp2 = tilt * lp2 + (1 - tilt) * lp1
                    x = 30 * lp2 + breath * noise1()
                } else {
                    lp1 *= tilt; lp2 = tilt * lp2 + (1 - tilt) * lp1
                    x = 30 * lp2 + (kind == 2 ? 0.06 * noise1() : 0)
                }
                x *= amp
                yk = g[1] * x + b1[1] * y1[1] - b2[1] * y2[1]; y2[1] = y1[1]; y1[1] = yk
                yk = g[2] * yk + b1[2] * y1[2] - b2[2] * y2[2]; y2[2] = y1[2]; y1[2] = yk
                yk = g[3] * yk + b1[3] * y1[3] - b2[3] * y2[3]; y2[3] = y1[3]; y1[3] = yk
                x = yk - 0.97 * rprev; rprev = yk                   # lip radiation: +6 dB/octave
                y = x + ctilt * xprev; xprev = x
                wave[t] = y
                if (y > peak) peak = y; else if (-y > peak) peak = -y
            }
            id = sprintf("spk%02d-utt%02d", s, u)
            path = dir "/wav/" id ".wav"
            printf "RIFF" > path; le32(36 + 2 * n); printf "WAVEfmt " > path
            le32(16); le16(1); le16(1); le32(FS); le32(2 * FS); le16(2); le16(16)
            printf "data" > path; le32(2 * n)
            sc = gain / peak
            for (t = 0; t < n; t++) {
                v = int(32767 * (wave[t] * sc + noise * noise1()) + 32768.5) - 32768
                if (v > 32767) v = 32767; else if (v < -32768) v = -32768
                if (v < 0) v += 65536
                printf "%c%c", v % 256, int(v / 256) > path
            }
            close(path)
            print id, path > (dir "/wav.scp." part)
            printf "%s spk%02d\n", id, s > (dir "/utt2spk." part)
        }
    }
}'
}
pids=()
for ((j = 0; j < jobs; j++)); do
    : >"$dir/wav.scp.$j"
    : >"$dir/utt2spk.$j"
    gen "$j" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for f in wav.scp utt2spk; do
    cat "$dir/$f".* | LC_ALL=C sort >"$dir/$f"
    rm -f "$dir/$f".*
done
