// Video frames at a fixed rate through FFmpeg's libraries (io/video/video_frames.h).
#include "io/video/video_frames.h"

#include "io/common/err_text.h"
#include "kernels/base/clock.h"

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/frame.h>
#include <libavutil/version.h>
#include <libswscale/swscale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *path;
    const video_spec_t *spec;
    video_frames_t *v;
    AVFormatContext *fmt;
    AVCodecContext *dec;
    struct SwsContext *sws;
    AVPacket *pkt;
    AVFrame *frame, *held;  // the picture decoded last, and the one on screen before it
    int stream;
    double tb, t0;         // the stream's time base and first presentation time, in seconds
    double held_end;       // when the held picture stops (its time plus its duration)
    double deadline;       // spk_seconds() past which the decode gives up
    int64_t last_emitted;  // the frame index whose pixels the held picture gave last (-1: none)
    err_text_t e;          // the file and where its sentence goes
} vdec_t;

#define fail(d, ...) err_text_fail(&(d)->e, -1, __VA_ARGS__)

static int fail_av(vdec_t *d, const char *what, int averr) {
    char why[AV_ERROR_MAX_STRING_SIZE] = "";
    av_strerror(averr, why, sizeof why);
    return fail(d, "%s (%s)", what, why);
}

// libavformat asks while it waits on the file: past the deadline it gives up.
static int past_deadline(void *opaque) { return spk_seconds() > ((const vdec_t *)opaque)->deadline; }

static int open_video(vdec_t *d) {
    d->fmt = avformat_alloc_context();
    if (!d->fmt) return fail(d, "out of memory for a demuxer");
    d->fmt->interrupt_callback = (AVIOInterruptCB){past_deadline, d};
    int rc = avformat_open_input(&d->fmt, d->path, NULL, NULL);
    if (rc < 0) return fail_av(d, "not a container FFmpeg knows", rc);
    if ((rc = avformat_find_stream_info(d->fmt, NULL)) < 0) return fail_av(d, "no stream information", rc);
    const AVCodec *codec = NULL;
    int s = av_find_best_stream(d->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (s < 0) return fail_av(d, "no video stream FFmpeg can decode", s);
    d->stream = s;
    const AVStream *st = d->fmt->streams[s];
    d->tb = av_q2d(st->time_base);
    d->t0 = d->fmt->start_time != AV_NOPTS_VALUE ? (double)d->fmt->start_time / AV_TIME_BASE
            : st->start_time != AV_NOPTS_VALUE   ? (double)st->start_time * d->tb
                                                 : 0.0;
    d->dec = avcodec_alloc_context3(codec);
    if (!d->dec) return fail(d, "out of memory for a decoder");
    if ((rc = avcodec_parameters_to_context(d->dec, st->codecpar)) < 0 || (rc = avcodec_open2(d->dec, codec, NULL)) < 0)
        return fail_av(d, "cannot open the video decoder", rc);
    d->pkt = av_packet_alloc();
    d->frame = av_frame_alloc();
    d->held = av_frame_alloc();
    if (!d->pkt || !d->frame || !d->held) return fail(d, "out of memory for frames");
    return 0;
}

// Room for one more frame in v.
static int reserve(vdec_t *d) {
    video_frames_t *v = d->v;
    const size_t bytes = (size_t)d->spec->size * (size_t)d->spec->size * (size_t)d->spec->channels;
    if (v->n < v->cap) return 0;
    int64_t ncap = v->cap ? v->cap * 2 : 64;
    uint8_t *p = realloc(v->pixels, (size_t)ncap * bytes);
    if (!p) return fail(d, "out of memory for %lld frames", (long long)ncap);
    v->pixels = p;
    v->cap = ncap;
    return 0;
}

// The held picture, centre square cropped and scaled, into frame v->n.
static int convert_held(vdec_t *d) {
    AVFrame *f = d->held;
    const int side = f->width < f->height ? f->width : f->height;
    f->crop_left = (size_t)(f->width - side) / 2;
    f->crop_right = (size_t)(f->width - side) - f->crop_left;
    f->crop_top = (size_t)(f->height - side) / 2;
    f->crop_bottom = (size_t)(f->height - side) - f->crop_top;
    int rc = av_frame_apply_cropping(f, AV_FRAME_CROP_UNALIGNED);
    if (rc < 0) return fail_av(d, "cannot crop a picture", rc);
    const int n = d->spec->size;
    d->sws = sws_getCachedContext(d->sws, f->width, f->height, f->format, n, n,
                                  d->spec->channels == 1 ? AV_PIX_FMT_GRAY8 : AV_PIX_FMT_RGB24,
                                  SWS_AREA | SWS_BITEXACT | SWS_ACCURATE_RND, NULL, NULL, NULL);
    if (!d->sws) return fail(d, "cannot scale %dx%d pictures of format %d", f->width, f->height, f->format);
    uint8_t *dst[1] = {d->v->pixels + (size_t)d->v->n * (size_t)n * (size_t)n * (size_t)d->spec->channels};
    const int stride[1] = {n * d->spec->channels};
    if (sws_scale(d->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, dst, stride) != n)
        return fail(d, "scaling a picture failed");
    return 0;
}

// Every frame wanted is there.
static int enough(const vdec_t *d) { return d->spec->max_frames > 0 && d->v->n >= d->spec->max_frames; }

// Frames k with k / fps before `until` show the held picture (up to max_frames).
static int emit_until(vdec_t *d, double until) {
    video_frames_t *v = d->v;
    const size_t bytes = (size_t)d->spec->size * (size_t)d->spec->size * (size_t)d->spec->channels;
    while ((double)v->n / d->spec->fps < until - 1e-9 && !enough(d)) {
        if (reserve(d)) return -1;
        if (d->last_emitted >= 0)
            memcpy(v->pixels + (size_t)v->n * bytes, v->pixels + (size_t)d->last_emitted * bytes, bytes);
        else if (convert_held(d))
            return -1;
        d->last_emitted = v->n++;
    }
    return 0;
}

// A new picture at time p (seconds from the stream's start): the held one covers the frames
// before p, and the new one is held.
static int take_picture(vdec_t *d) {
    AVFrame *f = d->frame;
    const int64_t ts = f->best_effort_timestamp;
    double p = ts != AV_NOPTS_VALUE ? (double)ts * d->tb - d->t0 : d->held_end;
    if (d->held->data[0]) {
        if (emit_until(d, p)) return -1;
    } else {
        p = 0;  // the first picture also covers the frames before it
    }
#if LIBAVUTIL_VERSION_INT >= AV_VERSION_INT(57, 30, 100)
    const int64_t ticks = f->duration;  // (pkt_duration before)
#else
    const int64_t ticks = f->pkt_duration;
#endif
    double dur = ticks > 0 ? (double)ticks * d->tb : 0;
    if (dur <= 0) {
        AVRational r = av_guess_frame_rate(d->fmt, d->fmt->streams[d->stream], f);
        dur = r.num > 0 && r.den > 0 ? av_q2d(av_inv_q(r)) : 1.0 / 25.0;
    }
    av_frame_unref(d->held);
    av_frame_move_ref(d->held, f);
    d->held_end = p + dur;
    d->last_emitted = -1;
    return 0;
}

static int decode(vdec_t *d, const AVPacket *pkt) {
    int rc = avcodec_send_packet(d->dec, pkt);
    if (rc < 0 && rc != AVERROR_EOF) return fail_av(d, "decoding failed", rc);
    for (;;) {
        rc = avcodec_receive_frame(d->dec, d->frame);
        if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return 0;
        if (rc < 0) return fail_av(d, "decoding failed", rc);
        if (take_picture(d)) return -1;
    }
}

static int read_all(vdec_t *d) {
    if (open_video(d)) return -1;
    int rc = 0;
    while (!enough(d) && (rc = av_read_frame(d->fmt, d->pkt)) >= 0) {
        int bad = d->pkt->stream_index == d->stream && decode(d, d->pkt);
        av_packet_unref(d->pkt);
        if (bad) return -1;
        if (past_deadline(d)) return fail(d, "decoding took longer than %g s", d->spec->timeout);
    }
    if (!enough(d)) {  // (with every frame wanted there, the rest of the file is not read)
        if (rc != AVERROR_EOF) return fail_av(d, past_deadline(d) ? "took too long" : "reading failed", rc);
        if (decode(d, NULL)) return -1;
        if (!d->held->data[0]) return fail(d, "the video stream holds no picture");
        if (emit_until(d, floor(d->held_end * d->spec->fps + 1e-6) / d->spec->fps)) return -1;
    }
    d->v->duration = (double)d->v->n / d->spec->fps;
    d->v->width = d->dec->width;
    d->v->height = d->dec->height;
    if (d->v->n == 0) return fail(d, "%.3f s of video give no frame at %g frames/s", d->held_end, d->spec->fps);
    return 0;
}

int video_read_frames(const char *path, const video_spec_t *spec, video_frames_t *v, char *err, size_t cap) {
    vdec_t d = {.path = path, .spec = spec, .v = v, .last_emitted = -1, .e = {path, err, cap}};
    d.deadline = spk_seconds() + (spec->timeout > 0 ? spec->timeout : 1e30);
    v->n = 0;
    av_log_set_level(AV_LOG_QUIET);  // the reason goes into the one sentence, not to stderr
    const int rc = read_all(&d);
    sws_freeContext(d.sws);
    av_frame_free(&d.frame);
    av_frame_free(&d.held);
    av_packet_free(&d.pkt);
    avcodec_free_context(&d.dec);
    avformat_close_input(&d.fmt);
    return rc;
}

void video_frames_free(video_frames_t *v) {
    free(v->pixels);
    memset(v, 0, sizeof *v);
}
