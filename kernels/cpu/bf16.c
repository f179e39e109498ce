// bf16 conversions (kernels/bf16.h) over flat arrays.
#include "kernels/bf16.h"

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/bf16_fold.h"

#define PAR_MIN 32768  // elements: below this, one thread

void bf16_from_f32(spk_bf16 *y, const float *x, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = spk_bf16_round(x[i]);
}

void bf16_to_f32(float *y, const spk_bf16 *x, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) y[i] = spk_bf16_to_f32(x[i]);
}

void bf16_fold_groups_from_f32(spk_bf16 *y, float *sums, const float *x, int B, int C, int T, int group) {
    SPK_ASSERT(group > 0 && B % group == 0);
    const int n = B / group;
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * C * T >= PAR_MIN)
    for (int g = 0; g < n; g++) {
        for (int c = 0; c < C; c++) {
            float acc = 0.0f;
            for (int bi = 0; bi < group; bi++) {
                const float *src = x + (((size_t)g * group + bi) * C + c) * T;
                spk_bf16 *dst = y + (((size_t)g * C + c) * group + bi) * T;
                float s = 0.0f;
#pragma omp simd reduction(+ : s)
                for (int t = 0; t < T; t++) {
                    dst[t] = spk_bf16_round(src[t]);
                    s += src[t];
                }
                acc += s;
            }
            if (sums) sums[(size_t)g * C + c] += acc;
        }
    }
}

void bf16_fold_from_f32(spk_bf16 *y, float *sums, const float *x, int B, int C, int T) {
    bf16_fold_groups_from_f32(y, sums, x, B, C, T, B);
}

void bf16_slice_from_f32(spk_bf16 *y, size_t yc, size_t yb, const float *x, int ldc, const float *add, int B, int C,
                         int T) {
    SPK_ASSERT(B > 0 && C > 0 && T > 0 && ldc >= C);
#pragma omp parallel for schedule(static) if ((size_t)B * C * T >= PAR_MIN)
    for (int c = 0; c < C; c++) {
        for (int b = 0; b < B; b++) {
            const float *src = x + ((size_t)b * ldc + c) * T;
            spk_bf16 *dst = y + c * yc + b * yb;
            if (add) {
                const float *a = add + ((size_t)b * C + c) * T;
#pragma omp simd
                for (int t = 0; t < T; t++) dst[t] = spk_bf16_round(src[t] + a[t]);
            } else {
#pragma omp simd
                for (int t = 0; t < T; t++) dst[t] = spk_bf16_round(src[t]);
            }
        }
    }
}
