// The signal processing of waveform augmentation, as pure functions of their inputs (the
// random choices are made by io/augment/augment.c): reverberation by FFT convolution, additive noise
// at a signal-to-noise ratio, and SpecAugment's masks (speed perturbation is io/audio/audio.h's
// resampler).
#pragma once
#include <stdint.h>

// Per-thread FFT plans and buffers for convolutions (FFTW single precision, FFTW_ESTIMATE
// plans, so every thread and rank runs the same algorithm on the same sizes; one plan pair
// per power-of-two size, made on first use under io/audio/fft_plan_lock.h).
typedef struct augment_fft augment_fft_t;

augment_fft_t *augment_fft_new(void);
void augment_fft_free(augment_fft_t *f);

// Reverberation: y (n,) = (x * g h)[d, d + n), the linear convolution of x (n,) with the
// impulse response h (m,) scaled to unit energy (g = 1 / ||h||), cut so that y[t] lines up
// with x[t] through the direct path d = argmax |h[k]|. Returns -1 (y untouched) when h is
// all zeros. y may be x.
int augment_reverb(augment_fft_t *f, const float *x, int64_t n, const float *h, int64_t m, float *y);

// Mean square of x (n,), in double.
double augment_power(const float *x, int64_t n);

// x (n,) += g noise (n,), with g such that 10 log10(P(x) / P(g noise)) = snr_db. Returns -1
// (x untouched) when x or noise is silent.
int augment_add_noise(float *x, const float *noise, int64_t n, double snr_db);

// dst (n,) = src (len,) repeated from its start (noise shorter than the speech), scaled by
// `gain`; accumulates into dst when `add`.
void augment_tile(float *dst, int64_t n, const float *src, int64_t len, float gain, int add);

// SpecAugment: zero frames [t0, t0 + w) of every bin, or bins [f0, f0 + w) of every frame, of
// x (T, F) time-major. Ranges are clipped to the array.
void augment_mask_time(float *x, int64_t T, int64_t F, int64_t t0, int64_t w);
void augment_mask_freq(float *x, int64_t T, int64_t F, int64_t f0, int64_t w);
