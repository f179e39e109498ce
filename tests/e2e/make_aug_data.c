// Test material for augmentation (16 kHz 16-bit WAV files and Kaldi lists), reproducible
// from a seed:
//
//   make_aug_data banks DIR SEED
//       DIR/noise.scp, DIR/noise.utt2cat: pink and brown noise (category "noise"), chords of
//       harmonic tones changing every few hundred ms ("music"), 3-6 s each;
//       DIR/rir.scp, DIR/rir.utt2cat: synthetic room impulse responses (exponentially
//       decaying noise after a direct path and early reflections), "small" rooms (RT60
//       0.15-0.35 s, direct-to-reverberant ratio 2-10 dB) and "large" ones (0.5-0.9 s,
//       -3-5 dB).
//   make_aug_data corrupt IN.scp DIR SEED SNR_LO SNR_HI DRR_LO DRR_HI
//       every file of IN.scp reverberated by a room of its own (RT60 0.3-0.9 s, direct-to-
//       reverberant ratio uniform in [DRR_LO, DRR_HI] dB) and mixed with noise of its own
//       (pink, brown or tones, SNR uniform in [SNR_LO, SNR_HI] dB): DIR/wav.scp.
//
// Babble comes from speech of other speakers (tests/e2e/make_speech_corpus.sh).
#include "io/audio/audio.h"
#include "io/augment/augment_dsp.h"
#include "kernels/base/rng.h"

#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define RATE 16000
#define PI   3.14159265358979

static void die(const char *what) {
    fprintf(stderr, "make_aug_data: %s\n", what);
    exit(1);
}

// Peak-normalised to `peak` of full scale.
static void write_wav(const char *path, float *x, int64_t n, double peak) {
    float m = 0;
    for (int64_t j = 0; j < n; j++) m = fabsf(x[j]) > m ? fabsf(x[j]) : m;
    for (int64_t j = 0; j < n; j++) x[j] *= m > 0 ? (float)(peak / m) : 0.0f;
    SF_INFO info = {.samplerate = RATE, .channels = 1, .format = SF_FORMAT_WAV | SF_FORMAT_PCM_16};
    SNDFILE *f = sf_open(path, SFM_WRITE, &info);
    if (!f || sf_writef_float(f, x, n) != n) die(path);
    sf_close(f);
}

// Pink noise: Paul Kellet's economy filter over white noise.
static void pink(rng_t *g, float *x, int64_t n) {
    double b0 = 0, b1 = 0, b2 = 0;
    for (int64_t j = 0; j < n; j++) {
        double w = rng_normal(g);
        b0 = 0.99765 * b0 + w * 0.0990460;
        b1 = 0.96300 * b1 + w * 0.2965164;
        b2 = 0.57000 * b2 + w * 1.0526913;
        x[j] = (float)(b0 + b1 + b2 + w * 0.1848);
    }
}

// Brown noise: leaky integral of white noise.
static void brown(rng_t *g, float *x, int64_t n) {
    double y = 0;
    for (int64_t j = 0; j < n; j++) x[j] = (float)(y = 0.995 * y + 0.1 * rng_normal(g));
}

// "Music": chords of 2-4 harmonic tones (3 harmonics each) with a new chord every 0.2-0.5 s.
static void tones(rng_t *g, float *x, int64_t n) {
    double f[4] = {0}, ph[4][3] = {{0}};
    int voices = 0;
    for (int64_t j = 0, next = 0; j < n; j++) {
        if (j == next) {
            voices = 2 + (int)rng_below(g, 3);
            for (int v = 0; v < voices; v++) f[v] = 110.0 * pow(2.0, (double)rng_below(g, 36) / 12.0);
            next = j + (int64_t)((0.2 + 0.3 * rng_uniform(g)) * RATE);
        }
        double s = 0;
        for (int v = 0; v < voices; v++)
            for (int h = 0; h < 3; h++) {
                ph[v][h] += 2 * PI * f[v] * (h + 1) / RATE;
                s += sin(ph[v][h]) / (h + 1);
            }
        x[j] = (float)s;
    }
}

static void noise_of_kind(rng_t *g, int kind, float *x, int64_t n) {
    if (kind == 0)
        pink(g, x, n);
    else if (kind == 1)
        brown(g, x, n);
    else
        tones(g, x, n);
}

// A room: silence before the direct path, the direct path, 4-8 early reflections in the next
// 20 ms, and a noise tail decaying by 60 dB over rt60 seconds, scaled to a direct-to-
// reverberant energy ratio of drr_db.
static int64_t room(rng_t *g, double rt60, double drr_db, float *h, int64_t cap) {
    int64_t n = (int64_t)(rt60 * RATE), d0 = (int64_t)rng_below(g, 80);
    if (n > cap) n = cap;
    memset(h, 0, (size_t)n * sizeof(float));
    h[d0] = 1.0f;
    int refl = 4 + (int)rng_below(g, 5);
    for (int k = 0; k < refl; k++)
        h[d0 + 16 + rng_below(g, 320)] += (float)((rng_uniform(g) < 0.5 ? -1 : 1) * (0.1 + 0.4 * rng_uniform(g)));
    double tail = 0;
    float *t = calloc((size_t)n, sizeof(float));
    for (int64_t j = d0 + 80; j < n; j++) {
        t[j] = (float)(rng_normal(g) * exp(-6.9 * (double)(j - d0) / (rt60 * RATE)));
        tail += (double)t[j] * t[j];
    }
    const double g_tail = sqrt(pow(10.0, -drr_db / 10.0) / tail);
    for (int64_t j = 0; j < n; j++) h[j] += (float)(g_tail * t[j]);
    free(t);
    return n;
}

static void make_banks(const char *dir, uint64_t seed) {
    char path[4096];
    snprintf(path, sizeof path, "%s/wav", dir);
    mkdir(dir, 0755);
    mkdir(path, 0755);
    FILE *scp, *cat;
    float *x = malloc(6 * RATE * sizeof(float));
    const char *names[3] = {"pink", "brown", "tones"}, *cats[3] = {"noise", "noise", "music"};
    snprintf(path, sizeof path, "%s/noise.scp", dir);
    scp = fopen(path, "w");
    snprintf(path, sizeof path, "%s/noise.utt2cat", dir);
    cat = fopen(path, "w");
    if (!x || !scp || !cat) die("cannot write the noise lists");
    for (int kind = 0; kind < 3; kind++)
        for (int k = 0; k < 4; k++) {
            rng_t g = rng_init(seed, 100 + (uint64_t)kind, (uint64_t)k, 0);
            int64_t n = (int64_t)((3.0 + 3.0 * rng_uniform(&g)) * RATE);
            noise_of_kind(&g, kind, x, n);
            snprintf(path, sizeof path, "%s/wav/%s%d.wav", dir, names[kind], k);
            write_wav(path, x, n, 0.5);
            fprintf(scp, "%s%d %s\n", names[kind], k, path);
            fprintf(cat, "%s%d %s\n", names[kind], k, cats[kind]);
        }
    fclose(scp);
    fclose(cat);
    snprintf(path, sizeof path, "%s/rir.scp", dir);
    scp = fopen(path, "w");
    snprintf(path, sizeof path, "%s/rir.utt2cat", dir);
    cat = fopen(path, "w");
    if (!scp || !cat) die("cannot write the RIR lists");
    for (int k = 0; k < 12; k++) {
        rng_t g = rng_init(seed, 200, (uint64_t)k, 0);
        const int large = k % 2;
        const double rt60 = large ? 0.5 + 0.4 * rng_uniform(&g) : 0.15 + 0.2 * rng_uniform(&g);
        int64_t n = room(&g, rt60, large ? -3 + 8 * rng_uniform(&g) : 2 + 8 * rng_uniform(&g), x, 6 * RATE);
        snprintf(path, sizeof path, "%s/wav/room%02d.wav", dir, k);
        write_wav(path, x, n, 0.9);
        fprintf(scp, "room%02d %s\n", k, path);
        fprintf(cat, "room%02d %s\n", k, large ? "large" : "small");
    }
    fclose(scp);
    fclose(cat);
    free(x);
}

static void corrupt(const char *in_scp, const char *dir, uint64_t seed, const double snr[2], const double drr[2]) {
    char path[4096], id[512], src[4096], err[1024];
    snprintf(path, sizeof path, "%s/wav", dir);
    mkdir(dir, 0755);
    mkdir(path, 0755);
    FILE *in = fopen(in_scp, "r");
    snprintf(path, sizeof path, "%s/wav.scp", dir);
    FILE *out = fopen(path, "w");
    if (!in || !out) die("cannot open the lists");
    augment_fft_t *fft = augment_fft_new();
    float *h = malloc(RATE * sizeof(float));
    for (uint64_t k = 0; fscanf(in, "%511s %4095s", id, src) == 2; k++) {
        audio_t a;
        if (audio_read(src, RATE, 0, &a, err, sizeof err) != 0) die(err);
        rng_t g = rng_init(seed, 300, k, 0);
        const double rt60 = 0.3 + 0.6 * rng_uniform(&g);
        int64_t m = room(&g, rt60, drr[0] + (drr[1] - drr[0]) * rng_uniform(&g), h, RATE);
        augment_reverb(fft, a.samples, a.n, h, m, a.samples);
        float *noise = malloc((size_t)a.n * sizeof(float));
        noise_of_kind(&g, (int)rng_below(&g, 3), noise, a.n);
        augment_add_noise(a.samples, noise, a.n, snr[0] + (snr[1] - snr[0]) * rng_uniform(&g));
        snprintf(path, sizeof path, "%s/wav/%s.wav", dir, id);
        write_wav(path, a.samples, a.n, 0.3);
        fprintf(out, "%s %s\n", id, path);
        free(noise);
        audio_free(&a);
    }
    fclose(in);
    fclose(out);
    free(h);
    augment_fft_free(fft);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "banks") == 0)
        make_banks(argv[2], strtoull(argv[3], NULL, 10));
    else if (argc == 9 && strcmp(argv[1], "corrupt") == 0)
        corrupt(argv[2], argv[3], strtoull(argv[4], NULL, 10), (double[2]){atof(argv[5]), atof(argv[6])},
                (double[2]){atof(argv[7]), atof(argv[8])});
    else {
        fprintf(stderr, "usage: make_aug_data banks DIR SEED | corrupt IN.scp DIR SEED SNR_LO SNR_HI DRR_LO DRR_HI\n");
        return 2;
    }
    return 0;
}
