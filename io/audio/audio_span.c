#include "io/audio/audio_span.h"

#include <stdlib.h>
#include <string.h>

#define MAX_OVERSHOOT_S 0.5  // extract-segments' --max-overshoot default

void audio_span_init(audio_span_reader_t *r, int channel) {
    memset(r, 0, sizeof *r);
    r->channel = channel;
}

void audio_span_free(audio_span_reader_t *r) {
    free(r->source);
    audio_free(&r->a);
    memset(r, 0, sizeof *r);
}

// The recording of sp at `rate` (0: its own), decoded unless it is the one held.
static int load(audio_span_reader_t *r, const kaldi_span_t *sp, int rate) {
    if (r->source && r->rate == rate && strcmp(r->source, sp->source) == 0) return r->rc;
    free(r->source);
    audio_free(&r->a);
    r->source = strdup(sp->source);
    r->rate = rate;
    char cmd[4096];
    if (kaldi_pipe_command(sp->source, cmd, sizeof cmd))
        r->rc = audio_read_command(cmd, rate, r->channel, &r->a, r->err, sizeof r->err);
    else
        r->rc = audio_read(sp->source, rate, r->channel, &r->a, r->err, sizeof r->err);
    return r->rc;
}

// Samples [*s0, *s1) of a recording of `total` samples at `rate`.
static int cut(const kaldi_span_t *sp, int64_t total, int rate, int64_t *s0, int64_t *s1, char *err, size_t cap) {
    *s0 = 0;
    *s1 = total;
    if (sp->end < 0 && sp->start == 0) return AUDIO_OK;
    *s0 = (int64_t)(sp->start * rate);
    if (sp->end >= 0) *s1 = (int64_t)(sp->end * rate);
    if (*s1 > total) {
        if ((double)(*s1 - total) > MAX_OVERSHOOT_S * rate)
            return audio_fail(err, cap, AUDIO_ERR_READ, "%s: the segment %g..%g s ends after the recording (%.3f s)",
                              sp->source, sp->start, sp->end, (double)total / rate);
        *s1 = total;
    }
    if (*s0 >= *s1)
        return audio_fail(err, cap, AUDIO_ERR_EMPTY,
                          "%s: the segment %g..%g s holds no samples (the recording has %.3f s)", sp->source, sp->start,
                          sp->end, (double)total / rate);
    return AUDIO_OK;
}

int audio_span_read(audio_span_reader_t *r, const kaldi_span_t *sp, int rate, const float **x, int64_t *n, char *err,
                    size_t cap) {
    *x = NULL;
    *n = 0;
    if (load(r, sp, rate) != AUDIO_OK) return audio_fail(err, cap, r->rc, "%s", r->err);
    int64_t s0, s1;
    int rc = cut(sp, r->a.n, rate, &s0, &s1, err, cap);
    if (rc != AUDIO_OK) return rc;
    *x = r->a.samples + s0;
    *n = s1 - s0;
    return AUDIO_OK;
}

int audio_span_length(audio_span_reader_t *r, const kaldi_span_t *sp, int rate, int64_t *n, char *err, size_t cap) {
    *n = 0;
    if (load(r, sp, 0) != AUDIO_OK) return audio_fail(err, cap, r->rc, "%s", r->err);
    int64_t s0, s1, total = audio_resampled_length(r->a.n, r->a.file_rate, rate);
    int rc = cut(sp, total, rate, &s0, &s1, err, cap);
    if (rc == AUDIO_OK) *n = s1 - s0;
    return rc;
}
