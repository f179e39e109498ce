#include "io/audio/audio_ffmpeg.h"

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/log.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    AVFormatContext *fmt;
    AVCodecContext *dec;
    SwrContext *swr;
    AVPacket *pkt;
    AVFrame *frame;
    float *inter;   // (inter_cap,) one frame converted, interleaved
    int inter_cap;  // frames
    float *mono;    // (cap,)
    int64_t n, cap;
    int channels, channel;
    int stream;  // index of the audio stream decoded
} ff_t;

// FFmpeg's own messages go into the failure's sentence, not to stderr ahead of it (where, at
// several ranks, they interleave with ours): the last error of this thread's decode is kept.
static _Thread_local char ff_said[256];

static void ff_log(void *avcl, int level, const char *fmt, va_list vl) {
    if (level > AV_LOG_ERROR) return;
    int prefix = 0;  // without FFmpeg's '[mov,mp4,... @ 0x...]'
    char line[sizeof ff_said];
    av_log_format_line2(avcl, level, fmt, vl, line, sizeof line, &prefix);
    const size_t n = strcspn(line, "\n");
    if (n) snprintf(ff_said, sizeof ff_said, "%.*s", (int)n, line);
}

static void ff_close(ff_t *f) {
    av_frame_free(&f->frame);
    av_packet_free(&f->pkt);
    swr_free(&f->swr);
    avcodec_free_context(&f->dec);
    avformat_close_input(&f->fmt);
    free(f->inter);
    free(f->mono);
}

static int ff_error(char *err, size_t cap, int code, const char *what, int averr) {
    char why[AV_ERROR_MAX_STRING_SIZE] = "";
    av_strerror(averr, why, sizeof why);
    return audio_fail(err, cap, code, "%s (%s)", what, why);
}

static int ff_open(ff_t *f, const char *path, char *err, size_t cap) {
    int rc = avformat_open_input(&f->fmt, path, NULL, NULL);
    if (rc < 0) return ff_error(err, cap, AUDIO_ERR_OPEN, "not a container FFmpeg knows", rc);
    if ((rc = avformat_find_stream_info(f->fmt, NULL)) < 0)
        return ff_error(err, cap, AUDIO_ERR_OPEN, "no stream information", rc);
    const AVCodec *codec = NULL;
    int s = av_find_best_stream(f->fmt, AVMEDIA_TYPE_AUDIO, -1, -1, &codec, 0);
    if (s < 0) return ff_error(err, cap, AUDIO_ERR_OPEN, "no audio stream FFmpeg can decode", s);
    f->stream = s;
    f->dec = avcodec_alloc_context3(codec);
    if (!f->dec) return audio_fail(err, cap, AUDIO_ERR_MEMORY, "out of memory for a decoder");
    if ((rc = avcodec_parameters_to_context(f->dec, f->fmt->streams[s]->codecpar)) < 0 ||
        (rc = avcodec_open2(f->dec, codec, NULL)) < 0)
        return ff_error(err, cap, AUDIO_ERR_OPEN, "cannot open the decoder", rc);
    f->channels = f->dec->ch_layout.nb_channels;
    if (f->channels < 1 || f->dec->sample_rate <= 0)
        return audio_fail(err, cap, AUDIO_ERR_OPEN, "the stream declares %d channels at %d Hz", f->channels,
                          f->dec->sample_rate);
    // Interleaved float at the stream's own rate and channels; resampling stays with libsoxr.
    rc = swr_alloc_set_opts2(&f->swr, &f->dec->ch_layout, AV_SAMPLE_FMT_FLT, f->dec->sample_rate, &f->dec->ch_layout,
                             f->dec->sample_fmt, f->dec->sample_rate, 0, NULL);
    if (rc < 0 || (rc = swr_init(f->swr)) < 0)
        return ff_error(err, cap, AUDIO_ERR_OPEN, "cannot set up the sample conversion", rc);
    f->pkt = av_packet_alloc();
    f->frame = av_frame_alloc();
    if (!f->pkt || !f->frame) return audio_fail(err, cap, AUDIO_ERR_MEMORY, "out of memory for packets");
    return AUDIO_OK;
}

// Converts one decoded frame and appends its channel to f->mono.
static int ff_take(ff_t *f, const char *path, char *err, size_t cap) {
    const int want = f->frame->nb_samples;
    if (want > f->inter_cap) {
        free(f->inter);
        f->inter_cap = want;
        f->inter = malloc((size_t)want * (size_t)f->channels * sizeof(float));
        if (!f->inter) return audio_fail(err, cap, AUDIO_ERR_MEMORY, "%s: out of memory decoding", path);
    }
    uint8_t *out = (uint8_t *)f->inter;
    int got = swr_convert(f->swr, &out, want, (const uint8_t **)f->frame->extended_data, want);
    if (got < 0) return ff_error(err, cap, AUDIO_ERR_READ, "sample conversion failed", got);
    if (f->n + got > f->cap) {
        int64_t ncap = f->cap * 2 > f->n + got ? f->cap * 2 : f->n + got + 65536;
        float *m = realloc(f->mono, (size_t)ncap * sizeof(float));
        if (!m)
            return audio_fail(err, cap, AUDIO_ERR_MEMORY, "%s: out of memory decoding %lld samples", path,
                              (long long)ncap);
        f->mono = m;
        f->cap = ncap;
    }
    int64_t bad = audio_take_channel(f->inter, got, f->channels, f->channel, f->mono + f->n);
    if (bad >= 0)
        return audio_fail(err, cap, AUDIO_ERR_SAMPLES, "%s: sample %lld " AUDIO_BAD_SAMPLE, path,
                          (long long)(f->n + bad));
    f->n += got;
    return AUDIO_OK;
}

// Feeds a packet (NULL: flush) and takes every frame the decoder gives back.
static int ff_decode(ff_t *f, const AVPacket *pkt, const char *path, char *err, size_t cap) {
    int rc = avcodec_send_packet(f->dec, pkt);
    if (rc < 0 && rc != AVERROR_EOF) return ff_error(err, cap, AUDIO_ERR_READ, "decoding failed", rc);
    for (;;) {
        rc = avcodec_receive_frame(f->dec, f->frame);
        if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return AUDIO_OK;
        if (rc < 0) return ff_error(err, cap, AUDIO_ERR_READ, "decoding failed", rc);
        int t = ff_take(f, path, err, cap);
        av_frame_unref(f->frame);
        if (t != AUDIO_OK) return t;
    }
}

static int ff_read_all(const char *path, int channel, audio_t *a, char *err, size_t errcap) {
    memset(a, 0, sizeof *a);
    ff_t f;
    memset(&f, 0, sizeof f);
    f.channel = channel;
    int rc = ff_open(&f, path, err, errcap);
    if (rc != AUDIO_OK) {
        ff_close(&f);
        return rc;
    }
    if (channel >= f.channels) {
        rc = audio_fail(err, errcap, AUDIO_ERR_CHANNEL, "%s: channel %d asked for, but the file has %d channel%s", path,
                        channel, f.channels, f.channels == 1 ? "" : "s");
        ff_close(&f);
        return rc;
    }
    rc = AUDIO_OK;
    while (rc == AUDIO_OK && av_read_frame(f.fmt, f.pkt) >= 0) {
        if (f.pkt->stream_index == f.stream) rc = ff_decode(&f, f.pkt, path, err, errcap);
        av_packet_unref(f.pkt);
    }
    if (rc == AUDIO_OK) rc = ff_decode(&f, NULL, path, err, errcap);
    if (rc == AUDIO_OK && f.n == 0)
        rc = audio_fail(err, errcap, AUDIO_ERR_EMPTY, "%s: the audio file holds no samples", path);
    if (rc == AUDIO_OK) {
        a->samples = f.mono;
        f.mono = NULL;
        a->n = a->file_frames = f.n;
        a->rate = a->file_rate = f.dec->sample_rate;
        a->channels = f.channels;
    } else if (rc == AUDIO_ERR_READ) {
        char why[512];
        snprintf(why, sizeof why, "%s", err);
        rc = audio_fail(err, errcap, AUDIO_ERR_READ, "%s: %s after %lld samples (FFmpeg)", path, why, (long long)f.n);
    }
    ff_close(&f);
    return rc;
}

int audio_ffmpeg_read(const char *path, int channel, audio_t *a, char *err, size_t errcap) {
    av_log_set_callback(ff_log);
    ff_said[0] = 0;
    const int rc = ff_read_all(path, channel, a, err, errcap);
    if (rc != AUDIO_OK && ff_said[0]) {
        const size_t n = strlen(err);
        snprintf(err + n, errcap - n, " [FFmpeg: %s]", ff_said);
    }
    return rc;
}

void audio_ffmpeg_library(char *out, size_t cap) {
    const unsigned f = avformat_version(), c = avcodec_version();
    snprintf(out, cap, "FFmpeg %s (libavformat %u.%u.%u, libavcodec %u.%u.%u)", av_version_info(), f >> 16,
             f >> 8 & 0xff, f & 0xff, c >> 16, c >> 8 & 0xff, c & 0xff);
}
