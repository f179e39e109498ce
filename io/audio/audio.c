#include "io/audio/audio.h"

#include "io/audio/audio_ffmpeg.h"
#include "kernels/base/child_process.h"
#include "kernels/base/clock.h"

#include <errno.h>
#include <math.h>
#include <sndfile.h>
#include <soxr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int audio_can_decode(void) { return 1; }

int audio_resample(const float *x, int64_t n, int in_rate, int out_rate, float **out, int64_t *out_n, char *err,
                   size_t errcap) {
    *out = NULL;
    *out_n = 0;
    if (in_rate <= 0 || out_rate <= 0)
        return audio_fail(err, errcap, -1, "resampling needs positive rates (%d -> %d)", in_rate, out_rate);
    // libsoxr's one-shot call flushes the filter and returns round(n * out / in) samples;
    // leave room for a few more.
    double ratio = (double)out_rate / (double)in_rate;
    size_t cap = (size_t)ceil((double)n * ratio) + 16;
    float *y = malloc(cap * sizeof(float));
    if (!y) return audio_fail(err, errcap, -1, "out of memory resampling %lld samples", (long long)n);
    soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
    soxr_runtime_spec_t rt = soxr_runtime_spec(1);
    size_t idone = 0, odone = 0;
    soxr_error_t e =
        soxr_oneshot((double)in_rate, (double)out_rate, 1, x, (size_t)n, &idone, y, cap, &odone, &io, &q, &rt);
    if (e) {
        free(y);
        return audio_fail(err, errcap, -1, "libsoxr failed resampling %d Hz -> %d Hz: %s", in_rate, out_rate, e);
    }
    *out = y;
    *out_n = (int64_t)odone;
    return 0;
}

// Decodes an open libsndfile handle to the end, whatever the header claims (truncated files
// and streams of unknown length both end where the data ends): one channel at the file's rate.
static int decode_sndfile(SNDFILE *sf, const SF_INFO *info, const char *name, int channel, audio_t *a, char *err,
                          size_t errcap) {
    if (info->channels < 1 || info->samplerate <= 0)
        return audio_fail(err, errcap, AUDIO_ERR_OPEN, "%s: the audio header declares %d channels at %d Hz", name,
                          info->channels, info->samplerate);
    if (channel >= info->channels)
        return audio_fail(err, errcap, AUDIO_ERR_CHANNEL, "%s: channel %d asked for, but the file has %d channel%s",
                          name, channel, info->channels, info->channels == 1 ? "" : "s");
    const int C = info->channels;
    const sf_count_t block = 65536;
    int64_t cap = info->frames > 0 && info->frames < ((int64_t)1 << 40) ? info->frames : block, n = 0;
    float *inter = malloc((size_t)block * (size_t)C * sizeof(float)),
          *mono = malloc((size_t)(cap > 0 ? cap : 1) * sizeof(float));
    int rc = AUDIO_OK;
    if (!inter || !mono) {
        rc = audio_fail(err, errcap, AUDIO_ERR_MEMORY, "%s: out of memory decoding %lld frames", name, (long long)cap);
        goto done;
    }
    for (;;) {
        sf_count_t got = sf_readf_float(sf, inter, block);
        if (got <= 0) break;
        if (n + got > cap) {
            int64_t ncap = cap * 2 > n + got ? cap * 2 : n + got;
            float *m = realloc(mono, (size_t)ncap * sizeof(float));
            if (!m) {
                rc = audio_fail(err, errcap, AUDIO_ERR_MEMORY, "%s: out of memory decoding %lld frames", name,
                                (long long)ncap);
                goto done;
            }
            mono = m;
            cap = ncap;
        }
        int64_t bad = audio_take_channel(inter, got, C, channel, mono + n);
        if (bad >= 0) {
            rc = audio_fail(err, errcap, AUDIO_ERR_SAMPLES, "%s: sample %lld " AUDIO_BAD_SAMPLE, name,
                            (long long)(n + bad));
            goto done;
        }
        n += got;
    }
    if (sf_error(sf) != SF_ERR_NO_ERROR) {
        rc = audio_fail(err, errcap, AUDIO_ERR_READ, "%s: decoding failed after %lld frames (libsndfile: %s)", name,
                        (long long)n, sf_strerror(sf));
        goto done;
    }
    if (n == 0) {
        rc = audio_fail(err, errcap, AUDIO_ERR_EMPTY, "%s: the audio file holds no samples (zero length)", name);
        goto done;
    }
    a->samples = mono;
    a->n = a->file_frames = n;
    a->rate = a->file_rate = info->samplerate;
    a->channels = C;
    mono = NULL;
done:
    free(inter);
    free(mono);
    return rc;
}

// Native-rate samples -> target_rate (0: keep the file's rate).
static int to_rate(audio_t *a, int target_rate, const char *name, char *err, size_t errcap) {
    if (target_rate == 0 || a->file_rate == target_rate) return AUDIO_OK;
    float *y;
    int64_t m;
    char why[512];
    if (audio_resample(a->samples, a->n, a->file_rate, target_rate, &y, &m, why, sizeof why) != 0) {
        audio_free(a);
        return audio_fail(err, errcap, AUDIO_ERR_RESAMPLE, "%s: %s", name, why);
    }
    free(a->samples);
    a->samples = y;
    a->rate = target_rate;
    if (m == 0) {
        int64_t n = a->n;
        int r = a->file_rate;
        audio_free(a);
        return audio_fail(err, errcap, AUDIO_ERR_EMPTY, "%s: %lld samples at %d Hz leave no samples at %d Hz", name,
                          (long long)n, r, target_rate);
    }
    a->n = m;
    return AUDIO_OK;
}

// A WAV whose data chunk declares more bytes than the file holds was cut short (a copy that
// stopped, a full disk); libsndfile reads what is there without a word. Returns 1 and the two
// sizes when so; 0 otherwise, and for the sizes streaming writers leave (0 or 0xFFFFFFFF).
static int wav_cut_short(const char *path, int64_t file_size, int64_t *declared, int64_t *present) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char h[12];
    int cut = 0;
    if (fread(h, 1, 12, f) == 12 && memcmp(h, "RIFF", 4) == 0 && memcmp(h + 8, "WAVE", 4) == 0) {
        for (int chunk = 0; chunk < 64; chunk++) {
            unsigned char c[8];
            if (fread(c, 1, 8, f) != 8) break;
            const uint32_t size = (uint32_t)c[4] | (uint32_t)c[5] << 8 | (uint32_t)c[6] << 16 | (uint32_t)c[7] << 24;
            if (memcmp(c, "data", 4) == 0) {
                *declared = size;
                *present = file_size - (int64_t)ftell(f);
                cut = size != 0 && size != 0xFFFFFFFFu && *declared > *present;
                break;
            }
            if (fseek(f, (long)size + (long)(size & 1), SEEK_CUR) != 0) break;
        }
    }
    fclose(f);
    return cut;
}

int audio_read(const char *path, int target_rate, int channel, audio_t *a, char *err, size_t errcap) {
    memset(a, 0, sizeof *a);
    if (target_rate < 0)
        return audio_fail(err, errcap, AUDIO_ERR_ARG, "%s: sample rate %d asked for is negative", path, target_rate);
    struct stat st;
    if (stat(path, &st) != 0)
        return audio_fail(err, errcap, AUDIO_ERR_OPEN, "%s: cannot open the audio file (%s)", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return audio_fail(err, errcap, AUDIO_ERR_OPEN, "%s: is a directory, not an audio file", path);
    // A FIFO or a device would be read with no end in sight; a stream belongs in a 'COMMAND |'
    // entry, which has a deadline.
    if (!S_ISREG(st.st_mode))
        return audio_fail(err, errcap, AUDIO_ERR_OPEN,
                          "%s: is not a regular file (a FIFO or a device); give a stream as 'cat %s |'", path, path);
    if (st.st_size == 0) return audio_fail(err, errcap, AUDIO_ERR_EMPTY, "%s: the audio file is empty (0 bytes)", path);
    SF_INFO info;
    memset(&info, 0, sizeof info);
    SNDFILE *sf = sf_open(path, SFM_READ, &info);
    int rc;
    const int wav =
        (info.format & SF_FORMAT_TYPEMASK) == SF_FORMAT_WAV || (info.format & SF_FORMAT_TYPEMASK) == SF_FORMAT_WAVEX;
    int64_t declared = 0, present = 0;
    if (sf && wav && wav_cut_short(path, (int64_t)st.st_size, &declared, &present)) {
        sf_close(sf);
        return audio_fail(
            err, errcap, AUDIO_ERR_READ,
            "%s: the file is cut short: its header declares %lld bytes of samples, it holds %lld (%.0f%%)", path,
            (long long)declared, (long long)present, 100.0 * (double)present / (double)declared);
    }
    if (sf) {
        rc = decode_sndfile(sf, &info, path, channel, a, err, errcap);
        sf_close(sf);
    } else {
        // What libsndfile does not know (m4a/AAC, ...) goes to FFmpeg.
        char why[256], ff[512];
        snprintf(why, sizeof why, "%s", sf_strerror(NULL));
        rc = audio_ffmpeg_read(path, channel, a, ff, sizeof ff);
        if (rc == AUDIO_ERR_OPEN)
            return audio_fail(err, errcap, AUDIO_ERR_OPEN,
                              "%s: cannot decode the audio file (libsndfile: %s; FFmpeg: %s)", path, why, ff);
        if (rc != AUDIO_OK) return audio_fail(err, errcap, rc, "%s", ff);
    }
    return rc == AUDIO_OK ? to_rate(a, target_rate, path, err, errcap) : rc;
}

// libsndfile reading from memory (a command's output).
typedef struct {
    const unsigned char *data;
    sf_count_t len, pos;
} membuf_t;
static sf_count_t mem_len(void *u) { return ((membuf_t *)u)->len; }
static sf_count_t mem_seek(sf_count_t off, int whence, void *u) {
    membuf_t *m = u;
    sf_count_t p = whence == SEEK_SET ? off : whence == SEEK_CUR ? m->pos + off : m->len + off;
    if (p < 0 || p > m->len) return -1;
    return m->pos = p;
}
static sf_count_t mem_read(void *ptr, sf_count_t count, void *u) {
    membuf_t *m = u;
    if (count > m->len - m->pos) count = m->len - m->pos;
    memcpy(ptr, m->data + m->pos, (size_t)count);
    m->pos += count;
    return count;
}
static sf_count_t mem_write(const void *ptr, sf_count_t count, void *u) {
    (void)ptr, (void)count, (void)u;
    return 0;
}
static sf_count_t mem_tell(void *u) { return ((membuf_t *)u)->pos; }

// Limits on a command's output (Kaldi's `cmd |` entries): set by prepare from its options.
static double g_pipe_timeout = 300.0;
static size_t g_pipe_max = (size_t)1024 << 20;

void audio_set_command_limits(double timeout_s, size_t max_bytes) {
    g_pipe_timeout = timeout_s;
    g_pipe_max = max_bytes;
}

// Runs `cmd` through the shell and takes its whole stdout, within the limits above.
static int run_command(const char *cmd, unsigned char **out, size_t *len, char *err, size_t errcap) {
    child_t c;
    char why[400];
    if (child_start(&c, cmd, 'r', why, sizeof why) != 0)
        return audio_fail(err, errcap, AUDIO_ERR_OPEN, "'%s |': %s", cmd, why);
    const double t0 = spk_seconds();
    if (child_read_all(&c, g_pipe_timeout, g_pipe_max, out, len, why, sizeof why) != 0)
        return audio_fail(err, errcap, AUDIO_ERR_OPEN, "'%s |': %s", cmd, why);
    const double left = g_pipe_timeout - (spk_seconds() - t0);
    int status;
    if (child_finish(&c, left > 1.0 ? left : 1.0, &status, why, sizeof why) != 0) {
        free(*out);
        *out = NULL;
        return audio_fail(err, errcap, AUDIO_ERR_OPEN, "'%s |': %s", cmd, why);
    }
    if (*len == 0) {
        free(*out);
        *out = NULL;
        return audio_fail(err, errcap, AUDIO_ERR_EMPTY, "'%s |': the command wrote nothing", cmd);
    }
    return AUDIO_OK;
}

int audio_read_command(const char *cmd, int target_rate, int channel, audio_t *a, char *err, size_t errcap) {
    memset(a, 0, sizeof *a);
    unsigned char *data;
    size_t len;
    int rc = run_command(cmd, &data, &len, err, errcap);
    if (rc != AUDIO_OK) return rc;
    char name[600];
    snprintf(name, sizeof name, "'%.500s |'", cmd);
    membuf_t m = {data, (sf_count_t)len, 0};
    SF_VIRTUAL_IO vio = {mem_len, mem_seek, mem_read, mem_write, mem_tell};
    SF_INFO info;
    memset(&info, 0, sizeof info);
    SNDFILE *sf = sf_open_virtual(&vio, SFM_READ, &info, &m);
    if (!sf) {
        rc = audio_fail(err, errcap, AUDIO_ERR_OPEN, "%s: the output is not a WAV stream (libsndfile: %s)", name,
                        sf_strerror(NULL));
    } else {
        rc = decode_sndfile(sf, &info, name, channel, a, err, errcap);
        sf_close(sf);
    }
    free(data);
    return rc == AUDIO_OK ? to_rate(a, target_rate, name, err, errcap) : rc;
}

void audio_libraries(char *out, size_t cap) {
    char ff[160];
    audio_ffmpeg_library(ff, sizeof ff);
    snprintf(out, cap, "%s; %s; %s", sf_version_string(), soxr_version(), ff);
}
