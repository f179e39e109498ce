#include "io/audio/audio_decode.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int audio_fail(char *err, size_t cap, int code, const char *fmt, ...) {
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return code;
}

int64_t audio_take_channel(const float *inter, int64_t frames, int channels, int channel, float *mono) {
    for (int64_t i = 0; i < frames; i++) {
        float v;
        if (channel >= 0) {
            v = inter[i * channels + channel];
        } else {
            double s = 0;
            for (int c = 0; c < channels; c++) s += inter[i * channels + c];
            v = (float)(s / channels);
        }
        if (!(fabsf(v) <= AUDIO_MAX_SAMPLE)) return i;  // NaN fails the comparison
        mono[i] = v;
    }
    return -1;
}

void audio_free(audio_t *a) {
    if (!a) return;
    free(a->samples);
    memset(a, 0, sizeof *a);
}

int64_t audio_resampled_length(int64_t n, int in_rate, int out_rate) {
    return in_rate == out_rate ? n : llround((double)n * out_rate / in_rate);
}
