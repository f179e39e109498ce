// 1x1 convolutions as GEMMs (kernels/cpu/conv2d_pointwise.h).
#include "kernels/cpu/conv2d_pointwise.h"

#include <string.h>

#include "kernels/base/spk_assert.h"
#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"

static int rows_of(const conv2d_shape_t *s) { return s->B * s->H * s->W; }

void conv2d_pointwise_forward(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s) {
    SPK_ASSERT(conv2d_pointwise(s));
    const int N = rows_of(s), O = s->Cout;
    if (bias)
#pragma omp parallel for schedule(static)
        for (int i = 0; i < N; i++) memcpy(y + (size_t)i * O, bias, sizeof(float) * O);
    spk_sgemm('N', 'T', N, O, s->Cin, 1.0f, x, s->Cin, w, s->Cin, bias ? 1.0f : 0.0f, y, O);
}

void conv2d_pointwise_input_grad(float *dx, int accumulate, const float *dy, const float *w, const conv2d_shape_t *s) {
    SPK_ASSERT(conv2d_pointwise(s));
    spk_sgemm('N', 'N', rows_of(s), s->Cin, s->Cout, 1.0f, dy, s->Cout, w, s->Cin, accumulate ? 1.0f : 0.0f, dx,
              s->Cin);
}

void conv2d_pointwise_weight_grad(float *dw, const float *dy, const float *x, const conv2d_shape_t *s) {
    SPK_ASSERT(conv2d_pointwise(s));
    spk_sgemm('T', 'N', s->Cout, s->Cin, rows_of(s), 1.0f, dy, s->Cout, x, s->Cin, 1.0f, dw, s->Cin);
}

void conv2d_pointwise_weight_grad_bf16(float *dw, const spk_bf16 *dyh, const spk_bf16 *xh, const conv2d_shape_t *s) {
    SPK_ASSERT(conv2d_pointwise(s));
    spk_gemm_bf16('T', 'N', s->Cout, s->Cin, rows_of(s), dyh, s->Cout, xh, s->Cin, 1.0f, dw, s->Cin);
}

// A group's units: its halves where dW is one tile of rows (CAM++'s 128-row dense layers) and it
// has an even count of samples, so that two threads share those layers; else the group whole.
// Tiles of 256 rows of dW, each a GEMM over all of dW's columns: narrower tiles re-read the
// unit's output gradient for every tile and ran slower (CAM++'s dense layers at 1600 rows, one
// thread: 128 x 256 tiles of the 128 x 1024 layer 433 GFLOP/s against 488 whole, from cache; from
// memory, halves of its rows 381 and the whole 377, and of the 512 x 1024 transition 391 against
// 453).
#define TILE_ROWS 256

static int units_of(const conv2d_shape_t *s, int group) { return group % 2 == 0 && s->Cout <= TILE_ROWS ? 2 : 1; }

size_t conv2d_pointwise_exact_floats(const conv2d_shape_t *s) {
    return conv2d_pointwise(s) ? 2 * (size_t)s->Cout * s->Cin : 0;
}

void conv2d_pointwise_weight_grad_exact(xsum_t dw, const void *dy, const void *x, int bf16, const conv2d_shape_t *s,
                                        int group, float *scratch) {
    SPK_ASSERT(conv2d_pointwise(s) && group > 0 && s->B % group == 0);
    const int U = units_of(s, group), R = group / U * s->H * s->W, O = s->Cout, C = s->Cin;
    const int tiles = (O + TILE_ROWS - 1) / TILE_ROWS;
    const size_t nw = (size_t)O * C;
    for (int g = 0; g < s->B / group; g++) {
#pragma omp parallel for schedule(dynamic, 1)
        for (int k = 0; k < U * tiles; k++) {
            const int u = k / tiles, o0 = k % tiles * TILE_ROWS, o1 = o0 + TILE_ROWS < O ? o0 + TILE_ROWS : O;
            const size_t r0 = ((size_t)g * U + u) * R;
            float *out = scratch + u * nw + (size_t)o0 * C;
            if (bf16)
                spk_gemm_bf16_fixed('T', 'N', o1 - o0, C, R, (const spk_bf16 *)dy + r0 * O + o0, O,
                                    (const spk_bf16 *)x + r0 * C, C, 0.0f, out, C);
            else
                spk_sgemm_serial('T', 'N', o1 - o0, C, R, 1.0f, (const float *)dy + r0 * O + o0, O,
                                 (const float *)x + r0 * C, C, 0.0f, out, C);
        }
        xsum_add(dw, scratch, U, (int64_t)nw, U);  // the units added in order: the group's term
    }
}
