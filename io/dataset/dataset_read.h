// Collective reads of frame segments of a dataset's streams through MPI-IO (io/dataset/dataset.h
// opens the file and describes the streams).
#pragma once
#include "io/dataset/dataset.h"

// Collective: every rank calls it the same number of times, with n >= 0 segments. Writes
// the rows of each segment one after another into out ((sum of counts), dim) of the
// stream's type (float, or int16 for /audio). Frames that are NaN or Inf stop the job with
// the utterance named.
void dataset_read(dataset_t *ds, const stream_t *s, int n, const segment_t *segs, void *out);
