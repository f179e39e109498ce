#include "io/loader/loader.h"

#include "io/audio/fbank.h"
#include "io/dataset/dataset_read.h"
#include "io/video/image_jpeg.h"
#include "io/video/picture_augment.h"
#include "kernels/base/check.h"
#include "kernels/base/rng.h"
#include "kernels/base/spk_assert.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

// A batch in flight: the crops read for it and the frames computed from them.
struct loader_slot {
    batch_t batch;
    int64_t epoch;
    segment_t *segs, *vsegs;  // (max_batch,) crops in frames (audio, visual)
    segment_t *wsegs;         // (max_batch,) audio datasets: the samples under each crop
    segment_t *jsegs;         // (max_batch,) pictures: each sample's utterance's JPEG bytes
    int64_t *jraw_at;         // (max_batch,) where they start in jraw
    uint8_t *jraw;
    int64_t jraw_cap;
    int64_t *raw_at, *vraw_at;  // (max_batch,) where sample i's crop starts in raw / vraw, in values
    void *raw;                  // crops as read: frames (float) or samples (int16)
    float *vraw;
    int64_t raw_cap, vraw_cap, x_cap, vx_cap;  // bytes
    int64_t *wave_len;                         // (max_batch,) audio datasets: samples into each crop's fbank
    augment_batch_t *aug;                      // the batch's augmentation draws and bank reads
    int next;                                  // next sample to hand out
    int remaining;                             // samples not yet computed
};

// What one thread needs to turn a crop into frames.
typedef struct {
    fbank_t fb;                    // audio datasets only
    float *wave;                   // (wave_cap,) the crop's samples as floats
    float *frames;                 // (frames_cap,) its fbank
    int64_t wave_cap, frames_cap;  // bytes
    double *mean;                  // (max(F, Fv),) CMN accumulator
    augment_scratch_t *aug;
    jpeg_codec_t *jpeg;   // pictures only
    uint8_t *pixels;      // (Fv,) one decoded picture
    float *vframes;       // (vframes_cap,) a crop's pictures as values
    int64_t vframes_cap;  // bytes
} scratch_t;

struct loader_pool {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    int stop;
    pthread_t *threads;  // (n,)
    scratch_t *scratch;  // (n + 1,): one per worker, the last for the caller
    int n;
    loader_t *l;
};

// A buffer of at least `bytes` (contents not kept).
static void *ensure(void *buf, int64_t *cap, int64_t bytes) {
    if (bytes <= *cap) return buf;
    free(buf);
    *cap = bytes;
    return mallocCheck((size_t)(bytes ? bytes : 1));
}

// Copies `have` frames into `want` frames (repeating a short segment), then optionally
// subtracts the mean frame.
static void place(float *dst, const float *src, int64_t want, int64_t have, int64_t F, int cmn, double *mean) {
    for (int64_t t = 0; t < want; t += have) {
        int64_t m = want - t < have ? want - t : have;
        memcpy(dst + t * F, src, (size_t)(m * F) * sizeof(float));
    }
    if (!cmn) return;
    for (int64_t j = 0; j < F; j++) mean[j] = 0.0;
    for (int64_t t = 0; t < want; t++)
        for (int64_t j = 0; j < F; j++) mean[j] += dst[t * F + j];
    for (int64_t j = 0; j < F; j++) mean[j] /= (double)want;
    for (int64_t t = 0; t < want; t++)
        for (int64_t j = 0; j < F; j++) dst[t * F + j] -= (float)mean[j];
}

// The fbank of sample i's crop of 16-bit samples (v / 32768, as audio_read gives 16-bit
// files), augmented in between when asked. Returns the frames and their count.
static const float *crop_fbank(const loader_t *l, scratch_t *w, const loader_slot_t *s, int i, int64_t *frames) {
    const dataset_t *ds = l->ds;
    const int16_t *pcm = (const int16_t *)s->raw + s->raw_at[i];
    const int64_t samples = s->wsegs[i].count;
    w->wave = ensure(w->wave, &w->wave_cap, samples * (int64_t)sizeof(float));
    for (int64_t j = 0; j < samples; j++) w->wave[j] = (float)pcm[j] / 32768.0f;
    const float *wave = l->aug ? augment_wave(l->aug, s->aug, i, w->aug, w->wave, samples) : w->wave;
    *frames = fbank_frames_of(s->wave_len[i], ds->frame_length, ds->frame_shift);
    w->frames = ensure(w->frames, &w->frames_cap, *frames * ds->feature_dim * (int64_t)sizeof(float));
    fbank_compute(&w->fb, wave, s->wave_len[i], w->frames);
    return w->frames;
}

// The key of sample i's random draws: its epoch, with its view above any epoch's bits.
static int64_t draw_key(const loader_t *l, int64_t epoch, int i) {
    return epoch + (int64_t)((uint64_t)(i % l->views) << 40);
}

// The pictures of sample i's visual crop, decoded from its utterance's JPEG frames (each a
// 4-byte little-endian length and the picture) into values (v - 127.5) / 128, in [-1, 1) (and
// augmented, io/video/picture_augment.h).
static const float *crop_pictures(const loader_t *l, scratch_t *w, const loader_slot_t *s, int i) {
    const dataset_t *ds = l->ds;
    const segment_t *v = &s->vsegs[i];
    const int64_t Fv = ds->visual.dim, size = ds->image_size;
    const uint8_t *p = s->jraw + s->jraw_at[i], *end = p + s->jsegs[i].count;
    w->vframes = ensure(w->vframes, &w->vframes_cap, v->count * Fv * (int64_t)sizeof(float));
    picture_transform_t tr = {0};
    if (l->augment_pictures) {
        rng_t g = rng_init(l->seed, RNG_PURPOSE_PICTURES, (uint64_t)draw_key(l, s->epoch, i), (uint64_t)v->utt);
        tr = picture_transform_draw(&g, (int)size);
    }
    char err[256];
    for (int64_t t = 0; t < v->start + v->count; t++) {
        uint32_t len = 0;
        if (end - p >= 4) len = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        if (end - p < 4 || len > (uint64_t)(end - p - 4))
            spk_die(SPK_EXIT_DATA, "%s: '/visual/jpeg' of utterance %lld ends inside frame %lld (a damaged file)",
                    ds->path, (long long)v->utt, (long long)t);
        p += 4;
        if (t >= v->start) {
            if (jpeg_decode(w->jpeg, p, len, (int)size, (int)ds->image_channels, w->pixels, err, sizeof err) != 0)
                spk_die(SPK_EXIT_DATA, "%s: '/visual/jpeg' of utterance %lld, frame %lld: %s", ds->path,
                        (long long)v->utt, (long long)t, err);
            picture_transform_apply(&tr, w->pixels, (int)size, (int)ds->image_channels,
                                    w->vframes + (t - v->start) * Fv);
        }
        p += len;
    }
    return w->vframes;
}

// Sample i of slot s: crop -> frames -> batch, on whichever thread took it.
static void sample_compute(const loader_t *l, scratch_t *w, loader_slot_t *s, int i) {
    const dataset_t *ds = l->ds;
    batch_t *b = &s->batch;
    const int64_t F = ds->feature_dim;
    int64_t count = s->segs[i].count;
    const float *frames;
    if (ds->sample_rate > 0) {
        frames = crop_fbank(l, w, s, i, &count);
    } else {
        frames = (const float *)s->raw + s->raw_at[i];
    }
    float *x = b->x + b->frame_off[i] * F;
    const int64_t T = b->frame_off[i + 1] - b->frame_off[i];
    place(x, frames, T, count, F, l->spec.cmn, w->mean);
    if (l->aug) augment_frames(l->aug, s->aug, i, x, T, F);
    if (l->spec.visual) {  // (a picture's mean is not a channel to remove: no CMN)
        const int64_t Fv = ds->visual.dim;
        const float *v = ds->image_size ? crop_pictures(l, w, s, i) : s->vraw + s->vraw_at[i];
        place(b->vx + b->vframe_off[i] * Fv, v, b->vframe_off[i + 1] - b->vframe_off[i], s->vsegs[i].count, Fv,
              l->spec.cmn && !ds->image_size, w->mean);
    }
}

// Under the pool's lock: a sample of slot `only` (or of the oldest slot with work, only < 0).
static int take_job(loader_t *l, int only, loader_slot_t **slot) {
    for (int q = 0; q < l->queued; q++) {
        loader_slot_t *s = &l->slots[l->queue[q]];
        if ((only < 0 || l->queue[q] == only) && s->next < s->batch.n) {
            *slot = s;
            return s->next++;
        }
    }
    return -1;
}

typedef struct {
    loader_pool_t *p;
    int k;
} worker_arg_t;

static void *worker_loop(void *arg) {
    worker_arg_t a = *(worker_arg_t *)arg;
    free(arg);
    loader_pool_t *p = a.p;
    scratch_t *w = &p->scratch[a.k];
    pthread_mutex_lock(&p->mu);
    for (;;) {
        loader_slot_t *s = NULL;
        int i = take_job(p->l, -1, &s);
        if (i < 0) {
            if (p->stop) break;
            pthread_cond_wait(&p->work, &p->mu);
            continue;
        }
        pthread_mutex_unlock(&p->mu);
        sample_compute(p->l, w, s, i);
        pthread_mutex_lock(&p->mu);
        if (--s->remaining == 0) pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void scratch_init(scratch_t *w, const dataset_t *ds) {
    memset(w, 0, sizeof *w);
    int64_t dim = ds->feature_dim > ds->visual.dim ? ds->feature_dim : ds->visual.dim;
    w->mean = mallocCheck((size_t)dim * sizeof(double));
    w->aug = augment_scratch_new();
    if (ds->image_size) {
        w->jpeg = jpeg_codec_create();
        w->pixels = mallocCheck((size_t)ds->visual.dim);
        if (!w->jpeg) spk_die(SPK_EXIT_FAILURE, "out of memory for a JPEG decoder");
    }
    if (ds->sample_rate <= 0) return;
    fbank_opts_t o = fbank_default_opts();  // dither off, as prepare's default
    o.num_bins = (int)ds->feature_dim;
    o.frame_length_ms = ds->frame_length_ms;
    o.frame_shift_ms = ds->frame_shift_ms;
    char err[512];
    if (fbank_init_opts(&w->fb, (int)ds->sample_rate, &o, err, sizeof err) != 0)
        spk_die(SPK_EXIT_DATA, "%s: cannot compute the fbank of this audio dataset: %s", ds->path, err);
}

static void scratch_free(scratch_t *w) {
    if (w->fb.plan) fbank_free(&w->fb);
    free(w->wave);
    free(w->frames);
    free(w->mean);
    augment_scratch_free(w->aug);
    jpeg_codec_free(w->jpeg);
    free(w->pixels);
    free(w->vframes);
}

static int threads_from_env(void) {
    const char *e = getenv("SPKDDP_LOADER_THREADS");
    if (!e || !*e) return 1;
    char *end = NULL;
    long v = strtol(e, &end, 10);
    if (*end || v < 0 || v > 64)
        spk_fail_all(SPK_EXIT_USAGE, "SPKDDP_LOADER_THREADS=%s is not a thread count in 0..64", e);
    return (int)v;
}

static void pool_start(loader_t *l) {
    loader_pool_t *p = callocCheck(1, sizeof *p);
    l->pool = p;
    p->l = l;
    p->n = l->threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->scratch = mallocCheck((size_t)(p->n + 1) * sizeof(scratch_t));
    for (int k = 0; k <= p->n; k++) scratch_init(&p->scratch[k], l->ds);
    p->threads = mallocCheck((size_t)(p->n > 0 ? p->n : 1) * sizeof(pthread_t));
    for (int k = 0; k < p->n; k++) {
        worker_arg_t *a = mallocCheck(sizeof *a);
        *a = (worker_arg_t){p, k};
        if (pthread_create(&p->threads[k], NULL, worker_loop, a) != 0)
            spk_die(SPK_EXIT_FAILURE, "cannot start loader thread %d of %d", k + 1, p->n);
    }
}

static void pool_stop(loader_pool_t *p) {
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int k = 0; k < p->n; k++) pthread_join(p->threads[k], NULL);
    for (int k = 0; k <= p->n; k++) scratch_free(&p->scratch[k]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    free(p->scratch);
    free(p->threads);
    free(p);
}

void loader_init(loader_t *l, dataset_t *ds, int max_batch, const loader_spec_t *spec, uint64_t seed, int threads) {
    memset(l, 0, sizeof *l);
    l->ds = ds;
    l->spec = *spec;
    l->spec.visual = spec->visual && ds->visual.dim > 0;
    l->seed = seed;
    l->max_batch = max_batch;
    l->views = 1;
    l->local_from = 0;
    l->local_crop = 0;  // no local crops
    l->threads = threads < 0 ? threads_from_env() : threads;
    l->in_use = -1;
    l->slots = callocCheck(LOADER_SLOTS, sizeof(loader_slot_t));
    for (int k = 0; k < LOADER_SLOTS; k++) {
        loader_slot_t *s = &l->slots[k];
        batch_t *b = &s->batch;
        b->feature_dim = ds->feature_dim;
        b->visual_dim = l->spec.visual ? ds->visual.dim : 0;
        b->frame_off = mallocCheck((size_t)(max_batch + 1) * sizeof(int64_t));
        b->vframe_off = mallocCheck((size_t)(max_batch + 1) * sizeof(int64_t));
        b->labels = mallocCheck((size_t)max_batch * sizeof(int32_t));
        b->index = mallocCheck((size_t)max_batch * sizeof(int64_t));
        s->segs = mallocCheck((size_t)max_batch * sizeof(segment_t));
        s->vsegs = mallocCheck((size_t)max_batch * sizeof(segment_t));
        s->wsegs = mallocCheck((size_t)max_batch * sizeof(segment_t));
        s->jsegs = mallocCheck((size_t)max_batch * sizeof(segment_t));
        s->jraw_at = mallocCheck((size_t)max_batch * sizeof(int64_t));
        s->raw_at = mallocCheck((size_t)max_batch * sizeof(int64_t));
        s->vraw_at = mallocCheck((size_t)max_batch * sizeof(int64_t));
        s->wave_len = mallocCheck((size_t)max_batch * sizeof(int64_t));
        s->aug = augment_batch_new();
    }
    pool_start(l);
}

void loader_set_views(loader_t *l, int views) {
    SPK_ASSERT(l->queued == 0 && views >= 1);
    l->views = views;
}

void loader_set_local_crops(loader_t *l, int from, int64_t crop) {
    SPK_ASSERT(l->queued == 0 && from >= 1 && crop > 0 && l->spec.crop > 0);
    l->local_from = from;
    l->local_crop = crop;
}

void loader_set_picture_augment(loader_t *l, int on) {
    SPK_ASSERT(l->queued == 0);
    l->augment_pictures = on && l->ds->image_size > 0;
}

void loader_set_augment(loader_t *l, augment_t *aug) {
    SPK_ASSERT(l->queued == 0);
    l->aug = aug;
}

// The crops of a batch: frames per sample, where each starts, and the segments to read.
// With augmentation, a sample's speed factor sets how much to read and its class.
// Pictures: a sample reads its utterance's JPEG frames whole (their lengths are inside), and
// decodes those of its crop.
static void plan(const loader_t *l, loader_slot_t *s, const int64_t *index, int n, int64_t *raw, int64_t *vraw,
                 int64_t *jraw) {
    const dataset_t *ds = l->ds;
    const int64_t r = l->spec.visual ? ds->visual_ratio : 1;
    batch_t *b = &s->batch;
    b->n = n;
    b->frame_off[0] = b->vframe_off[0] = 0;
    *raw = *vraw = *jraw = 0;
    if (l->aug) augment_batch_begin(s->aug, n);
    for (int i = 0; i < n; i++) {
        int64_t u = index[i], len = dataset_frames(ds, u);
        const int64_t crop = l->local_crop > 0 && i % l->views >= l->local_from ? l->local_crop : l->spec.crop;
        const int64_t key = draw_key(l, s->epoch, i);
        const int k = l->aug ? augment_speed_of(l->aug, key, u) : 0;
        const int64_t read = l->aug ? augment_source_frames(l->aug, k, crop) : crop;  // frames to read
        segment_t seg = {u, 0, len};
        if (crop > 0 && len >= read) {
            // Crop starts on visual frame boundaries (r = 1 without the visual stream).
            rng_t g = rng_init(l->seed, RNG_PURPOSE_CROP, (uint64_t)key, (uint64_t)u);
            seg.start = r * (int64_t)rng_below(&g, (uint64_t)((len - read) / r + 1));
            seg.count = read;
        }
        s->segs[i] = seg;
        s->raw_at[i] = *raw;
        int64_t have = seg.count;  // frames the sample ends up with
        if (ds->sample_rate > 0) {
            s->wsegs[i] = dataset_frames_to_samples(ds, seg);
            *raw += s->wsegs[i].count;
            const int64_t need = crop > 0 ? (crop - 1) * ds->frame_shift + ds->frame_length : 0;
            s->wave_len[i] =
                l->aug ? augment_plan(l->aug, s->aug, i, key, u, k, s->wsegs[i].count, need) : s->wsegs[i].count;
            have = fbank_frames_of(s->wave_len[i], ds->frame_length, ds->frame_shift);
        } else {
            *raw += seg.count * ds->feature_dim;
            if (l->aug) augment_plan(l->aug, s->aug, i, key, u, k, 0, 0);
        }
        int64_t want = crop > 0 ? crop : have;
        if (want < l->spec.min_frames) want = l->spec.min_frames;
        want = (want + r - 1) / r * r;  // whole visual frames
        b->frame_off[i + 1] = b->frame_off[i] + want;
        if (l->spec.visual) {
            int64_t vlen = stream_frames(&ds->visual, u), vcount = seg.count / r;
            if (vcount < 1) vcount = 1;
            if (vcount > vlen - seg.start / r) vcount = vlen - seg.start / r;
            s->vsegs[i] = (segment_t){u, seg.start / r, vcount};
            if (ds->image_size) {
                s->jsegs[i] = (segment_t){u, 0, stream_frames(&ds->jpeg, u)};
                s->jraw_at[i] = *jraw;
                *jraw += s->jsegs[i].count;
            } else {
                s->vraw_at[i] = *vraw;
                *vraw += vcount * ds->visual.dim;
            }
            b->vframe_off[i + 1] = b->vframe_off[i] + want / r;
        }
        b->labels[i] = ds->labels[u] + (int32_t)(k * ds->num_speakers);
        b->index[i] = u;
    }
}

void loader_prefetch(loader_t *l, int64_t epoch, const int64_t *index, int n) {
    SPK_ASSERT(n >= 0 && n <= l->max_batch);
    dataset_t *ds = l->ds;
    loader_pool_t *p = l->pool;
    l->in_use = -1;  // the batch last returned is given up
    SPK_ASSERT(l->queued < LOADER_SLOTS);
    int k = 0;  // a slot not in flight
    for (int busy = 1; busy; k += busy) {
        busy = 0;
        for (int q = 0; q < l->queued; q++) busy |= l->queue[q] == k;
    }
    loader_slot_t *s = &l->slots[k];
    s->epoch = epoch;
    int64_t raw, vraw, jraw;
    plan(l, s, index, n, &raw, &vraw, &jraw);
    batch_t *b = &s->batch;
    b->x = ensure(b->x, &s->x_cap, b->frame_off[n] * ds->feature_dim * (int64_t)sizeof(float));
    if (ds->sample_rate > 0) {
        s->raw = ensure(s->raw, &s->raw_cap, raw * (int64_t)sizeof(int16_t));
        dataset_read(ds, &ds->wave, n, s->wsegs, s->raw);
        if (l->aug) augment_read(l->aug, s->aug);
    } else {
        s->raw = ensure(s->raw, &s->raw_cap, raw * (int64_t)sizeof(float));
        dataset_read(ds, &ds->audio, n, s->segs, s->raw);
    }
    if (l->spec.visual) {
        b->vx = ensure(b->vx, &s->vx_cap, b->vframe_off[n] * ds->visual.dim * (int64_t)sizeof(float));
        if (ds->image_size) {
            s->jraw = ensure(s->jraw, &s->jraw_cap, jraw);
            dataset_read(ds, &ds->jpeg, n, s->jsegs, s->jraw);
        } else {
            s->vraw = ensure(s->vraw, &s->vraw_cap, vraw * (int64_t)sizeof(float));
            dataset_read(ds, &ds->visual, n, s->vsegs, s->vraw);
        }
    }
    pthread_mutex_lock(&p->mu);
    s->next = 0;
    s->remaining = n;
    l->queue[l->queued++] = k;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
}

const batch_t *loader_wait(loader_t *l) {
    SPK_ASSERT(l->queued > 0);
    loader_pool_t *p = l->pool;
    const int k = l->queue[0];
    loader_slot_t *s = &l->slots[k];
    pthread_mutex_lock(&p->mu);
    while (s->remaining > 0) {
        loader_slot_t *got = NULL;
        int i = take_job(l, k, &got);  // help with what is left of this batch
        if (i < 0) {
            pthread_cond_wait(&p->done, &p->mu);
            continue;
        }
        pthread_mutex_unlock(&p->mu);
        sample_compute(l, &p->scratch[p->n], got, i);
        pthread_mutex_lock(&p->mu);
        --got->remaining;
    }
    memmove(l->queue, l->queue + 1, (size_t)(l->queued - 1) * sizeof(int));
    l->queued--;
    pthread_mutex_unlock(&p->mu);
    l->in_use = k;
    return &s->batch;
}

const batch_t *loader_load(loader_t *l, int64_t epoch, const int64_t *index, int n) {
    loader_prefetch(l, epoch, index, n);
    return loader_wait(l);
}

void loader_free(loader_t *l) {
    if (l->pool) pool_stop(l->pool);
    for (int k = 0; l->slots && k < LOADER_SLOTS; k++) {
        loader_slot_t *s = &l->slots[k];
        batch_t *b = &s->batch;
        free(b->frame_off);
        free(b->vframe_off);
        free(b->labels);
        free(b->index);
        free(b->x);
        free(b->vx);
        free(s->segs);
        free(s->vsegs);
        free(s->wsegs);
        free(s->jsegs);
        free(s->jraw_at);
        free(s->jraw);
        free(s->raw_at);
        free(s->vraw_at);
        free(s->wave_len);
        augment_batch_free(s->aug);
        free(s->raw);
        free(s->vraw);
    }
    free(l->slots);
    memset(l, 0, sizeof *l);
}
