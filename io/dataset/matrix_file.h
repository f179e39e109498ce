// Per-utterance feature matrices as practitioners keep them, for `prepare --visual-scp`: a NumPy
// .npy file of a 2-D float32 or float64 array (rows = frames, C order), or a Kaldi binary float or
// double matrix addressed as feats.scp does ("archive.ark:OFFSET", the offset just after the
// key; Kaldi's compressed matrices are refused with a sentence saying so). Values come back as
// float32, and NaN or Inf is refused with its row and column.
#pragma once
#include <stddef.h>
#include <stdint.h>

// Reads the matrix `spec` names into *data (malloc'ed; the caller frees), rows x cols. Returns 0,
// or -1 with one sentence in err naming the file and what is wrong.
int matrix_read(const char *spec, float **data, int64_t *rows, int64_t *cols, char *err, size_t cap);
