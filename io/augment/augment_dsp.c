#include "io/augment/augment_dsp.h"

#include "io/audio/fft_plan_lock.h"
#include "kernels/base/check.h"

#include <fftw3.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FFT_SIZES 40  // powers of two up to 2^39

// One size: forward and inverse plans over their own (SIMD-aligned) buffers.
typedef struct {
    fftwf_plan fwd, inv;
    float *real;           // (N,)
    fftwf_complex *a, *b;  // (N / 2 + 1,)
} fft_size_t;

struct augment_fft {
    fft_size_t size[FFT_SIZES];
};

augment_fft_t *augment_fft_new(void) { return callocCheck(1, sizeof(augment_fft_t)); }

void augment_fft_free(augment_fft_t *f) {
    if (!f) return;
    for (int k = 0; k < FFT_SIZES; k++) {
        fft_size_t *s = &f->size[k];
        if (!s->fwd) continue;
        fft_plan_lock();
        fftwf_destroy_plan(s->fwd);
        fftwf_destroy_plan(s->inv);
        fft_plan_unlock();
        fftwf_free(s->real);
        fftwf_free(s->a);
        fftwf_free(s->b);
    }
    free(f);
}

static fft_size_t *fft_size(augment_fft_t *f, int k) {
    fft_size_t *s = &f->size[k];
    if (s->fwd) return s;
    const int64_t N = (int64_t)1 << k;
    s->real = fftwf_malloc((size_t)N * sizeof(float));
    s->a = fftwf_malloc((size_t)(N / 2 + 1) * sizeof(fftwf_complex));
    s->b = fftwf_malloc((size_t)(N / 2 + 1) * sizeof(fftwf_complex));
    if (!s->real || !s->a || !s->b)
        spk_die(SPK_EXIT_FAILURE, "out of memory for a %lld-point convolution", (long long)N);
    fft_plan_lock();
    s->fwd = fftwf_plan_dft_r2c_1d((int)N, s->real, s->a, FFTW_ESTIMATE);
    s->inv = fftwf_plan_dft_c2r_1d((int)N, s->a, s->real, FFTW_ESTIMATE);
    fft_plan_unlock();
    if (!s->fwd || !s->inv) spk_die(SPK_EXIT_FAILURE, "FFTW could not plan a %lld-point convolution", (long long)N);
    return s;
}

int augment_reverb(augment_fft_t *f, const float *x, int64_t n, const float *h, int64_t m, float *y) {
    double energy = 0;
    int64_t d = 0;
    for (int64_t k = 0; k < m; k++) {
        energy += (double)h[k] * h[k];
        if (fabsf(h[k]) > fabsf(h[d])) d = k;
    }
    if (energy <= 0 || n <= 0) return -1;
    // Linear convolution by a circular one of N >= n + m - 1 points: nothing wraps.
    int k = 1;
    while (((int64_t)1 << k) < n + m - 1) k++;
    fft_size_t *s = fft_size(f, k);
    const int64_t N = (int64_t)1 << k, H = N / 2 + 1;
    memset(s->real, 0, (size_t)N * sizeof(float));
    memcpy(s->real, h, (size_t)m * sizeof(float));
    fftwf_execute_dft_r2c(s->fwd, s->real, s->b);
    memset(s->real, 0, (size_t)N * sizeof(float));
    memcpy(s->real, x, (size_t)n * sizeof(float));
    fftwf_execute_dft_r2c(s->fwd, s->real, s->a);
    // Unit energy and FFTW's unnormalised inverse (a factor N) in one scale.
    const float g = (float)(1.0 / (sqrt(energy) * (double)N));
    for (int64_t j = 0; j < H; j++) {
        const float re = s->a[j][0] * s->b[j][0] - s->a[j][1] * s->b[j][1];
        const float im = s->a[j][0] * s->b[j][1] + s->a[j][1] * s->b[j][0];
        s->a[j][0] = re * g;
        s->a[j][1] = im * g;
    }
    fftwf_execute_dft_c2r(s->inv, s->a, s->real);
    memmove(y, s->real + d, (size_t)n * sizeof(float));
    return 0;
}

double augment_power(const float *x, int64_t n) {
    double p = 0;
    for (int64_t j = 0; j < n; j++) p += (double)x[j] * x[j];
    return n > 0 ? p / (double)n : 0.0;
}

int augment_add_noise(float *x, const float *noise, int64_t n, double snr_db) {
    const double ps = augment_power(x, n), pn = augment_power(noise, n);
    if (ps <= 0 || pn <= 0) return -1;
    const float g = (float)sqrt(ps / (pn * pow(10.0, snr_db / 10.0)));
    for (int64_t j = 0; j < n; j++) x[j] += g * noise[j];
    return 0;
}

void augment_tile(float *dst, int64_t n, const float *src, int64_t len, float gain, int add) {
    for (int64_t t = 0; t < n; t += len) {
        const int64_t c = n - t < len ? n - t : len;
        if (add)
            for (int64_t j = 0; j < c; j++) dst[t + j] += gain * src[j];
        else
            for (int64_t j = 0; j < c; j++) dst[t + j] = gain * src[j];
    }
}

void augment_mask_time(float *x, int64_t T, int64_t F, int64_t t0, int64_t w) {
    if (t0 < 0) w += t0, t0 = 0;
    if (t0 + w > T) w = T - t0;
    if (w > 0) memset(x + t0 * F, 0, (size_t)(w * F) * sizeof(float));
}

void augment_mask_freq(float *x, int64_t T, int64_t F, int64_t f0, int64_t w) {
    if (f0 < 0) w += f0, f0 = 0;
    if (f0 + w > F) w = F - f0;
    for (int64_t t = 0; w > 0 && t < T; t++) memset(x + t * F + f0, 0, (size_t)w * sizeof(float));
}
