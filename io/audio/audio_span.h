// The samples of one utterance of a Kaldi data directory: a wav.scp source (path or
// `cmd |`), whole or cut to a segments span. The last recording decoded is kept, so the
// segments of one recording (consecutive in a sorted segments file) decode it once.
#pragma once
#include "io/audio/audio.h"
#include "io/audio/kaldi_data.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *source;  // the recording held (NULL: none)
    int rate;      // the rate it was read at (0: its own)
    int channel;
    audio_t a;
    int rc;  // audio_status of that read
    char err[1024];
} audio_span_reader_t;

void audio_span_init(audio_span_reader_t *r, int channel);
void audio_span_free(audio_span_reader_t *r);
// Samples of the span at `rate` (> 0): *x points into the reader (valid until the next
// call), *n samples. Segments follow Kaldi's extract-segments: samples [start r, end r)
// (truncated), an end up to 0.5 s past the recording cut to its end, further is an error.
// Returns an audio_status with one sentence in err.
int audio_span_read(audio_span_reader_t *r, const kaldi_span_t *sp, int rate, const float **x, int64_t *n, char *err,
                    size_t cap);
// The number of samples audio_span_read gives at `rate`, from the recording decoded at its
// own rate (no resampling: io/audio/audio.h predicts the resampled length).
int audio_span_length(audio_span_reader_t *r, const kaldi_span_t *sp, int rate, int64_t *n, char *err, size_t cap);
