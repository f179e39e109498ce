#include "io/dataset/synth.h"

#include "io/dataset/dataset_write.h"
#include "kernels/base/check.h"
#include "kernels/base/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define PHONES             16  // shared "phone" inventory
#define SEG_MIN            4   // phone segment length range, frames
#define SEG_MAX            14
#define VOICE_FACTORS      8  // dimensions of voice variation
#define SYNTH_VISUAL_RATIO 4  // 100 audio frames/s, 25 visual frames/s

synth_config_t synth_defaults(void) {
    return (synth_config_t){
        .seed = 1234,
        .toy_samples = 128,
        .toy_dim = 64,
        .toy_classes = 2,
        .toy_separation = 0.0,
        .speakers = 40,
        .utts_per_speaker = 24,
        .val_utts_per_speaker = 6,
        .dim = 80,
        .min_frames = 150,
        .max_frames = 400,
    };
}

void synth_write_toy(const synth_config_t *c, const char *path) {
    int64_t n = c->toy_samples, f = c->toy_dim;
    float *x = mallocCheck((size_t)(n * f) * sizeof(float));
    int32_t *y = mallocCheck((size_t)n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++) {
        rng_t r = rng_init(c->seed, RNG_PURPOSE_SYNTH, 0, (uint64_t)i);
        y[i] = (int32_t)rng_below(&r, (uint64_t)c->toy_classes);
        for (int64_t j = 0; j < f; j++) {
            // Class k's mean is +separation on dimension k (mod F).
            double shift = (j % c->toy_classes == y[i]) ? c->toy_separation : 0.0;
            x[i * f + j] = (float)(rng_normal(&r) + shift);
        }
    }
    dataset_writer_t w;
    dataset_writer_create(
        &w, path, MPI_COMM_SELF,
        &(dataset_layout_t){.num_utts = n, .num_speakers = c->toy_classes, .feature_dim = f, .fixed_frames = 1});
    for (int64_t i = 0; i < n; i++) dataset_writer_put(&w, i, x + i * f);
    dataset_writer_finish(&w, y, NULL, NULL);
    free(x);
    free(y);
}

// Speaker s: per-dimension gain (vocal tract), a static offset, and a personal deviation of
// every phone (how this speaker pronounces it), all driven by VOICE_FACTORS latent factors.
// Identity lives mostly in the phone deviations, which a frame-level encoder can model and a
// plain average blurs.
typedef struct {
    float *warp;    // (S) spectral: the speaker's frequency scale (vocal tract length), else NULL
    float *phones;  // (PHONES, F) shared inventory
    float *gain;    // (S, F)
    float *offset;  // (S, F)
    float *dev;     // (S, PHONES, F)
    // visual stream (visual_dim > 0): lip shapes per phone, rendered per speaker
    float *visemes;   // (PHONES, Fv) shared
    float *lips;      // (S, Fv) speaker's resting lip shape
    float *lip_gain;  // (S, Fv) speaker's articulation strength
} voices_t;

// Spectral voices (synth_config_t.spectral): rows of n values made smooth along the feature
// axis, as spectra are, by a Gaussian of sigma bins, with their variance kept.
static void smooth_rows(float *x, int64_t rows, int64_t n, double sigma) {
    const int64_t half = (int64_t)ceil(3 * sigma);
    double k[2 * half + 1], norm = 0, energy = 0;
    for (int64_t i = -half; i <= half; i++) norm += k[i + half] = exp(-0.5 * (double)(i * i) / (sigma * sigma));
    for (int64_t i = 0; i <= 2 * half; i++) energy += (k[i] / norm) * (k[i] / norm);
    double *row = mallocCheck((size_t)n * sizeof(double));
    for (int64_t r = 0; r < rows; r++) {
        float *xr = x + r * n;
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t i = -half; i <= half; i++) {
                int64_t u = j + i < 0 ? -(j + i) : (j + i >= n ? 2 * (n - 1) - (j + i) : j + i);  // reflect
                u = u < 0 ? 0 : (u >= n ? n - 1 : u);  // rows shorter than the kernel
                acc += k[i + half] / norm * xr[u];
            }
            row[j] = acc / sqrt(energy);
        }
        for (int64_t j = 0; j < n; j++) xr[j] = (float)row[j];
    }
    free(row);
}

static voices_t voices_make(const synth_config_t *c) {
    int64_t S = c->speakers, F = c->dim;
    voices_t v = {
        .phones = mallocCheck((size_t)(PHONES * F) * sizeof(float)),
        .gain = mallocCheck((size_t)(S * F) * sizeof(float)),
        .offset = mallocCheck((size_t)(S * F) * sizeof(float)),
        .dev = mallocCheck((size_t)(S * PHONES * F) * sizeof(float)),
    };
    // Shared by every voice: the phone inventory and a low-rank basis of voice variation
    // (VOICE_FACTORS directions), so speakers share structure an encoder can learn from a
    // few dozen of them and apply to unseen ones, as with real voices.
    const int64_t Fv = c->visual_dim;
    const int64_t per_voice = F + F + PHONES * F + 2 * Fv;  // gain, offset, phone deviations, lips, lip gain
    if (Fv > 0) {
        v.visemes = mallocCheck((size_t)(PHONES * Fv) * sizeof(float));
        v.lips = mallocCheck((size_t)(S * Fv) * sizeof(float));
        v.lip_gain = mallocCheck((size_t)(S * Fv) * sizeof(float));
    }
    float *basis = mallocCheck((size_t)(VOICE_FACTORS * per_voice) * sizeof(float));
    rng_t r = rng_init(c->seed, RNG_PURPOSE_SYNTH, 1, 0);
    for (int64_t i = 0; i < PHONES * F; i++) v.phones[i] = (float)(1.5 * rng_normal(&r));
    for (int64_t i = 0; i < VOICE_FACTORS * per_voice; i++) basis[i] = (float)(rng_normal(&r) / sqrt(VOICE_FACTORS));
    rng_t rv = rng_init(c->seed, RNG_PURPOSE_SYNTH, 5, 0);  // separate stream: audio-only datasets stay as they were
    for (int64_t i = 0; i < PHONES * Fv; i++) v.visemes[i] = (float)rng_normal(&rv);
    for (int64_t s = 0; s < S; s++) {
        rng_t rs = rng_init(c->seed, RNG_PURPOSE_SYNTH, 2, (uint64_t)(c->first_speaker + s));
        double z[VOICE_FACTORS];
        for (int k = 0; k < VOICE_FACTORS; k++) z[k] = rng_normal(&rs);
        for (int64_t j = 0; j < per_voice; j++) {
            double x = 0;
            for (int k = 0; k < VOICE_FACTORS; k++) x += z[k] * basis[k * per_voice + j];
            if (j < F)
                v.gain[s * F + j] = (float)exp(0.15 * x);
            else if (j < 2 * F)
                v.offset[s * F + j - F] = (float)(0.3 * x);
            else if (j < 2 * F + PHONES * F)
                v.dev[s * PHONES * F + j - 2 * F] = (float)(0.5 * x);
            else if (j < 2 * F + PHONES * F + Fv)
                v.lips[s * Fv + j - 2 * F - PHONES * F] = (float)(0.8 * x);
            else
                v.lip_gain[s * Fv + j - 2 * F - PHONES * F - Fv] = (float)exp(0.3 * x);
        }
    }
    free(basis);
    if (c->spectral) {  // smooth along frequency, and each speaker's own frequency scale
        const double sigma = F / 16.0 > 0.75 ? F / 16.0 : 0.75;
        smooth_rows(v.phones, PHONES, F, sigma);
        smooth_rows(v.gain, S, F, sigma);
        smooth_rows(v.offset, S, F, sigma);
        smooth_rows(v.dev, S * PHONES, F, sigma);
        for (int64_t i = 0; i < S * F; i++) v.gain[i] = v.gain[i] > 0 ? v.gain[i] : 0.05f;  // gains stay positive
        v.warp = mallocCheck((size_t)S * sizeof(float));
        for (int64_t s = 0; s < S; s++) {
            rng_t rw = rng_init(c->seed, RNG_PURPOSE_SYNTH, 6, (uint64_t)(c->first_speaker + s));
            v.warp[s] = (float)exp(0.08 * rng_normal(&rw));
        }
    }
    return v;
}

static void voices_free(voices_t *v) {
    free(v->warp);
    free(v->phones);
    free(v->gain);
    free(v->offset);
    free(v->dev);
    free(v->visemes);
    free(v->lips);
    free(v->lip_gain);
}

static int64_t utt_length(const synth_config_t *c, uint64_t key) {
    rng_t r = rng_init(c->seed, RNG_PURPOSE_SYNTH, 3, key);
    return c->min_frames + (int64_t)rng_below(&r, (uint64_t)(c->max_frames - c->min_frames + 1));
}

// One utterance: phone segments with speaker-specific rendering, a per-utterance channel
// offset (removed by mean normalisation) and frame noise. With a visual stream, every visual
// frame shows the lips of the phone spoken at its first audio frame, in this speaker's style.
static void utt_make(const synth_config_t *c, const voices_t *v, int64_t spk, uint64_t key, int64_t len, float *out,
                     float *vout) {
    int64_t F = c->dim;
    rng_t r = rng_init(c->seed, RNG_PURPOSE_SYNTH, 4, key);
    float channel[1024];
    for (int64_t j = 0; j < F; j++) channel[j] = (float)(0.6 * rng_normal(&r));
    int64_t t = 0;
    while (t < len) {
        int64_t ph = (int64_t)rng_below(&r, PHONES);
        int64_t seg = SEG_MIN + (int64_t)rng_below(&r, SEG_MAX - SEG_MIN + 1);
        for (int64_t k = 0; k < seg && t < len; k++, t++) {
            if (vout && t % SYNTH_VISUAL_RATIO == 0)
                for (int64_t j = 0, Fv = c->visual_dim; j < Fv; j++)
                    vout[t / SYNTH_VISUAL_RATIO * Fv + j] = v->lips[spk * Fv + j] +
                                                            v->lip_gain[spk * Fv + j] * v->visemes[ph * Fv + j] +
                                                            (float)(0.8 * rng_normal(&r));
            for (int64_t j = 0; j < F; j++) {
                // spectral voices read the phone at the speaker's scaled frequency (interpolated)
                const double pos = v->warp ? fmin((double)j * v->warp[spk], (double)(F - 1)) : (double)j;
                const int64_t j0 = (int64_t)pos, j1 = j0 + 1 < F ? j0 + 1 : j0;
                const float a = (float)(pos - (double)j0);
                const float *ph0 = v->phones + ph * F, *dv = v->dev + (spk * PHONES + ph) * F;
                float clean = (1 - a) * (ph0[j0] + dv[j0]) + a * (ph0[j1] + dv[j1]);
                out[t * F + j] =
                    v->gain[spk * F + j] * clean + v->offset[spk * F + j] + channel[j] + (float)(0.7 * rng_normal(&r));
            }
        }
    }
}

static void write_split(const synth_config_t *c, const voices_t *v, const char *path, int64_t per_spk,
                        uint64_t key_base) {
    int64_t S = c->speakers, N = S * per_spk;
    int64_t *len = mallocCheck((size_t)N * sizeof(int64_t));
    int32_t *lab = mallocCheck((size_t)N * sizeof(int32_t));
    char **ids = mallocCheck((size_t)N * sizeof(char *));
    char **names = mallocCheck((size_t)S * sizeof(char *));
    for (int64_t s = 0; s < S; s++) {
        names[s] = mallocCheck(32);
        snprintf(names[s], 32, "spk%04lld", (long long)(c->first_speaker + s));
    }
    for (int64_t i = 0; i < N; i++) {
        lab[i] = (int32_t)(i % S);  // interleaved speakers
        len[i] = utt_length(c, key_base + ((uint64_t)c->first_speaker << 24) + (uint64_t)i);
        ids[i] = mallocCheck(48);
        snprintf(ids[i], 48, "spk%04lld-%s%05lld", (long long)(c->first_speaker + lab[i]), key_base ? "val" : "utt",
                 (long long)(i / S));
    }
    dataset_writer_t w;
    dataset_writer_create(&w, path, MPI_COMM_SELF,
                          &(dataset_layout_t){.num_utts = N, .num_speakers = S, .feature_dim = c->dim, .lengths = len});
    // Utterances are pure functions of their keys: a block of them is made in parallel, then
    // written in order.
    enum { BLOCK = 64 };
    const size_t per = (size_t)(c->max_frames * c->dim),
                 vper = (size_t)((c->max_frames / SYNTH_VISUAL_RATIO + 1) * (c->visual_dim > 0 ? c->visual_dim : 0));
    float *buf = mallocCheck(BLOCK * per * sizeof(float)), *vbuf = NULL;
    if (c->visual_dim > 0) {
        int64_t *vlen = mallocCheck((size_t)N * sizeof(int64_t));
        for (int64_t i = 0; i < N; i++) vlen[i] = (len[i] + SYNTH_VISUAL_RATIO - 1) / SYNTH_VISUAL_RATIO;
        dataset_writer_add_visual(&w, c->visual_dim, 100.0 / SYNTH_VISUAL_RATIO, 100.0, vlen);
        vbuf = mallocCheck(BLOCK * vper * sizeof(float));
        free(vlen);
    }
    for (int64_t i0 = 0; i0 < N; i0 += BLOCK) {
        const int64_t nb = N - i0 < BLOCK ? N - i0 : BLOCK;
#pragma omp parallel for schedule(dynamic, 1)
        for (int64_t k = 0; k < nb; k++)
            utt_make(c, v, lab[i0 + k], key_base + ((uint64_t)c->first_speaker << 24) + (uint64_t)(i0 + k), len[i0 + k],
                     buf + (size_t)k * per, vbuf ? vbuf + (size_t)k * vper : NULL);
        for (int64_t k = 0; k < nb; k++) {
            dataset_writer_put(&w, i0 + k, buf + (size_t)k * per);
            if (vbuf) dataset_writer_put_visual(&w, i0 + k, vbuf + (size_t)k * vper);
        }
    }
    free(vbuf);
    dataset_writer_finish(&w, lab, (const char *const *)ids, (const char *const *)names);
    for (int64_t i = 0; i < N; i++) free(ids[i]);
    for (int64_t s = 0; s < S; s++) free(names[s]);
    free(ids);
    free(names);
    free(buf);
    free(len);
    free(lab);
}

void synth_write_speakers(const synth_config_t *c, const char *path, const char *val_path) {
    voices_t v = voices_make(c);
    write_split(c, &v, path, c->utts_per_speaker, 0);
    if (val_path) write_split(c, &v, val_path, c->val_utts_per_speaker, 1ull << 40);
    voices_free(&v);
}
