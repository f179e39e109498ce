// io/augment/augment_dsp.c and io/augment/augment_config.c: reverberation against a direct convolution in
// double precision, the SNR of mixed noise, repetition of short noise, SpecAugment's masks,
// the speed change of libsoxr, and the flags' parsing.
#include "io/audio/audio.h"
#include "io/augment/augment.h"
#include "io/augment/augment_dsp.h"
#include "kernels/base/rng.h"
#include "tests/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void fill_normal(float *x, int64_t n, uint64_t key) {
    rng_t g = rng_init(7, 99, key, 0);
    for (int64_t j = 0; j < n; j++) x[j] = (float)rng_normal(&g);
}

// y[t] = sum_k h[k] / ||h|| x[t + d - k], d = argmax |h|, in double.
static void direct_reverb(const float *x, int64_t n, const float *h, int64_t m, double *y) {
    double e = 0;
    int64_t d = 0;
    for (int64_t k = 0; k < m; k++) {
        e += (double)h[k] * h[k];
        if (fabsf(h[k]) > fabsf(h[d])) d = k;
    }
    for (int64_t t = 0; t < n; t++) {
        double s = 0;
        for (int64_t k = 0; k < m; k++)
            if (t + d - k >= 0 && t + d - k < n) s += (double)h[k] * x[t + d - k];
        y[t] = s / sqrt(e);
    }
}

static void test_reverb(void) {
    augment_fft_t *f = augment_fft_new();
    for (int trial = 0; trial < 3; trial++) {
        const int64_t n = 1000 + 777 * trial, m = 300 + 250 * trial, d = 37 + 50 * trial;
        float *x = malloc((size_t)n * sizeof(float)), *h = malloc((size_t)m * sizeof(float));
        float *y = malloc((size_t)n * sizeof(float)), *y7 = malloc((size_t)n * sizeof(float));
        double *ref = malloc((size_t)n * sizeof(double));
        fill_normal(x, n, 1 + (uint64_t)trial);
        fill_normal(h, m, 10 + (uint64_t)trial);
        for (int64_t k = 0; k < m; k++) h[k] *= (float)(0.3 * exp(-(double)k / 80.0));
        h[d] = 2.5f;  // the direct path
        direct_reverb(x, n, h, m, ref);
        EXPECT(augment_reverb(f, x, n, h, m, y) == 0, "reverb of a non-zero response");
        double err = 0, peak = 0;
        for (int64_t t = 0; t < n; t++) {
            err = fmax(err, fabs(y[t] - ref[t]));
            peak = fmax(peak, fabs(ref[t]));
        }
        EXPECT(err <= 1e-5 * peak, "n %lld m %lld: FFT reverb differs from the direct convolution by %g (peak %g)",
               (long long)n, (long long)m, err, peak);
        for (int64_t k = 0; k < m; k++) h[k] *= 7.0f;  // energy normalised: the scale of h does not matter
        augment_reverb(f, x, n, h, m, y7);
        double d7 = 0;
        for (int64_t t = 0; t < n; t++) d7 = fmax(d7, fabs(y7[t] - y[t]));
        EXPECT(d7 <= 1e-5 * peak, "a 7x louder response changes the output by %g", d7);
        memcpy(y, x, (size_t)n * sizeof(float));
        augment_reverb(f, y, n, h, m, y);  // in place: the same numbers
        EXPECT(memcmp(y, y7, (size_t)n * sizeof(float)) == 0, "in place differs from out of place");
        free(x), free(h), free(y), free(y7), free(ref);
    }
    // A lone impulse at d: the output is the input, aligned (the direct path leads nowhere).
    float x[500], h[64] = {0}, y[500];
    fill_normal(x, 500, 3);
    h[21] = -0.5f;
    augment_reverb(f, x, 500, h, 64, y);
    double e = 0;
    for (int t = 0; t < 500; t++) e = fmax(e, fabs(y[t] + x[t]));
    EXPECT(e < 1e-5, "an impulse response -delta[t - 21] must give -x aligned, off by %g", e);
    memset(h, 0, sizeof h);
    EXPECT(augment_reverb(f, x, 500, h, 64, y) == -1, "an all-zero response is refused");
    augment_fft_free(f);
}

static void test_noise(void) {
    float x[4000], x0[4000], noise[4000];
    fill_normal(x, 4000, 4);
    fill_normal(noise, 4000, 5);
    for (int j = 0; j < 4000; j++) x[j] *= 0.1f, noise[j] = noise[j] * 3.0f + 1.0f;
    memcpy(x0, x, sizeof x);
    for (double snr = -5; snr <= 20; snr += 12.5) {
        memcpy(x, x0, sizeof x);
        EXPECT(augment_add_noise(x, noise, 4000, snr) == 0, "mix at %g dB", snr);
        float added[4000];
        for (int j = 0; j < 4000; j++) added[j] = x[j] - x0[j];
        double got = 10 * log10(augment_power(x0, 4000) / augment_power(added, 4000));
        EXPECT(fabs(got - snr) < 1e-3, "SNR %g dB asked, %g dB measured", snr, got);
    }
    float silent[4000] = {0};
    memcpy(x, x0, sizeof x);
    EXPECT(augment_add_noise(x, silent, 4000, 5) == -1 && memcmp(x, x0, sizeof x) == 0, "silent noise changes nothing");
    float src[3] = {1, 2, 3}, dst[8];
    augment_tile(dst, 8, src, 3, 2.0f, 0);
    const float want[8] = {2, 4, 6, 2, 4, 6, 2, 4};
    EXPECT(memcmp(dst, want, sizeof want) == 0, "tiling repeats the source from its start");
    augment_tile(dst, 8, src, 3, 1.0f, 1);
    EXPECT(dst[7] == 6 && dst[3] == 3, "tiling accumulates when asked");
}

static void test_masks(void) {
    float x[20 * 6];
    for (int j = 0; j < 120; j++) x[j] = 1;
    augment_mask_time(x, 20, 6, 3, 4);
    augment_mask_freq(x, 20, 6, 4, 5);   // clipped to bins 4, 5
    augment_mask_time(x, 20, 6, 18, 9);  // clipped to frames 18, 19
    for (int t = 0; t < 20; t++)
        for (int j = 0; j < 6; j++) {
            int masked = (t >= 3 && t < 7) || t >= 18 || j >= 4;
            EXPECT(x[t * 6 + j] == (masked ? 0.0f : 1.0f), "frame %d bin %d", t, j);
        }
}

// Speed 1.1 of a 1 kHz tone: 1/1.1 of the samples, at 1.1 kHz.
static void test_speed(void) {
    const int64_t n = 16000;
    float *x = malloc(n * sizeof(float)), *y;
    for (int64_t j = 0; j < n; j++) x[j] = (float)sin(2 * 3.14159265358979 * 1000.0 * j / 16000.0);
    int64_t m;
    char err[256];
    EXPECT(audio_resample(x, n, 17600, 16000, &y, &m, err, sizeof err) == 0, "%s", err);
    EXPECT(m == audio_resampled_length(n, 17600, 16000) && llabs(m - 14545) <= 1, "%lld samples", (long long)m);
    int crossings = 0;
    for (int64_t j = 2000; j < 12000; j++) crossings += (y[j] < 0) != (y[j + 1] < 0);
    const double hz = crossings / 2.0 / (10000.0 / 16000.0);
    EXPECT(fabs(hz - 1100) < 5, "the tone is at %g Hz after speed 1.1", hz);
    free(x);
    free(y);
}

static void test_parse(void) {
    augment_config_t c = augment_config_defaults();
    augment_spec_t s;
    char err[512];
    EXPECT(augment_parse(&c, &s, err, sizeof err) == 0, "defaults: %s", err);
    EXPECT(s.num_kinds == 3 && s.babble == 2 && s.babble_lo == 3 && s.babble_hi == 7 && s.kind[1].snr_lo == 5 &&
               s.kind[1].snr_hi == 15 && s.num_speeds == 0,
           "the MUSAN defaults");
    EXPECT(augment_classes_per_speaker(&c) == 1, "no speed factors, one class per speaker");
    snprintf(c.speed, sizeof c.speed, "1.0,0.9,1.1");
    snprintf(c.noise_snr, sizeof c.noise_snr, "hum=7,speech=13:20");
    EXPECT(augment_parse(&c, &s, err, sizeof err) == 0 && s.num_speeds == 3 && s.speed[2] == 1.1 &&
               s.kind[0].snr_lo == 7 && s.kind[0].snr_hi == 7 && s.babble == 1,
           "lists: %s", err);
    EXPECT(augment_classes_per_speaker(&c) == 3, "three factors, three classes per speaker");
    const struct {
        const char *field, *value, *says;
    } bad[] = {
        {"snr", "noise=5:1", "--noise-snr item 'noise=5:1'"},
        {"snr", "noise", "--noise-snr item 'noise'"},
        {"snr", "=1:2", "--noise-snr item '=1:2'"},
        {"snr", "a=1,a=2", "names category 'a' twice"},
        {"snr", "noise=1:2x", "--noise-snr item"},
        {"babble", "speech=0:3", "--babble 'speech=0:3'"},
        {"babble", "hum=2:3", "--babble names category 'hum'"},
        {"speed", "1.0,3", "factor '3'"},
        {"speed", "1.0,1.0", "factor 1 twice"},
        {"speed", "0.9,x", "factor 'x'"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        augment_config_t b = augment_config_defaults();
        char *f = strcmp(bad[k].field, "snr") == 0      ? b.noise_snr
                  : strcmp(bad[k].field, "babble") == 0 ? b.babble
                                                        : b.speed;
        if (strcmp(bad[k].field, "snr") == 0) b.babble[0] = 0;
        strcpy(f, bad[k].value);
        err[0] = 0;
        EXPECT(augment_parse(&b, &s, err, sizeof err) == -1 && strstr(err, bad[k].says), "'%s' gives '%s'",
               bad[k].value, err);
    }
}

int main(void) {
    test_reverb();
    test_noise();
    test_masks();
    test_speed();
    test_parse();
    return test_report("test_augment");
}
