#!/usr/bin/env bash
# Turns a metrics file (JSON lines from spkddp train --metrics) into a PNG with four panels:
# loss, accuracy, verification EER, throughput, by epoch.
#   tools/plot_metrics.sh metrics.jsonl [out.png]
# Needs gnuplot (Debian: gnuplot-nox).
set -euo pipefail
in=$1
out=${2:-${in%.*}.png}
command -v gnuplot >/dev/null || { echo "plot_metrics: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 2; }
[ -s "$in" ] || { echo "plot_metrics: $in is missing or empty" >&2; exit 2; }
tab=$(mktemp)
trap 'rm -f "$tab"' EXIT
# One row per epoch: epoch loss accuracy val_loss val_accuracy val_eer samples_per_s ("NaN" when absent).
field() { sed -nE "s/.*\"$1\": ([-0-9.eE+]+|null).*/\1/p" <<<"$2" | sed 's/null/NaN/'; }
while IFS= read -r line; do
    row=""
    for k in epoch loss accuracy val_loss val_accuracy val_eer samples_per_s; do
        v=$(field "$k" "$line")
        row="$row ${v:-NaN}"
    done
    echo "$row"
done <"$in" >"$tab"
gnuplot 2> >(grep -v "no valid points" >&2) <<GP
set terminal pngcairo size 1200,800 noenhanced
set output "$out"
set datafile missing "NaN"
set multiplot layout 2,2 title "$in"
set grid
set xlabel "epoch"
set title "loss"
plot "$tab" using 1:2 with linespoints title "train", "" using 1:4 with linespoints title "held-out"
set title "accuracy"
set yrange [0:1]
plot "$tab" using 1:3 with linespoints title "train", "" using 1:5 with linespoints title "held-out"
set title "verification EER (%)"
set yrange [0:*]
plot "$tab" using 1:(100*\$6) with linespoints title "held-out trials"
set title "throughput (samples/s)"
plot "$tab" using 1:7 with linespoints title "samples/s"
unset multiplot
GP
echo "wrote $out"
