// Dense layer via the row-major GEMM dispatch (kernels/gemm.h).
#include "kernels/linear.h"

#include <stddef.h>

#include "kernels/base/spk_assert.h"
#include "kernels/gemm.h"

static void forward(float *y, const float *x, const float *w, const float *b, int B, int In, int Out,
                    spk_gemm_fn *gemm) {
    SPK_ASSERT(B > 0 && In > 0 && Out > 0);
    if (b) {
        for (int i = 0; i < B; i++)
            for (int o = 0; o < Out; o++) y[(size_t)i * Out + o] = b[o];
    }
    gemm('N', 'T', B, Out, In, 1.0f, x, In, w, In, b ? 1.0f : 0.0f, y, Out);
}

void linear_forward(float *y, const float *x, const float *w, const float *b, int B, int In, int Out) {
    forward(y, x, w, b, B, In, Out, spk_sgemm);
}

void linear_forward_rows(float *y, const float *x, const float *w, const float *b, int B, int In, int Out) {
    forward(y, x, w, b, B, In, Out, spk_sgemm_rows);
}

void linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, int B, int In,
                     int Out) {
    SPK_ASSERT(B > 0 && In > 0 && Out > 0);
    if (dx) spk_sgemm('N', 'N', B, In, Out, 1.0f, dy, Out, w, In, 1.0f, dx, In);
    if (dw) spk_sgemm('T', 'N', Out, In, B, 1.0f, dy, Out, x, In, 1.0f, dw, In);
    if (db) {
#pragma omp parallel for schedule(static) if ((size_t)B * Out >= 65536)
        for (int o = 0; o < Out; o++) {
            float acc = 0.0f;
            for (int i = 0; i < B; i++) acc += dy[(size_t)i * Out + o];
            db[o] += acc;
        }
    }
}
