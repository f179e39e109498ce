// Time pooling / reweighting over (B, C, T); every kernel is parallel over the B*C rows, one
// thread per row, so reductions have a fixed order.
#include "kernels/pooling.h"

#include <math.h>
#include <stddef.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/rows.h"

#define PAR_MIN 32768

static float row_sum(const float *r, int T) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int t = 0; t < T; t++) s += r[t];
    return s;
}

void time_mean_forward(float *m, const float *x, int B, int C, int T) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0);
    const size_t rows = (size_t)B * C;
#pragma omp parallel for schedule(static) if (rows * T >= PAR_MIN)
    for (size_t i = 0; i < rows; i++) m[i] = row_sum(x + i * T, T) / (float)T;
}

void time_mean_backward(float *dx, const float *dm, int B, int C, int T) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0);
    const size_t rows = (size_t)B * C;
#pragma omp parallel for schedule(static) if (rows * T >= PAR_MIN)
    for (size_t i = 0; i < rows; i++) {
        const float g = dm[i] / (float)T;
        float *r = dx + i * T;
#pragma omp simd
        for (int t = 0; t < T; t++) r[t] += g;
    }
}

void channel_scale_forward(float *y, const float *x, const float *s, int B, int C, int T) {
    const size_t rows = (size_t)B * C;
#pragma omp parallel for schedule(static) if (rows * T >= PAR_MIN)
    for (size_t i = 0; i < rows; i++) {
        const float g = s[i];
        const float *r = x + i * T;
        float *o = y + i * T;
#pragma omp simd
        for (int t = 0; t < T; t++) o[t] = r[t] * g;
    }
}

void channel_scale_backward(float *dx, float *ds, const float *dy, const float *x, const float *s, int B, int C,
                            int T) {
    const size_t rows = (size_t)B * C;
#pragma omp parallel for schedule(static) if (rows * T >= PAR_MIN)
    for (size_t i = 0; i < rows; i++) {
        const float *g = dy + i * T;
        if (ds) {
            const float *r = x + i * T;
            float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int t = 0; t < T; t++) acc += g[t] * r[t];
            ds[i] += acc;
        }
        if (dx) {
            const float sc = s[i];
            float *o = dx + i * T;
#pragma omp simd
            for (int t = 0; t < T; t++) o[t] = g[t] * sc;
        }
    }
}

// ---- weighted statistics and the attention's softmax, one row at a time ------------------------
// A row is one (b, c) pair's T frames; wr == NULL means the uniform weight wu = 1/T
// (SpeechBrain: mask / total).

static void row_stats(float *mu_out, float *var_out, const float *xr, const float *wr, int T, float wu) {
    float mu = 0.0f;
    if (wr) {
#pragma omp simd reduction(+ : mu)
        for (int t = 0; t < T; t++) mu += wr[t] * xr[t];
    } else {
#pragma omp simd reduction(+ : mu)
        for (int t = 0; t < T; t++) mu += wu * xr[t];
    }
    float var = 0.0f;
    if (wr) {
#pragma omp simd reduction(+ : var)
        for (int t = 0; t < T; t++) var += wr[t] * (xr[t] - mu) * (xr[t] - mu);
    } else {
#pragma omp simd reduction(+ : var)
        for (int t = 0; t < T; t++) var += wu * (xr[t] - mu) * (xr[t] - mu);
    }
    *mu_out = mu, *var_out = var;
}

// The row's gradient: d loss / d x[t] = w[t] (a + 2 gv (x[t] - mu)), d loss / d w[t] =
// x[t] a + gv (x[t] - mu)^2, with a = gm - 2 gv s1 (d loss / d mean, including the variance's
// dependence on it) and s1 = sum w (x - mu), 0 only if w sums to exactly 1.
typedef struct {
    float a, gv;
} stats_grad_t;

static stats_grad_t row_stats_grad(const float *xr, const float *wr, int T, float wu, float mu, float gm,
                                   const float *dstd, float std, float eps) {
    float var = 0.0f, s1 = 0.0f;
#pragma omp simd reduction(+ : var, s1)
    for (int t = 0; t < T; t++) {
        const float wt = wr ? wr[t] : wu, d = xr[t] - mu;
        var += wt * d * d;
        s1 += wt * d;
    }
    // std = sqrt(clamp(var, eps)): gradient passes where var >= eps (torch clamp_min)
    const float gv = (dstd && var >= eps) ? *dstd * 0.5f / std : 0.0f;
    return (stats_grad_t){gm - 2.0f * gv * s1, gv};
}

static void row_stats_dx(float *r, const float *xr, const float *wr, int T, float wu, float mu, stats_grad_t g,
                         int accumulate) {
    if (accumulate) {
#pragma omp simd
        for (int t = 0; t < T; t++) r[t] += (wr ? wr[t] : wu) * (g.a + 2.0f * g.gv * (xr[t] - mu));
    } else {
#pragma omp simd
        for (int t = 0; t < T; t++) r[t] = (wr ? wr[t] : wu) * (g.a + 2.0f * g.gv * (xr[t] - mu));
    }
}

static void row_stats_dw(float *r, const float *xr, int T, float mu, stats_grad_t g) {
#pragma omp simd
    for (int t = 0; t < T; t++) {
        const float d = xr[t] - mu;
        r[t] = xr[t] * g.a + g.gv * d * d;
    }
}

static void row_softmax(float *o, const float *r, int T) {
    float mx = r[0];
#pragma omp simd reduction(max : mx)
    for (int t = 0; t < T; t++) mx = r[t] > mx ? r[t] : mx;
    spk_softmax_row(o, r, T, mx);
}

// o = p (g - sum_t g p), the softmax's backward from its output p; o may alias g.
static void row_softmax_backward(float *o, const float *g, const float *p, int T) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int t = 0; t < T; t++) s += g[t] * p[t];
#pragma omp simd
    for (int t = 0; t < T; t++) o[t] = p[t] * (g[t] - s);
}

void weighted_stats_forward(float *mean, float *std, const float *x, const float *w, int B, int C, int T, int ld,
                            float eps) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && ld >= C);
    const float wu = 1.0f / (float)T;
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * C * T >= PAR_MIN)
    for (int b = 0; b < B; b++) {
        for (int c = 0; c < C; c++) {
            const size_t row = ((size_t)b * C + c) * T;
            float mu, var;
            row_stats(&mu, &var, x + row, w ? w + row : NULL, T, wu);
            mean[(size_t)b * ld + c] = mu;
            std[(size_t)b * ld + c] = sqrtf(var > eps ? var : eps);
        }
    }
}

void weighted_stats_backward(float *dx, float *dw, const float *dmean, const float *dstd, const float *x,
                             const float *w, const float *mean, const float *std, int B, int C, int T, int ld,
                             float eps) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && ld >= C);
    SPK_ASSERT(w != NULL || dw == NULL);
    if (!dx && !dw) return;
    const float wu = 1.0f / (float)T;
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * C * T >= PAR_MIN)
    for (int b = 0; b < B; b++) {
        for (int c = 0; c < C; c++) {
            const size_t row = ((size_t)b * C + c) * T, o = (size_t)b * ld + c;
            const float *xr = x + row, *wr = w ? w + row : NULL;
            const stats_grad_t g =
                row_stats_grad(xr, wr, T, wu, mean[o], dmean ? dmean[o] : 0.0f, dstd ? dstd + o : NULL, std[o], eps);
            if (dx) row_stats_dx(dx + row, xr, wr, T, wu, mean[o], g, 1);
            if (dw) row_stats_dw(dw + row, xr, T, mean[o], g);
        }
    }
}

// Each row's softmax is read back from cache by its statistics, and in the backward the
// weights' gradient never leaves the row: the pooling's largest tensors cross memory once.
void attentive_stats_forward(float *w, float *mean, float *std, const float *logits, const float *x, int B, int C,
                             int T, int ld, float eps) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && ld >= C);
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * C * T >= PAR_MIN)
    for (int b = 0; b < B; b++) {
        for (int c = 0; c < C; c++) {
            const size_t row = ((size_t)b * C + c) * T;
            row_softmax(w + row, logits + row, T);
            float mu, var;
            row_stats(&mu, &var, x + row, w + row, T, 0.0f);
            mean[(size_t)b * ld + c] = mu;
            std[(size_t)b * ld + c] = sqrtf(var > eps ? var : eps);
        }
    }
}

void attentive_stats_backward(float *dx, float *dlogits, const float *dmean, const float *dstd, const float *x,
                              const float *w, const float *mean, const float *std, int B, int C, int T, int ld,
                              float eps, int dx_accumulate) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && ld >= C && dx && dlogits);
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * C * T >= PAR_MIN)
    for (int b = 0; b < B; b++) {
        for (int c = 0; c < C; c++) {
            const size_t row = ((size_t)b * C + c) * T, o = (size_t)b * ld + c;
            const float *xr = x + row, *wr = w + row;
            const stats_grad_t g =
                row_stats_grad(xr, wr, T, 0.0f, mean[o], dmean ? dmean[o] : 0.0f, dstd ? dstd + o : NULL, std[o], eps);
            row_stats_dw(dlogits + row, xr, T, mean[o], g);  // the weights' gradient, in place
            row_softmax_backward(dlogits + row, dlogits + row, wr, T);
            row_stats_dx(dx + row, xr, wr, T, 0.0f, mean[o], g, dx_accumulate);
        }
    }
}

// ---- TSTP over channels-last maps -------------------------------------------------------------
// Parallel over (b, h); each channel is summed over w in order, in double. The maps are the
// encoder's last and smallest (W is a few dozen frames), so the strided reads cost little.

void tstp_forward(float *out, const float *x, int B, int H, int W, int C, float eps) {
    SPK_ASSERT(B > 0 && H > 0 && W > 1 && C > 0);
    const size_t P = (size_t)C * H;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *xr = x + ((size_t)b * H + h) * W * C;
            float *o = out + (size_t)b * 2 * P;
            for (int c = 0; c < C; c++) {
                double m = 0.0, v = 0.0;
                for (int w = 0; w < W; w++) m += xr[(size_t)w * C + c];
                m /= W;
                for (int w = 0; w < W; w++) {
                    const double d = xr[(size_t)w * C + c] - m;
                    v += d * d;
                }
                o[(size_t)c * H + h] = (float)m;
                o[P + (size_t)c * H + h] = sqrtf((float)(v / (W - 1)) + eps);
            }
        }
}

// d mean / dx = 1 / W; d std / dx = (x - mean) / ((W - 1) std) (the mean's own change cancels).
void tstp_backward(float *dx, const float *dout, const float *x, const float *out, int B, int H, int W, int C) {
    SPK_ASSERT(B > 0 && H > 0 && W > 1 && C > 0);
    const size_t P = (size_t)C * H;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *o = out + (size_t)b * 2 * P, *g = dout + (size_t)b * 2 * P;
            const size_t row = ((size_t)b * H + h) * W * C;
            for (int c = 0; c < C; c++) {
                const size_t i = (size_t)c * H + h;
                const float gm = g[i] / (float)W, mu = o[i], gs = g[P + i] / ((float)(W - 1) * o[P + i]);
                for (int w = 0; w < W; w++) {
                    const size_t j = row + (size_t)w * C + c;
                    dx[j] += gm + gs * (x[j] - mu);
                }
            }
        }
}
