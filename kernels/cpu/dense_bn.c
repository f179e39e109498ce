// BatchNorm + ReLU over a dense block's channels, statistics shared by the readers
// (kernels/dense_bn.h). Every sum runs per channel over the rows in order, in float over chunks
// of DBN_CHUNK rows and the chunks added in double, so the result depends on the shape alone:
// the statistics per (group, lane of DBN_LANES channels) on one thread each, a reader's backward
// per (group, chunk of rows), each chunk's sums kept apart. The elementwise passes are parallel
// over rows, and the readers' walk each row whole.
#include "kernels/dense_bn.h"

#include <omp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/base/check.h"
#include "kernels/base/spk_assert.h"
#include "kernels/elementwise_math.h"

#define DBN_LANES 32  // channels a thread sums at a time (two cache lines of a row)
#define DBN_CHUNK 64  // rows summed in float before the double sums take them; an elementwise pass's share

// Channels in the lane that starts at channel c0 of C (the last one may be short).
static inline int lane_width(int C, int c0) { return C - c0 < DBN_LANES ? C - c0 : DBN_LANES; }

// rstd and the folded scale rstd * weight of channels [c0, c0 + cn).
static void fold(float *rstd, float *scale, const float *var, const float *weight, int c0, int cn, float eps) {
    for (int c = 0; c < cn; c++) {
        rstd[c] = spk_bn_rstd(var[c0 + c], eps);
        scale[c] = spk_bn_scale(rstd[c], weight ? weight[c0 + c] : 1.0f);
    }
}

// One row's terms of the statistics sums, lanes [0, n) (n a constant where the compiler should
// unroll it): s1 += x - shift, s2 += (x - shift)^2.
static inline void stats_row(float *restrict s1, float *restrict s2, const float *restrict r, const float *sh, int n) {
#pragma omp simd
    for (int c = 0; c < n; c++) {
        const float a = r[c] - sh[c];
        s1[c] += a;
        s2[c] += a * a;
    }
}

void dense_bn_stats_partial(float *part, const float *x, int ldx, const float *shift, int B, int HW, int C, int group) {
    SPK_ASSERT(B > 0 && HW > 0 && C > 0 && ldx >= C && group > 0 && B % group == 0);
    const int groups = B / group, lanes = (C + DBN_LANES - 1) / DBN_LANES;
    const size_t rows = (size_t)group * HW;
#pragma omp parallel for schedule(static) collapse(2)
    for (int k = 0; k < groups; k++)
        for (int l = 0; l < lanes; l++) {
            const int c0 = l * DBN_LANES, cn = lane_width(C, c0);
            float sh[DBN_LANES] = {0};
            for (int c = 0; c < cn; c++) sh[c] = shift ? shift[c0 + c] : 0.0f;
            double a1[DBN_LANES] = {0}, a2[DBN_LANES] = {0};
            const float *xk = x + (size_t)k * rows * ldx + c0;
            for (size_t i0 = 0; i0 < rows; i0 += DBN_CHUNK) {  // float over a chunk, chunks in double
                const size_t i1 = i0 + DBN_CHUNK < rows ? i0 + DBN_CHUNK : rows;
                float s1[DBN_LANES] = {0}, s2[DBN_LANES] = {0};
                for (size_t i = i0; i < i1; i++) {
                    if (cn == DBN_LANES)
                        stats_row(s1, s2, xk + i * ldx, sh, DBN_LANES);
                    else
                        stats_row(s1, s2, xk + i * ldx, sh, cn);
                }
                for (int c = 0; c < DBN_LANES; c++) a1[c] += s1[c], a2[c] += s2[c];
            }
            for (int c = 0; c < cn; c++) {
                part[(size_t)k * C + c0 + c] = (float)a1[c];
                part[((size_t)groups + k) * C + c0 + c] = (float)a2[c];
            }
        }
}

void dense_bn_running_update(float *running_mean, float *running_var, const float *mean, const float *var, int64_t N,
                             int C, float momentum) {
    SPK_ASSERT(N > 1);
    for (int c = 0; c < C; c++) {
        running_mean[c] = spk_ema(running_mean[c], mean[c], momentum);
        running_var[c] = spk_ema(running_var[c], (float)((double)var[c] * (double)N / (double)(N - 1)), momentum);
    }
}

void dense_bn_stats_finish(float *mean, float *var, float *running_mean, float *running_var, const float *s1,
                           const float *s2, const float *shift, int64_t N, int C, float momentum) {
    SPK_ASSERT(N > 1 && C > 0);  // N > 1: PyTorch's "more than 1 value per channel"
    for (int c = 0; c < C; c++) {
        double mu, v;
        spk_bn_stats_of_sums(s1[c], s2[c], shift ? shift[c] : 0.0f, (double)N, &mu, &v);
        mean[c] = (float)mu;
        var[c] = (float)v;
    }
    if (running_mean) dense_bn_running_update(running_mean, running_var, mean, var, N, C, momentum);
}

// A reader's per-channel constants over channels [0, C), folded once a call: rstd, the scale
// rstd * weight, the mean, the shift (bias) and the weight.
typedef struct {
    float *rstd, *scale, *mu, *beta, *w;
} reader_t;

static reader_t reader_of(const float *mean, const float *var, const float *weight, const float *bias, int C,
                          float eps) {
    float *k = mallocCheck(sizeof(float) * 5 * (size_t)C);
    reader_t q = {k, k + C, k + 2 * (size_t)C, k + 3 * (size_t)C, k + 4 * (size_t)C};
    fold(q.rstd, q.scale, var, weight, 0, C, eps);
    for (int c = 0; c < C; c++)
        q.mu[c] = mean[c], q.beta[c] = bias ? bias[c] : 0.0f, q.w[c] = weight ? weight[c] : 1.0f;
    return q;
}

// Threads take chunks of rows and walk each row whole: a lane at a time down the chunk (rows
// 4 KiB apart in a wide block) ran at a third of the memory's bandwidth.
void dense_bn_relu_forward(float *z, spk_bf16 *zh, int ldz, const float *x, int ldx, const float *mean,
                           const float *var, const float *weight, const float *bias, int N, int C, float eps) {
    SPK_ASSERT(N > 0 && C > 0 && ldx >= C && ldz >= C && (z || zh));
    const reader_t q = reader_of(mean, var, weight, bias, C, eps);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float *restrict r = x + (size_t)i * ldx;
        if (z) {
            float *restrict o = z + (size_t)i * ldz;
#pragma omp simd
            for (int c = 0; c < C; c++) {
                const float a = spk_bn_apply(r[c], q.mu[c], q.scale[c], q.beta[c]);
                o[c] = a > 0.0f ? a : 0.0f;
            }
        }
        if (zh) {
            spk_bf16 *restrict o = zh + (size_t)i * ldz;
#pragma omp simd
            for (int c = 0; c < C; c++) {
                const float a = spk_bn_apply(r[c], q.mu[c], q.scale[c], q.beta[c]);
                o[c] = spk_bf16_round(a > 0.0f ? a : 0.0f);
            }
        }
    }
    free(q.rstd);
}

// One row of a reader's backward over its C channels: g = m * w (= or +=), s1 += m,
// s2 += m * xhat.
static inline void backward_row(float *restrict gr, int accumulate, float *restrict s1, float *restrict s2,
                                const float *restrict xr, const float *restrict dr, const reader_t *q, int C) {
    const float *restrict mu = q->mu, *restrict scale = q->scale, *restrict beta = q->beta;
    const float *restrict rstd = q->rstd, *restrict w = q->w;
#pragma omp simd
    for (int c = 0; c < C; c++) {
        const float z = spk_bn_apply(xr[c], mu[c], scale[c], beta[c]);
        const float m = z > 0.0f ? dr[c] : 0.0f;
        s1[c] += m;
        s2[c] += m * ((xr[c] - mu[c]) * rstd[c]);
        gr[c] = accumulate ? gr[c] + m * w[c] : m * w[c];
    }
}

// Threads take chunks of DBN_CHUNK rows of a group and walk each row whole, each chunk's float
// sums kept apart and the chunks added in order in double per channel, as a lane walked down
// the rows alone would add them (so the split changes no bit; a block of lanes walking the rows
// together ran at half the memory's bandwidth).
void dense_bn_relu_backward(float *g, int ldg, int accumulate, float *part, const float *dz, int ldz, const float *x,
                            int ldx, const float *mean, const float *var, const float *weight, const float *bias, int B,
                            int HW, int C, float eps, int group) {
    SPK_ASSERT(B > 0 && HW > 0 && C > 0 && ldx >= C && ldz >= C && ldg >= C && group > 0 && B % group == 0);
    const int groups = B / group;
    const size_t rows = (size_t)group * HW, chunks = (rows + DBN_CHUNK - 1) / DBN_CHUNK;
    const reader_t q = reader_of(mean, var, weight, bias, C, eps);
    float *sums = mallocCheck(sizeof(float) * 2 * (size_t)C * groups * chunks);  // (groups, chunks, 2, C)
#pragma omp parallel for schedule(static)
    for (size_t task = 0; task < groups * chunks; task++) {
        const size_t first = task / chunks * rows, i0 = task % chunks * DBN_CHUNK;
        const size_t i1 = i0 + DBN_CHUNK < rows ? i0 + DBN_CHUNK : rows;
        float *s1 = sums + task * 2 * C, *s2 = s1 + C;
        memset(s1, 0, sizeof(float) * 2 * (size_t)C);
        for (size_t i = first + i0; i < first + i1; i++)
            backward_row(g + i * ldg, accumulate, s1, s2, x + i * ldx, dz + i * ldz, &q, C);
    }
#pragma omp parallel for schedule(static) collapse(2)
    for (int k = 0; k < groups; k++)
        for (int c = 0; c < C; c++) {
            double a1 = 0.0, a2 = 0.0;
            for (size_t ch = 0; ch < chunks; ch++) {
                const float *s1 = sums + ((size_t)k * chunks + ch) * 2 * C;
                a1 += s1[c], a2 += s1[C + c];
            }
            const float m1 = (float)a1, m2 = (float)a2;
            part[(size_t)k * C + c] = m1;
            part[((size_t)groups + k) * C + c] = m2;
            part[((size_t)2 * groups + k) * C + c] = m1 * q.w[c];
            part[((size_t)3 * groups + k) * C + c] = m2 * q.w[c];
        }
    free(sums);
    free(q.rstd);
}

void dense_bn_input_grad(float *dx, int lddx, int accumulate, const float *g, int ldg, const float *x, int ldx,
                         const float *mean, const float *var, const float *s1, const float *s2, int64_t N, int rows,
                         int C, float eps) {
    SPK_ASSERT(N > 0 && rows > 0 && C > 0 && lddx >= C && ldg >= C && ldx >= C);
    const int chunks = (rows + DBN_CHUNK - 1) / DBN_CHUNK;
#pragma omp parallel for schedule(static)
    for (int k = 0; k < chunks; k++) {
        const int i1 = (k + 1) * DBN_CHUNK < rows ? (k + 1) * DBN_CHUNK : rows;
        for (int c0 = 0; c0 < C; c0 += DBN_LANES) {
            const int cn = lane_width(C, c0);
            float rstd[DBN_LANES], scale[DBN_LANES], mu[DBN_LANES], m1[DBN_LANES], m2[DBN_LANES];
            fold(rstd, scale, var, NULL, c0, cn, eps);
            for (int c = 0; c < cn; c++)
                mu[c] = mean[c0 + c], m1[c] = s1[c0 + c] / (float)N, m2[c] = s2[c0 + c] / (float)N;
            for (int i = k * DBN_CHUNK; i < i1; i++) {
                const float *xr = x + (size_t)i * ldx + c0, *gr = g + (size_t)i * ldg + c0;
                float *o = dx + (size_t)i * lddx + c0;
#pragma omp simd
                for (int c = 0; c < cn; c++) {
                    const float d = spk_bn_dx(gr[c], (xr[c] - mu[c]) * rstd[c], 1.0f, rstd[c], m1[c], m2[c]);
                    o[c] = accumulate ? o[c] + d : d;
                }
            }
        }
    }
}
