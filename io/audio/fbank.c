#include "io/audio/fbank.h"

#include "io/audio/fft_plan_lock.h"
#include "kernels/base/rng.h"

#include <fftw3.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Stream purpose for dither noise in kernels/base/rng.h terms (kept apart from the trainer's purposes).
#define RNG_PURPOSE_DITHER 0x64697468ull

fbank_opts_t fbank_default_opts(void) {
    fbank_opts_t o = {
        .num_bins = 80,
        .frame_length_ms = 25.0,
        .frame_shift_ms = 10.0,
        .low_freq = 20.0,
        .high_freq = 0.0,
        .preemphasis = 0.97,
        .remove_dc_offset = 1,
        .input_scale = 32768.0,
        .dither = 0.0,
        .dither_seed = 0,
    };
    return o;
}

double fbank_mel(double hz) { return 1127.0 * log(1.0 + hz / 700.0); }
double fbank_mel_inv(double mel) { return 700.0 * (exp(mel / 1127.0) - 1.0); }

static int fail(char *err, size_t cap, const char *fmt, ...) {
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int next_pow2(int x) {
    int p = 1;
    while (p < x) p <<= 1;
    return p;
}

// Kaldi's MelBanks (mel-computations.cc) without VTLN: triangles equally spaced in mel
// between low and high, evaluated at the mel position of each FFT bin below Nyquist.
static int make_banks(fbank_t *fb, char *err, size_t errcap) {
    const fbank_opts_t *o = &fb->opts;
    const int F = fb->num_bins, K = fb->fft_size / 2;
    const double nyquist = 0.5 * fb->sample_rate;
    double low = o->low_freq, high = o->high_freq <= 0.0 ? o->high_freq + nyquist : o->high_freq;
    if (!(low >= 0.0 && low < nyquist && high > 0.0 && high <= nyquist && low < high))
        return fail(err, errcap, "mel range %g..%g Hz does not fit below Nyquist (%g Hz)", low, high, nyquist);
    const double bin_hz = (double)fb->sample_rate / fb->fft_size;
    const double mel_low = fbank_mel(low), mel_high = fbank_mel(high);
    const double delta = (mel_high - mel_low) / (F + 1);
    fb->bank_first = malloc((size_t)F * sizeof(int));
    fb->bank_len = malloc((size_t)F * sizeof(int));
    fb->bank_at = malloc((size_t)F * sizeof(int));
    fb->bank_center_hz = malloc((size_t)F * sizeof(double));
    float *w = malloc((size_t)F * (size_t)K * sizeof(float));  // upper bound, trimmed below
    if (!fb->bank_first || !fb->bank_len || !fb->bank_at || !fb->bank_center_hz || !w) {
        free(w);
        return fail(err, errcap, "out of memory for %d mel banks", F);
    }
    int at = 0;
    for (int b = 0; b < F; b++) {
        double left = mel_low + b * delta, center = mel_low + (b + 1) * delta, right = mel_low + (b + 2) * delta;
        fb->bank_center_hz[b] = fbank_mel_inv(center);
        int first = -1, last = -1;
        for (int k = 0; k < K; k++) {
            double mel = fbank_mel(bin_hz * k);
            if (mel > left && mel < right) {
                if (first < 0) first = k;
                last = k;
            }
        }
        if (first < 0) {
            free(w);
            return fail(
                err, errcap,
                "mel bin %d (%.1f..%.1f Hz) holds no FFT bin: %d mel bins are too many for a %d-point FFT at %d Hz", b,
                fbank_mel_inv(left), fbank_mel_inv(right), F, fb->fft_size, fb->sample_rate);
        }
        fb->bank_first[b] = first;
        fb->bank_len[b] = last - first + 1;
        fb->bank_at[b] = at;
        for (int k = first; k <= last; k++) {
            double mel = fbank_mel(bin_hz * k), v = 0.0;
            if (mel > left && mel < right)
                v = mel <= center ? (mel - left) / (center - left) : (right - mel) / (right - center);
            w[at++] = (float)v;
        }
    }
    fb->bank_weights = realloc(w, (size_t)(at > 0 ? at : 1) * sizeof(float));
    if (!fb->bank_weights) fb->bank_weights = w;
    return 0;
}

int fbank_init_opts(fbank_t *fb, int sample_rate, const fbank_opts_t *opts, char *err, size_t errcap) {
    memset(fb, 0, sizeof *fb);
    fb->opts = *opts;
    fb->sample_rate = sample_rate;
    fb->num_bins = opts->num_bins;
    if (sample_rate <= 0) return fail(err, errcap, "sample rate %d is not positive", sample_rate);
    if (opts->num_bins < 3) return fail(err, errcap, "need at least 3 mel bins, got %d", opts->num_bins);
    fb->frame_length = fbank_samples_of_ms(sample_rate, opts->frame_length_ms);
    fb->frame_shift = fbank_samples_of_ms(sample_rate, opts->frame_shift_ms);
    if (fb->frame_length < 2 || fb->frame_shift < 1)
        return fail(err, errcap, "frames of %g ms every %g ms are too short at %d Hz", opts->frame_length_ms,
                    opts->frame_shift_ms, sample_rate);
    if (opts->preemphasis < 0.0 || opts->preemphasis > 1.0)
        return fail(err, errcap, "pre-emphasis %g is outside [0, 1]", opts->preemphasis);
    if (opts->dither < 0.0) return fail(err, errcap, "dither %g is negative", opts->dither);
    fb->fft_size = next_pow2(fb->frame_length);

    const int L = fb->frame_length, N = fb->fft_size;
    fb->window = malloc((size_t)L * sizeof(float));
    if (!fb->window) return fail(err, errcap, "out of memory");
    const double a = 2.0 * M_PI / (L - 1);
    for (int i = 0; i < L; i++) fb->window[i] = (float)pow(0.5 - 0.5 * cos(a * i), 0.85);
    if (make_banks(fb, err, errcap) != 0) {
        fbank_free(fb);
        return -1;
    }
    fb->power = malloc((size_t)(N / 2 + 1) * sizeof(float));
    fb->frame = malloc((size_t)L * sizeof(double));
    fb->fft_in = fftwf_malloc((size_t)N * sizeof(float));
    fb->fft_out = fftwf_malloc((size_t)(N / 2 + 1) * sizeof(fftwf_complex));
    if (!fb->power || !fb->frame || !fb->fft_in || !fb->fft_out) {
        fbank_free(fb);
        return fail(err, errcap, "out of memory for a %d-point FFT", N);
    }
    memset(fb->fft_in, 0, (size_t)N * sizeof(float));
    fft_plan_lock();
    fb->plan = fftwf_plan_dft_r2c_1d(N, fb->fft_in, (fftwf_complex *)fb->fft_out, FFTW_ESTIMATE);
    fft_plan_unlock();
    if (!fb->plan) {
        fbank_free(fb);
        return fail(err, errcap, "FFTW could not plan a %d-point real FFT", N);
    }
    return 0;
}

int fbank_init(fbank_t *fb, int sample_rate, int num_bins) {
    fbank_opts_t o = fbank_default_opts();
    o.num_bins = num_bins;
    char err[512];
    if (fbank_init_opts(fb, sample_rate, &o, err, sizeof err) != 0) {
        fprintf(stderr, "fbank: %s\n", err);
        return -1;
    }
    return 0;
}

// Kaldi: static_cast<int32>(samp_freq * 0.001 * frame_length_ms).
int fbank_samples_of_ms(int sample_rate, double ms) { return (int)(sample_rate * 0.001 * ms); }

int64_t fbank_frames_of(int64_t n, int64_t frame_length, int64_t frame_shift) {
    return n < frame_length ? 0 : 1 + (n - frame_length) / frame_shift;
}

int64_t fbank_num_frames(const fbank_t *fb, int64_t n) { return fbank_frames_of(n, fb->frame_length, fb->frame_shift); }

float fbank_bank_weight(const fbank_t *fb, int b, int k) {
    if (b < 0 || b >= fb->num_bins) return 0.0f;
    int off = k - fb->bank_first[b];
    if (off < 0 || off >= fb->bank_len[b]) return 0.0f;
    return fb->bank_weights[fb->bank_at[b] + off];
}

void fbank_compute(fbank_t *fb, const float *x, int64_t n, float *out) {
    const int L = fb->frame_length, N = fb->fft_size, K = N / 2, F = fb->num_bins;
    const double scale = fb->opts.input_scale, pre = fb->opts.preemphasis, dither = fb->opts.dither;
    const int64_t T = fbank_num_frames(fb, n);
    double *frame = fb->frame;
    const fftwf_complex *X = (const fftwf_complex *)fb->fft_out;
    for (int64_t t = 0; t < T; t++) {
        const float *src = x + t * fb->frame_shift;
        for (int i = 0; i < L; i++) frame[i] = scale * (double)src[i];
        if (dither > 0.0) {
            rng_t r = rng_init(fb->opts.dither_seed, RNG_PURPOSE_DITHER, fb->dither_stream, (uint64_t)t);
            for (int i = 0; i < L; i++) frame[i] += dither * rng_normal(&r);
        }
        if (fb->opts.remove_dc_offset) {
            double mean = 0.0;
            for (int i = 0; i < L; i++) mean += frame[i];
            mean /= L;
            for (int i = 0; i < L; i++) frame[i] -= mean;
        }
        if (pre != 0.0) {
            for (int i = L - 1; i > 0; i--) frame[i] -= pre * frame[i - 1];
            frame[0] -= pre * frame[0];
        }
        for (int i = 0; i < L; i++) fb->fft_in[i] = (float)(frame[i] * fb->window[i]);
        for (int i = L; i < N; i++) fb->fft_in[i] = 0.0f;  // r2c may reuse the input as scratch
        fftwf_execute((fftwf_plan)fb->plan);
        for (int k = 0; k < K; k++) fb->power[k] = X[k][0] * X[k][0] + X[k][1] * X[k][1];
        float *o = out + t * F;
        for (int b = 0; b < F; b++) {
            const float *w = fb->bank_weights + fb->bank_at[b];
            const float *p = fb->power + fb->bank_first[b];
            double e = 0.0;
            for (int j = 0; j < fb->bank_len[b]; j++) e += (double)w[j] * p[j];
            o[b] = (float)log(e > FLT_EPSILON ? e : FLT_EPSILON);
        }
    }
}

void fbank_free(fbank_t *fb) {
    if (!fb) return;
    if (fb->plan) {
        fft_plan_lock();
        fftwf_destroy_plan((fftwf_plan)fb->plan);
        fft_plan_unlock();
    }
    if (fb->fft_in) fftwf_free(fb->fft_in);
    if (fb->fft_out) fftwf_free(fb->fft_out);
    free(fb->power);
    free(fb->frame);
    free(fb->window);
    free(fb->bank_first);
    free(fb->bank_len);
    free(fb->bank_at);
    free(fb->bank_weights);
    free(fb->bank_center_hz);
    memset(fb, 0, sizeof *fb);
}

const char *fbank_fft_library(void) { return fftwf_version; }
