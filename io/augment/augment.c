// Augmentation: the banks, the per-sample draws (main thread, while the loader plans a
// batch), the collective bank reads, and the per-sample work on the worker threads.
#include "io/augment/augment.h"

#include "io/audio/audio.h"
#include "io/audio/fbank.h"
#include "io/augment/augment_dsp.h"
#include "io/common/h5util.h"
#include "io/dataset/dataset_read.h"
#include "kernels/base/check.h"
#include "kernels/base/rng.h"
#include "kernels/base/spk_assert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// A bank: an audio dataset whose labels are categories.
typedef struct {
    dataset_t ds;
    int open;
    int64_t num_cats;
    char **names;        // (num_cats,) category names (/speakers)
    int64_t *cat_first;  // (num_cats + 1,) entries of category c: members[cat_first[c] ..)
    int64_t *members;    // (num_utts,) entry indices grouped by category
} bank_t;

struct augment {
    augment_config_t cfg;
    augment_spec_t spec;
    uint64_t seed;
    int waveform;  // the training set holds audio (speed, reverb and noise possible)
    int rate;      // its sample rate
    int64_t num_speakers;
    int64_t frame_length, frame_shift;
    int in_rate[AUGMENT_MAX_SPEEDS];  // speed factor k: samples read as sampled at this rate
    bank_t noise, rir;
    int64_t kind_cat[AUGMENT_MAX_KINDS];  // --noise-snr item -> noise bank category
    int64_t rir_cats;                     // RIR categories with entries (drawn uniformly)
    int64_t *rir_cat_ids;                 // (rir_cats,)
};

// One sample's draws, and where its bank reads land.
typedef struct {
    int64_t epoch, u;
    int on;                   // augmented at all
    int speed;                // factor index
    int64_t len, skip;        // samples augment_wave gives; resampled samples dropped before them
    int64_t rir_at, rir_len;  // in rir_raw (rir_len 0: no reverberation)
    int sources;              // noise entries summed (0: no noise; > 1: babble)
    double snr_db;
    int64_t src_at[AUGMENT_MAX_SOURCES], src_len[AUGMENT_MAX_SOURCES];  // in noise_raw
} draw_t;

// Segments to read from one bank and where they land.
typedef struct {
    segment_t *seg;
    int n, cap;
    int16_t *raw;
    int64_t used, raw_cap;  // values
} reads_t;

struct augment_batch {
    draw_t *draw;
    int n, cap;
    reads_t noise, rir;
};

struct augment_scratch {
    augment_fft_t *fft;
    float *wave, *h, *noise, *src;  // (len), (rir), (len), (source) floats
    int64_t wave_cap, h_cap, noise_cap, src_cap;
};

// ---- flags and banks ----------------------------------------------------------------------

static int enabled(const augment_config_t *c, const augment_spec_t *s) {
    return c->noise_bank[0] || c->rir_bank[0] || s->num_speeds > 0 || c->time_masks > 0 || c->freq_masks > 0;
}

// Opens a bank made by `prepare --kind kind` and groups its entries by category.
static void bank_open(bank_t *b, const char *path, const char *kind, const char *flag, const dataset_t *speech,
                      MPI_Comm comm) {
    dataset_open(&b->ds, path, comm);
    b->open = 1;
    char have[32] = "";
    if (h5_attr_read_str(b->ds.file, "bank", have, sizeof have) != 0 || strcmp(have, kind) != 0)
        spk_fail_all(
            SPK_EXIT_USAGE,
            "train: %s %s: not a %s bank (root attribute 'bank' is '%s'; make one with spkddp prepare --kind %s)", flag,
            path, kind, have, kind);
    if (b->ds.sample_rate != speech->sample_rate)
        spk_fail_all(SPK_EXIT_USAGE, "train: %s %s holds %lld Hz audio, the training set %s %lld Hz", flag, path,
                     (long long)b->ds.sample_rate, speech->path, (long long)speech->sample_rate);
    b->num_cats = b->ds.num_speakers;
    b->names = h5_read_strings(b->ds.file, "speakers", b->num_cats);
    if (!b->names) spk_fail_all(SPK_EXIT_DATA, "%s: '/speakers' (the category names) is missing", path);
    b->cat_first = callocCheck((size_t)b->num_cats + 1, sizeof(int64_t));
    b->members = mallocCheck((size_t)b->ds.num_utts * sizeof(int64_t));
    for (int64_t e = 0; e < b->ds.num_utts; e++) b->cat_first[b->ds.labels[e] + 1]++;
    for (int64_t c = 0; c < b->num_cats; c++) b->cat_first[c + 1] += b->cat_first[c];
    int64_t *fill = mallocCheck((size_t)b->num_cats * sizeof(int64_t));
    memcpy(fill, b->cat_first, (size_t)b->num_cats * sizeof(int64_t));
    for (int64_t e = 0; e < b->ds.num_utts; e++) b->members[fill[b->ds.labels[e]]++] = e;
    free(fill);
}

static void bank_close(bank_t *b) {
    if (!b->open) return;
    h5_free_strings(b->names, b->num_cats);
    free(b->cat_first);
    free(b->members);
    dataset_close(&b->ds);
}

static int64_t cat_size(const bank_t *b, int64_t c) { return b->cat_first[c + 1] - b->cat_first[c]; }

// Every --noise-snr category must be in the noise bank and have entries.
static void match_categories(augment_t *a) {
    const bank_t *b = &a->noise;
    for (int k = 0; k < a->spec.num_kinds; k++) {
        const char *name = a->spec.kind[k].category;
        a->kind_cat[k] = -1;
        for (int64_t c = 0; c < b->num_cats; c++)
            if (strcmp(b->names[c], name) == 0 && cat_size(b, c) > 0) a->kind_cat[k] = c;
        if (a->kind_cat[k] >= 0) continue;
        char list[512] = "";
        for (int64_t c = 0; c < b->num_cats; c++)
            if (cat_size(b, c) > 0)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? ", " : "", b->names[c]);
        spk_fail_all(SPK_EXIT_USAGE, "train: --noise-snr names category '%s', which %s does not have (it has: %s)",
                     name, a->cfg.noise_bank, list);
    }
}

augment_t *augment_open(const augment_config_t *c, const dataset_t *speech, MPI_Comm comm, uint64_t seed) {
    augment_spec_t spec;
    char err[512];
    if (augment_parse(c, &spec, err, sizeof err) != 0) spk_fail_all(SPK_EXIT_USAGE, "train: %s", err);
    if (!enabled(c, &spec)) return NULL;
    augment_t *a = callocCheck(1, sizeof *a);
    a->cfg = *c;
    a->spec = spec;
    a->seed = seed;
    a->waveform = speech->sample_rate > 0;
    a->rate = (int)speech->sample_rate;
    a->num_speakers = speech->num_speakers;
    a->frame_length = speech->frame_length;
    a->frame_shift = speech->frame_shift;
    const char *needs = c->noise_bank[0]  ? "--noise-bank"
                        : c->rir_bank[0]  ? "--rir-bank"
                        : spec.num_speeds ? "--speed-perturb"
                                          : NULL;
    if (needs && !a->waveform)
        spk_fail_all(SPK_EXIT_USAGE,
                     "train: %s works on waveforms, and %s holds features; prepare it with --store audio "
                     "(SpecAugment's --spec-* masks work on either)",
                     needs, speech->path);
    for (int k = 0; k < spec.num_speeds; k++) {
        a->in_rate[k] = (int)lround(spec.speed[k] * a->rate);
        for (int j = 0; j < k; j++)
            if (a->in_rate[j] == a->in_rate[k])
                spk_fail_all(SPK_EXIT_USAGE, "train: --speed-perturb factors %g and %g are the same at %d Hz",
                             spec.speed[j], spec.speed[k], a->rate);
    }
    if (c->noise_bank[0]) {
        bank_open(&a->noise, c->noise_bank, "noise", "--noise-bank", speech, comm);
        match_categories(a);
    }
    if (c->rir_bank[0]) {
        bank_open(&a->rir, c->rir_bank, "rir", "--rir-bank", speech, comm);
        a->rir_cat_ids = mallocCheck((size_t)a->rir.num_cats * sizeof(int64_t));
        for (int64_t k = 0; k < a->rir.num_cats; k++)
            if (cat_size(&a->rir, k) > 0) a->rir_cat_ids[a->rir_cats++] = k;
    }
    return a;
}

void augment_close(augment_t *a) {
    if (!a) return;
    bank_close(&a->noise);
    bank_close(&a->rir);
    free(a->rir_cat_ids);
    free(a);
}

void augment_describe(const augment_t *a, char *out, size_t cap) {
    const augment_config_t *c = &a->cfg;
    const augment_spec_t *s = &a->spec;
    size_t n = 0;
#define ADD(...) n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, __VA_ARGS__)
    ADD("augmentation: p %g", c->prob);
    if (c->rir_bank[0])
        ADD("; reverb p %g from %s (%lld impulse responses, %lld categories)", c->reverb_prob, c->rir_bank,
            (long long)a->rir.ds.num_utts, (long long)a->rir_cats);
    if (c->noise_bank[0]) {
        ADD("; noise p %g from %s:", c->noise_prob, c->noise_bank);
        for (int k = 0; k < s->num_kinds; k++)
            ADD("%s %s %g..%g dB", k ? "," : "", s->kind[k].category, s->kind[k].snr_lo, s->kind[k].snr_hi);
        if (s->babble >= 0) ADD(" (%s: babble of %d..%d)", s->kind[s->babble].category, s->babble_lo, s->babble_hi);
    }
    if (s->num_speeds) ADD("; speed %s (%d x %lld classes)", c->speed, s->num_speeds, (long long)a->num_speakers);
    if (c->time_masks) ADD("; %lld time masks <= %lld frames", (long long)c->time_masks, (long long)c->time_width);
    if (c->freq_masks) ADD("; %lld frequency masks <= %lld bins", (long long)c->freq_masks, (long long)c->freq_width);
#undef ADD
}

// ---- planning a batch (main thread) ---------------------------------------------------------

augment_batch_t *augment_batch_new(void) { return callocCheck(1, sizeof(augment_batch_t)); }

static void reads_free(reads_t *r) {
    free(r->seg);
    free(r->raw);
}

void augment_batch_free(augment_batch_t *b) {
    if (!b) return;
    free(b->draw);
    reads_free(&b->noise);
    reads_free(&b->rir);
    free(b);
}

void augment_batch_begin(augment_batch_t *b, int n) {
    if (n > b->cap) {
        free(b->draw);
        b->cap = n;
        b->draw = mallocCheck((size_t)n * sizeof(draw_t));
    }
    b->n = n;
    b->noise.n = b->rir.n = 0;
    b->noise.used = b->rir.used = 0;
}

// Queues samples [start, start + count) of bank entry e; returns where they will land.
static int64_t queue_read(reads_t *r, int64_t e, int64_t start, int64_t count) {
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        segment_t *s = realloc(r->seg, (size_t)r->cap * sizeof(segment_t));
        if (!s) spk_die(SPK_EXIT_FAILURE, "out of memory planning augmentation reads");
        r->seg = s;
    }
    r->seg[r->n++] = (segment_t){e, start, count};
    const int64_t at = r->used;
    r->used += count;
    return at;
}

int augment_speed_of(const augment_t *a, int64_t epoch, int64_t u) {
    if (a->spec.num_speeds < 2) return 0;
    rng_t g = rng_init(a->seed, RNG_PURPOSE_SPEED, (uint64_t)epoch, (uint64_t)u);
    return (int)rng_below(&g, (uint64_t)a->spec.num_speeds);
}

static int is_identity(const augment_t *a, int k) { return a->spec.num_speeds == 0 || a->in_rate[k] == a->rate; }

// Resampled crops lose a few samples at each edge to the filter; 4 frames of margin cover
// libsoxr's high-quality filter at these ratios.
#define SPEED_MARGIN_FRAMES 4

int64_t augment_source_frames(const augment_t *a, int k, int64_t crop) {
    if (crop == 0 || is_identity(a, k)) return crop;
    return (int64_t)ceil((double)crop * a->in_rate[k] / a->rate) + SPEED_MARGIN_FRAMES;
}

static void draw_reverb(const augment_t *a, augment_batch_t *b, draw_t *d) {
    rng_t g = rng_init(a->seed, RNG_PURPOSE_REVERB, (uint64_t)d->epoch, (uint64_t)d->u);
    if (!a->rir.open || a->rir_cats == 0 || rng_uniform(&g) >= a->cfg.reverb_prob) return;
    const bank_t *r = &a->rir;
    const int64_t c = a->rir_cat_ids[rng_below(&g, (uint64_t)a->rir_cats)];  // rooms of each kind equally often
    const int64_t e = r->members[r->cat_first[c] + (int64_t)rng_below(&g, (uint64_t)cat_size(r, c))];
    d->rir_len = stream_frames(&r->ds.wave, e);
    d->rir_at = queue_read(&b->rir, e, 0, d->rir_len);
}

// A stretch of d->len samples (or the whole entry when shorter: it is repeated) of a random
// entry of category c.
static void draw_source(const augment_t *a, augment_batch_t *b, draw_t *d, rng_t *g, int64_t c, int j) {
    const bank_t *nb = &a->noise;
    const int64_t e = nb->members[nb->cat_first[c] + (int64_t)rng_below(g, (uint64_t)cat_size(nb, c))];
    const int64_t have = stream_frames(&nb->ds.wave, e);
    const int64_t count = have < d->len ? have : d->len;
    const int64_t start = (int64_t)rng_below(g, (uint64_t)(have - count + 1));
    d->src_len[j] = count;
    d->src_at[j] = queue_read(&b->noise, e, start, count);
}

static void draw_noise(const augment_t *a, augment_batch_t *b, draw_t *d) {
    rng_t g = rng_init(a->seed, RNG_PURPOSE_NOISE, (uint64_t)d->epoch, (uint64_t)d->u);
    if (!a->noise.open || rng_uniform(&g) >= a->cfg.noise_prob) return;
    const augment_spec_t *s = &a->spec;
    const int k = (int)rng_below(&g, (uint64_t)s->num_kinds);
    d->snr_db = s->kind[k].snr_lo + (s->kind[k].snr_hi - s->kind[k].snr_lo) * rng_uniform(&g);
    d->sources = k == s->babble ? s->babble_lo + (int)rng_below(&g, (uint64_t)(s->babble_hi - s->babble_lo + 1)) : 1;
    for (int j = 0; j < d->sources; j++) draw_source(a, b, d, &g, a->kind_cat[k], j);
}

int64_t augment_plan(const augment_t *a, augment_batch_t *b, int i, int64_t epoch, int64_t u, int k, int64_t src,
                     int64_t need) {
    SPK_ASSERT(i >= 0 && i < b->n);
    draw_t *d = &b->draw[i];
    memset(d, 0, sizeof *d);
    d->epoch = epoch;
    d->u = u;
    d->speed = k;
    d->len = src;
    rng_t g = rng_init(a->seed, RNG_PURPOSE_AUGMENT, (uint64_t)epoch, (uint64_t)u);
    d->on = rng_uniform(&g) < a->cfg.prob;
    if (!a->waveform) return 0;
    if (!is_identity(a, k)) {
        // The crop's samples after resampling, less the edges: the middle `need` of them.
        const int64_t out = audio_resampled_length(src, a->in_rate[k], a->rate);
        d->len = need > 0 && out > need ? need : out;
        d->skip = (out - d->len) / 2;
        if (d->len < a->frame_length) d->len = a->frame_length;  // padded with zeros to one frame
    }
    if (d->on) {
        draw_reverb(a, b, d);
        draw_noise(a, b, d);
    }
    return d->len;
}

static void reads_run(bank_t *bank, reads_t *r) {
    if (!bank->open) return;
    if (r->used > r->raw_cap) {
        free(r->raw);
        r->raw_cap = r->used;
        r->raw = mallocCheck((size_t)r->raw_cap * sizeof(int16_t));
    }
    dataset_read(&bank->ds, &bank->ds.wave, r->n, r->seg, r->raw);
}

void augment_read(augment_t *a, augment_batch_t *b) {
    reads_run(&a->noise, &b->noise);
    reads_run(&a->rir, &b->rir);
}

// ---- per sample (worker threads) ------------------------------------------------------------

augment_scratch_t *augment_scratch_new(void) {
    augment_scratch_t *s = callocCheck(1, sizeof *s);
    s->fft = augment_fft_new();
    return s;
}

void augment_scratch_free(augment_scratch_t *s) {
    if (!s) return;
    augment_fft_free(s->fft);
    free(s->wave);
    free(s->h);
    free(s->noise);
    free(s->src);
    free(s);
}

static float *grow(float *buf, int64_t *cap, int64_t n) {
    if (n <= *cap) return buf;
    free(buf);
    *cap = n;
    return mallocCheck((size_t)n * sizeof(float));
}

// int16 sample values as audio_read gives them (v / 32768).
static float *to_float(float **buf, int64_t *cap, const int16_t *pcm, int64_t n) {
    *buf = grow(*buf, cap, n);
    for (int64_t j = 0; j < n; j++) (*buf)[j] = (float)pcm[j] / 32768.0f;
    return *buf;
}

// The resampled crop: samples [skip, skip + len) of x read at the factor's rate.
static float *speed_change(const augment_t *a, const draw_t *d, augment_scratch_t *s, const float *x, int64_t n) {
    float *y;
    int64_t m;
    char err[256];
    if (audio_resample(x, n, a->in_rate[d->speed], a->rate, &y, &m, err, sizeof err) != 0)
        spk_die(SPK_EXIT_FAILURE, "speed perturbation of utterance %lld: %s", (long long)d->u, err);
    s->wave = grow(s->wave, &s->wave_cap, d->len);
    const int64_t have = m - d->skip < d->len ? (m - d->skip > 0 ? m - d->skip : 0) : d->len;
    memcpy(s->wave, y + d->skip, (size_t)have * sizeof(float));
    memset(s->wave + have, 0, (size_t)(d->len - have) * sizeof(float));
    free(y);
    return s->wave;
}

// The noise of a draw: one entry repeated to length, or a babble of entries each at unit
// power; then mixed in at the drawn SNR.
static void add_noise(const augment_batch_t *b, const draw_t *d, augment_scratch_t *s, float *x) {
    s->noise = grow(s->noise, &s->noise_cap, d->len);
    for (int j = 0; j < d->sources; j++) {
        const float *src = to_float(&s->src, &s->src_cap, b->noise.raw + d->src_at[j], d->src_len[j]);
        double p = d->sources > 1 ? augment_power(src, d->src_len[j]) : 1.0;
        augment_tile(s->noise, d->len, src, d->src_len[j], p > 0 ? (float)(1.0 / sqrt(p)) : 0.0f, j > 0);
    }
    augment_add_noise(x, s->noise, d->len, d->snr_db);
}

float *augment_wave(const augment_t *a, const augment_batch_t *b, int i, augment_scratch_t *s, float *x, int64_t n) {
    const draw_t *d = &b->draw[i];
    if (!is_identity(a, d->speed)) x = speed_change(a, d, s, x, n);
    if (d->rir_len > 0) {
        const float *h = to_float(&s->h, &s->h_cap, b->rir.raw + d->rir_at, d->rir_len);
        augment_reverb(s->fft, x, d->len, h, d->rir_len, x);
    }
    if (d->sources > 0) add_noise(b, d, s, x);
    return x;
}

// A mask of 1..max_width (at most `size`) at a uniform position.
static void draw_mask(rng_t *g, int64_t size, int64_t max_width, int64_t *at, int64_t *w) {
    *w = 1 + (int64_t)rng_below(g, (uint64_t)max_width);
    if (*w > size) *w = size;
    *at = (int64_t)rng_below(g, (uint64_t)(size - *w + 1));
}

void augment_frames(const augment_t *a, const augment_batch_t *b, int i, float *x, int64_t T, int64_t F) {
    const draw_t *d = &b->draw[i];
    if (!d->on || (a->cfg.time_masks == 0 && a->cfg.freq_masks == 0)) return;
    rng_t g = rng_init(a->seed, RNG_PURPOSE_SPECAUG, (uint64_t)d->epoch, (uint64_t)d->u);
    int64_t at, w;
    for (int64_t k = 0; k < a->cfg.time_masks; k++) {
        draw_mask(&g, T, a->cfg.time_width, &at, &w);
        augment_mask_time(x, T, F, at, w);
    }
    for (int64_t k = 0; k < a->cfg.freq_masks; k++) {
        draw_mask(&g, F, a->cfg.freq_width, &at, &w);
        augment_mask_freq(x, T, F, at, w);
    }
}
