// CAM++'s segment context and mask over channels-last (B, T, C) maps (kernels/segment_pool.h):
// one thread per (sample, lane of SEG_LANES channels), time in order.
#include "kernels/segment_pool.h"

#include <stddef.h>

#include "kernels/base/spk_assert.h"

#define SEG_LANES 32

static int segments(int T, int L) { return (T + L - 1) / L; }
static int seg_end(int s, int T, int L) { return (s + 1) * L < T ? (s + 1) * L : T; }

// The loops over (sample, lane): b, c0 and cn in the body.
#define FOR_SAMPLE_LANES(B, C)                                                                                        \
    _Pragma("omp parallel for schedule(static) collapse(2)") for (int b = 0; b < (B); b++) for (int c0 = 0; c0 < (C); \
                                                                                                c0 += SEG_LANES)

void segment_context_forward(float *ctx, const float *x, int B, int T, int C, int L) {
    SPK_ASSERT(B > 0 && T > 0 && C > 0 && L > 0);
    const int S = segments(T, L);
    FOR_SAMPLE_LANES(B, C) {
        const int cn = C - c0 < SEG_LANES ? C - c0 : SEG_LANES;
        float total[SEG_LANES] = {0};
        float *cb = ctx + (size_t)b * S * C + c0;
        for (int s = 0; s < S; s++) {  // each segment's sum, then the utterance's
            float acc[SEG_LANES] = {0};
            for (int t = s * L; t < seg_end(s, T, L); t++) {
                const float *r = x + ((size_t)b * T + t) * C + c0;
#pragma omp simd
                for (int c = 0; c < cn; c++) acc[c] += r[c];
            }
            const float inv = 1.0f / (float)(seg_end(s, T, L) - s * L);
            for (int c = 0; c < cn; c++) total[c] += acc[c], cb[(size_t)s * C + c] = acc[c] * inv;
        }
        const float invT = 1.0f / (float)T;
        for (int s = 0; s < S; s++)
            for (int c = 0; c < cn; c++) cb[(size_t)s * C + c] += total[c] * invT;
    }
}

void segment_context_backward(float *dx, const float *dctx, int B, int T, int C, int L) {
    SPK_ASSERT(B > 0 && T > 0 && C > 0 && L > 0);
    const int S = segments(T, L);
    FOR_SAMPLE_LANES(B, C) {
        const int cn = C - c0 < SEG_LANES ? C - c0 : SEG_LANES;
        const float *db = dctx + (size_t)b * S * C + c0;
        float mean[SEG_LANES] = {0};  // sum_s dctx / T: every frame's share of the utterance mean
        for (int s = 0; s < S; s++)
            for (int c = 0; c < cn; c++) mean[c] += db[(size_t)s * C + c];
        for (int c = 0; c < cn; c++) mean[c] /= (float)T;
        for (int s = 0; s < S; s++) {
            const float inv = 1.0f / (float)(seg_end(s, T, L) - s * L);
            float d[SEG_LANES];
            for (int c = 0; c < cn; c++) d[c] = mean[c] + db[(size_t)s * C + c] * inv;
            for (int t = s * L; t < seg_end(s, T, L); t++) {
                float *r = dx + ((size_t)b * T + t) * C + c0;
#pragma omp simd
                for (int c = 0; c < cn; c++) r[c] += d[c];
            }
        }
    }
}

void segment_mask_forward(float *y, int ldy, const float *x, const float *mask, int B, int T, int C, int L) {
    SPK_ASSERT(B > 0 && T > 0 && C > 0 && L > 0 && ldy >= C);
    const int S = segments(T, L);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < B * T; i++) {
        const int b = i / T, t = i % T;
        const float *r = x + (size_t)i * C, *m = mask + ((size_t)b * S + t / L) * C;
        float *o = y + (size_t)i * ldy;
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = r[c] * m[c];
    }
}

void segment_mask_backward(float *dx, float *dmask, const float *dy, int ldy, const float *x, const float *mask, int B,
                           int T, int C, int L) {
    SPK_ASSERT(B > 0 && T > 0 && C > 0 && L > 0 && ldy >= C);
    const int S = segments(T, L);
    FOR_SAMPLE_LANES(B, C) {
        const int cn = C - c0 < SEG_LANES ? C - c0 : SEG_LANES;
        for (int s = 0; s < S; s++) {
            const float *m = mask + ((size_t)b * S + s) * C + c0;
            float acc[SEG_LANES] = {0};
            for (int t = s * L; t < seg_end(s, T, L); t++) {
                const size_t i = (size_t)b * T + t;
                const float *d = dy + i * ldy + c0, *r = x + i * C + c0;
                float *o = dx + i * C + c0;
#pragma omp simd
                for (int c = 0; c < cn; c++) {
                    o[c] = d[c] * m[c];
                    acc[c] += d[c] * r[c];
                }
            }
            for (int c = 0; c < cn; c++) dmask[((size_t)b * S + s) * C + c0 + c] = acc[c];
        }
    }
}
