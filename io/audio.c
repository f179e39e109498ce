#include "io/audio.h"

#include <errno.h>
#include <math.h>
#include <sndfile.h>
#include <soxr.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int fail(char *err, size_t cap, int code, const char *fmt, ...) {
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return code;
}

void audio_free(audio_t *a) {
    if (!a) return;
    free(a->samples);
    memset(a, 0, sizeof *a);
}

int audio_resample(const float *x, int64_t n, int in_rate, int out_rate, float **out, int64_t *out_n, char *err,
                   size_t errcap) {
    *out = NULL;
    *out_n = 0;
    if (in_rate <= 0 || out_rate <= 0) return fail(err, errcap, -1, "resampling needs positive rates (%d -> %d)", in_rate, out_rate);
    // libsoxr's one-shot call flushes the filter and returns round(n * out / in) samples;
    // leave room for a few more.
    double ratio = (double)out_rate / (double)in_rate;
    size_t cap = (size_t)ceil((double)n * ratio) + 16;
    float *y = malloc(cap * sizeof(float));
    if (!y) return fail(err, errcap, -1, "out of memory resampling %lld samples", (long long)n);
    soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
    soxr_runtime_spec_t rt = soxr_runtime_spec(1);
    size_t idone = 0, odone = 0;
    soxr_error_t e = soxr_oneshot((double)in_rate, (double)out_rate, 1, x, (size_t)n, &idone, y, cap, &odone, &io, &q, &rt);
    if (e) {
        free(y);
        return fail(err, errcap, -1, "libsoxr failed resampling %d Hz -> %d Hz: %s", in_rate, out_rate, e);
    }
    *out = y;
    *out_n = (int64_t)odone;
    return 0;
}

int audio_read(const char *path, int target_rate, int channel, audio_t *a, char *err, size_t errcap) {
    memset(a, 0, sizeof *a);
    if (target_rate <= 0) return fail(err, errcap, AUDIO_ERR_ARG, "%s: sample rate %d asked for is not positive", path, target_rate);
    struct stat st;
    if (stat(path, &st) != 0)
        return fail(err, errcap, AUDIO_ERR_OPEN, "%s: cannot open the audio file (%s)", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return fail(err, errcap, AUDIO_ERR_OPEN, "%s: is a directory, not an audio file", path);
    if (S_ISREG(st.st_mode) && st.st_size == 0)
        return fail(err, errcap, AUDIO_ERR_EMPTY, "%s: the audio file is empty (0 bytes)", path);

    SF_INFO info;
    memset(&info, 0, sizeof info);
    SNDFILE *sf = sf_open(path, SFM_READ, &info);
    if (!sf)
        return fail(err, errcap, AUDIO_ERR_OPEN, "%s: cannot decode the audio file (libsndfile: %s)", path, sf_strerror(NULL));
    int rc = AUDIO_OK;
    float *inter = NULL, *mono = NULL;
    if (info.channels < 1 || info.samplerate <= 0) {
        rc = fail(err, errcap, AUDIO_ERR_OPEN, "%s: the audio header declares %d channels at %d Hz", path, info.channels,
                  info.samplerate);
        goto done;
    }
    if (channel >= info.channels) {
        rc = fail(err, errcap, AUDIO_ERR_CHANNEL, "%s: channel %d asked for, but the file has %d channel%s", path, channel,
                  info.channels, info.channels == 1 ? "" : "s");
        goto done;
    }
    // Decode in blocks until the end, whatever the header claims (truncated files and
    // streams with unknown length both end where the data ends).
    const int C = info.channels;
    const sf_count_t block = 65536;
    int64_t cap = info.frames > 0 && info.frames < ((int64_t)1 << 40) ? info.frames : block, n = 0;
    inter = malloc((size_t)block * (size_t)C * sizeof(float));
    mono = malloc((size_t)(cap > 0 ? cap : 1) * sizeof(float));
    if (!inter || !mono) {
        rc = fail(err, errcap, AUDIO_ERR_MEMORY, "%s: out of memory decoding %lld frames", path, (long long)cap);
        goto done;
    }
    for (;;) {
        sf_count_t got = sf_readf_float(sf, inter, block);
        if (got <= 0) break;
        if (n + got > cap) {
            int64_t ncap = cap * 2 > n + got ? cap * 2 : n + got;
            float *m = realloc(mono, (size_t)ncap * sizeof(float));
            if (!m) {
                rc = fail(err, errcap, AUDIO_ERR_MEMORY, "%s: out of memory decoding %lld frames", path, (long long)ncap);
                goto done;
            }
            mono = m;
            cap = ncap;
        }
        for (sf_count_t i = 0; i < got; i++) {
            float v;
            if (channel >= 0) {
                v = inter[i * C + channel];
            } else {
                double s = 0;
                for (int c = 0; c < C; c++) s += inter[i * C + c];
                v = (float)(s / C);
            }
            if (!isfinite(v)) {
                rc = fail(err, errcap, AUDIO_ERR_SAMPLES, "%s: sample %lld is NaN or Inf", path, (long long)(n + i));
                goto done;
            }
            mono[n + i] = v;
        }
        n += got;
    }
    if (sf_error(sf) != SF_ERR_NO_ERROR) {
        rc = fail(err, errcap, AUDIO_ERR_READ, "%s: decoding failed after %lld frames (libsndfile: %s)", path, (long long)n,
                  sf_strerror(sf));
        goto done;
    }
    if (n == 0) {
        rc = fail(err, errcap, AUDIO_ERR_EMPTY, "%s: the audio file holds no samples (zero length)", path);
        goto done;
    }
    a->file_rate = info.samplerate;
    a->channels = C;
    a->file_frames = n;
    a->rate = target_rate;
    if (info.samplerate == target_rate) {
        a->samples = mono;
        a->n = n;
        mono = NULL;
    } else {
        char why[512];
        if (audio_resample(mono, n, info.samplerate, target_rate, &a->samples, &a->n, why, sizeof why) != 0) {
            rc = fail(err, errcap, AUDIO_ERR_RESAMPLE, "%s: %s", path, why);
            memset(a, 0, sizeof *a);
            goto done;
        }
        if (a->n == 0) {
            rc = fail(err, errcap, AUDIO_ERR_EMPTY, "%s: %lld samples at %d Hz leave no samples at %d Hz", path, (long long)n,
                      info.samplerate, target_rate);
            audio_free(a);
            goto done;
        }
    }
done:
    free(inter);
    free(mono);
    sf_close(sf);
    return rc;
}
