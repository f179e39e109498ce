// DET plots: miss against false-alarm probability on normal-deviate axes (the NIST DET plot),
// one curve per score set, drawn by gnuplot (Debian gnuplot-nox) and written with the curve's
// points as a table beside the image. Rank 0 only.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;       // the curve's title ("cosine", "as-norm")
    const double *pm, *pf;  // (points,) a DET curve (score_det_curve)
    int64_t points;
} det_series_t;

// The table's path for an image path: "det.png" -> "det.txt" (other names get ".txt" added).
void det_table_path(const char *png, char *out, size_t cap);
// Writes the corners of every curve to `table` (the points where it turns; the staircase is
// unchanged) as gnuplot blocks "# name" then "pfa pmiss" lines, and draws them into `png`.
// Both files appear whole or not at all. Returns 0, or -1 with a sentence in err (gnuplot
// missing or failing, a file that cannot be written).
int det_plot(const char *png, const char *title, const det_series_t *series, int n, char *err, size_t cap);
