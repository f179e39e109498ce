// Per-element math shared by the CPU kernels (kernels/cpu/*.c) and CUDA kernels, so both
// run the same expressions. Everything here is SPK_HD (static inline, host+device), but for the
// host-side spk_aam_margin.
#pragma once
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/spk_hd.h"

// ---- exp ----------------------------------------------------------------------------------
// expf written with plain arithmetic so compilers vectorize it (libm's expf is scalar here).
// Range reduction x = n*ln2 + r, |r| <= ln2/2, then a degree-7 Taylor polynomial of e^r
// (truncation error < 6e-9) and 2^n built from the exponent bits. Max error about 2 ulp.
// Inputs below -87.3 give 0; inputs above 88 are clamped to 88 (exp(88) = 1.65e38).
SPK_HD float spk_expf(float x) {
    const float xin = x;
    x = x > 88.0f ? 88.0f : x;
    x = x < -87.3f ? -87.3f : x;
    const float t = x * 1.44269504088896341f;         // x / ln2
    const float n = (t + 12582912.0f) - 12582912.0f;  // round to nearest integer
    float r = x - n * 0.693145751953125f;             // ln2, high part (exact product)
    r = r - n * 1.42860682030941723e-6f;              // ln2, low part
    float p = 1.98412698e-4f;                         // 1/7!
    p = p * r + 1.38888889e-3f;                       // 1/6!
    p = p * r + 8.33333333e-3f;                       // 1/5!
    p = p * r + 4.16666667e-2f;                       // 1/4!
    p = p * r + 1.66666667e-1f;                       // 1/3!
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const int32_t e = ((int32_t)(n == n ? n : 0.0f) + 127) << 23;  // NaN in, NaN out (p), no shift of INT_MIN
    float s;
    memcpy(&s, &e, sizeof s);
    const float out = p * s;
    return xin < -87.3f ? 0.0f : out;
}

// ---- activations --------------------------------------------------------------------------
SPK_HD float spk_relu(float x) { return x > 0.0f ? x : 0.0f; }
// Gradient of ReLU given its OUTPUT y (y > 0 exactly where x > 0), so it works in place.
SPK_HD float spk_relu_grad(float dy, float y) { return y > 0.0f ? dy : 0.0f; }

SPK_HD float spk_sigmoid(float x) { return 1.0f / (1.0f + spk_expf(-x)); }
SPK_HD float spk_sigmoid_grad(float dy, float y) { return dy * y * (1.0f - y); }

// tanh with plain arithmetic, vectorized as spk_expf is (libm's tanhf is scalar here: ~15 ns an
// element through expm1f). |x| < 0.625: x + x^3 P(x^2), P a degree-5 least-squares fit of
// (tanh x - x) / x^3 weighted for relative error; else 1 - 2 / (e^2|x| + 1). Within 1.4 ulp of
// tanh (in double) over every float. Both sides are computed, then one picked (no branch), on
// |x|, and x's sign put back: -0 stays -0, NaN stays NaN.
SPK_HD float spk_tanh(float x) {
    const float a = fabsf(x), z = x * x;
    float p = 2.14895746e-3f;
    p = p * z - 8.18463322e-3f;
    p = p * z + 2.17039902e-2f;
    p = p * z - 5.39474525e-2f;
    p = p * z + 1.33332118e-1f;
    p = p * z - 3.33333313e-1f;
    const float small = a + a * z * p, big = 1.0f - 2.0f / (spk_expf(2.0f * a) + 1.0f);
    return copysignf(a < 0.625f ? small : big, x);
}
SPK_HD float spk_tanh_grad(float dy, float y) { return dy * (1.0f - y * y); }

// GELU, exact form (PyTorch nn.GELU(approximate='none')): x * Phi(x), Phi the standard normal
// CDF. Phi(x) = erfc(u) / 2 with u = -x / sqrt 2, rather than (1 + erf(x / sqrt 2)) / 2, which
// cancels for negative x and loses Phi's relative precision there. erfc's relative slope is
// about 2u, so the float rounding of u would cost ~u^2 ulp in the tail: u = uh + ul is split
// (fmaf gives the product's rounding error exactly, plus the constant's own) and erfc(uh + ul)
// taken to first order, erfc(uh) - 2/sqrt(pi) exp(-uh^2) ul. Within 2-3 ulp for |x| < 12.
// Past |x| = 16 erfc is 0 or 2 in float: no correction there (and no inf - inf for x = inf).
SPK_HD float spk_gelu_cdf(float x) {
    const float c_hi = 0.707106769f, c_lo = 1.21016171e-8f;  // 1/sqrt 2 = c_hi + c_lo
    const float uh = -x * c_hi;
    const float ul = fabsf(x) < 16.0f ? fmaf(-x, c_hi, -uh) - x * c_lo : 0.0f;
    return 0.5f * (erfcf(uh) - 1.12837923f * spk_expf(-uh * uh) * ul);
}
SPK_HD float spk_gelu(float x) { return x * spk_gelu_cdf(x); }
// Gradient of GELU given its INPUT x (GELU is not invertible): dy * (Phi(x) + x * phi(x)), phi
// the standard normal density.
SPK_HD float spk_gelu_grad(float dy, float x) {
    return dy * (spk_gelu_cdf(x) + x * (0.398942280401432678f * spk_expf(-0.5f * x * x)));
}

// ---- batch norm ---------------------------------------------------------------------------
SPK_HD float spk_bn_rstd(float var, float eps) { return 1.0f / sqrtf(var + eps); }
// y = (x - mean) * rstd * w + b, computed as (x - mean) * scale + b with scale = rstd * w
// (subtracting first keeps precision when |mean| >> std).
SPK_HD float spk_bn_scale(float rstd, float w) { return rstd * w; }
SPK_HD float spk_bn_apply(float x, float mean, float scale, float b) { return (x - mean) * scale + b; }
// Input gradient of training-mode batch norm, with xhat = (x - mean) * rstd and the
// per-channel means over the N = B*T positions: mdy = mean(dy), mdyx = mean(dy * xhat).
SPK_HD float spk_bn_dx(float dy, float xhat, float w, float rstd, float mdy, float mdyx) {
    return w * rstd * (dy - mdy - xhat * mdyx);
}
// Running statistics update (PyTorch): running = (1 - momentum) * running + momentum * stat.
SPK_HD float spk_ema(float running, float stat, float momentum) {
    return (1.0f - momentum) * running + momentum * stat;
}
// Channel c's statistics after a training batch with mean `mu` and BIASED variance `var` over
// N values: mean and rstd saved for the backward; the running statistics (either pointer may
// be NULL: not tracked) follow the mean and the UNBIASED variance var * N / (N - 1) (PyTorch).
SPK_HD void spk_bn_save_stats(float *mean, float *rstd, float *running_mean, float *running_var, int c, float mu,
                              float rs, double var, size_t N, float momentum) {
    mean[c] = mu;
    rstd[c] = rs;
    if (running_mean) running_mean[c] = spk_ema(running_mean[c], mu, momentum);
    if (running_var) {
        const float unbiased = (float)(var * (double)N / (double)(N - 1));
        running_var[c] = spk_ema(running_var[c], unbiased, momentum);
    }
}
// Synchronized BatchNorm (the world-size-invariant mode): the mean and BIASED variance of N
// values from their sums s1 = sum (x - shift), s2 = sum (x - shift)^2 (shift: a value near
// the mean, which keeps s2 - s1^2 / N from cancelling).
SPK_HD void spk_bn_stats_of_sums(double s1, double s2, float shift, double N, double *mean, double *var) {
    const double m1 = s1 / N, v = s2 / N - m1 * m1;
    *mean = (double)shift + m1;
    *var = v > 0.0 ? v : 0.0;
}

// ---- additive angular margin --------------------------------------------------------------
// sin(theta) from cos(theta) as SpeechBrain: sqrt(clamp(1 - cos^2, 0, 1)).
SPK_HD float spk_aam_sin(float c) {
    float s2 = 1.0f - c * c;
    s2 = s2 < 0.0f ? 0.0f : (s2 > 1.0f ? 1.0f : s2);
    return sqrtf(s2);
}
// The constants of margin m, formed in double from m (as Python's math.cos/sin in SpeechBrain):
// cos_m = cos(m), sin_m = sin(m), th = cos(pi - m), mm = sin(pi - m) * m. Host only.
typedef struct {
    float cos_m, sin_m, th, mm;
} spk_aam_margin_t;
static inline spk_aam_margin_t spk_aam_margin(float m) {
    const double pi = 3.14159265358979323846, md = m;
    spk_aam_margin_t c;
    c.cos_m = (float)cos(md);
    c.sin_m = (float)sin(md);
    c.th = (float)cos(pi - md);
    c.mm = (float)(sin(pi - md) * md);
    return c;
}
// Target logit before scaling: phi(cos) with easy_margin = False.
SPK_HD float spk_aam_phi(float c, spk_aam_margin_t m) {
    const float s = spk_aam_sin(c);
    const float phi = c * m.cos_m - s * m.sin_m;
    return c > m.th ? phi : c - m.mm;
}
// d phi / d cos. Branch 1: cos_m - sin_m * dsin/dcos with dsin/dcos = -c / sin. Where the
// clamp is active (1 - c^2 <= 0, i.e. |c| >= 1) the derivative through sin is 0, as
// PyTorch's clamp gives; elsewhere sin is floored at SPK_AAM_SIN_FLOOR in the division so the
// derivative stays finite as |c| -> 1 (PyTorch would produce inf/NaN exactly at |c| = 1).
#define SPK_AAM_SIN_FLOOR 1e-6f
SPK_HD float spk_aam_dphi(float c, spk_aam_margin_t m) {
    if (!(c > m.th)) return 1.0f;
    const float s2 = 1.0f - c * c;
    if (s2 <= 0.0f) return m.cos_m;
    float s = sqrtf(s2 > 1.0f ? 1.0f : s2);
    s = s < SPK_AAM_SIN_FLOOR ? SPK_AAM_SIN_FLOOR : s;
    return m.cos_m + m.sin_m * c / s;
}

// ---- optimizers (PyTorch torch.optim semantics, one element) -----------------------------
// Hyperparameters arrive as Python floats (double) in PyTorch and are rounded to float when
// applied to float tensors; derived constants such as 1 - beta1 are formed in double first.
// The callers in kernels/cpu/optim.c do exactly that and pass the rounded floats here.
//
// SGD: d = g + wd * p; buf = first ? d : momentum * buf + (1 - dampening) * d;
// d = nesterov ? d + momentum * buf : buf (when momentum != 0); p = p + (-lr) * d.
SPK_HD void spk_sgd_update(float *p, float *buf, float g, float neg_lr, float momentum, float one_minus_dampening,
                           float weight_decay, int nesterov, int first) {
    float d = g;
    if (weight_decay != 0.0f) d = d + weight_decay * *p;
    if (momentum != 0.0f) {
        const float b = first ? d : *buf * momentum + one_minus_dampening * d;
        *buf = b;
        d = nesterov ? d + momentum * b : b;
    }
    *p = *p + neg_lr * d;
}
// Adam / AdamW moments and step: m = m*beta1 + (1-beta1)*g; v = v*beta2 + (1-beta2)*g*g;
// p = p + (-step_size) * m / (sqrt(v) / bc2_sqrt + eps), with step_size = lr / (1 - beta1^t)
// and bc2_sqrt = sqrt(1 - beta2^t). g already includes coupled weight decay (Adam); for AdamW
// the caller has already multiplied p by (1 - lr * wd).
SPK_HD void spk_adam_update(float *p, float *m, float *v, float g, float beta1, float one_minus_beta1, float beta2,
                            float one_minus_beta2, float eps, float neg_step_size, float bc2_sqrt) {
    const float mn = *m * beta1 + one_minus_beta1 * g;
    const float vn = *v * beta2 + one_minus_beta2 * g * g;
    *m = mn;
    *v = vn;
    const float denom = sqrtf(vn) / bc2_sqrt + eps;
    *p = *p + neg_step_size * mn / denom;
}
