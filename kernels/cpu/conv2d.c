// Conv2d over channels-last activations (kernels/conv2d.h) on the CPU: oneDNN's direct
// convolutions where oneDNN is built in and chosen as the GEMM backend (kernels/cpu/conv2d_dnnl.c,
// measured 2.5-5x faster than im2col here, docs/kernels.md), else im2col + SGEMM per sample.
// The bias gradient is ours either way: channel sums over the output rows.
#include "kernels/conv2d.h"

#include <omp.h>
#include <string.h>

#include "kernels/base/spk_assert.h"
#include "kernels/cpu/conv2d_dnnl.h"
#include "kernels/cpu/rows.h"
#include "kernels/gemm.h"

static void check_shape(const conv2d_shape_t *s) { SPK_ASSERT(conv2d_shape_ok(s)); }

// ---- im2col + SGEMM ------------------------------------------------------------------------------
// With K = KH*KW*Cin and P = OH*OW: a sample's patches col (P, K), col[p, (r*KW + s)*Cin + c] =
// x[b, i*SH - PH + r*DH, j*SW - PW + s*DW, c] (0 outside), and the weights as wr (Cout, K) in the
// same order, so y_b (P, Cout) = col wr^T, dcol = dy_b wr, dwr += dy_b^T col.
// Workspace: [wr (Cout, K)][dwr (Cout, K)][one col per thread].

static size_t patch_len(const conv2d_shape_t *s) { return (size_t)s->KH * s->KW * s->Cin; }
static size_t patches(const conv2d_shape_t *s) { return (size_t)conv2d_out_h(s) * conv2d_out_w(s); }

static size_t im2col_floats(const conv2d_shape_t *s) {
    return 2 * (size_t)s->Cout * patch_len(s) + (size_t)omp_get_max_threads() * patches(s) * patch_len(s);
}

// (Cout, Cin, KH, KW) -> (Cout, KH, KW, Cin), and back (added).
static void weights_to_rows(float *wr, const float *w, const conv2d_shape_t *s) {
    for (int o = 0; o < s->Cout; o++)
        for (int c = 0; c < s->Cin; c++)
            for (int r = 0; r < s->KH * s->KW; r++)
                wr[((size_t)o * s->KH * s->KW + r) * s->Cin + c] = w[((size_t)o * s->Cin + c) * s->KH * s->KW + r];
}

static void rows_add_to_weights(float *w, const float *wr, const conv2d_shape_t *s) {
    for (int o = 0; o < s->Cout; o++)
        for (int c = 0; c < s->Cin; c++)
            for (int r = 0; r < s->KH * s->KW; r++)
                w[((size_t)o * s->Cin + c) * s->KH * s->KW + r] += wr[((size_t)o * s->KH * s->KW + r) * s->Cin + c];
}

// The input row read by output row i through tap r, or -1 outside.
static int source(int i, int r, int stride, int pad, int dil, int size) {
    const int v = i * stride - pad + r * dil;
    return v >= 0 && v < size ? v : -1;
}

static void im2col(float *col, const float *xb, const conv2d_shape_t *s) {
    const int OH = conv2d_out_h(s), OW = conv2d_out_w(s), C = s->Cin;
    for (int i = 0; i < OH; i++)
        for (int j = 0; j < OW; j++) {
            float *p = col + ((size_t)i * OW + j) * patch_len(s);
            for (int r = 0; r < s->KH; r++)
                for (int q = 0; q < s->KW; q++, p += C) {
                    const int u = source(i, r, s->SH, s->PH, s->DH, s->H), v = source(j, q, s->SW, s->PW, s->DW, s->W);
                    if (u < 0 || v < 0)
                        memset(p, 0, sizeof(float) * C);
                    else
                        memcpy(p, xb + ((size_t)u * s->W + v) * C, sizeof(float) * C);
                }
        }
}

// dxb += the patches' gradients, each folded back onto the input position it was copied from.
static void col2im_add(float *dxb, const float *col, const conv2d_shape_t *s) {
    const int OH = conv2d_out_h(s), OW = conv2d_out_w(s), C = s->Cin;
    for (int i = 0; i < OH; i++)
        for (int j = 0; j < OW; j++) {
            const float *p = col + ((size_t)i * OW + j) * patch_len(s);
            for (int r = 0; r < s->KH; r++)
                for (int q = 0; q < s->KW; q++, p += C) {
                    const int u = source(i, r, s->SH, s->PH, s->DH, s->H), v = source(j, q, s->SW, s->PW, s->DW, s->W);
                    if (u < 0 || v < 0) continue;
                    float *d = dxb + ((size_t)u * s->W + v) * C;
                    for (int c = 0; c < C; c++) d[c] += p[c];
                }
        }
}

static void im2col_forward(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s,
                           float *ws) {
    const size_t K = patch_len(s), P = patches(s), xs = (size_t)s->H * s->W * s->Cin;
    float *wr = ws, *cols = ws + 2 * (size_t)s->Cout * K;
    weights_to_rows(wr, w, s);
#pragma omp parallel for schedule(dynamic, 1)
    for (int b = 0; b < s->B; b++) {
        float *col = cols + (size_t)omp_get_thread_num() * P * K;
        float *yb = y + (size_t)b * P * s->Cout;
        im2col(col, x + b * xs, s);
        spk_sgemm_serial('N', 'T', (int)P, s->Cout, (int)K, 1.0f, col, (int)K, wr, (int)K, 0.0f, yb, s->Cout);
        if (bias)
            for (size_t p = 0; p < P; p++)
                for (int o = 0; o < s->Cout; o++) yb[p * s->Cout + o] += bias[o];
    }
}

static void im2col_backward(float *dx, int accumulate, float *dw, const float *dy, const float *x, const float *w,
                            const conv2d_shape_t *s, float *ws) {
    const size_t K = patch_len(s), P = patches(s), xs = (size_t)s->H * s->W * s->Cin;
    float *wr = ws, *dwr = ws + (size_t)s->Cout * K, *cols = ws + 2 * (size_t)s->Cout * K;
    if (dx) {
        weights_to_rows(wr, w, s);
#pragma omp parallel for schedule(dynamic, 1)
        for (int b = 0; b < s->B; b++) {
            float *col = cols + (size_t)omp_get_thread_num() * P * K;
            float *dxb = dx + b * xs;
            if (!accumulate) memset(dxb, 0, sizeof(float) * xs);
            spk_sgemm_serial('N', 'N', (int)P, (int)K, s->Cout, 1.0f, dy + (size_t)b * P * s->Cout, s->Cout, wr, (int)K,
                             0.0f, col, (int)K);
            col2im_add(dxb, col, s);
        }
    }
    if (dw) {  // samples in order, each GEMM threaded
        for (int b = 0; b < s->B; b++) {
            im2col(cols, x + b * xs, s);
            spk_sgemm('T', 'N', s->Cout, (int)K, (int)P, 1.0f, dy + (size_t)b * P * s->Cout, s->Cout, cols, (int)K,
                      b ? 1.0f : 0.0f, dwr, (int)K);
        }
        rows_add_to_weights(dw, dwr, s);
    }
}

// ---- the contract ------------------------------------------------------------------------------

size_t conv2d_workspace_floats(const conv2d_shape_t *s) {
    check_shape(s);
    if (conv2d_dnnl_usable(CONV2D_F32)) return (conv2d_dnnl_workspace_bytes(s, CONV2D_F32) + 3) / 4;
    return im2col_floats(s);
}

void conv2d_forward(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s,
                    float *workspace) {
    check_shape(s);
    if (conv2d_dnnl_usable(CONV2D_F32))
        conv2d_dnnl_forward(y, x, w, bias, s, CONV2D_F32, workspace);
    else
        im2col_forward(y, x, w, bias, s, workspace);
}

void conv2d_backward(float *dx, int dx_accumulate, float *dw, float *dbias, const float *dy, const float *x,
                     const float *w, const conv2d_shape_t *s, float *workspace) {
    check_shape(s);
    if (dbias) spk_rows_channel_sums(dbias, dy, (size_t)s->B * conv2d_out_h(s) * conv2d_out_w(s), s->Cout);
    if (!conv2d_dnnl_usable(CONV2D_F32)) {
        im2col_backward(dx, dx_accumulate, dw, dy, x, w, s, workspace);
        return;
    }
    if (dx) conv2d_dnnl_backward_data(dx, dx_accumulate, dy, w, s, CONV2D_F32, workspace);
    if (dw) conv2d_dnnl_backward_weights(dw, x, dy, s, CONV2D_F32, workspace);
}

void conv2d_forward_reference(float *y, const float *x, const float *w, const float *bias, const conv2d_shape_t *s) {
    check_shape(s);
    const int OH = conv2d_out_h(s), OW = conv2d_out_w(s);
    for (int b = 0; b < s->B; b++)
        for (int i = 0; i < OH; i++)
            for (int j = 0; j < OW; j++)
                for (int o = 0; o < s->Cout; o++) {
                    double acc = bias ? bias[o] : 0.0;
                    for (int r = 0; r < s->KH; r++) {
                        const int u = source(i, r, s->SH, s->PH, s->DH, s->H);
                        for (int q = 0; q < s->KW && u >= 0; q++) {
                            const int v = source(j, q, s->SW, s->PW, s->DW, s->W);
                            if (v < 0) continue;
                            for (int c = 0; c < s->Cin; c++)
                                acc += (double)x[(((size_t)b * s->H + u) * s->W + v) * s->Cin + c] *
                                       w[(((size_t)o * s->Cin + c) * s->KH + r) * s->KW + q];
                        }
                    }
                    y[(((size_t)b * OH + i) * OW + j) * s->Cout + o] = (float)acc;
                }
}
